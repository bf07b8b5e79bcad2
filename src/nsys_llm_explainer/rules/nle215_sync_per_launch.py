from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Cause, Confidence, Finding
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput
from nsys_llm_explainer.rules.idle_cause_common import device_lines, where
from nsys_llm_explainer.rules.impact import affected_devices, band, total_pct


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """One synchronize after each launch: the host launches a kernel, waits for it, launches
    the next, so the GPU drains and refills around every kernel.

    From host_patterns: blocking synchronize calls whose previous launch-or-sync call on the
    same thread was a launch, at least 10 of them and at least half the thread's launches.
    Impact: the sync_wait idle time those calls and their refill launches cover. Severity from
    the impact bands (rules/impact.py).

    Example:

        NLE215 low: One synchronize per launch: 1,312 syncs for 1,312 launches (3.8% of GPU 0's time)
        - GPU 0: 12.914 ms idle around the per-launch syncs (3.8% of its window)
        - cudaDeviceSynchronize x1,312 on 1 thread(s)
    """
    hp = view.metric("host_patterns")
    if hp is None or not hp.data["sync_per_launch"]["found"]:
        return
    spl = hp.data["sync_per_launch"]
    affected = affected_devices(view.acct, {d["device_id"]: d["idle_ns"] for d in spl["devices"]})
    ns, share = total_pct(view.acct, affected)
    severity = band(share)
    if severity is None:
        return
    evidence = [
        *device_lines(affected, "idle around the per-launch syncs"),
        ", ".join(f"{a['api']} x{a['calls']:,}" for a in spl["apis"]) + f" on {spl['threads']} thread(s)",
    ]
    yield rule.finding(
        severity=severity,
        confidence=Confidence.HIGH,
        evidence=evidence,
        recommendation=advice("sync", view.workload),
        title=(f"One synchronize per launch: {spl['syncs']:,} syncs for {spl['launches']:,} launches "
        f"({share:.1f}% of {where(affected)} time)"),
        affected=affected,
        impact=(ns, share),
        cause=Cause.SYNC,
    )


RULE = Rule(
    id="NLE215",
    name="sync-per-launch",
    title="One synchronize per launch",
    check=check,
    metric_ids=("host_patterns",),
)
