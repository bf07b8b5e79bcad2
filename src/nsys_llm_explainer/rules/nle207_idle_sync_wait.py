from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput
from nsys_llm_explainer.rules.idle_cause_common import dominant_cause_findings


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Most GPU idle time starts while the host is blocked in a synchronize call.

    Per device, from idle_causes: sync_wait is the largest cause and covers >= 5% (low), >= 20% (medium)
    or >= 40% (high) of the device's kernel window. The GPU drained while the host waited,
    and stays idle until the host refills it; the refill delay after the sync returned is
    quoted.

    Example:

        NLE207 low: GPU 0 idle time is mostly sync wait (13.9% of its window)
        - GPU 0: 1,309 gaps, 47.911 ms (99.9% of its idle time, 13.9% of its kernel window)
        - refill after the sync returned: p50 30.1 us, p90 41.0 us, 43.100 ms in total
    """
    yield from dominant_cause_findings(
        view,
        rule,
        "sync_wait",
        [
            "Remove per-step synchronization (.item(), .cpu(), .tolist(), printing tensors) from "
            "the loop.",
            "Keep the next step's work queued before waiting: launch step N+1 before reading step "
            "N's result.",
            "Replace device-wide syncs by events on the streams that matter.",
        ],
    )


RULE = Rule(
    "NLE207", "idle-sync-wait", "GPU idle behind blocking syncs", check, ("idle_causes", "gpu_idle")
)
