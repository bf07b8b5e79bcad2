"""Shared check for the idle-cause rules NLE207-NLE211: one rule per dominant cause."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from nsys_llm_explainer.model import Confidence, Finding, Severity
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct, us

# The same bands as NLE104 (GPU idle), so a cause never outranks the idle time it explains.
LOW_PCT_OF_WINDOW = 5.0
MEDIUM_PCT_OF_WINDOW = 20.0
HIGH_PCT_OF_WINDOW = 40.0


def dominant_cause_findings(
    view: RuleInput,
    rule: Rule,
    cause: str,
    recommendations: Sequence[str],
    max_severity: Severity = Severity.HIGH,
) -> Iterator[Finding]:
    """Per device whose largest idle cause is `cause` and whose share of the device's kernel
    window is >= LOW_PCT_OF_WINDOW (low), >= MEDIUM_PCT_OF_WINDOW (medium) or
    >= HIGH_PCT_OF_WINDOW (high)."""
    res = view.metric("idle_causes")
    idle = view.metric("gpu_idle")
    if res is None or idle is None:
        return
    windows = {
        d["device_id"]: d["window_end_ns"] - d["window_start_ns"] for d in idle.data["devices"]
    }
    for d in res.data["devices"]:
        window = windows.get(d["device_id"], 0)
        if d["dominant_cause"] != cause or window <= 0:
            continue
        row = next(c for c in d["causes"] if c["cause"] == cause)
        share = 100.0 * row["idle_ns"] / window
        if share < LOW_PCT_OF_WINDOW:
            continue
        if share >= HIGH_PCT_OF_WINDOW:
            severity = Severity.HIGH
        elif share >= MEDIUM_PCT_OF_WINDOW:
            severity = Severity.MEDIUM
        else:
            severity = Severity.LOW
        if severity.rank < max_severity.rank:
            severity = max_severity
        evidence = [
            f"GPU {d['device_id']}: {row['gaps']:,} gaps, {ms(row['idle_ns'])} "
            f"({pct(row['pct_of_idle'])} "
            f"of its idle time, {pct(share)} of its kernel window)",
        ]
        if cause == "sync_wait" and d["refill"]["gaps"]:
            r = d["refill"]
            evidence.append(
                f"refill after the sync returned: p50 {us(r['p50_ns'])}, p90 {us(r['p90_ns'])}, "
                f"{ms(r['total_ns'])} in total"
            )
        if d["queued_gaps"]:
            evidence.append(
                f"{d['queued_gaps']:,} gaps ({ms(d['queued_ns'])}) ended with a kernel launched "
                "before the gap began: there the GPU waited on a dependency, not the host"
            )
        yield rule.finding(
            severity,
            Confidence.MEDIUM,
            evidence,
            list(recommendations),
            title=f"GPU {d['device_id']} idle time is mostly {cause.replace('_', ' ')} "
            f"({pct(share)} of its window)",
        )
