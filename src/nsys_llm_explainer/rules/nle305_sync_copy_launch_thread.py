from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.fmt import size
from nsys_llm_explainer.model import Cause, Confidence, Finding
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms
from nsys_llm_explainer.rules.idle_cause_common import device_lines, hidden_graphs_cap, where
from nsys_llm_explainer.rules.impact import affected_devices, band, total_pct

MIN_COUNT = 10


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Synchronous copies stall the GPU: copy calls that block the host (synchronous
    cudaMemcpy*, or async copies to or from pageable memory), other than scalar read-backs.

    While such a call waits, nothing new is queued and the device drains. From host_patterns
    (sync_copies). Impact per device: the transfer idle time the copies cover plus the
    sync_wait idle time while the calls, and the launch right after them, were in flight (the
    stall). One cause, one finding: that time is not counted again by NLE208 (copies) or
    NLE103 (blocking calls). Fires from 10 copies. Severity from the impact bands
    (rules/impact.py).

    Example:

        NLE305 medium: 279 synchronous copies stall the GPU (5.9% of GPU 0's time)
        - GPU 0: 20.150 ms idle around synchronous copies (5.9% of its window); copies 9.391 ms, ...
        - cudaMemcpy x279 (214.6 MiB), 239 from a kernel-launching thread
    """
    hp = view.metric("host_patterns")
    sc = hp.data.get("sync_copies") if hp is not None else None
    if not sc or sc["count"] < MIN_COUNT:
        return
    detail = {d["device_id"]: f"copies {ms(d['transfer_ns'])}, waiting in the calls {ms(d['stall_ns'])}"
              for d in sc["devices"]}
    affected = affected_devices(view.acct, {d["device_id"]: d["idle_ns"] for d in sc["devices"]}, detail)
    ns, share = total_pct(view.acct, affected)
    severity = band(share)
    if severity is None:
        return
    apis = ", ".join(f"{a['api']} x{a['calls']:,}" for a in sc["apis"])
    evidence = [
        *device_lines(affected, "idle around synchronous copies"),
        f"{apis} ({size(sc['bytes'])}), {sc['on_launch_threads']:,} from a kernel-launching thread",
    ]
    severity, confidence, evidence = hidden_graphs_cap(view, severity, Confidence.HIGH, evidence)
    yield rule.finding(
        severity=severity,
        confidence=confidence,
        evidence=evidence,
        recommendation=advice("sync_copy", view.workload),
        title=f"{sc['count']:,} synchronous copies stall the GPU ({share:.1f}% of {where(affected)} time)",
        affected=affected,
        impact=(ns, share),
        cause=Cause.TRANSFER,
    )


RULE = Rule(
    id="NLE305",
    name="sync-copy-on-launch-thread",
    title="Synchronous copies stall the GPU",
    check=check,
    metric_ids=("host_patterns",),
)
