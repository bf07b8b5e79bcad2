from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nsys_llm_explainer.model import Cause, Confidence, Finding, IdleCause
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct, us
from nsys_llm_explainer.rules.impact import band, whole

RECOMMENDATION = (
    "Look at the slow steps in tables/steps.csv on the Nsight Systems timeline: a long idle gap "
    "points at the host (its cause is in idle_causes), a slow kernel at shapes or contention.",
    "Periodic slow steps often come from batching changes, KV-cache allocation, garbage "
    "collection or logging every N steps.",
)
# The idle sweep's gap cause -> the diagnosis cause whose finding reports that time.
GAP_CAUSE: dict[str, Cause] = {
    IdleCause.TRANSFER: Cause.TRANSFER, IdleCause.COMMUNICATION: Cause.COMMUNICATION,
    IdleCause.SYNC_WAIT: Cause.SYNC, IdleCause.LAUNCH_BOUND: Cause.HOST, IdleCause.HOST_OTHER: Cause.HOST,
}


def _shared_cause(view: RuleInput, outliers: list[dict[str, Any]]) -> Cause | None:
    """The diagnosis cause most slow steps' gaps belong to, when that cause is large enough to
    have its own finding (then the steps' excess is not reported twice)."""
    causes = [GAP_CAUSE.get(o["gap_cause"] or "") for o in outliers if o["reason"] == "idle_gap"]
    if not causes or len(causes) * 2 < len(outliers):
        return None
    cause = max(set(causes), key=causes.count)
    if cause is None:
        return None
    window = view.acct.window()
    return cause if window and band(100.0 * view.acct.total(cause) / window) is not None else None


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Some steps take more than twice the median step time of their phase.

    Per phase, from the steps metric: outliers are steps longer than 2x the phase's median
    latency. Fires when a phase has any. Impact: the slow steps' time beyond the median (what
    they would give back at median speed), over all devices' windows; severity from the
    impact bands (rules/impact.py).
    The evidence names the slowest step and what made it slow: its longest GPU idle gap
    (with cause), its slowest kernel against that kernel's median, or its longest CUDA call.
    When most slow steps are slow because of idle gaps of one cause that has its own finding
    (e.g. NLE208 for copies), the finding is a note (INFO, no impact): it is the same time,
    at stake in that finding (one finding per cause).
    Confidence follows how the steps were found (NVTX: high; automatic: as detected).

    Example:

        NLE212 medium: 3 of 40 decode steps take over 2x the median (28.100 ms)
        - slowest: step 17, 120.400 ms (4.3x): idle gap of 80.000 ms (sync_wait)
    """
    res = view.metric("steps")
    if res is None:
        return
    d = res.data
    for p in d["phases"]:
        if p["outliers"] <= 0:
            continue
        share = 100.0 * p["outliers"] / p["steps"]
        noun = "steps" if p["phase"] == "step" else f"{p['phase']} steps"
        mine = [o for o in d["outliers"] if o["phase"] == p["phase"]]
        evidence = [
            f"{p['outliers']:,} of {p['steps']:,} steps ({pct(share)}); median {ms(p['p50_ns'])}, "
            f"max {ms(p['max_ns'])}"
        ]
        if mine:
            o = mine[0]
            why = {
                "idle_gap": f"idle gap of {ms(o['gap_ns'])} ({o['gap_cause']})",
                "slow_kernel": f"kernel {view.kernel_label(o['kernel_name'] or '')} ran "
                f"{us(o['kernel_ns'] or 0)} "
                f"(median {us(o['kernel_median_ns'] or 0)})",
                "host_call": f"{o['host_call']} took {ms(o['host_call_ns'])}",
            }.get(o["reason"] or "", "no single cause stands out")
            evidence.append(
                f"slowest: step {o['step']}, {ms(o['latency_ns'])} ({o['ratio_to_median']}x): {why}"
            )
        excess = sum(max(0, int(o["latency_ns"]) - int(p["p50_ns"])) for o in mine)
        affected, impact = whole(view.acct, excess)
        severity = band(impact[1])
        if severity is None:
            continue
        cause = _shared_cause(view, mine)
        title = f"{p['outliers']:,} of {p['steps']:,} {noun} take over 2x the median ({ms(p['p50_ns'])})"
        if cause is not None:  # the gaps are the same time the cause's own finding reports
            evidence.append(f"the slow steps' gaps are {cause} time ({ms(excess)} beyond the median), "
                            "at stake in that cause's own finding, not here")
            yield rule.note(
                confidence=Confidence(d["confidence"]),
                evidence=evidence,
                recommendation=RECOMMENDATION,
                title=title,
            )
            continue
        yield rule.finding(
            severity=severity,
            confidence=Confidence(d["confidence"]),
            evidence=evidence,
            recommendation=RECOMMENDATION,
            title=title,
            affected=affected,
            impact=impact,
        )


RULE = Rule(
    id="NLE212",
    name="slow-steps",
    title="Steps much slower than the median",
    check=check,
    metric_ids=("steps",),
)
