from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """A GPU that ran work is not in the built-in peak table, so no peak context is given.

    The table in compute/peaks.py matches exact CUDA device names only; similar names are never
    guessed. Fires (low) once, listing the unknown active models.

    Example:

        NLE310 info: No peak figures for NVIDIA RTX A2000 12GB
        - devices 0 run work on a model the built-in table does not list
    """
    res = view.metric("gpu_context")
    if res is None:
        return
    unknown = [g for g in res.data["gpus"] if g["active"] and not g["known"]]
    if not unknown:
        return
    names = sorted({g["name"] or "(no name)" for g in unknown})
    yield rule.note(
        confidence=Confidence.HIGH,
        evidence=[
            f"devices {', '.join(str(g['device_id']) for g in unknown)} run work on a "
            "model the built-in "
            "table does not list"
        ],
        recommendation=[
            "Compare against the vendor datasheet of this GPU by hand; peak and ridge "
            "figures are not shown."
        ],
        title=f"No peak figures for {', '.join(names)}",
    )


RULE = Rule(
    id="NLE310",
    name="unknown-gpu",
    title="GPU model without built-in peak figures",
    check=check,
    metric_ids=("gpu_context",),
)
