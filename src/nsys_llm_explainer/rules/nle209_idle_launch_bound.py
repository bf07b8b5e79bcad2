from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput
from nsys_llm_explainer.rules.idle_cause_common import dominant_cause_findings
from nsys_llm_explainer.rules.nle204_host_bound_decode import RECOMMENDATIONS


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Most GPU idle time passes while the host is busy inside kernel launch calls.

    Per device, from idle_causes: launch_bound (launch calls of the owning processes cover
    at least half of the gap) is the largest cause and covers >= 5% (low), >= 20% (medium) or >= 40% (high)
    of the device's kernel window: kernels finish faster than the host can launch the next.

    Example:

        NLE209 medium: GPU 0 idle time is mostly launch bound (35.0% of its window)
        - GPU 0: 48,000 gaps, 350.000 ms (80.0% of its idle time, 35.0% of its kernel window)
    """
    yield from dominant_cause_findings(view, rule, "launch_bound", RECOMMENDATIONS)


RULE = Rule(
    "NLE209",
    "idle-launch-bound",
    "GPU idle while the host launches",
    check,
    ("idle_causes", "gpu_idle"),
)
