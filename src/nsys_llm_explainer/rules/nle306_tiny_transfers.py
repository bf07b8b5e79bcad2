from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Cause, Confidence, Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct
from nsys_llm_explainer.rules.impact import band, whole

MIN_COUNT = 500
MIN_SHARE_PCT = 50.0  # tiny transfers as a share of all transfers


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Many tiny memory transfers (at most 4 KiB each).

    Fires when at least 500 transfers of at most 4 KiB make up at least half of all
    memcpy/memset operations: each costs a fixed API and DMA setup that dwarfs its bytes.
    Impact: their copy time (at most the transfer idle time), over all devices' windows;
    severity from the impact bands (rules/impact.py).

    Example:

        NLE306 low: 12,000 tiny transfers (<= 4 KiB)
        - 12,000 of 12,400 transfers (96.8%), 48.000 ms, 1,200.0 per second
    """
    res = view.metric("memory_transfers")
    if res is None:
        return
    t, total = res.data["tiny"], res.data["transfer_count"]
    share = 100.0 * t["count"] / total if total else 0.0
    if t["count"] < MIN_COUNT or share < MIN_SHARE_PCT:
        return
    rate = f", {t['per_s']:,.1f} per second" if t["per_s"] is not None else ""
    affected, impact = whole(view.acct, min(int(t["time_ns"]), view.acct.total(Cause.TRANSFER)))
    severity = band(impact[1])
    if severity is None:
        return
    yield rule.finding(
        severity=severity,
        confidence=Confidence.HIGH,
        evidence=[f"{t['count']:,} of {total:,} transfers ({pct(share)}), {ms(t['time_ns'])}{rate}"],
        recommendation=[
            "Batch small host-device transfers into one pinned buffer per step, or keep the values "
            "on the GPU."
        ],
        title=f"{t['count']:,} tiny transfers (<= {res.data['tiny_bytes']:,} bytes)",
        affected=affected,
        impact=impact,
        cause=Cause.TRANSFER,
    )


RULE = Rule(
    id="NLE306",
    name="tiny-transfers",
    title="Many tiny memory transfers",
    check=check,
    metric_ids=("memory_transfers",),
)
