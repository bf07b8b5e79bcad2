from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Finding, Severity
from nsys_llm_explainer.rules.base import Rule, RuleInput
from nsys_llm_explainer.rules.idle_cause_common import dominant_cause_findings


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Most GPU idle time lies where the host is not visible in the capture.

    Per device, from idle_causes: capture_edge (at least half of the gap lies before the
    owning processes' first CUDA API call or after their last) is the largest cause and
    covers >= 5% of the device's kernel window. Always low severity: it is a limit of the
    capture, not of the workload.

    Example:

        NLE211 low: GPU 0 idle time is mostly capture edge (12.0% of its window)
        - GPU 0: 3 gaps, 120.000 ms (70.0% of its idle time, 12.0% of its kernel window)
    """
    yield from dominant_cause_findings(
        view,
        rule,
        "capture_edge",
        [
            "Capture a window where the host threads are traced from start to end (nsys profile "
            "--trace=cuda,nvtx,osrt with a --delay/--duration inside the steady state).",
        ],
        max_severity=Severity.LOW,
    )


RULE = Rule(
    "NLE211",
    "idle-capture-edge",
    "GPU idle outside the captured host activity",
    check,
    ("idle_causes", "gpu_idle"),
)
