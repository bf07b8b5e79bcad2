from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nsys_llm_explainer.kernels.math_mode import math_mode
from nsys_llm_explainer.model import Cause, Confidence, Finding, TraceFormat
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct
from nsys_llm_explainer.rules.impact import band, per_device
from nsys_llm_explainer.rules.precision_advice import fp32_matmul

MIN_SHARE_PCT = 5.0  # of a device's GEMM time
EVIDENCE = 3


def _span(parts: list[str], lo: int, hi: int) -> str:
    """parts[lo - 1 .. hi + 1] joined, with ellipses where the name goes on."""
    a, b = max(0, lo - 1), min(len(parts), hi + 2)
    return ("..." if a > 0 else "") + "_".join(parts[a:b]) + ("..." if b < len(parts) else "")


def named_by(name: str, dtype_token: str | None) -> str:
    """The parts of the full name that say float32 operands and no tensor cores (math_mode),
    with their `_`-separated neighbours, so evidence shows the text that matched even where
    the kernel's label leaves it out."""
    mode = math_mode(name)
    said = [(t, what) for t, what in ((dtype_token or mode.dtype_token, "float32 operands"),
                                       (mode.tensor_core_token, "no tensor cores")) if t]
    parts = name.split("_")
    low = [p.lower() for p in parts]
    at = [(low.index(t.lower()), what) for t, what in said if t.lower() in low]
    if len(at) == 2 and abs(at[0][0] - at[1][0]) <= 2:
        lo, hi = sorted(i for i, _ in at)
        shown = [f"'{_span(parts, lo, hi)}' ({at[0][1]}, {at[1][1]})"]
    else:
        shown = [f"'{_span(parts, i, i)}' ({what})" for i, what in at]
    shown += [f"'{t}' ({what})" for t, what in said if t.lower() not in low]
    return "its full name has " + " and ".join(shown) if shown else "float32 by its name"


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Float32 GEMMs and convolutions run on CUDA cores instead of tensor cores.

    Reads gemm_precision: GEMM and convolution kernels whose names show float32 operands
    multiplied without tensor cores (`sgemm`, `scudnn`, `implicit_convolve_sgemm`,
    `sm80_xmma_gemm_f32f32_..._ffma`, `simt`, cuBLAS gemv; kernels/math_mode.py). An FP32
    accumulator is not an FP32 GEMM: BF16, FP16, FP8 and block-scaled (MX, NVFP4) kernels that
    accumulate in FP32 are tensor-core kernels and never count here. Such a GEMM runs at the FP32
    CUDA-core peak, a fraction of TF32 or BF16 tensor cores (A100: 19.5 vs 156 and 312 TFLOPS).
    Fires when they take at least 5% of a device's GEMM and convolution time. Impact: their
    kernel time per device (a ceiling: tensor-core kernels take some time too); severity from
    the impact bands (rules/impact.py). Each kernel's evidence line quotes the parts of its full
    name that decided (`..._f32f32_...`, `..._ffma_...`), since its label may leave them out.
    The advice fits the GPU (rules/precision_advice.py, gemm_precision's `arch`): FP16 with a
    gradient scaler on Volta and Turing, TF32 or BF16 from Ampere, FP8 on Ada and Hopper, MXFP8
    and NVFP4 on Blackwell, BF16 on AMD GPUs; cuDNN's settings (`cudnn.allow_tf32`,
    `channels_last`) only when convolution kernels ran. NLE101 leaves such a kernel to this rule.

    Example:

        NLE323 high: Float32 GEMMs on CUDA cores take 64.0% of GPU 0's GEMM time
        - ampere_sgemm_128x64_nn: 412 ms in 2,048 calls; its full name has
          'ampere_sgemm_128x64...' (float32 operands, no tensor cores)
        - GPU 0: 412 ms of 644 ms of GEMM time
        - GPU: NVIDIA A100-SXM4-80GB (Ampere)
    """
    res = view.metric("gemm_precision")
    if res is None:
        return
    rows = [d for d in res.data["by_device"] if d["fp32_cuda_core_pct"] >= MIN_SHARE_PCT]
    if not rows:
        return
    affected, impact = per_device(view.acct, {d["device_id"]: int(d["fp32_cuda_core_ns"]) for d in rows})
    severity = band(impact[1])
    if severity is None:
        return
    devices = {d["device_id"] for d in rows}
    by_name: dict[str, dict[str, Any]] = {}  # one line per kernel name, summed over the devices
    for k in res.data["fp32_kernels"]:
        if k["device_id"] in devices:
            row = by_name.setdefault(k["name"], {**k, "kernel_ns": 0, "calls": 0})
            row["kernel_ns"] += k["kernel_ns"]
            row["calls"] += k["calls"]
    kernels = sorted(by_name.values(), key=lambda k: -k["kernel_ns"])
    families = {k.get("family", "gemm") for k in kernels}
    what = {frozenset({"gemm"}): "GEMMs", frozenset({"conv"}): "convolutions"}.get(
        frozenset(families), "GEMMs and convolutions")
    scope = {"GEMMs": "GEMM", "convolutions": "convolution"}.get(what, "GEMM and convolution")
    worst = max(rows, key=lambda d: d["fp32_cuda_core_pct"])
    evidence = [
        f"{view.kernel_label(k['name'])}: {ms(k['kernel_ns'])} in {k['calls']:,} calls; "
        f"{named_by(k['name'], k['dtype_token'])}"
        for k in kernels[:EVIDENCE]
    ]
    evidence += [f"GPU {d['device_id']}: {ms(d['fp32_cuda_core_ns'])} of {ms(d['gemm_ns'])} of {scope} time"
                 for d in rows]
    arch = res.data.get("arch") or {}
    evidence.append(f"GPU: {arch.get('why') or 'unknown'}")
    share = pct(worst["fp32_cuda_core_pct"])
    title = (
        f"Float32 {what} on CUDA cores take {share} of GPU {worst['device_id']}'s {scope} time"
        if len(rows) == 1
        else f"Float32 {what} on CUDA cores take up to {share} of the {scope} time of {len(rows)} GPUs"
    )
    kineto = view.schema is not None and view.schema.format is TraceFormat.KINETO  # a PyTorch profiler trace
    pytorch = kineto or view.workload not in ("generic_cuda", "unknown", "tensorrt_inference")
    tk = view.metric("top_kernels")
    conv = "conv" in families or any(view.kernel_category(k["name"]) == "conv"
                                      for k in (tk.data["kernels"] if tk is not None else []))
    yield rule.finding(
        severity=severity,
        confidence=Confidence.HIGH,
        evidence=evidence,
        recommendation=fp32_matmul(
            arch.get("family"), bool(arch.get("exact")), pytorch, amd=arch.get("vendor") == "amd", conv=conv
        ),
        title=title,
        affected=affected,
        impact=impact,
        cause=Cause.COMPUTE,
    )


RULE = Rule(
    id="NLE323",
    name="fp32-gemm",
    title="Float32 GEMMs and convolutions without tensor cores",
    check=check,
    metric_ids=("gemm_precision",),
)
