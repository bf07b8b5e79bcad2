"""How close the GPU work runs to its roof: GEMMs below their roofline (NLE320), compute-heavy
phases with low MFU (NLE321), memory-bound phases with low MBU (NLE322), float32 GEMMs without
tensor cores and the precision advice that fits the GPU (NLE323), and the same from Nsight
Compute: kernels below their roof (NLE330), durations far from the trace's (NLE331), launches
without a trace kernel (NLE332)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

from nsys_llm_explainer import fmt
from nsys_llm_explainer.kernels.math_mode import math_mode
from nsys_llm_explainer.model import Affected, Cause, Confidence, Finding, Severity, TraceFormat
from nsys_llm_explainer.results.efficiency import (
    ComputeEfficiency,
    ModelUtilization,
    NcuKernel,
    NcuLaunch,
    NcuResults,
    Operation,
    UtilizationPhase,
)
from nsys_llm_explainer.results.kernels import GemmKernel, GemmPrecision, TopKernels
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, dur, ms, pct, us
from nsys_llm_explainer.rules.impact import band, per_device


# Shared by NLE321 (low MFU) and NLE322 (low MBU): the GPU time a phase would give back at
# full utilisation, per device of the phase (a ceiling: no step reaches 100%).
def phase_stake(
    view: RuleInput, phase: UtilizationPhase, util_pct: float
) -> tuple[tuple[Affected, ...], tuple[int, float]]:
    """time x (1 - utilisation) on each device of the phase, at most that device's window."""
    stake = int(phase.time_ns * max(0.0, 1.0 - util_pct / 100.0))
    per_dev = {}
    for dev in phase.device_ids:
        d = view.acct.device(int(dev))
        if d is not None:
            per_dev[int(dev)] = min(stake, d.window_ns)
    return per_device(view.acct, per_dev)


def phase_line(phase: UtilizationPhase, what: str, value: float, lo: float | None, hi: float | None) -> str:
    spread = f" (steps {pct(lo)} to {pct(hi)})" if lo is not None and hi is not None and lo != hi else ""
    return (f"phase {phase.phase!r} ({phase.kind}, {phase.steps:,} steps, {ms(phase.time_ns)}): "
            f"{what} {pct(value)}{spread}")


# Precision advice for float32 matrix math, keyed by the GPU architecture the trace shows
# (docs/diagnosis.md, "Advice that fits the hardware"):
#
# - Volta and Turing have no TF32 or BF16 tensor cores: FP16 autocast, with a gradient scaler in
#   training;
# - Ampere and Ada: TF32 for float32 matrix products, or BF16;
# - Hopper adds FP8 (Transformer Engine); Ada has FP8 tensor cores too;
# - Blackwell adds the block-scaled MXFP8 and NVFP4 formats;
# - AMD CDNA GPUs: BF16 (their FP32 matrix rate is a fraction of the BF16 rate);
# - unknown architecture: what each generation allows, said as such.
#
# Where the architecture is only a lower bound (kernel names built for sm_80 run on Ampere and
# newer), the advice is that of the lower bound, and the newer formats are offered as "on
# Hopper or newer".
PRE_AMPERE = ("volta", "turing")
GROUPS = {"volta": "fp16_only", "turing": "fp16_only", "ampere": "ampere", "ada": "ada", "hopper": "hopper",
          "blackwell": "blackwell", "cdna2": "amd", "cdna3": "amd", "cdna4": "amd"}

_TF32_PT = ("Let float32 matrix products use TF32 tensor cores: `torch.set_float32_matmul_precision('high')` "
            "(or `torch.backends.cuda.matmul.allow_tf32 = True`).")
_TF32_CONV = ("; convolutions use TF32 while `torch.backends.cudnn.allow_tf32` stays True (the default).")
_BF16_PT = ("Better: run the model in BF16 (`torch.autocast('cuda', dtype=torch.bfloat16)`, or cast the weights), "
            "which also halves the bytes moved.")
_FP16_PT = ("This GPU has no TF32 or BF16 tensor cores: run the matrix math in FP16 with "
            "`torch.autocast('cuda', dtype=torch.float16)` and, when training, scale the loss with "
            "`torch.amp.GradScaler('cuda')`.")
_FP16_CONV = "; `model.to(memory_format=torch.channels_last)` lets cuDNN pick FP16 tensor-core convolutions."
_FP8 = ("For the largest GEMMs, FP8 doubles the tensor-core peak again: Transformer Engine "
        "(`te.Linear` under `te.fp8_autocast()`), or FP8 weights and activations in the serving engine.")
_MX = ("Blackwell adds block-scaled MXFP8 and NVFP4: Transformer Engine's `MXFP8BlockScaling` and "
       "`NVFP4BlockScaling` recipes for training, NVFP4 or MXFP8 checkpoints (TensorRT Model Optimizer) "
       "for inference.")
_TF32_C = ("Enable TF32 tensor-core math for float32 GEMMs (`cublasSetMathMode(handle, CUBLAS_TF32_TENSOR_OP_MATH)` "
           "or `CUBLAS_COMPUTE_32F_FAST_TF32` in `cublasGemmEx`), or store the operands in BF16/FP16.")
_FP16_C = ("This GPU has no TF32 or BF16 tensor cores: store the operands in FP16 and call `cublasGemmEx` with "
           "`CUDA_R_16F` inputs and `CUBLAS_COMPUTE_32F` (FP16 tensor cores, FP32 accumulation).")
_AMD_PT = ("Run the model in BF16 (`torch.autocast('cuda', dtype=torch.bfloat16)`): on AMD Instinct GPUs "
           "float32 matrix math runs at a fraction of the BF16 matrix-core rate (MI300X: 163 vs 1,307 TFLOPS).")
_AMD_C = ("Store the operands in BF16 and call hipBLASLt (or `hipblasGemmEx`) with `HIP_R_16BF` inputs and "
          "`HIPBLAS_COMPUTE_32F`.")


def _lower(text: str) -> str:
    return text[:1].lower() + text[1:]


def _with_conv(line: str, conv_words: str, conv: bool) -> str:
    """`line` with its convolution clause (cuDNN's settings) only when convolutions ran."""
    return line[:-1] + conv_words if conv else line


def fp32_matmul(family: str | None, exact: bool, pytorch: bool, amd: bool = False,
                conv: bool = False) -> tuple[str, ...]:
    """Advice lines, main fix first, for float32 GEMMs and convolutions without tensor cores on
    a GPU of `family` (None: unknown; `exact` False: a lower bound from kernel names; `amd`: an
    AMD GPU whose family may be unknown). cuDNN's settings (`cudnn.allow_tf32`,
    `channels_last`) are named only when convolutions ran (`conv`)."""
    group = "amd" if amd else GROUPS.get(family or "")
    if group == "amd":
        return (_AMD_PT if pytorch else _AMD_C,)
    fp16 = _with_conv(_FP16_PT, _FP16_CONV, conv) if pytorch else _FP16_C
    no_tf32 = fp16.replace("This GPU has no TF32 or BF16 tensor cores: ", "")
    if group == "fp16_only" and exact:
        return (fp16,)
    lines = [_with_conv(_TF32_PT, _TF32_CONV, conv), _BF16_PT] if pytorch else [_TF32_C]
    if group is None:
        lines[0] = "If this GPU is Ampere or newer: " + _lower(lines[0])
        lines.append("On Volta or Turing, which have neither TF32 nor BF16: " + no_tf32)
    elif group == "fp16_only":  # kernels built for Volta or Turing: that GPU, or a newer one
        lines = ["If this GPU is Volta or Turing (no TF32 or BF16 tensor cores): " + no_tf32,
                 "On Ampere or newer: " + _lower(lines[0]), *lines[1:]]
    elif group == "blackwell":
        lines += [_FP8, _MX]
    elif exact and group in ("ada", "hopper"):
        lines.append(_FP8)
    elif not exact:
        lines.append("On Ada, Hopper or newer (the kernel names show only the oldest architecture this GPU "
                     "can be): " + _lower(_FP8))
    return tuple(lines)


LOW_ROOF_PCT = 50.0  # a GEMM operation reaching less than this share of its roof
SMALL_M = 64  # rows (or columns) below this leave most of a tensor-core tile empty
ALIGN = 8  # dimensions that are not multiples of 8 elements miss 16-byte aligned kernels
BELOW_ROOF_EVIDENCE = 3
TILE = 128  # a common output tile side, to count a GEMM's tiles
MANY_TILES = 2048  # tiles of TILE x TILE: over six waves on a 304-CU GPU, so a partial last wave costs little
LARGE_ADVICE = (
    "These GEMMs are large on every side, so neither the batch nor the wave count holds them back: tune the "
    "library's kernel choice for these shapes (PyTorch TunableOp, `PYTORCH_TUNABLEOP_ENABLED=1`, or "
    "`torch.compile(mode=\"max-autotune\")`), and check the clocks the GPU held under load (power or thermal "
    "limits).",
    "Profile one launch with Nsight Compute (ncu_plan.sh in the report directory) to see the kernel the library "
    "picked and the clocks it ran at.",
)


def low_gemm_operations(operations: Sequence[Operation]) -> list[Operation]:
    """compute_efficiency's matrix products placed plausibly on the roofline at under
    LOW_ROOF_PCT of their roof: the operations NLE320 puts at stake."""
    return [o for o in operations
            if o.family == "gemm" and o.pct_of_roof is not None and (o.flops or 0) > 0
            and float(o.pct_of_roof) < LOW_ROOF_PCT and not o.implausible]


def _roof_pct(op: Operation) -> float:
    assert op.pct_of_roof is not None  # low_gemm_operations keeps placed operations only
    return float(op.pct_of_roof)


def stake_ns(op: Operation) -> int:
    """GPU time an operation would give back at its roof: time x (1 - achieved/attainable)."""
    return int(op.kernel_ns * max(0.0, 1.0 - _roof_pct(op) / 100.0))


def shape_cause(op: Operation) -> str:
    m, n, k = op.m, op.n, op.k
    if m is None or n is None or k is None:
        return "sizes not known"
    if min(m, n) < SMALL_M:
        return f"M = {min(m, n)}: a tiny batch (decode) fills a sliver of each tensor-core tile"
    if any(d % ALIGN for d in (m, n, k)):
        return f"{m} x {n} x {k}: a size that is not a multiple of {ALIGN} rules out the aligned kernels"
    if large(op):
        return (f"{m} x {n} x {k}: large on every side ({tiles(op):,} tiles of {TILE} x {TILE}), so not the tiles "
                "or the waves: the kernel the library picked, or the clocks it ran at")
    return f"{m} x {n} x {k}: tile shape or wave quantization (too few tiles for the GPU's SMs)"


def tiles(op: Operation) -> int:
    return -(-int(op.m or 0) // TILE) * -(-int(op.n or 0) // TILE)


def large(op: Operation) -> bool:
    """Sizes known, none small or off-aligned, and at least MANY_TILES output tiles."""
    m, n, k = op.m, op.n, op.k
    return (m is not None and n is not None and k is not None and min(m, n) >= SMALL_M
            and not any(d % ALIGN for d in (m, n, k)) and tiles(op) >= MANY_TILES)


def gemm_below_roof(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """GEMM operations run far below the roof of their dtype.

    Reads compute_efficiency's operations (FLOPs from recorded shapes, placed under the
    roofline of the GPU for their dtype). An operation counts when it is a matrix product
    (mm, addmm, bmm, linear, ...) reaching less than 50% of the roof at its arithmetic
    intensity (the bandwidth slope for memory-bound shapes, the dtype's peak for
    compute-bound ones). Impact: per device, the sum over those operations of time x (1 -
    achieved / attainable), the time they would give back at their roof (a ceiling: no
    kernel reaches it); severity from the impact bands (rules/impact.py). The evidence names
    the likely cause from the sizes: a tiny M (decode batches), dimensions off the 8-element
    alignment, tile shape / wave quantization, or, for GEMMs large on every side (at least
    MANY_TILES output tiles of 128 x 128), the kernel the library picked or the clocks. When
    every operation listed is that large, the advice leads with tuning the library's kernel
    choice, not with batching.

    Example:

        NLE320 medium: 4 GEMM operations reach 12.4% to 40.0% of their roof
        - mm [[16,4096],[4096,4096]] bf16: 21.3 of 53.2 TFLOP/s (40.0% of the roof), memory-bound at 15.9 FLOP/byte
        -   25.805 ms in 1,024 calls; M = 16: a tiny batch (decode) fills a sliver of each tensor-core tile
    """
    res = view.result(ComputeEfficiency)
    if res is None:
        return
    low = low_gemm_operations(res.operations)
    if not low:
        return
    per_dev: dict[int, int] = {}
    for o in low:
        per_dev[int(o.device_id)] = per_dev.get(int(o.device_id), 0) + stake_ns(o)
    affected, impact = per_device(view.acct, per_dev)
    severity = band(impact[1])
    if severity is None:
        return
    top = sorted(low, key=stake_ns, reverse=True)
    evidence = []
    for o in top[:BELOW_ROOF_EVIDENCE]:
        evidence.append(
            f"{o.label} {o.compute_dtype}: {fmt.sig(o.tflops)} of {fmt.sig(o.roof_tflops)} TFLOP/s "
            f"({pct(_roof_pct(o))} of the roof), {o.bound}-bound at {o.flop_per_byte:,.1f} FLOP/byte"
        )
        evidence.append(f"  {ms(o.kernel_ns)} in {o.calls:,} calls; {shape_cause(o)}")
    lo, hi = min(_roof_pct(o) for o in low), max(_roof_pct(o) for o in low)
    assumed = any(o.dtype_source == "assumed" for o in top[:BELOW_ROOF_EVIDENCE])
    yield rule.finding(
        severity=severity,
        confidence=Confidence.LOW if assumed else Confidence.MEDIUM,
        evidence=evidence,
        recommendation=(LARGE_ADVICE if all(large(o) for o in top[:BELOW_ROOF_EVIDENCE])
                        else advice("gemm_roof", view.workload)),
        title=(f"{len(low)} GEMM operations reach {pct(lo)} to {pct(hi)} of their roof" if len(low) > 1
               else f"A GEMM operation reaches {pct(lo)} of its roof"),
        affected=affected,
        impact=impact,
        cause=Cause.COMPUTE,
    )


NLE320 = Rule(
    id="NLE320",
    name="gemm-below-roof",
    title="GEMMs far below their roofline",
    check=gemm_below_roof,
    metric_ids=("compute_efficiency",),
)


LOW_MFU_PCT = 30.0  # compute-heavy phases (prefill, training) below this MFU


def low_mfu(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """A compute-heavy phase (prefill, training or plain forward steps) runs at a low MFU.

    Reads model_utilization's phases: MFU = model FLOPs per step / (step time x the GPU's
    dense peak for the model's dtype x GPUs), from --model config.json or
    --model-flops-per-token and the tokens per step. Fires per compute-heavy phase below 30%
    MFU. Impact: the phase's time x (1 - MFU) on each of its devices, the time it would give
    back at the peak (a ceiling); severity from the impact bands (rules/impact.py). The
    evidence lists every input the figure used, the hardware FLOPs utilisation of the
    measured operators when there is one, and how much kernel time memory-bound operators
    took (compute_efficiency). A phase whose figures failed a plausibility check (its
    `warnings`: an HFU below MFU means the model FLOPs count work the steps did not run)
    gets low confidence and the warning in its evidence.

    Example:

        NLE321 high: Phase 'step' (prefill) runs at 12.9% MFU
        - phase 'step' (prefill, 1 steps, 47.151 ms): MFU 12.9%
        - tokens per step: the token embedding's input [16, 559]
        - FLOPs per token: qwen1.5-0.5b.json: 2 x 308,281,344 (no LM head) + attention over 559 keys
        - LM head: left out: no matrix product of the step has the vocabulary dimension 151,936 ...
        - measured operator FLOPs reach 12.3% of the peak (HFU)
        - memory-bound operators (no FLOPs) take 44.4% of the kernel time
    """
    res = view.result(ModelUtilization)
    if res is None:
        return
    ce = view.result(ComputeEfficiency)
    memory = ce.family("memory") if ce else None
    for ph in res.phases:
        mfu = ph.mfu_pct
        if not ph.compute_heavy or mfu is None or mfu >= LOW_MFU_PCT:
            continue
        affected, impact = phase_stake(view, ph, float(mfu))
        severity = band(impact[1])
        if severity is None:
            continue
        evidence = [phase_line(ph, "MFU", float(mfu), ph.mfu_min_pct, ph.mfu_max_pct)]
        evidence += [f"  {line}" for line in ph.inputs]
        if ph.hfu_pct is not None:
            evidence.append(f"measured operator FLOPs reach {pct(ph.hfu_pct)} of the peak (HFU)")
        if memory is not None:
            share = pct(memory.pct_of_kernel_time)
            evidence.append(f"memory-bound operators (no FLOPs) take {share} of the kernel time")
        evidence += [f"warning: {w}" for w in ph.warnings]
        assumed = any("assumed" in line for line in ph.inputs) or bool(ph.warnings)
        yield rule.finding(
            severity=severity,
            confidence=Confidence.LOW if assumed else Confidence.MEDIUM,
            evidence=evidence,
            recommendation=advice("mfu", view.workload),
            title=f"Phase {ph.phase!r} ({ph.kind}) runs at {pct(float(mfu))} MFU",
            affected=affected,
            impact=impact,
            cause=Cause.COMPUTE,
        )


NLE321 = Rule(
    id="NLE321",
    name="low-mfu",
    title="Compute-heavy phase with low MFU",
    check=low_mfu,
    metric_ids=("model_utilization", "compute_efficiency"),
)


LOW_MBU_PCT = 50.0  # decode phases below this MBU


def low_mbu(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """A memory-bound phase (decode) reads its weights and KV cache far below peak bandwidth.

    Reads model_utilization's decode phases: MBU = bytes a step must read (every weight
    it uses and the KV cache, from --model config.json with the step's batch and key length)
    / (step time x the GPU's peak bandwidth x GPUs). A decode step does little arithmetic per
    byte, so its floor is the time to stream those bytes; a low MBU means the step's time goes
    to launches, host work, small kernels or idle gaps instead. Fires per decode phase below
    50% MBU. Impact: the phase's time x (1 - MBU) on each of its devices (a ceiling); severity
    from the impact bands (rules/impact.py). A phase whose figures failed a plausibility
    check (its `warnings`) gets low confidence and the warning in its evidence.

    Example:

        NLE322 high: Phase 'decode' reads weights and KV cache at 21.4% of peak bandwidth
        - phase 'decode' (decode, 512 steps, 1,024.000 ms): MBU 21.4% (steps 18.0% to 25.1%)
        - bytes per step: qwen1.5-0.5b.json: bf16 weights + KV cache at 1,024 keys, batch 16
    """
    res = view.result(ModelUtilization)
    if res is None:
        return
    for ph in res.phases:
        mbu = ph.mbu_pct
        if ph.kind != "decode" or mbu is None or mbu >= LOW_MBU_PCT:
            continue
        affected, impact = phase_stake(view, ph, float(mbu))
        severity = band(impact[1])
        if severity is None:
            continue
        per_step = [float(s.mbu_pct) for s in res.steps if s.phase == ph.phase and s.mbu_pct is not None]
        lo, hi = (min(per_step), max(per_step)) if per_step else (None, None)
        evidence = [phase_line(ph, "MBU", float(mbu), lo, hi)]
        evidence += [f"  {line}" for line in ph.inputs]
        if ph.mfu_pct is not None:
            evidence.append(f"MFU of the same steps: {pct(ph.mfu_pct)}")
        evidence += [f"warning: {w}" for w in ph.warnings]
        assumed = any("assumed" in line or "lower bound" in line for line in ph.inputs)
        assumed = assumed or bool(ph.warnings)
        yield rule.finding(
            severity=severity,
            confidence=Confidence.LOW if assumed else Confidence.MEDIUM,
            evidence=evidence,
            recommendation=advice("mbu", view.workload),
            title=f"Phase {ph.phase!r} reads weights and KV cache at {pct(float(mbu))} of peak bandwidth",
            affected=affected,
            impact=impact,
            cause=Cause.COMPUTE,
        )


NLE322 = Rule(
    id="NLE322",
    name="low-mbu",
    title="Memory-bound (decode) phase with low MBU",
    check=low_mbu,
    metric_ids=("model_utilization",),
)


MIN_SHARE_PCT = 5.0  # of a device's GEMM time
FP32_EVIDENCE = 3


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


def fp32_gemm(view: RuleInput, rule: Rule) -> Iterator[Finding]:
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
    The advice fits the GPU (rules/efficiency.py fp32_matmul, gemm_precision's `arch`): FP16 with a
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
    res = view.result(GemmPrecision)
    if res is None:
        return
    rows = [d for d in res.by_device if d.fp32_cuda_core_pct >= MIN_SHARE_PCT]
    if not rows:
        return
    affected, impact = per_device(view.acct, {d.device_id: int(d.fp32_cuda_core_ns) for d in rows})
    severity = band(impact[1])
    if severity is None:
        return
    devices = {d.device_id for d in rows}
    by_name: dict[str, GemmKernel] = {}  # one line per kernel name, summed over the devices
    for k in res.fp32_kernels:
        if k.device_id in devices:
            row = by_name.get(k.name)
            by_name[k.name] = k if row is None else replace(
                row, kernel_ns=row.kernel_ns + k.kernel_ns, calls=row.calls + k.calls)
    kernels = sorted(by_name.values(), key=lambda k: -k.kernel_ns)
    families = {k.family for k in kernels}
    what = {frozenset({"gemm"}): "GEMMs", frozenset({"conv"}): "convolutions"}.get(
        frozenset(families), "GEMMs and convolutions")
    scope = {"GEMMs": "GEMM", "convolutions": "convolution"}.get(what, "GEMM and convolution")
    worst = max(rows, key=lambda d: d.fp32_cuda_core_pct)
    evidence = [
        f"{view.kernel_label(k.name)}: {ms(k.kernel_ns)} in {k.calls:,} calls; "
        f"{named_by(k.name, k.dtype_token)}"
        for k in kernels[:FP32_EVIDENCE]
    ]
    evidence += [f"GPU {d.device_id}: {ms(d.fp32_cuda_core_ns)} of {ms(d.gemm_ns)} of {scope} time"
                 for d in rows]
    arch = res.arch
    evidence.append(f"GPU: {arch.why or 'unknown'}")
    share = pct(worst.fp32_cuda_core_pct)
    title = (
        f"Float32 {what} on CUDA cores take {share} of GPU {worst.device_id}'s {scope} time"
        if len(rows) == 1
        else f"Float32 {what} on CUDA cores take up to {share} of the {scope} time of {len(rows)} GPUs"
    )
    kineto = view.schema is not None and view.schema.format is TraceFormat.KINETO  # a PyTorch profiler trace
    pytorch = kineto or view.workload not in ("generic_cuda", "unknown", "tensorrt_inference")
    tk = view.result(TopKernels)
    conv = "conv" in families or any(view.kernel_category(k.name) == "conv"
                                      for k in (tk.kernels if tk is not None else ()))
    yield rule.finding(
        severity=severity,
        confidence=Confidence.HIGH,
        evidence=evidence,
        recommendation=fp32_matmul(
            arch.family, bool(arch.exact), pytorch, amd=arch.vendor == "amd", conv=conv
        ),
        title=title,
        affected=affected,
        impact=impact,
        cause=Cause.COMPUTE,
    )


NLE323 = Rule(
    id="NLE323",
    name="fp32-gemm",
    title="Float32 GEMMs and convolutions without tensor cores",
    check=fp32_gemm,
    metric_ids=("gemm_precision",),
)


MAX_FINDINGS = 3  # kernels, by time at stake
RULE_TEXT = 240  # characters of ncu's own rule text quoted in evidence

ADVICE = {
    "grid": "Give the GPU more blocks per launch: a larger batch or sequence per call, split-K or stream-K "
            "for a GEMM (cuBLASLt heuristics, CUTLASS split-K), or fuse the kernel with its neighbours.",
    "waves": "Pick a tile size or grid that fills whole waves of the GPU's SMs (the last wave runs part-empty).",
    "registers": "Free registers: a smaller tile or fewer accumulators, __launch_bounds__ or -maxrregcount "
                 "on your own kernels, another autotuned config for library ones.",
    "shared memory": "Use less shared memory per block: fewer pipeline stages or a smaller tile (CUTLASS "
                     "stages, Triton num_stages and BLOCK sizes), so more blocks fit on an SM.",
    "stall": "Hide the latency the warps wait on: more independent work per thread (unrolling, "
             "prefetching, asynchronous copies), fewer dependent global loads.",
    "issue": "Raise the warps ready to issue: more warps per SM (occupancy) or more independent "
             "instructions per warp.",
    "memory-bound": "Move fewer bytes: fuse it with the kernels that produce or consume its data, keep "
                    "reused data in shared memory or L2, or store activations and weights in a narrower type.",
    "compute-bound": "Do the work on tensor cores or in a narrower type (BF16, FP8) where accuracy allows, "
                     "or do less of it (a cheaper algorithm, skipped padding).",
    "balanced": "Compute and memory both run near their peaks: only less work (fewer FLOPs and bytes, a "
                "narrower type, an algorithmic change) makes it faster.",
}
OPEN = ("Open the launch in Nsight Compute (`ncu-ui`, or `ncu --import` of its report) for the source "
        "lines and stall reasons behind these figures.")


def advice_for(row: NcuKernel) -> list[str]:
    """Recommendations for a kernel's class and, when latency-bound, for the causes named."""
    out = []
    if row.class_ == "latency-bound":
        text = " ".join(row.causes)
        for key, word in (("grid", "of a wave"), ("waves", "part-empty"), ("registers", "registers"),
                          ("shared memory", "shared memory"), ("stall", "stall"), ("issue", "issues in")):
            if word in text:
                out.append(ADVICE[key])
        if not out:
            out.append(ADVICE["issue"])
    elif row.class_ in ADVICE:
        out.append(ADVICE[row.class_])
    out.append(OPEN)
    return out


def _headline(row: NcuKernel) -> str:
    """The class and its main reason: "latency-bound: occupancy 17% ..." or "memory-bound (DRAM at 85% of peak)"."""
    if row.class_ == "latency-bound" and row.causes:
        return f"latency-bound: {row.causes[0]}"
    if row.class_ == "latency-bound":
        return "latency-bound"
    return f"{row.class_} ({row.limiter})"


def _evidence(view: RuleInput, row: NcuKernel, launch: NcuLaunch | None) -> list[str]:
    lines = [
        f"trace: {ms(row.total_ns)} in {row.calls:,} calls ({pct(float(row.pct_of_kernel_time))} of kernel "
        f"time), median {us(row.p50_ns)} per call",
        f"ncu: SM {row.sm_pct:.1f}%, memory {row.memory_pct:.1f}% of peak, {row.class_}: "
        + ("; ".join(row.causes) if row.causes else str(row.limiter)),
        f"at its roof it would give back up to {dur(row.stake_ns or 0)}: trace time x (1 - "
        f"{float(row.pct_of_roof or 0.0):.1f}%), an upper bound (no kernel runs at its roof)",
    ]
    if row.duration_ratio:
        far = " (far from 1: ncu replays a kernel alone, caches flushed, clocks locked)" if row.ratio_far else ""
        lines.append(f"ncu's median launch {us(row.ncu_p50_ns or 0.0)} / the trace's median {us(row.p50_ns)} = "
                     f"{row.duration_ratio:.2f}{far}")
    point = launch.roofline if launch is not None else None
    if point and point.pct_of_roof is not None and point.roof_tflops is not None:
        where = f" at {point.flop_per_byte:,.1f} FLOP/byte" if point.flop_per_byte is not None else ""
        lines.append(
            f"roofline ({point.precision.upper()}{' tensor' if point.tensor else ''}): "
            f"{point.achieved_tflops:,.2f} of {point.roof_tflops:,.2f} TFLOP/s "
            f"({pct(float(point.pct_of_roof))}){where} ({point.peaks_basis})"
        )
    rules = launch.ncu_rules if launch is not None else ()
    if rules:
        r = rules[0]
        gain = f", estimated speedup {r.speedup_pct:.0f}%" if r.speedup_pct is not None else ""
        text = r.text if len(r.text) <= RULE_TEXT else r.text[: RULE_TEXT - 3] + "..."
        lines.append(f"ncu's own {r.name} rule{gain}: {text}")
    if row.matched_by == "short":
        lines.append(f"matched by function name only (ncu: {view.kernel_label(row.ncu_kernel)})")
    return lines


def ncu_below_roof(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """A kernel that Nsight Compute measured runs far below its roof, for much of the trace's time.

    Reads the ncu metric (--ncu): each kernel of the trace matched to ncu launches, with its
    class (compute-, memory-, latency-bound, balanced), its distance from the roof (the
    busier of SM and memory throughput, % of peak) and the limiter. Impact: per device, the
    kernel's trace time x (1 - that share), the time it would give back at its roof: an
    upper bound (no kernel reaches its roof); severity from the impact bands
    (rules/impact.py), at most low when ncu's duration is far from the trace's (`ratio_far`:
    ncu measured a launch unlike the ones the trace timed). One finding per kernel, for the
    MAX_FINDINGS kernels with the most time at stake. Confidence: medium; low when the match
    is by function name only or the durations are far apart. The
    advice follows the class and, for latency-bound kernels, the causes named (grid, waves,
    registers, shared memory, stalls).

    Example:

        NLE330 medium: Kernel2<cutlass_80…> runs at 32.1% of its roof, latency-bound: occupancy 17% from ...
        - trace: 22.400 ms in 200 calls (61.5% of kernel time), median 112.0 us per call
        - ncu: SM 32.1%, memory 27.7% of peak: SM 32%, memory 28% of peak: occupancy 17% ...
        - at its roof it would give back up to 15.210 ms: trace time x (1 - 32.1%), an upper bound ...
    """
    res = view.result(NcuResults)
    if res is None:
        return
    rows = [r for r in res.kernels if r.stake_ns and r.class_]
    for row in sorted(rows, key=lambda r: -(r.stake_ns or 0))[:MAX_FINDINGS]:
        per_dev = {int(d.device_id): int(d.stake_ns) for d in row.devices if d.stake_ns}
        affected, impact = per_device(view.acct, per_dev)
        severity = band(impact[1])
        if severity is None:
            continue
        if row.ratio_far and severity.rank < Severity.LOW.rank:
            severity = Severity.LOW  # ncu measured a launch unlike the trace's: its figures may not apply
        weak = row.matched_by == "short" or row.ratio_far
        yield rule.finding(
            severity=severity,
            confidence=Confidence.LOW if weak else Confidence.MEDIUM,
            evidence=_evidence(view, row, res.launch(row.longest_launch)),
            recommendation=advice_for(row),
            title=(f"{view.kernel_label(row.name)} runs at {float(row.pct_of_roof or 0.0):.1f}% of its roof, "
            f"{_headline(row)}"),
            affected=affected,
            impact=impact,
            cause=Cause.COMPUTE,
        )


NLE330 = Rule(
    id="NLE330",
    name="ncu-below-roof",
    title="Kernels far below their roof (Nsight Compute)",
    check=ncu_below_roof,
    metric_ids=("ncu",),
)


RATIO_EVIDENCE = 5


def ncu_duration_mismatch(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Nsight Compute timed matched kernels far from the trace's time for them.

    Reads the ncu metric's kernels (--ncu): the ratio of ncu's median launch duration to the
    trace's median call, flagged when it is outside [1/2, 2] (`ratio_far`, RATIO_FAR in
    metrics/ncu_results.py). ncu replays one kernel at a time with the caches flushed and
    the clocks locked to base, and may have profiled a launch of another size (a warm-up
    call, a different batch): its class and limiter then describe that launch, not the time
    the trace measured. A launch is matched only within 2x of the trace's calls of its name
    and launch shape (NLE332 lists the others), so this fires where the kernel's calls of
    that shape differ from its calls overall. A note (info) listing those kernels.

    Example:

        NLE331 info: 2 kernels took far longer or shorter under Nsight Compute than in the trace
        - elementwise_kernel_with_index<int, arange_cuda_out…>: ncu 3.4 us, trace median 60.0 us (ratio 0.06)
    """
    res = view.result(NcuResults)
    if res is None:
        return
    far = [r for r in res.kernels if r.ratio_far]
    if not far:
        return
    far.sort(key=lambda r: -r.total_ns)
    evidence = [
        f"{view.kernel_label(r.name)}: ncu {us(r.ncu_p50_ns or 0.0)}, trace median {us(r.p50_ns)} "
        f"(ratio {r.duration_ratio or 0.0:.2f})"
        for r in far[:RATIO_EVIDENCE]
    ]
    if len(far) > RATIO_EVIDENCE:
        evidence.append(f"and {len(far) - RATIO_EVIDENCE} more (tables/ncu_kernels.csv)")
    n = len(far)
    yield rule.note(
        confidence=Confidence.HIGH,
        evidence=evidence,
        recommendation=[
            "Check that ncu profiled a launch like the ones that take the trace's time (same sizes, after "
            "warm-up: the launch skip in ncu_plan.sh), and compare like with like by rerunning with "
            "`--cache-control none --clock-control none`.",
        ],
        title=f"{n} kernel{'s' if n > 1 else ''} took far longer or shorter under Nsight Compute than in the trace",
    )


NLE331 = Rule(
    id="NLE331",
    name="ncu-duration-mismatch",
    title="Nsight Compute durations far from the trace's",
    check=ncu_duration_mismatch,
    metric_ids=("ncu",),
)


UNMATCHED_EVIDENCE = 5


def ncu_unmatched(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Nsight Compute launches that match no kernel of the trace.

    Reads the ncu metric's match (--ncu): launches whose kernel name matched no trace
    kernel by mangled name, demangled name or (where one side has only that) function name,
    or whose function name several trace kernels share; whose grid and block the trace never
    ran that kernel with; or whose duration is more than 2x off the trace's median call of
    that name and shape (DURATION_FACTOR in metrics/ncu_results.py): results of another
    program or another size of work. Their figures are in ncu.csv but join no trace time and
    give no trace kernel a class. A note (info).

    Example:

        NLE332 info: 2 of 12 Nsight Compute launches match no kernel of the trace
        - Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128…>: no kernel of the trace has this name
        - fmha_fwd_loop_kernel: its duration, 7.8 us, is 2.60x the trace's median call (3.0 us): not the same work
    """
    res = view.result(NcuResults)
    if res is None:
        return
    m = res.match
    if not m.unmatched:
        return
    evidence = [f"{view.kernel_label(u.kernel)}: {u.reason}" for u in m.unmatched[:UNMATCHED_EVIDENCE]]
    if len(m.unmatched) > UNMATCHED_EVIDENCE:
        evidence.append(f"and {len(m.unmatched) - UNMATCHED_EVIDENCE} more (tables/ncu_launches.csv)")
    yield rule.note(
        confidence=Confidence.HIGH,
        evidence=evidence,
        recommendation=[
            "Profile the kernels this trace ran (ncu_plan.sh in the report directory names them) with the "
            "same program and build; with several kernels of one function name, export ncu's demangled or "
            "mangled names (`--print-kernel-base demangled`).",
        ],
        title=f"{len(m.unmatched)} of {m.launches} Nsight Compute launches match no kernel of the trace",
    )


NLE332 = Rule(
    id="NLE332",
    name="ncu-unmatched",
    title="Nsight Compute launches without a trace kernel",
    check=ncu_unmatched,
    metric_ids=("ncu",),
)


RULES = (NLE320, NLE321, NLE322, NLE323, NLE330, NLE331, NLE332)
