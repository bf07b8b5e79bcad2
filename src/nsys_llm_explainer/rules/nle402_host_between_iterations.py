from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Cause, Confidence, Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput, dur, pct
from nsys_llm_explainer.rules.impact import band
from nsys_llm_explainer.rules.serving_common import (
    ENGINE_GAP_ADVICE,
    GENERIC_GAP_ADVICE,
    engine_advice,
    largest,
    per_device,
    serving,
)

MIN_SHARE_PCT = 10.0  # of the time per output token


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """The host's work between decode iterations (scheduling, sampling, detokenization) is a
    share of every output token's latency.

    Reads the serving metric's decode iterations: the gap before each (previous iteration's
    GPU end to its first kernel, same process) over its period. Fires when the gaps are at
    least 10% of the decode periods. Impact: per device, the summed gaps (the GPU idles in
    them), the largest device's. Evidence: the gap per token and what the launching thread did
    in the gaps (synchronize calls, other CUDA calls, neither).

    Example:

        NLE402 medium: Host time between decode iterations: 12.0% of each output token
        - gap before each decode iteration: p50 640 µs of a 5.31 ms period
    """
    s = serving(view)
    ph = s.phase("decode") if s is not None else None
    if s is None or ph is None:
        return
    rows = [r for r in s.of_phase("decode") if r.gap_before_ns is not None and r.period_ns]
    periods = sum(r.period_ns or 0 for r in rows)
    gaps = sum(r.gap_before_ns or 0 for r in rows)
    if not rows or not periods or 100.0 * gaps / periods < MIN_SHARE_PCT:
        return
    affected = per_device(view, rows, lambda r: r.gap_before_ns or 0,
                          lambda d, rs: f"{len(rs):,} gaps before decode iterations")
    top = largest(affected)
    if top is None or band(top[1]) is None:
        return
    share = 100.0 * gaps / periods
    sync = sum(r.gap_host.sync_ns for r in rows if r.gap_host)
    cuda = sum(r.gap_host.cuda_ns for r in rows if r.gap_host)
    other = sum(r.gap_host.other_ns for r in rows if r.gap_host)
    gap_sorted = sorted(r.gap_before_ns or 0 for r in rows)
    evidence = [
        f"gap before each decode iteration: p50 {dur(gap_sorted[len(gap_sorted) // 2])} of a "
        f"{dur(ph.period_p50_ns or 0)} period; {dur(gaps)} over {len(rows):,} iterations",
        f"in the gaps the launching thread was in synchronize calls {pct(100.0 * sync / gaps)}, other CUDA calls "
        f"{pct(100.0 * cuda / gaps)}, no CUDA call {pct(100.0 * other / gaps)}",
    ]
    yield rule.finding(
        severity=band(top[1]),  # type: ignore[arg-type]
        confidence=Confidence.HIGH,
        evidence=evidence,
        recommendation=[engine_advice(s, ENGINE_GAP_ADVICE, GENERIC_GAP_ADVICE)],
        title=f"Host time between decode iterations: {pct(share)} of each output token",
        affected=affected,
        impact=top,
        cause=Cause.HOST,
    )


RULE = Rule(
    id="NLE402",
    name="host-between-iterations",
    title="Host time between decode iterations",
    check=check,
    metric_ids=("serving",),
)
