from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput
from nsys_llm_explainer.rules.idle_cause_common import dominant_cause_findings


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Most GPU idle time passes while the host is outside CUDA: Python, scheduler, I/O.

    Per device, from idle_causes: host_other (no blocking sync in flight at the gap start,
    copies and launch calls each under half the gap, the host visible in the capture) is the
    largest cause and covers >= 5% (low), >= 20% (medium) or >= 40% (high) of the device's kernel window.

    Example:

        NLE210 high: GPU 0 idle time is mostly host other (42.0% of its window)
        - GPU 0: 1,024 gaps, 420.000 ms (90.0% of its idle time, 42.0% of its kernel window)
    """
    yield from dominant_cause_findings(
        view,
        rule,
        "host_other",
        [
            "Profile the host side of the gaps (py-spy, the NVTX ranges listed with the largest "
            "gaps): "
            "scheduling, sampling, tokenization or I/O run while the GPU waits.",
            "Overlap that work with the GPU: prepare step N+1 while step N runs (async "
            "scheduling).",
            "Move it off the launching thread (a separate process or thread for "
            "detokenization/I/O).",
        ],
    )


RULE = Rule(
    "NLE210",
    "idle-host-other",
    "GPU idle while the host is outside CUDA",
    check,
    ("idle_causes", "gpu_idle"),
)
