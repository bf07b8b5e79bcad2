from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput, pct
from nsys_llm_explainer.trace.formats import capture_hint

MIN_PCT = 5.0


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Many kernels have no launch call in the trace, so their launch figures are missing.

    A kernel joins its launch call on (pid, correlationId), restricted to launch APIs. Fires
    (low) when at least 5% of kernels find none. Captures cut from a longer run start with
    kernels launched before the window opened; runtime API tracing turned off has the same
    effect. Launch overhead, queue times and boundness then describe only the joined kernels.
    The advice is the trace format's own (trace/formats.py): Nsight Systems capture options,
    or the PyTorch profiler's start and schedule.

    Example:

        NLE202 info: 52.6% of kernels have no launch call in the trace
        - 1,810 of 3,442 kernels; launch and queue figures cover the other 1,632
    """
    res = view.metric("launch_overhead")
    if res is None or res.data["kernels_without_launch_pct"] < MIN_PCT:
        return
    d = res.data
    yield rule.note(
        confidence=Confidence.HIGH,
        evidence=[
            f"{d['kernels_without_launch']:,} of {d['kernels']:,} kernels; launch and queue "
            "figures "
            f"cover the other {d['kernels_with_launch']:,}"
        ],
        recommendation=[capture_hint(view.schema.format, "launches") or ""],
        title=f"{pct(d['kernels_without_launch_pct'])} of kernels have no launch call in the trace",
    )


RULE = Rule(
    id="NLE202",
    name="kernels-without-launch",
    title="Kernels without a launch call",
    check=check,
    metric_ids=("launch_overhead",),
)
