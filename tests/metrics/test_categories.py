"""categories: the built-in table on public kernel names, user files, and breakdowns by hand."""

from __future__ import annotations

import json

import pytest

from nsys_llm_explainer.errors import UsageError
from nsys_llm_explainer.kernels.categories import BUILTIN_TABLE, OTHER, load_table
from tests.conftest import GENERATIONS, analyze, ok, run_cli, skipped, table
from tests.fixtures.builder import TraceBuilder
from tests.kernel_names_public import KNOWN_KERNELS
from tests.kernel_names_traces import TRACE_KERNELS

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_execute_kernel__5x_cublas"
ATTN = "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128>>(flash::Flash_fwd_params)"
NORM = "void vllm::rms_norm_kernel<c10::BFloat16, 8, 4>(T1 *, const T1 *, long, float, int)"
MYSTERY = "my_custom_thing"


def test_public_kernel_list_is_large_and_classified_as_expected():
    assert len(KNOWN_KERNELS) >= 60
    cats, rules = BUILTIN_TABLE.classify([n for n, _ in KNOWN_KERNELS])
    wrong = [
        (n[:80], want, got)
        for (n, want), got in zip(KNOWN_KERNELS, cats, strict=True)
        if want != got
    ]
    assert wrong == []
    assert (rules >= 0).all()
    # Every class of the issue is exercised by the list.
    assert {w for _, w in KNOWN_KERNELS} >= {
        "gemm",
        "attention",
        "moe",
        "norm",
        "activation_elementwise",
        "reduction",
        "sampling",
        "communication",
        "memory",
    }


def test_real_trace_names_are_classified_as_expected():
    assert len(TRACE_KERNELS) >= 40
    cats, _ = BUILTIN_TABLE.classify([n for n, _ in TRACE_KERNELS])
    wrong = [
        (n[:80], want, got)
        for (n, want), got in zip(TRACE_KERNELS, cats, strict=True)
        if want != got
    ]
    assert wrong == []
    assert {w for _, w in TRACE_KERNELS} >= {"conv", "pooling", "fft", "layout", "cast_copy"}


# Names that text inside template arguments or the name's middle used to misclassify.
FORMERLY_MISCLASSIFIED = [
    ("fft2d_r2c_32x32<float, 0u, 0u, false, cudnn::reduced_divisor>(...)", "fft"),  # "reduce"
    ("volta_scudnn_128x64_relu_interior_nn_v1", "conv"),  # "relu"
    ("sm50_xmma_pooling_fw_4d_FP32FP32NHWC_Max", "pooling"),  # "xmma"
    # "copy" in the launcher, "elementwise" in the name: what runs is a fill.
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
     "std::array<char *, 1>>(int, T2, T3)", "memory"),
    # A mean reduction whose arguments say "Mean", not a softmax or a copy.
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, "
     "float, float, float>, unsigned int, float, 4, 4>>(T3)", "reduction"),
    # "gemm" only in an argument type: not a GEMM.
    ("void my_ns::scale_rows<cutlass::gemm::GemmShape<128, 128, 32>>(float *, int)", "other"),
    # An argmax launched by the generic reduce launcher is sampling.
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>, "
     "unsigned int, long, 4, 4>>(T3)", "sampling"),
]


@pytest.mark.parametrize("name, want", FORMERLY_MISCLASSIFIED)
def test_formerly_misclassified(name, want):
    assert BUILTIN_TABLE.classify([name])[0] == [want]


@pytest.mark.parametrize(
    "name, want",
    [
        ("trt_volta_h884cudnn_256x128_ldg8_relu_exp_medium_nhwc_tn_v1", "conv"),
        ("sm90_xmma_dgrad_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x64", "conv"),
        ("sm80_xmma_wgrad_implicit_gemm_indexed_f16f16_f16f32_f32_nhwckrsc_nhwc", "conv"),
        ("void cudnn::detail::implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, true>(int)", "conv"),
        ("void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(int)", "conv"),
        ("void at::native::conv_depthwise2d_forward_kernel<3, float, int>(int)", "conv"),
        ("void cudnn::ops::pooling_fw_4d_kernel<float, float, cudnn::maxpooling_func<float>>(int)", "pooling"),
        ("void regular_fft<256u, EPT_8, 32u, 8u, 1u, LUT, float, float2>(unsigned int)", "fft"),
        ("void cudnn::ops::nhwcToNchwKernel<__half, __half, float, true, false>(int)", "layout"),
        ("void genericReformat::copyPackedKernel<float, float, true, true, 4>(unsigned int)", "layout"),
        ("void transpose_readWrite_alignment_kernel<float2, float2, 1, false, 6, 4, 4>(int)", "layout"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::bfloat16_copy_kernel_cuda("
         "at::TensorIteratorBase&)::{lambda(float)#1}, std::array<char*, 2ul> >(int)", "cast_copy"),
        ("void vllm::convert_fp8_kernel<uint8_t, __nv_bfloat16>(int)", "cast_copy"),
        ("void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, true>(int)", "gemm"),
        ("void deep_ep::intranode::combine<__nv_bfloat16, 8, 768>(int)", "communication"),
        ("void at::native::unrolled_elementwise_kernel<at::native::CUDAFunctor_add<double>, "
         "at::detail::Array<char*, 3>, TrivialOffsetCalculator<2, unsigned int>>(int)", "activation_elementwise"),
    ],
)
def test_new_categories_and_launchers(name, want):
    assert BUILTIN_TABLE.classify([name])[0] == [want]


def test_category_order_keeps_old_ids_and_adds_new_ones():
    assert BUILTIN_TABLE.categories() == [
        "gemm", "communication", "moe", "memory", "attention", "conv", "pooling", "fft",
        "compiler_fused", "norm", "sampling", "reduction", "layout", "cast_copy",
        "activation_elementwise", OTHER,
    ]


def test_explain_reports_the_text_that_decided():
    names = [
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
        "std::array<char *, 1>>(int)",
        "void deep_ep::intranode::dispatch<8>(int)",
        "void my_ns::mystery<cutlass::gemm::GemmShape<1>>(int)",
    ]
    cats, _, matched = BUILTIN_TABLE.explain(names)
    assert cats == ["memory", "communication", OTHER]
    assert matched == ["at::native::FillFunctor", "deep_ep::intranode", "mystery"]


def test_unknown_name_is_other():
    cats, rules = BUILTIN_TABLE.classify([MYSTERY, "par_ranged2d_kernel"])
    assert cats == [OTHER, OTHER] and rules.tolist() == [-1, -1]


def _trace(version: str = "2024.6") -> TraceBuilder:
    b = TraceBuilder(version)
    b.process(100)
    b.process(200)
    # device 0, pid 100: gemm 1000, attention 600, mystery 400
    # device 1, pid 200: norm 300, gemm 700
    t = 10_000
    for name, dur, dev, pid in (
        (GEMM, 1000, 0, 100),
        (ATTN, 600, 0, 100),
        (MYSTERY, 400, 0, 100),
        (NORM, 300, 1, 200),
        (GEMM, 700, 1, 200),
    ):
        b.kernel(t, t + dur, device=dev, pid=pid, name=name)
        t += dur + 100
    return b


@pytest.mark.parametrize("version", GENERATIONS)
def test_breakdown_by_hand(version, build):
    report = analyze(build(_trace(version)))
    d = ok(report, "categories")
    assert d["total_kernel_ns"] == ok(report, "top_kernels")["total_kernel_ns"] == 3000
    rows = {r["category"]: r for r in d["categories"]}
    assert rows["gemm"]["total_ns"] == 1700 and rows["gemm"]["kernel_count"] == 2
    assert rows["attention"]["total_ns"] == 600 and rows["norm"]["total_ns"] == 300
    assert rows[OTHER]["total_ns"] == 400 and rows[OTHER]["distinct_names"] == 1
    assert d["other_pct"] == pytest.approx(100 * 400 / 3000, abs=0.01)
    assert d["categorized_pct"] == pytest.approx(100 * 2600 / 3000, abs=0.01)
    dev = {
        x["device_id"]: {r["category"]: r["total_ns"] for r in x["categories"]}
        for x in d["by_device"]
    }
    assert dev == {
        0: {"gemm": 1000, "attention": 600, OTHER: 400},
        1: {"gemm": 700, "norm": 300, OTHER: 0},
    }
    proc = {x["pid"]: x["total_ns"] for x in d["by_process"]}
    assert proc == {100: 2000, 200: 1000}
    assert d["by_phase"] is None
    assert [k["name"] for k in d["top_uncategorized"]] == [MYSTERY]
    csv = table(report, "categories", "kernel_categories")
    assert set(csv["scope"]) == {"all", "device", "process"}
    names = table(report, "categories", "kernel_category_names")
    assert dict(zip(names["name"], names["category"], strict=True))[NORM] == "norm"


def test_per_phase_breakdown_uses_nvtx_attribution(build, tmp_path):
    b = TraceBuilder("2024.6")
    b.process(100)
    b.nvtx(0, 5_000, text="prefill")
    b.nvtx(5_000, 10_000, text="decode")
    b.runtime(100, 200, corr=1)
    b.runtime(5_100, 5_200, corr=2)
    b.runtime(5_300, 5_400, corr=3)
    b.kernel(1_000, 2_000, corr=1, name=GEMM)
    b.kernel(6_000, 6_500, corr=2, name=ATTN)
    b.kernel(7_000, 7_100, corr=3, name=MYSTERY)
    pm = tmp_path / "pm.json"
    pm.write_text(json.dumps({"prefill": ["prefill"], "decode": ["decode"]}))
    from nsys_llm_explainer.options import PhaseMap

    d = ok(analyze(build(b), phase_map=PhaseMap.load(pm)), "categories")
    phases = {
        p["phase"]: {r["category"]: r["total_ns"] for r in p["categories"]} for p in d["by_phase"]
    }
    assert phases["prefill"] == {"gemm": 1000, OTHER: 0}
    assert phases["decode"] == {"attention": 500, OTHER: 100}


def test_user_rule_matching_the_full_name(tmp_path):
    path = tmp_path / "full.json"
    path.write_text(json.dumps({"rules": [
        {"category": "custom", "pattern": r"MyOp<", "match": "full"},
        {"category": "never", "pattern": r"MyOp<"},
    ]}))
    table_ = load_table(path)
    name = "void launcher<MyOp<float>>(int)"
    # The default "function" match sees only "launcher"; "full" sees the template argument.
    assert table_.classify([name])[0] == ["custom"]
    assert table_.rules[0].match == "full" and table_.rules[1].match == "function"


def test_user_file_extends_and_overrides(build, tmp_path):
    path = build(_trace())
    ext = tmp_path / "ext.json"
    ext.write_text(json.dumps({"rules": [{"category": "custom", "pattern": "^my_custom"}]}))
    d = ok(analyze(path, kernel_categories=str(ext)), "categories")
    rows = {r["category"]: r["total_ns"] for r in d["categories"]}
    assert rows["custom"] == 400 and rows[OTHER] == 0 and rows["gemm"] == 1700
    assert d["table_source"] == "built-in, extended by ext.json"
    over = tmp_path / "over.json"
    over.write_text(
        json.dumps({"mode": "override", "rules": [{"category": "gemm", "pattern": "gemm"}]})
    )
    d = ok(analyze(path, kernel_categories=str(over)), "categories")
    rows = {r["category"]: r["total_ns"] for r in d["categories"]}
    assert rows == {"gemm": 1700, OTHER: 1300}
    assert d["rule_count"] == 1


@pytest.mark.parametrize(
    "content, message",
    [
        ("not json", "not valid JSON"),
        ('{"rules": []}', "non-empty list"),
        ('{"mode": "merge", "rules": [{"category": "a", "pattern": "x"}]}', "mode must be"),
        ('{"rules": [{"category": "Bad Name", "pattern": "x"}]}', "category must match"),
        ('{"rules": [{"category": "a", "pattern": "("}]}', "bad regular expression"),
        ('{"rules": [{"category": "a", "pattern": "x", "color": 1}]}', "must be an object"),
        ('{"rules": [{"category": "a", "pattern": "x", "match": "name"}]}', "match must be"),
        ('{"rulez": []}', "unknown key"),
    ],
)
def test_bad_user_files_are_usage_errors(tmp_path, content, message):
    f = tmp_path / "c.json"
    f.write_text(content)
    with pytest.raises(UsageError, match=message):
        load_table(str(f))


def test_cli_rejects_bad_file_with_exit_2(build, tmp_path):
    path = build(_trace())
    f = tmp_path / "c.json"
    f.write_text('{"rules": [{"category": "a", "pattern": "("}]}')
    res = run_cli(path, "--out", tmp_path / "out", "--kernel-categories", f)
    assert res.exit_code == 2
    assert "bad regular expression" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_skipped_without_kernels(build):
    b = TraceBuilder("2024.6", omit=("CUPTI_ACTIVITY_KIND_KERNEL",))
    b.process(100)
    b.runtime(1, 2)
    assert "kernel" in skipped(analyze(build(b)), "categories")
