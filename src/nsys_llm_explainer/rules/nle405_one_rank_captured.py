from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput
from nsys_llm_explainer.rules.serving_common import serving


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Only part of a tensor-parallel serving job was captured.

    Fires (a note) when the trace records a world size larger than the processes whose
    iterations it holds: a collective that waits on another rank shows as communication time
    here, and a straggler rank is invisible. Capture every rank in the same window and compare
    them with `nsys-llm-explain fleet`.

    Example:

        NLE405 info: 1 of 8 tensor-parallel ranks captured
    """
    s = serving(view)
    tp = s.tensor_parallel if s is not None else None
    if tp is None or not isinstance(tp.get("world_size"), int):
        return
    world, got = int(tp["world_size"]), int(tp["processes_captured"])
    if world <= got:
        return
    rank = f" (rank {tp['rank']})" if tp.get("rank") is not None else ""
    yield rule.note(
        confidence=Confidence.HIGH,
        evidence=[f"world size {world}; iterations of {got} process{'es' * (got != 1)}{rank} in the trace"],
        recommendation=["Capture every rank in the same window and run `nsys-llm-explain fleet` on the captures "
                        "to see whether one rank holds the others back at each all-reduce."],
        title=f"{got} of {world} tensor-parallel ranks captured",
    )


RULE = Rule(
    id="NLE405",
    name="one-rank-captured",
    title="Part of a tensor-parallel job captured",
    check=check,
    metric_ids=("serving",),
)
