from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput, pct

MIN_PCT = 5.0


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Many kernels have no launch call in the trace, so their launch figures are missing.

    A kernel joins its launch call on (pid, correlationId), restricted to launch APIs. Fires
    (low) when at least 5% of kernels find none. Captures cut from a longer run start with
    kernels launched before the window opened; runtime API tracing turned off has the same
    effect. Launch overhead, queue times and boundness then describe only the joined kernels.

    Example:

        NLE202 info: 52.6% of kernels have no launch call in the trace
        - 1,810 of 3,442 kernels; launch and queue figures cover the other 1,632
    """
    res = view.metric("launch_overhead")
    if res is None or res.data["kernels_without_launch_pct"] < MIN_PCT:
        return
    d = res.data
    yield rule.note(
        Confidence.HIGH,
        [
            f"{d['kernels_without_launch']:,} of {d['kernels']:,} kernels; launch and queue "
            "figures "
            f"cover the other {d['kernels_with_launch']:,}"
        ],
        [
            "Start the capture before the workload (or widen the window) and keep CUDA API "
            "tracing on "
            "(nsys profile --trace=cuda) so every kernel's launch is recorded."
        ],
        title=f"{pct(d['kernels_without_launch_pct'])} of kernels have no launch call in the trace",
    )


RULE = Rule(
    "NLE202", "kernels-without-launch", "Kernels without a launch call", check, ("launch_overhead",)
)
