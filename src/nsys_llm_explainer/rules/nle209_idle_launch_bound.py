from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Bucket, Cause, Confidence, Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput, pct, us
from nsys_llm_explainer.rules.idle_cause_common import (
    cause_finding,
    host_bound_phases,
    host_recommendations,
    readback_after,
)


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """The GPU idles while the host is inside kernel launch calls: launch-bound.

    Impact: per device, the idle time idle_causes labels launch_bound (a launch call of a
    process that drives the device is in flight and nothing with a higher precedence covers
    the time). Evidence: the launch rate and kernel durations (launch_storm) and the launch
    overhead per process (launch_overhead), and the phases whose kernels mostly start as
    soon as they are launched (boundness' queue times). The advice follows what the launching
    thread was in (NLE210), then launch advice. Severity from the impact bands
    (rules/impact.py). On a start-up capture only the steady part counts (lazy module loading
    makes first launches slow: that is start-up's, NLE216).

    Example:

        NLE209 high: GPU idle while the host launches kernels (31.0% of GPU 0's time)
        - GPU 0: 310.000 ms idle while launch calls were in flight (31.0% of its window)
        - 1,204,113 kernels at 182,300 per second, median 4.1 us, 88.0% under 10 us
    """
    evidence = []
    ls = view.metric("launch_storm")
    if ls is not None:
        g = ls.data["global"]
        evidence.append(f"{g['kernels']:,} kernels at {g['launches_per_s']:,.0f} per second, median "
                        f"{us(g['p50_ns'])}, {pct(g['pct_under_10us'])} under 10 µs")
    lo = view.metric("launch_overhead")
    if lo is not None:
        for p in lo.data["processes"][:3]:
            if p.get("launch_calls"):
                evidence.append(f"process {p['pid']}: {p['launch_calls']:,} launch calls, launch API time "
                                f"p50 {us(p['api_p50_ns'])}")
    evidence += host_bound_phases(view)
    f = cause_finding(
        view,
        rule,
        buckets=(Bucket.LAUNCH_BOUND,),
        cause=Cause.HOST,
        title="GPU idle while the host launches kernels ({pct} of {where} time)",
        what="idle while launch calls were in flight",
        evidence=evidence,
        recommendations=host_recommendations(view, "launch"),
        confidence=Confidence.MEDIUM,
        subtract=readback_after(view, Bucket.LAUNCH_BOUND),
    )
    if f is not None:
        yield f


RULE = Rule(
    id="NLE209",
    name="idle-launch-bound",
    title="GPU idle behind kernel launches",
    check=check,
    metric_ids=("idle_causes", "launch_storm", "launch_overhead", "boundness"),
)
