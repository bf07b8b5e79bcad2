"""compute_efficiency and model_utilization on Nsight Systems exports: PyTorch NVTX ranges with
sizes (emit_nvtx(record_shapes=True)), without sizes, and MFU from --model-flops-per-token.

Every expected number is computed by hand below from the fixture's sizes and times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nsys_llm_explainer.model import MetricResult, Skipped
from nsys_llm_explainer.schema import validate
from tests.conftest import analyze, ok, run_cli, skipped
from tests.fixtures.builder import TraceBuilder

H100 = "NVIDIA H100 80GB HBM3"
GEMM_KERNEL = (
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
)
MUL_KERNEL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<c10::BFloat16, "
    "c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, "
    "std::array<char*, 3ul> >(int, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, "
    "c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul>)"
)
SILU_KERNEL = "void at::native::vectorized_elementwise_kernel<4, silu_kernel>(int)"
STEPS = 3
STEP_NS = 100_000
GPU_NS = 60_000  # each step's own kernels: from 10 us into its range to 70 us
GEMM_NS = 50_000
MUL_NS = 5_000

# aten::addmm(bias [4096], x [8, 4096], W [4096, 4096]) in bf16 (the kernel name says bf16):
ADDMM_FLOPS = 2 * 8 * 4096 * 4096  # 268,435,456
ADDMM_BYTES = (4096 + 8 * 4096 + 4096 * 4096) * 2 + 8 * 4096 * 2  # read bias, x, W; write out
MUL_BYTES = 3 * 8 * 4096 * 2  # read two [8, 4096] bf16 tensors, write one
H100_BF16 = 989.5e12
H100_BW = 3350e9


def shaped(name: str, seq: int, sizes: str | None) -> str:
    return f"{name}, seq = {seq}, op_id = {seq}" + (f", sizes = {sizes}" if sizes is not None else "")


def nvtx_trace(with_sizes: bool = True) -> TraceBuilder:
    """Three 100 us steps; each: aten::linear around aten::addmm (one 50 us GEMM kernel),
    aten::mul (one 5 us kernel), aten::silu whose range never carries sizes (3 us kernel)."""
    b = TraceBuilder("2024.6")
    b.process(100)
    b.gpu(0, name=H100)
    lin = "[[8, 4096], [4096, 4096], [4096]]" if with_sizes else None
    addmm = "[[4096], [8, 4096], [4096, 4096], [], []]" if with_sizes else None
    mul = "[[8, 4096], [8, 4096]]" if with_sizes else None
    for s in range(STEPS):
        t = 1_000_000 + s * 200_000
        b.nvtx(t, t + STEP_NS, text="step")
        b.nvtx(t + 1_000, t + 20_000, text=shaped("aten::linear", 10 * s + 1, lin))
        b.nvtx(t + 2_000, t + 19_000, text=shaped("aten::addmm", 10 * s + 2, addmm))
        for i, (start, dur, name) in enumerate(
            ((t + 10_000, GEMM_NS, GEMM_KERNEL), (t + 61_000, MUL_NS, MUL_KERNEL), (t + 67_000, 3_000, SILU_KERNEL))
        ):
            corr = 100 * s + i + 1
            call = t + (3_000, 22_000, 32_000)[i]
            b.runtime(call, call + 1_000, corr=corr)
            b.kernel(start, start + dur, corr=corr, name=name)
        b.nvtx(t + 21_000, t + 30_000, text=shaped("aten::mul", 10 * s + 3, mul))
        b.nvtx(t + 31_000, t + 40_000, text=shaped("aten::silu", 10 * s + 4, None))
    return b


def test_nvtx_sizes_give_hand_computed_flops_and_roofline(build) -> None:
    report = analyze(build(nvtx_trace()), step_range="step")
    d = ok(report, "compute_efficiency")
    assert d["source"] == "nvtx"
    ops = {o["operator"]: o for o in d["operations"]}
    assert set(ops) == {"aten::addmm", "aten::mul"}  # linear is composite: its addmm counts
    mm = ops["aten::addmm"]
    assert (mm["calls"], mm["flops"], mm["bytes"], mm["kernel_ns"]) == (
        STEPS, STEPS * ADDMM_FLOPS, STEPS * ADDMM_BYTES, STEPS * GEMM_NS
    )
    assert (mm["m"], mm["n"], mm["k"]) == (8, 4096, 4096)
    assert mm["dtype"] == "bf16" and mm["dtype_source"] == "assumed"
    assert "sm90" not in mm["assumptions"] and "bf16" in mm["assumptions"]
    tflops = ADDMM_FLOPS / (GEMM_NS * 1e-9) / 1e12
    intensity = ADDMM_FLOPS / ADDMM_BYTES
    roof = min(H100_BF16, intensity * H100_BW)
    assert mm["tflops"] == pytest.approx(tflops, abs=1e-3)  # 5.369
    assert mm["flop_per_byte"] == pytest.approx(intensity, abs=0.01)  # 7.97
    assert mm["roof_tflops"] == pytest.approx(roof / 1e12, abs=1e-3)  # 26.690
    assert mm["pct_of_roof"] == pytest.approx(100 * tflops * 1e12 / roof, abs=0.05)  # 20.1
    assert mm["bound"] == "memory" and mm["ridge_flop_per_byte"] == pytest.approx(295.4)
    assert mm["gbps"] == pytest.approx(ADDMM_BYTES / GEMM_NS, abs=0.1)
    mul = ops["aten::mul"]
    assert (mul["flops"], mul["bytes"], mul["tflops"]) == (0, STEPS * MUL_BYTES, None)
    assert mul["pct_of_roof"] == pytest.approx(100 * MUL_BYTES / (MUL_NS * 1e-9) / H100_BW, abs=0.05)
    kernels = {k["name"]: k for k in d["kernels"]}
    assert kernels[GEMM_KERNEL]["flops"] == STEPS * ADDMM_FLOPS
    assert kernels[GEMM_KERNEL]["math_dtype"] == "bf16" and kernels[GEMM_KERNEL]["tensor_cores"] is True
    t = d["totals"]
    assert t["kernel_ns"] == STEPS * (GEMM_NS + MUL_NS)
    assert t["uncovered_kernel_ns"] == STEPS * 3_000
    assert d["uncovered"][0]["operator"].startswith("aten::silu")
    assert "autograd-shapes-nvtx" in d["uncovered"][0]["reason"]
    assert d["roofline"]["roofs"] == [
        {"dtype": "bf16", "peak_tflops": 989.5, "bandwidth_gbps": 3350.0, "ridge_flop_per_byte": 295.4}
    ]


def test_nvtx_measured_flops_give_hfu_per_step(build) -> None:
    report = analyze(build(nvtx_trace()), step_range="step")
    mu = ok(report, "model_utilization")
    assert [s["measured_flops"] for s in mu["steps"]] == [ADDMM_FLOPS] * STEPS
    hfu = 100 * ADDMM_FLOPS / (GPU_NS * 1e-9 * H100_BF16)
    assert [s["hfu_pct"] for s in mu["steps"]] == [pytest.approx(hfu, abs=0.005)] * STEPS  # 0.45%
    assert all(s["mfu_pct"] is None for s in mu["steps"])
    assert any("--model-flops-per-token" in line for line in mu["missing"])


def test_without_sizes_the_section_says_how_to_capture_them(build) -> None:
    report = analyze(build(nvtx_trace(with_sizes=False)), step_range="step")
    reason = skipped(report, "compute_efficiency")
    assert "nsys profile --pytorch=autograd-shapes-nvtx" in reason
    assert "emit_nvtx(record_shapes=True)" in reason
    assert isinstance(report.metrics["model_utilization"], Skipped)  # no model inputs either


def test_mfu_from_the_command_line_without_shapes(build, tmp_path: Path) -> None:
    trace = build(nvtx_trace(with_sizes=False))
    out = tmp_path / "out"
    res = run_cli(trace, "--out", out, "-q", "--step-range", "step", "--format", "json",
                  "--model-flops-per-token", "1.5G", "--tokens-per-step", "8")
    assert res.exit_code == 0, res.stderr
    doc = json.loads((out / "report.json").read_text(encoding="utf-8"))
    validate(doc)
    assert doc["options"]["model_flops_per_token"] == 1.5e9 and doc["options"]["tokens_per_step"] == 8
    mu = doc["metrics"]["model_utilization"]
    mfu = 100 * 1.5e9 * 8 / (GPU_NS * 1e-9 * H100_BF16)  # 20.21%
    assert [s["mfu_pct"] for s in mu["steps"]] == [pytest.approx(mfu, abs=0.005)] * STEPS
    phase = mu["phases"][0]
    assert phase["mfu_pct"] == pytest.approx(mfu, abs=0.005) and phase["hfu_pct"] is None
    assert "tokens per step: --tokens-per-step" in phase["inputs"]
    assert any("assumed from kernel names" in mu["inputs"]["dtype_from"] for _ in [0])
    assert doc["metrics"]["compute_efficiency"]["status"] == "skipped"


@pytest.mark.parametrize(
    "args, message",
    [
        (("--model-flops-per-token", "lots"), "--model-flops-per-token must be a positive number"),
        (("--tokens-per-step", "2.5"), "--tokens-per-step must be a whole number"),
        (("--gpu-peaks", "missing.json"), "cannot read GPU peak file"),
        (("--model", "missing.json"), "cannot read model config"),
    ],
)
def test_bad_compute_options_are_one_line_usage_errors(build, tmp_path: Path, args, message) -> None:
    argv = [str(tmp_path / a) if a.endswith(".json") else a for a in args]
    res = run_cli(build(nvtx_trace()), "--out", tmp_path / "o", *argv)
    assert res.exit_code == 2 and message in res.stderr and res.stderr.count("\n") == 1


def test_gpu_peaks_file_replaces_the_table(build, tmp_path: Path) -> None:
    peaks = tmp_path / "peaks.json"
    peaks.write_text(json.dumps({"gpus": [{"names": [H100], "bf16_tflops": 500, "hbm_gbps": 2000}]}))
    report = analyze(build(nvtx_trace()), step_range="step", gpu_peaks=str(peaks))
    mm = next(o for o in ok(report, "compute_efficiency")["operations"] if o["operator"] == "aten::addmm")
    intensity = ADDMM_FLOPS / ADDMM_BYTES
    assert mm["roof_tflops"] == pytest.approx(intensity * 2000e9 / 1e12, abs=1e-3)
    assert mm["ridge_flop_per_byte"] == pytest.approx(250.0)
    dev = ok(report, "compute_efficiency")["devices"][0]
    assert dev["peaks_basis"] == "user file"


def test_no_gpu_name_infers_the_architecture(build) -> None:
    b = nvtx_trace()
    b._rows.pop("TARGET_INFO_GPU")
    report = analyze(build(b), step_range="step")
    dev = ok(report, "compute_efficiency")["devices"][0]
    assert dev["peaks_basis"] == "assumed" and dev["model"] == "H100 SXM5 80GB"
    assert "inferred from kernel names" in dev["peaks_note"] and dev["arch_evidence"] == [GEMM_KERNEL]
    assert isinstance(report.metrics["ncu_plan"], MetricResult)


def test_a_gpu_the_table_lacks_gets_its_figures_from_gpu_peaks(build, tmp_path: Path) -> None:
    b = nvtx_trace()
    b._rows["TARGET_INFO_GPU"][0]["name"] = "My Lab GPU"
    trace = build(b)
    report = analyze(trace, step_range="step")
    assert [f.rule_id for f in report.findings].count("NLE310") == 1
    mm = next(o for o in ok(report, "compute_efficiency")["operations"] if o["operator"] == "aten::addmm")
    assert mm["bound"] is None and mm["pct_of_roof"] is None and mm["tflops"] is not None
    peaks = tmp_path / "peaks.json"
    peaks.write_text(json.dumps({"gpus": [{"names": ["My Lab GPU"], "bf16_tflops": 100, "hbm_gbps": 1000}]}))
    report = analyze(trace, step_range="step", gpu_peaks=str(peaks))
    assert "NLE310" not in [f.rule_id for f in report.findings]
    assert ok(report, "gpu_context")["gpus"][0]["bf16_tflops"] == 100
    mm = next(o for o in ok(report, "compute_efficiency")["operations"] if o["operator"] == "aten::addmm")
    assert mm["roof_tflops"] == pytest.approx(ADDMM_FLOPS / ADDMM_BYTES * 1000e9 / 1e12, abs=1e-3)
