from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Cause, Confidence, Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput, dur, pct
from nsys_llm_explainer.rules.impact import band
from nsys_llm_explainer.rules.serving_common import (
    ENGINE_GRAPH_ADVICE,
    GENERIC_GRAPH_ADVICE,
    engine_advice,
    largest,
    per_device,
    serving,
)

HOST_SHARE_PCT = 50.0  # of the decode phase's time
MIN_LAUNCHES = 20  # launches per decode iteration
GRAPH_SHARE = 0.5  # of decode iterations replaying a graph: then graphs are on


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Decode runs eagerly, and launching its kernels is what takes its time.

    Reads the serving metric's decode phase: fires when fewer than half of the decode
    iterations replay a CUDA graph, each launches at least 20 kernels, and the host holds at
    least half the phase (host_share_pct: gaps before iterations plus GPU idle inside their
    spans). Impact: per device, the GPU idle inside the decode iterations' spans (the GPU waits
    for the next eager launch there; one graph launch per step removes that wait), the largest
    device's; the gaps between iterations are NLE402's. The advice is the engine's own switch
    for CUDA graphs.

    Example:

        NLE401 high: Decode runs without CUDA graphs: 138 launches per token, GPU busy 6.0% of it
        - 50 decode iterations at 5.31 ms per output token, of which 316 µs is kernels
    """
    s = serving(view)
    ph = s.phase("decode") if s is not None else None
    if s is None or ph is None or ph.launches_per_iteration < MIN_LAUNCHES:
        return
    if ph.graph_iterations >= GRAPH_SHARE * ph.iterations or (ph.host_share_pct or 0.0) < HOST_SHARE_PCT:
        return
    rows = s.of_phase("decode")
    affected = per_device(view, rows, lambda r: max(r.gpu_span_ns - r.gpu_busy_ns, 0),
                          lambda d, rs: f"{len(rs):,} decode iterations")
    top = largest(affected)
    if top is None or band(top[1]) is None:
        return
    per_token = ph.period_p50_ns or ph.gpu_span_p50_ns
    busy = 100.0 * ph.gpu_busy_p50_ns / per_token if per_token else 0.0
    evidence = [
        f"{ph.iterations:,} decode iterations, {ph.launches_per_iteration:,.0f} launches each, "
        f"{'none' if not ph.graph_iterations else f'{ph.graph_iterations:,}'} replayed as a CUDA graph",
        f"{dur(per_token)} per output token (p50), of which {dur(ph.gpu_busy_p50_ns)} is kernels ({pct(busy)})",
        f"GPU idle inside the decode iterations: {dur(sum(max(r.gpu_span_ns - r.gpu_busy_ns, 0) for r in rows))}",
    ]
    if s.profiler_overhead:
        evidence.append(f"captured with {' and '.join(s.profiler_overhead)}: the host time is inflated, so "
                        "confirm on a capture without them")
    yield rule.finding(
        severity=band(top[1]) or band(0.0),  # type: ignore[arg-type]
        confidence=Confidence.MEDIUM if s.profiler_overhead else Confidence.HIGH,
        evidence=evidence,
        recommendation=[engine_advice(s, ENGINE_GRAPH_ADVICE, GENERIC_GRAPH_ADVICE),
                        "Fuse the small kernels of each layer (norm, rotary, activation) to cut the launch count."],
        title=(f"Decode runs without CUDA graphs: {ph.launches_per_iteration:,.0f} launches per token, GPU busy "
               f"{pct(busy)} of it"),
        affected=affected,
        impact=top,
        cause=Cause.HOST,
    )


RULE = Rule(
    id="NLE401",
    name="decode-without-graphs",
    title="Decode without CUDA graphs where launches dominate",
    check=check,
    metric_ids=("serving",),
)
