from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding, Severity
from nsys_llm_explainer.rules.base import Rule, RuleInput, pct, us

COPY_HEAVY_GAP = 30.0  # GPU busy minus kernel busy above this: copies keep the GPU busy


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """A process is GPU-bound: the host runs ahead and kernels queue, so host tuning will not help.

    Uses the boundness verdict per process (gpu_bound: queue time p50 >= 200 us or GPU busy
    >= 85%), when its confidence is at least medium. Low severity: it points the work at the
    GPU side. When copies, not kernels, keep the GPU busy (busy with copies exceeds kernel-only
    busy by 30 points or more), the finding says so.

    Example:

        NLE206 low: Process 4242 is GPU-bound
        - queue time p50 421,287.7 us; GPU busy 99.3% (kernels only 2.3%)
        - copies, not kernels, fill most of the GPU time
    """
    res = view.metric("boundness")
    if res is None:
        return
    for p in res.data["processes"]:
        if p["verdict"] != "gpu_bound" or p["confidence"] == "low":
            continue
        evidence = [
            f"queue time p50 {us(p['queue_p50_ns'])}; GPU busy {pct(p['gpu_busy_pct'])} "
            f"(kernels only {pct(p['kernel_busy_pct'])})"
        ]
        recs = [
            "Optimize the top kernels (see Top kernels): faster kernels shorten the step directly."
        ]
        if p["gpu_busy_pct"] - p["kernel_busy_pct"] >= COPY_HEAVY_GAP:
            evidence.append("copies, not kernels, fill most of the GPU time")
            recs.insert(
                0,
                "Reduce or overlap the memcpy traffic (see the memory transfer and idle cause "
                "sections).",
            )
        yield rule.finding(
            Severity.LOW,
            Confidence(p["confidence"]),
            evidence,
            recs,
            title=f"Process {p['pid']} is GPU-bound",
        )


RULE = Rule("NLE206", "gpu-bound", "GPU-bound process", check, ("boundness",))
