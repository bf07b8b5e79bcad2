from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Some kernels start before the launch call that started them: host and GPU clocks disagree.

    A kernel cannot start before its launch call begins. When the trace says it does, the CPU
    and GPU timestamps are skewed; the launch-to-start latency of those launches is clamped
    to 0 (never reported negative) and they are counted. Fires (low) when any launch is clamped.

    Example:

        NLE203 info: 12 kernels start before their launch call (clock skew)
        - their launch-to-start latency is clamped to 0; host-GPU timings below 1 us are unreliable
    """
    res = view.metric("launch_overhead")
    if res is None or res.data["skew_clamped"] <= 0:
        return
    n = res.data["skew_clamped"]
    yield rule.note(
        confidence=Confidence.MEDIUM,
        evidence=[
            f"{n:,} of {res.data['launch_calls']:,} launch calls; their launch-to-start latency is "
            "clamped to 0, and host-GPU timings of about a microsecond are unreliable in this trace"
        ],
        recommendation=[
            "Re-capture with a recent Nsight Systems; keep the clock source the default (no custom "
            "--timestamp settings) so CPU and GPU timestamps share one time base."
        ],
        title=f"{n:,} kernels start before their launch call (clock skew)",
    )


RULE = Rule(
    id="NLE203",
    name="clock-skew",
    title="Kernels start before their launch call",
    check=check,
    metric_ids=("launch_overhead",),
)
