from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding, Severity
from nsys_llm_explainer.rules.base import Rule, RuleInput, pct, us
from nsys_llm_explainer.rules.nle204_host_bound_decode import RECOMMENDATIONS


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """A process is host-bound: its kernels start as soon as they are launched and the GPU idles.

    Uses the boundness verdict per process: host_bound means queue time p50 under 20 us and
    GPU busy (kernels and copies over the process's GPU window) under 60%. Not raised when the
    verdict's confidence is low (fewer than 20 measured launches). Severity high when the
    confidence is high, else medium.

    Example:

        NLE205 high: Process 4242 is host-bound (GPU busy 28.4%)
        - 18,000 launches; queue time p50 1.9 us, 95.1% start within 20 us of the launch
    """
    res = view.metric("boundness")
    if res is None:
        return
    for p in res.data["processes"]:
        if p["verdict"] != "host_bound" or p["confidence"] == "low":
            continue
        conf = Confidence(p["confidence"])
        yield rule.finding(
            Severity.HIGH if conf is Confidence.HIGH else Severity.MEDIUM,
            conf,
            [
                f"{p['launch_calls']:,} launches; queue time p50 {us(p['queue_p50_ns'])}, "
                f"{pct(p['immediate_start_pct'])} start within 20 us of the launch",
                f"GPU busy {pct(p['gpu_busy_pct'])} (kernels only {pct(p['kernel_busy_pct'])})",
            ],
            list(RECOMMENDATIONS),
            title=f"Process {p['pid']} is host-bound (GPU busy {pct(p['gpu_busy_pct'])})",
        )


RULE = Rule("NLE205", "host-bound-process", "Host-bound process", check, ("boundness",))
