from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding, Severity
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct, us

MEDIUM_SHARE_PCT = 5.0  # outliers in at least this share of a phase's steps: medium, else low


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Some steps take more than twice the median step time of their phase.

    Per phase, from the steps metric: outliers are steps longer than 2x the phase's median
    latency. Fires when a phase has any: medium when they are >= 5% of its steps, else low.
    The evidence names the slowest step and what made it slow: its longest GPU idle gap
    (with cause), its slowest kernel against that kernel's median, or its longest CUDA call.
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
        yield rule.finding(
            Severity.MEDIUM if share >= MEDIUM_SHARE_PCT else Severity.LOW,
            Confidence(d["confidence"]),
            evidence,
            [
                "Look at the slow steps in tables/steps.csv on the Nsight Systems timeline: a "
                "long idle "
                "gap points at the host (its cause is in idle_causes), a slow kernel at shapes or "
                "contention.",
                "Periodic slow steps often come from batching changes, KV-cache allocation, "
                "garbage "
                "collection or logging every N steps.",
            ],
            title=f"{p['outliers']:,} of {p['steps']:,} {noun} take over 2x the median "
            f"({ms(p['p50_ns'])})",
        )


RULE = Rule("NLE212", "slow-steps", "Steps much slower than the median", check, ("steps",))
