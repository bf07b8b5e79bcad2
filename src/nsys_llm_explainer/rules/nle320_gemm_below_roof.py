from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nsys_llm_explainer import fmt
from nsys_llm_explainer.model import Cause, Confidence, Finding
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct
from nsys_llm_explainer.rules.impact import band, per_device

LOW_ROOF_PCT = 50.0  # a GEMM operation reaching less than this share of its roof
SMALL_M = 64  # rows (or columns) below this leave most of a tensor-core tile empty
ALIGN = 8  # dimensions that are not multiples of 8 elements miss 16-byte aligned kernels
EVIDENCE = 3
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


def stake_ns(op: dict[str, Any]) -> int:
    """GPU time an operation would give back at its roof: time x (1 - achieved/attainable)."""
    return int(op["kernel_ns"] * max(0.0, 1.0 - float(op["pct_of_roof"]) / 100.0))


def shape_cause(op: dict[str, Any]) -> str:
    m, n, k = op.get("m"), op.get("n"), op.get("k")
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


def tiles(op: dict[str, Any]) -> int:
    return -(-int(op["m"]) // TILE) * -(-int(op["n"]) // TILE)


def large(op: dict[str, Any]) -> bool:
    """Sizes known, none small or off-aligned, and at least MANY_TILES output tiles."""
    m, n, k = op.get("m"), op.get("n"), op.get("k")
    return (m is not None and n is not None and k is not None and min(m, n) >= SMALL_M
            and not any(d % ALIGN for d in (m, n, k)) and tiles(op) >= MANY_TILES)


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
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
    res = view.metric("compute_efficiency")
    if res is None:
        return
    low = [
        o for o in res.data["operations"]
        if o["family"] == "gemm" and o.get("pct_of_roof") is not None and o["flops"] > 0
        and float(o["pct_of_roof"]) < LOW_ROOF_PCT and not o.get("implausible")
    ]
    if not low:
        return
    per_dev: dict[int, int] = {}
    for o in low:
        per_dev[int(o["device_id"])] = per_dev.get(int(o["device_id"]), 0) + stake_ns(o)
    affected, impact = per_device(view.acct, per_dev)
    severity = band(impact[1])
    if severity is None:
        return
    top = sorted(low, key=stake_ns, reverse=True)
    evidence = []
    for o in top[:EVIDENCE]:
        evidence.append(
            f"{o['label']} {o['compute_dtype']}: {fmt.sig(o['tflops'])} of {fmt.sig(o['roof_tflops'])} TFLOP/s "
            f"({pct(float(o['pct_of_roof']))} of the roof), {o['bound']}-bound at {o['flop_per_byte']:,.1f} FLOP/byte"
        )
        evidence.append(f"  {ms(o['kernel_ns'])} in {o['calls']:,} calls; {shape_cause(o)}")
    lo, hi = min(float(o["pct_of_roof"]) for o in low), max(float(o["pct_of_roof"]) for o in low)
    assumed = any(o["dtype_source"] == "assumed" for o in top[:EVIDENCE])
    yield rule.finding(
        severity=severity,
        confidence=Confidence.LOW if assumed else Confidence.MEDIUM,
        evidence=evidence,
        recommendation=(LARGE_ADVICE if all(large(o) for o in top[:EVIDENCE])
                        else advice("gemm_roof", view.workload)),
        title=(f"{len(low)} GEMM operations reach {pct(lo)} to {pct(hi)} of their roof" if len(low) > 1
               else f"A GEMM operation reaches {pct(lo)} of its roof"),
        affected=affected,
        impact=impact,
        cause=Cause.COMPUTE,
    )


RULE = Rule(
    id="NLE320",
    name="gemm-below-roof",
    title="GEMMs far below their roofline",
    check=check,
    metric_ids=("compute_efficiency",),
)
