from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms
from nsys_llm_explainer.rules.impact import band, whole

MIN_COUNT = 10


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Synchronous copies are issued from a thread that launches kernels.

    Counts memcpy rows whose API call (cudaMemcpy, cuMemcpyDtoH ... any Memcpy API without
    Async) ran on a thread that also launched kernels, during serving steps when the steps
    metric found them (else over the whole capture). Each one stalls the launch queue until
    the GPU drains. Fires from 10 copies. Impact: their copy time, at most the transfer and
    sync_wait idle time of all devices, over all devices' windows; severity from the impact bands (rules/impact.py).

    Example:

        NLE305 medium: 240 synchronous copies on the kernel-launching thread
        - 240 copies, 2.400 ms of copy time, during steps
    """
    res = view.metric("memory_transfers")
    if res is None:
        return
    s = res.data["sync_on_launch_thread"]
    if s["count"] < MIN_COUNT:
        return
    idle = view.acct.total("transfer") + view.acct.total("sync")
    affected, impact = whole(view.acct, min(int(s["time_ns"]), idle))
    severity = band(impact[1])
    if severity is None:
        return
    yield rule.finding(
        severity,
        Confidence.MEDIUM,
        [f"{s['count']:,} copies, {ms(s['time_ns'])} of copy time, {s['scope']}"],
        advice("sync_copy", view.workload),
        title=f"{s['count']:,} synchronous copies on the kernel-launching thread",
        affected=affected, impact=impact, cause="transfer",
    )


RULE = Rule(
    "NLE305",
    "sync-copy-on-launch-thread",
    "Synchronous copies on the launch thread",
    check,
    ("memory_transfers",),
)
