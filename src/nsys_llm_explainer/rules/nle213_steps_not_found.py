from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput

NOT_FOUND_PREFIX = "no steps found"


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Serving steps could not be found, or only with low confidence.

    Fires (low) when the steps metric was skipped because no NVTX step ranges were named and
    no repeating pattern was found, or when automatic detection succeeded with low confidence.
    Step timing is the per-token view of an LLM server; naming the step range fixes it.

    Example:

        NLE213 info: Steps were not identified
        - no steps found: no phase map or --step-range, and neither a repeating launch sequence ...
    """
    skipped = view.skipped("steps")
    res = view.metric("steps")
    if skipped is not None and skipped.reason.startswith(NOT_FOUND_PREFIX):
        evidence = [skipped.reason]
        title = "Steps were not identified"
    elif res is not None and res.data["confidence"] == "low":
        evidence = [f"automatic detection ({res.data['method']}): {res.data['detail']}"]
        title = "Steps were identified with low confidence"
    else:
        return
    yield rule.note(
        confidence=Confidence.HIGH,
        evidence=evidence,
        recommendation=advice("steps", view.workload),
        title=title,
    )


RULE = Rule(
    id="NLE213",
    name="steps-not-found",
    title="Steps not identified",
    check=check,
    metric_ids=("steps",),
)
