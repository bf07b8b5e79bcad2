from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, dur, pct
from nsys_llm_explainer.rules.serving_common import serving

MIN_SHARE_PCT = 10.0  # communication's share of a phase's kernel time


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Tensor-parallel communication takes a large share of a serving phase.

    Reads the serving metric's phases of a run with collectives (tensor_parallel): per phase,
    communication kernels' share of its kernel time. Fires (a note) per phase at 10% or more:
    the GPU time communication costs is NLE307's (exposed communication, one finding per
    cause); this says which phase it belongs to. Decode all-reduces are small messages, where
    latency dominates; prefill all-reduces are large ones, where bandwidth does.

    Example:

        NLE404 info: All-reduce takes 35.0% of decode's kernel time (tensor parallel, 8 ranks)
    """
    s = serving(view)
    if s is None or s.tensor_parallel is None:
        return
    world = s.tensor_parallel.get("world_size")
    for ph in s.phases:
        total = sum(ph.categories.values())
        comm = ph.categories.get("communication", 0)
        if not total or 100.0 * comm / total < MIN_SHARE_PCT:
            continue
        size = "small messages: latency-bound" if ph.phase == "decode" else "large messages: bandwidth-bound"
        yield rule.note(
            confidence=Confidence.HIGH,
            evidence=[f"{ph.phase}: communication {dur(comm)} of {dur(total)} kernel time over "
                      f"{ph.iterations:,} iteration{'s' * (ph.iterations != 1)} ({size}); its GPU cost is in NLE307"],
            recommendation=list(advice("communication", "llm_inference")),
            title=(f"All-reduce takes {pct(100.0 * comm / total)} of {ph.phase}'s kernel time"
                   + (f" (tensor parallel, {world} ranks)" if world else "")),
        )


RULE = Rule(
    id="NLE404",
    name="phase-all-reduce",
    title="Tensor-parallel communication share of a serving phase",
    check=check,
    metric_ids=("serving", "communication"),
)
