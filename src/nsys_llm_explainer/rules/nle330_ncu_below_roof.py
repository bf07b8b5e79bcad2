from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nsys_llm_explainer.model import Cause, Confidence, Finding, Severity
from nsys_llm_explainer.rules.base import Rule, RuleInput, dur, ms, pct, us
from nsys_llm_explainer.rules.impact import band, per_device

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


def advice_for(row: dict[str, Any]) -> list[str]:
    """Recommendations for a kernel's class and, when latency-bound, for the causes named."""
    out = []
    if row["class"] == "latency-bound":
        text = " ".join(row.get("causes") or [])
        for key, word in (("grid", "of a wave"), ("waves", "part-empty"), ("registers", "registers"),
                          ("shared memory", "shared memory"), ("stall", "stall"), ("issue", "issues in")):
            if word in text:
                out.append(ADVICE[key])
        if not out:
            out.append(ADVICE["issue"])
    elif row["class"] in ADVICE:
        out.append(ADVICE[row["class"]])
    out.append(OPEN)
    return out


def _headline(row: dict[str, Any]) -> str:
    """The class and its main reason: "latency-bound: occupancy 17% ..." or "memory-bound (DRAM at 85% of peak)"."""
    if row["class"] == "latency-bound" and row.get("causes"):
        return f"latency-bound: {row['causes'][0]}"
    if row["class"] == "latency-bound":
        return "latency-bound"
    return f"{row['class']} ({row['limiter']})"


def _evidence(view: RuleInput, row: dict[str, Any], launch: dict[str, Any] | None) -> list[str]:
    lines = [
        f"trace: {ms(row['total_ns'])} in {row['calls']:,} calls ({pct(float(row['pct_of_kernel_time']))} of kernel "
        f"time), median {us(row['p50_ns'])} per call",
        f"ncu: SM {row['sm_pct']:.1f}%, memory {row['memory_pct']:.1f}% of peak, {row['class']}: "
        + ("; ".join(row["causes"]) if row.get("causes") else str(row["limiter"])),
        f"at its roof it would give back up to {dur(row['stake_ns'])}: trace time x (1 - "
        f"{float(row['pct_of_roof']):.1f}%), an upper bound (no kernel runs at its roof)",
    ]
    if row.get("duration_ratio"):
        far = " (far from 1: ncu replays a kernel alone, caches flushed, clocks locked)" if row["ratio_far"] else ""
        lines.append(f"ncu's median launch {us(row['ncu_p50_ns'])} / the trace's median {us(row['p50_ns'])} = "
                     f"{row['duration_ratio']:.2f}{far}")
    point = (launch or {}).get("roofline")
    if point and point.get("pct_of_roof") is not None and point.get("roof_tflops") is not None:
        where = f" at {point['flop_per_byte']:,.1f} FLOP/byte" if point.get("flop_per_byte") is not None else ""
        lines.append(
            f"roofline ({point['precision'].upper()}{' tensor' if point['tensor'] else ''}): "
            f"{point['achieved_tflops']:,.2f} of {point['roof_tflops']:,.2f} TFLOP/s "
            f"({pct(float(point['pct_of_roof']))}){where} ({point['peaks_basis']})"
        )
    rules = (launch or {}).get("ncu_rules") or []
    if rules:
        r = rules[0]
        gain = f", estimated speedup {r['speedup_pct']:.0f}%" if r.get("speedup_pct") is not None else ""
        text = r["text"] if len(r["text"]) <= RULE_TEXT else r["text"][: RULE_TEXT - 3] + "..."
        lines.append(f"ncu's own {r['name']} rule{gain}: {text}")
    if row["matched_by"] == "short":
        lines.append(f"matched by function name only (ncu: {view.kernel_label(row['ncu_kernel'])})")
    return lines


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
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
    res = view.metric("ncu")
    if res is None:
        return
    launches = {d["index"]: d for d in res.data["launches"]}
    rows = [r for r in res.data["kernels"] if r["stake_ns"] and r["class"]]
    for row in sorted(rows, key=lambda r: -r["stake_ns"])[:MAX_FINDINGS]:
        per_dev = {int(d["device_id"]): int(d["stake_ns"]) for d in row["devices"] if d.get("stake_ns")}
        affected, impact = per_device(view.acct, per_dev)
        severity = band(impact[1])
        if severity is None:
            continue
        if row["ratio_far"] and severity.rank < Severity.LOW.rank:
            severity = Severity.LOW  # ncu measured a launch unlike the trace's: its figures may not apply
        weak = row["matched_by"] == "short" or row["ratio_far"]
        yield rule.finding(
            severity=severity,
            confidence=Confidence.LOW if weak else Confidence.MEDIUM,
            evidence=_evidence(view, row, launches.get(row["longest_launch"])),
            recommendation=advice_for(row),
            title=(f"{view.kernel_label(row['name'])} runs at {float(row['pct_of_roof']):.1f}% of its roof, "
            f"{_headline(row)}"),
            affected=affected,
            impact=impact,
            cause=Cause.COMPUTE,
        )


RULE = Rule(
    id="NLE330",
    name="ncu-below-roof",
    title="Kernels far below their roof (Nsight Compute)",
    check=check,
    metric_ids=("ncu",),
)
