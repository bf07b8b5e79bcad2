from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Cause, Confidence, Finding
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms
from nsys_llm_explainer.rules.impact import band, whole


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Async copies touch pageable host memory, so they run synchronously.

    A cudaMemcpyAsync (or any *Async copy API) from or to pageable (not pinned) host memory
    is staged through a driver buffer and blocks the calling thread. Fires on any such copy
    (joined to its API call on pid and correlation id). Impact: those copies' time over all
    devices' windows; severity from the impact bands (rules/impact.py).

    Example:

        NLE304 low: 4 async copies use pageable host memory
        - 4 copies, 3.1 KiB, 0.003 ms (memory_transfer_issues.csv, issue pageable_async)
    """
    res = view.metric("memory_transfers")
    if res is None or res.data["pageable_async"]["count"] == 0:
        return
    p = res.data["pageable_async"]
    affected, impact = whole(view.acct, p["time_ns"])
    severity = band(impact[1])
    if severity is None:
        return
    yield rule.finding(
        severity=severity,
        confidence=Confidence.HIGH,
        evidence=[
            f"{p['count']:,} copies, {p['bytes']:,} bytes, {ms(p['time_ns'])} "
            "(memory_transfer_issues.csv, issue pageable_async)"
        ],
        recommendation=advice("pinned", view.workload),
        title=f"{p['count']:,} async copies use pageable host memory",
        affected=affected,
        impact=impact,
        cause=Cause.TRANSFER,
    )


RULE = Rule(
    id="NLE304",
    name="pageable-async-copy",
    title="Async copies from pageable memory",
    check=check,
    metric_ids=("memory_transfers",),
)
