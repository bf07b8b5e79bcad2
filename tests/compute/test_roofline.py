"""Roofline arithmetic, the plausibility check, and architecture / dtype evidence in kernel
names (on the real traces' names)."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.compute import peaks
from nsys_llm_explainer.compute.arch import (
    from_compute_capability,
    infer_from_kernels,
    kernel_min_sm,
)
from nsys_llm_explainer.compute.dtypes import dtype_from_kernel
from nsys_llm_explainer.compute.peaks import lookup
from tests.compute.test_shapes import kineto_events
from tests.conftest import NSYS_TRACES

FAST = settings(max_examples=300)
H100 = lookup("NVIDIA H100 80GB HBM3")


def test_ridge_and_attainable():
    roof = peaks.roofs(H100)["bf16"]
    assert roof.ridge == pytest.approx(989.5e12 / 3350e9) == pytest.approx(295.373, abs=1e-3)
    assert roof.attainable(10) == 10 * 3350e9  # below the ridge: the bandwidth slope
    assert roof.attainable(1000) == 989.5e12  # above: the flat peak
    assert peaks.classify(10, roof.ridge) == "memory"
    assert peaks.classify(roof.ridge, roof.ridge) == "compute"
    assert set(peaks.roofs(H100)) == {"fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8"}
    assert set(peaks.roofs(lookup("Tesla V100-SXM2-16GB"))) == {"fp64", "fp32", "fp16"}
    assert peaks.roofs(lookup("NVIDIA A10G")) == {}  # bandwidth only
    with pytest.raises(ValueError):
        peaks.ridge_point(0, 1)


def test_place_a_gemm_and_a_memory_op():
    roof = peaks.roofs(H100)["bf16"]
    # the Qwen projection: 2*8944*1024*1024 FLOPs, (8944*1024 + 1024*1024 + 8944*1024)*2 bytes
    flops, nbytes = 18_756_927_488, 38_731_776
    p = peaks.place("mm", flops, nbytes, 30e-6, roof)
    assert p.intensity == pytest.approx(484.28, abs=0.01) and p.bound == "compute"
    assert p.achieved_flops == pytest.approx(625.23e12, rel=1e-4)  # 18.757e9 / 30e-6
    assert p.efficiency == pytest.approx(625.23e12 / 989.5e12, rel=1e-4)
    assert p.implausible is None and not p.above_bandwidth
    silu = peaks.place("silu", 0, 100_745_216, 40e-6, roof)
    assert silu.bound == "memory" and silu.achieved_bandwidth == pytest.approx(2.5186e12, rel=1e-4)
    assert silu.efficiency == pytest.approx(2.5186e12 / 3350e9, rel=1e-4)
    fast = peaks.place("mm", flops, nbytes, 10e-6, roof)  # 1,876 TFLOP/s on a 989.5 roof
    assert fast.implausible and "1.90x" in fast.implausible and "wrong" in fast.implausible
    cached = peaks.place("copy", 0, 1e9, 1e-4, roof)  # 10 TB/s: from L2, not HBM
    assert cached.above_bandwidth and cached.implausible is None
    with pytest.raises(ValueError):
        peaks.place("x", 1, 1, 0, roof)


@FAST
@given(
    peak=st.floats(1e9, 1e16),
    ratio=st.floats(0, 3),
    tol=st.floats(0, 0.5),
)
def test_plausibility_flags_exactly_what_exceeds_peak_plus_tolerance(peak, ratio, tol):
    achieved = peak * ratio
    msg = peaks.check_plausible(achieved, peak, tol)
    assert (msg is not None) == (achieved > peak * (1 + tol))


@FAST
@given(
    flops=st.floats(1, 1e15),
    nbytes=st.floats(1, 1e12),
    time_s=st.floats(1e-7, 10),
    dtype=st.sampled_from(["fp32", "tf32", "bf16", "fp8"]),
)
def test_placement_properties(flops, nbytes, time_s, dtype):
    roof = peaks.roofs(H100)[dtype]
    p = peaks.place("op", flops, nbytes, time_s, roof)
    assert p.attainable <= roof.peak_flops * (1 + 1e-12)
    assert p.attainable <= p.intensity * roof.peak_bandwidth * (1 + 1e-9)
    assert p.efficiency == pytest.approx(p.achieved_flops / p.attainable)
    # efficiency above 1 + tolerance in the compute-bound region is exactly the flagged case
    if p.bound == "compute":
        assert (p.implausible is not None) == (p.achieved_flops > roof.peak_flops * 1.1)
    assert roof.attainable(p.intensity * 2) >= p.attainable  # the roof never goes down


def test_architecture_from_compute_capability():
    cases = {(9, 0): "hopper", (8, 0): "ampere", (8, 6): "ampere", (8, 9): "ada", (7, 5): "turing",
             (7, 0): "volta", (10, 0): "blackwell", (12, 0): "blackwell"}  # fmt: skip
    for (major, minor), family in cases.items():
        a = from_compute_capability(major, minor)
        assert a.family == family and not a.inferred and a.min_sm == major * 10 + minor
    assert from_compute_capability(6, 1) is None


def test_kernel_name_evidence():
    assert kernel_min_sm("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64") == 90
    assert (
        kernel_min_sm("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(x)") == 80
    )
    assert kernel_min_sm("nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NTN") == 90
    assert kernel_min_sm("cutlass3x_sm100_tensorop_gemm_f16_f16") == 100
    assert kernel_min_sm("volta_h884gemm_64x64_ldg8_nn") == 70
    assert kernel_min_sm("turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_tn") == 75
    assert (
        kernel_min_sm("void at::native::vectorized_elementwise_kernel<4, at::native::x>(int)")
        is None
    )
    assert kernel_min_sm("asm90_kernel") is None and kernel_min_sm("gemm_tile_sm_count") is None


def _nsys_kernel_names(name: str) -> list[str]:
    path = NSYS_TRACES / name
    if not path.is_file():
        pytest.skip(f"shared trace {path} not found (a clone outside /work)")
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [
            v
            for (v,) in con.execute(
                "SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                "JOIN StringIds s ON s.id = k.demangledName"
            )
        ]
    finally:
        con.close()


def test_architecture_inferred_from_real_kernel_names():
    qwen = {
        e["name"] for e in kineto_events("hf_qwen1.5_0.5b_h100.json.gz") if e.get("cat") == "kernel"
    }
    a = infer_from_kernels(sorted(qwen))
    assert a.family == "hopper" and a.inferred and a.evidence[0].startswith("sm90_xmma_gemm_bf16")
    fuser = infer_from_kernels(_nsys_kernel_names("fuser_gemm_report1.sqlite"))
    assert fuser.family == "hopper" and fuser.evidence == (
        "nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NTN",
    )
    # An H100 running only sm80 cuBLAS kernels: the evidence proves Ampere or newer, no more.
    h100_sm80 = infer_from_kernels(_nsys_kernel_names("nsysai_h100_2gpu_1s.sqlite"))
    assert h100_sm80.family == "ampere" and "or newer" in h100_sm80.note
    alexnet = {
        e["name"] for e in kineto_events("hta_alexnet_a100.json.gz") if e.get("cat") == "kernel"
    }
    assert infer_from_kernels(alexnet).family == "ampere"
    assert infer_from_kernels(_nsys_kernel_names("pipit_cloverleaf.sqlite")) is None


def test_dtype_from_kernel_names():
    cases = {
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_execute_kernel": (
            "bf16",
            "bf16",
        ),
        "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw": ("fp32", "tf32"),
        "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_ffma": ("fp32", "fp32"),
        "ampere_sgemm_32x32_sliced1x4_tn": ("fp32", "fp32"),
        "nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NTN": ("fp16", "fp16"),
        "nvjet_tst_128x128_64x4_1x2_h_bz_coopA_TNT": ("bf16", "bf16"),
        "nvjet_qqtst_128x128_128x6_1x2_h_bz_coopA_TNT": ("fp8_e4m3", "fp8"),
        "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, "
        "false, cutlass::bfloat16_t>>(Flash_fwd_params)": ("bf16", "bf16"),
        "sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n": ("fp8_e4m3", "fp8"),
        "turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_tn": ("fp16", "fp16"),
    }
    for name, (dtype, cls) in cases.items():
        found = dtype_from_kernel(name)
        assert (found.dtype, found.compute_class) == (dtype, cls), name
        assert found.evidence
    assert dtype_from_kernel("void at::native::reduce_kernel<512, 1>(x)") is None


@pytest.mark.parametrize(("bound", "pct", "words"), [
    ("compute", 62.3, "compute"),
    ("memory", 60.0, "memory"),
    # FlashAttention under the memory roof at 19% of it is not memory-bound: far from every roof.
    ("memory", 19.3, "far from every roof (under the memory roof)"),
    ("compute", 59.9, "far from every roof (under the compute roof)"),
    (None, None, "n/a"),
])
def test_the_roof_an_operation_sits_under_is_not_a_diagnosis(bound, pct, words):
    assert peaks.regime(bound, pct) == words
