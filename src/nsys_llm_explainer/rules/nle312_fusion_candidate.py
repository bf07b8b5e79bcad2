from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct
from nsys_llm_explainer.rules.impact import band, whole

MIN_OCCURRENCES = 50
MIN_PROXIMITY = 0.3
MIN_KERNEL_NS = 1_000_000  # the chain's kernels take at least 1 ms in total


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """A chain of short kernels repeats often enough to be worth one fused kernel.

    Takes the best-ranked fusion candidate that occurs >= 50 times, follows its first kernel
    in >= 30% of that kernel's occurrences (proximity) and holds >= 1 ms of kernel time.
    Fusing it removes the chain's launches, the idle gaps inside it (removable_gap_ns) and
    the intermediate tensors' round trips through memory. Impact: the chain's kernel time plus
    its inner gaps, those at most the host-side (launch and host work) idle time of the devices,
    since fusing removes launches, not syncs or copies (a ceiling), over all devices' windows;
    severity from the impact bands (rules/impact.py).

    Example:

        NLE312 low: A chain of 6 short kernels repeats 112 times
        - pow -> mean -> add -> rsqrt -> mul -> mul (an unfused RMSNorm)
        - 2.101 ms of kernel time, 0.733 ms of gaps inside, proximity 46.7%
    """
    res = view.metric("fusion_candidates")
    if res is None:
        return
    for c in res.data["candidates"]:
        if (
            c["occurrences"] < MIN_OCCURRENCES
            or c["proximity"] < MIN_PROXIMITY
            or c["kernel_ns"] < MIN_KERNEL_NS
        ):
            continue
        gaps = min(int(c["removable_gap_ns"]), view.acct.total("host"))
        affected, impact = whole(view.acct, int(c["kernel_ns"]) + gaps)
        severity = band(impact[1])
        if severity is None:
            return
        yield rule.finding(
            severity,
            Confidence.MEDIUM,
            [
                " -> ".join(view.kernel_label(k) for k in c["kernels"]),
                f"{ms(c['kernel_ns'])} of kernel time, {ms(c['removable_gap_ns'])} of gaps inside, "
                f"proximity {pct(100 * c['proximity'])}",
            ],
            advice("fusion", view.workload),
            title=f"A chain of {c['length']} short kernels repeats {c['occurrences']:,} times",
            affected=affected, impact=impact, cause="compute",
        )
        return


RULE = Rule(
    "NLE312", "fusion-candidate", "Frequent chain of short kernels", check, ("fusion_candidates",)
)
