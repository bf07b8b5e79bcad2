from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Kernels were captured but there are no NVTX ranges to say which step launched them.

    Fires when kernels exist and the NVTX table is absent or holds no ranges. Without ranges
    the report cannot split time into prefill and decode, per-phase verdicts are impossible,
    and steps must be guessed.

    Example:

        NLE108 info: No NVTX ranges: kernel time cannot be split into phases
        - the export has no NVTX_EVENTS table (NVTX not captured)
    """
    if view.metric("top_kernels") is None:
        return
    skipped = view.skipped("nvtx_ranges")
    if skipped is None:
        return
    yield rule.note(
        confidence=Confidence.HIGH,
        evidence=[skipped.reason],
        recommendation=advice("nvtx", view.workload),
        title="No NVTX ranges: kernel time cannot be split into phases",
    )


RULE = Rule(id="NLE108", name="no-nvtx", title="No NVTX ranges", check=check, metric_ids=("nvtx_ranges",))
