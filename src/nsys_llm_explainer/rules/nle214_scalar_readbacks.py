from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nsys_llm_explainer.diagnosis.verdict import readback_text
from nsys_llm_explainer.model import Cause, Confidence, Finding
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, dur
from nsys_llm_explainer.rules.idle_cause_common import device_lines, where
from nsys_llm_explainer.rules.impact import affected_devices, band, total_pct

MIN_COUNT = 3
MAX_GROUPS = 3
HOLD_SHARE = 0.1


def _impact(rb: dict[str, Any]) -> dict[int, int]:
    """Per device: sync_wait idle while read-backs were in flight, plus the host-late idle
    after they returned having drained the queue."""
    return {d["device_id"]: int(d["idle_ns"]) + int(d.get("after_ns", 0)) for d in rb.get("devices", [])}


def reports(view: RuleInput) -> bool:
    """Whether this rule yields a finding (other rules then leave its time to it)."""
    hp = view.metric("host_patterns")
    rb = hp.data.get("scalar_readbacks") if hp is not None else None
    if not rb or rb["count"] < MIN_COUNT:
        return False
    _, share = total_pct(view.acct, affected_devices(view.acct, _impact(rb)))
    return band(share) is not None


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Read-backs: small device-to-host copies (at most 1 KiB) whose call blocks the host (a
    synchronous copy, or an async copy into pageable memory), or that a blocking synchronize
    follows on the same thread, as `.item()`, `.cpu()`, `.tolist()` or a Python `if` on a tensor
    produce. The host waits for the GPU's whole queue before it can queue anything else.

    Impact: per device, the sync_wait idle time while the copy call and its sync were in flight
    (plus the refill launch after them), and, when the read-back drained the queue, the idle
    time after it returned until the host launched the next work (launch_bound and host_other
    there are counted here, not by NLE209/NLE210); the host's wait while the GPU was busy
    costs nothing. At least 3 read-backs. Evidence: how many per step, the host time blocked
    and what the GPU did meanwhile (busy, idle with nothing queued, idle with work queued and
    waiting on something else), the idle time after the return, and where they come from (the
    outermost range below the step and the operator called, with the copy size). Severity from
    the impact bands (rules/impact.py). When that cost is below the bands but the read-backs
    block the host for at least 10% of the devices' time while the GPU sits idle just as long
    with queued work waiting on something else, a note (no time at stake) names them: the host
    could queue nothing more while it waited.

    Example:

        NLE214 high: 8 read-backs stall the GPU (64.4% of GPU 0's time)
        - GPU 0: 14.511 ms idle around read-backs (64.4% of its window)
        - a 4 B device-to-host copy into pageable memory in `aten::item`, 1 per step: 8 read-backs, the host
          blocked 7.320 ms in all (GPU meanwhile busy 7.280 ms, idle 21.0 us with nothing queued); idle after
          they returned until the host queued more work: 14.490 ms
    """
    hp = view.metric("host_patterns")
    rb = hp.data.get("scalar_readbacks") if hp is not None else None
    if not rb or rb["count"] < MIN_COUNT:
        return
    affected = affected_devices(view.acct, _impact(rb))
    ns, share = total_pct(view.acct, affected)
    severity = band(share)
    held = _holding(view, rb)
    if severity is None and held is None:
        return
    evidence = [*device_lines(affected, "idle around read-backs")]
    if held is not None:
        evidence.insert(0, held)
    for g in (rb.get("groups") or [])[:MAX_GROUPS]:
        queued = f", idle {dur(g['queued_during_ns'])} with work queued waiting on something else" \
            if g["queued_during_ns"] else ""
        evidence.append(
            f"{readback_text(g, rb.get('per_step'))}: {g['count']:,} read-backs, the host blocked "
            f"{dur(g['host_blocked_ns'])} in all (GPU meanwhile busy {dur(g['busy_ns'])}, idle "
            f"{dur(g['idle_during_ns'])} with nothing queued{queued}); idle after they returned until the host "
            f"queued more work: {dur(g['idle_after_ns'])}")
    per = rb.get("per_step")
    if per:
        evidence.append(f"per step: {per['median']:g} at the median, {per['max']:,} at most; "
                        f"{per['with_readbacks']:,} of {per['steps']:,} steps have one")
    if not rb.get("groups") and rb["ranges"]:
        evidence.append("around: " + ", ".join(f"{r['range']!r} x{r['count']:,}" for r in rb["ranges"][:3]))
    if severity is None:  # they hold the host, but the GPU idle they provably cause is small
        yield rule.note(
            confidence=Confidence.MEDIUM,
            evidence=evidence,
            recommendation=advice("sync", view.workload),
            title=f"{rb['count']:,} read-backs hold the host while the GPU waits on other work",
        )
        return
    yield rule.finding(
        severity=severity,
        confidence=Confidence.HIGH,
        evidence=evidence,
        recommendation=advice("sync", view.workload),
        title=f"{rb['count']:,} read-backs stall the GPU ({share:.1f}% of {where(affected)} time)",
        affected=affected,
        impact=(ns, share),
        cause=Cause.SYNC,
    )


def _holding(view: RuleInput, rb: dict[str, Any]) -> str | None:
    """A line when read-backs block the host for at least HOLD_SHARE of the devices' windows
    while the GPU sits idle with queued work (what they wait for waits on something else), else
    None."""
    window = view.acct.window()
    queued = int(rb.get("queued_during_ns", 0))
    if not window or rb.get("host_blocked_ns", 0) < HOLD_SHARE * window or queued < HOLD_SHARE * window:
        return None
    blocked = int(rb["host_blocked_ns"])
    return (f"the host is blocked in read-backs for {dur(blocked)} ({100.0 * blocked / window:.1f}% of the devices' "
            f"time); meanwhile the GPU sat idle {dur(queued)} with its next work queued, waiting on "
            "something else, and the host could queue nothing more: time the read-back does not cause but keeps "
            "the host from using")


RULE = Rule(
    id="NLE214",
    name="scalar-readbacks",
    title="Read-backs stall the GPU",
    check=check,
    metric_ids=("host_patterns",),
)
