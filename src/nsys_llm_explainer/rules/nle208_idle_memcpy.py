from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput
from nsys_llm_explainer.rules.idle_cause_common import dominant_cause_findings


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Most GPU kernel-idle time is spent copying memory on that device.

    Per device, from idle_causes: memcpy (copies or memsets on the device cover at least half
    of the gap) is the largest cause and covers >= 5% (low), >= 20% (medium) or >= 40% (high) of the
    device's kernel window.

    Example:

        NLE208 high: GPU 0 idle time is mostly memcpy (57.2% of its window)
        - GPU 0: 28 gaps, 536.382 ms (57.2% of its idle time, 57.2% of its kernel window)
    """
    yield from dominant_cause_findings(
        view,
        rule,
        "memcpy",
        [
            "Overlap copies with compute: separate streams, pinned host memory, cudaMemcpyAsync.",
            "Avoid the copies: keep tensors on the GPU, prefetch weights and inputs ahead of use.",
            "For peer-to-peer traffic, check NVLink/P2P is enabled rather than staging through "
            "the host.",
        ],
    )


RULE = Rule("NLE208", "idle-memcpy", "GPU idle while copying", check, ("idle_causes", "gpu_idle"))
