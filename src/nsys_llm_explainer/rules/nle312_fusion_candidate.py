from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from nsys_llm_explainer.metrics.casts import CAST_NAME
from nsys_llm_explainer.model import Cause, Confidence, Finding
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct, us
from nsys_llm_explainer.rules.impact import band, whole
from nsys_llm_explainer.rules.nle315_repeated_casts import reports as casts_reported

MIN_OCCURRENCES = 50
MIN_PROXIMITY = 0.3
MIN_KERNEL_NS = 1_000_000  # the chain's kernels take at least 1 ms in total
PER_LAUNCH_SAVING_NS = 1_000  # per kernel a fused chain no longer runs: its ramp-up and tail
# Chains with one of these are not short memory-bound ops: fusing a GEMM or attention kernel
# with its neighbours is an epilogue or a different kernel, not this rule's fix.
COMPUTE_CATEGORIES = ("gemm", "attention", "conv", "fft", "moe", "communication")


@dataclass(frozen=True)
class Chain:
    candidate: dict[str, Any]
    gaps_ns: int  # removable gaps inside the occurrences, at most the devices' host-side idle
    saving_ns: int  # the per-launch saving of the kernels fusion removes

    @property
    def impact_ns(self) -> int:
        return self.gaps_ns + self.saving_ns


def chain(view: RuleInput) -> Chain | None:
    """The best-ranked fusion candidate this rule reports, with its time at stake (see check)."""
    res = view.metric("fusion_candidates")
    if res is None:
        return None
    casts: bool | None = None  # whether NLE315 reports the casts, asked only when a chain is all casts
    for c in res.data["candidates"]:
        if (
            c["occurrences"] < MIN_OCCURRENCES
            or c["proximity"] < MIN_PROXIMITY
            or c["kernel_ns"] < MIN_KERNEL_NS
            or any(view.kernel_category(k) in COMPUTE_CATEGORIES for k in c["kernels"])
        ):
            continue
        if all(CAST_NAME.search(k) for k in c["kernels"]):
            if casts is None:
                casts = casts_reported(view)
            if casts:  # the same casts in every step: NLE315's cause, not a fusion chain
                continue
        gaps = min(int(c["removable_gap_ns"]), view.acct.total(Cause.HOST))
        removed = int(c["occurrences"]) * (int(c["length"]) - 1)
        saving = min(removed * PER_LAUNCH_SAVING_NS, int(c["kernel_ns"]) // 2)
        return Chain(c, gaps, saving)
    return None


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """A chain of short memory-bound kernels repeats often enough to be worth one fused kernel.

    Takes the best-ranked fusion candidate that occurs >= 50 times, follows its first kernel
    in >= 30% of that kernel's occurrences (proximity), holds >= 1 ms of kernel time, and has
    no GEMM, attention, convolution, FFT, MoE or communication kernel in it (those are not
    short memory-bound ops; fusing them is a different kernel, not a fused chain), and is not
    made of dtype casts alone that NLE315 reports (the same casts in every step: one cause). Fusing the
    chain removes its launches and the idle gaps inside it, and keeps the intermediate
    tensors on chip.

    Impact (a ceiling of what fusion gives back, never the chain's kernel time, which the
    fused kernel still spends): the gaps inside the occurrences (removable_gap_ns), at most
    the devices' host-side idle time (launch_bound and host_other: fusing removes launches,
    not syncs or copies), plus PER_LAUNCH_SAVING_NS (1 us: a short kernel's ramp-up and
    tail) for each kernel fusion removes (length - 1 per occurrence), at most half the
    chain's kernel time. Over all devices' windows; severity from the impact bands
    (rules/impact.py). The bytes the intermediates no longer move are not in a trace, so
    they are not counted.

    Example:

        NLE312 low: A chain of 6 short memory-bound kernels repeats 112 times
        - pow -> mean -> add -> rsqrt -> mul -> mul (an unfused RMSNorm)
        - at stake: 0.733 ms of gaps inside the chain and 560 launches removed x 1.0 us
        - 2.101 ms of kernel time (not at stake: the fused kernel does the same work), proximity 46.7%
    """
    found = chain(view)
    if found is None:
        return
    c = found.candidate
    affected, impact = whole(view.acct, found.impact_ns)
    severity = band(impact[1])
    if severity is None:
        return
    removed = int(c["occurrences"]) * (int(c["length"]) - 1)
    yield rule.finding(
        severity=severity,
        confidence=Confidence.MEDIUM,
        evidence=[
            " -> ".join(view.kernel_label(k) for k in c["kernels"]),
            f"at stake: {ms(found.gaps_ns)} of gaps inside the chain and {removed:,} launches removed x "
            f"{us(PER_LAUNCH_SAVING_NS)} ({ms(found.saving_ns)})",
            f"{ms(c['kernel_ns'])} of kernel time (not at stake: the fused kernel does the same work), "
            f"proximity {pct(100 * c['proximity'])}",
        ],
        recommendation=advice("fusion", view.workload),
        title=f"A chain of {c['length']} short memory-bound kernels repeats {c['occurrences']:,} times",
        affected=affected,
        impact=impact,
        cause=Cause.COMPUTE,
    )


RULE = Rule(
    id="NLE312",
    name="fusion-candidate",
    title="Frequent chain of short kernels",
    check=check,
    metric_ids=("fusion_candidates",),
)
