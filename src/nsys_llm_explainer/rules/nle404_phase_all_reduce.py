from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Cause, Confidence, Finding
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, dur, pct
from nsys_llm_explainer.rules.impact import band
from nsys_llm_explainer.rules.serving_common import largest, per_device, serving

MIN_SHARE_PCT = 10.0  # communication's share of a phase's kernel time


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Tensor-parallel communication takes a large share of a serving phase.

    Reads the serving metric's phases of a run with collectives (tensor_parallel): per phase,
    communication kernels' share of its kernel time. Fires per phase at 10% or more. Impact:
    the phase's communication kernel time per device, the largest device's (a ceiling: what
    overlapping or avoiding the collectives could recover). Decode all-reduces are small
    messages, where latency dominates; prefill all-reduces are large ones, where bandwidth does.

    Example:

        NLE404 medium: All-reduce takes 35.0% of decode's kernel time (tensor parallel, 8 ranks)
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
        rows = s.of_phase(ph.phase)
        affected = per_device(view, rows, lambda r: r.categories.get("communication", 0))
        top = largest(affected)
        if top is None or band(top[1]) is None:
            continue
        size = "small messages: latency-bound" if ph.phase == "decode" else "large messages: bandwidth-bound"
        yield rule.finding(
            severity=band(top[1]),  # type: ignore[arg-type]
            confidence=Confidence.HIGH,
            evidence=[f"{ph.phase}: communication {dur(comm)} of {dur(total)} kernel time over "
                      f"{ph.iterations:,} iteration{'s' * (ph.iterations != 1)} ({size})"],
            recommendation=list(advice("communication", "llm_inference")),
            title=(f"All-reduce takes {pct(100.0 * comm / total)} of {ph.phase}'s kernel time"
                   + (f" (tensor parallel, {world} ranks)" if world else "")),
            affected=affected,
            impact=top,
            cause=Cause.COMMUNICATION,
        )


RULE = Rule(
    id="NLE404",
    name="phase-all-reduce",
    title="Tensor-parallel communication share of a serving phase",
    check=check,
    metric_ids=("serving", "communication"),
)
