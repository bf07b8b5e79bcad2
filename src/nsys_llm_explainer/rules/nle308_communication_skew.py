from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Cause, Confidence, Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct
from nsys_llm_explainer.rules.impact import band, whole

MEDIUM_SKEW_PCT = 30.0
MIN_COMM_NS = 1_000_000  # ignore skew over less than 1 ms of communication


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Communication kernel time differs a lot between ranks (devices or processes).

    Collectives wait for the slowest rank, so the fast ranks' NCCL kernels spin longer: a
    spread of >= 30% ((max - min) / max, with max >= 1 ms) points at a straggler or at
    uneven work per rank. Impact: max - min communication time, over all devices' windows;
    severity from the impact bands (rules/impact.py).

    Example:

        NLE308 medium: Communication time differs 45.0% across devices
        - from 110.000 ms to 200.000 ms of communication kernel time
    """
    res = view.metric("communication")
    if res is None:
        return
    for label, key in (("devices", "device_skew"), ("processes", "process_skew")):
        s = res.data[key]
        if s is None or s["max_ns"] < MIN_COMM_NS or s["skew_pct"] < MEDIUM_SKEW_PCT:
            continue
        affected, impact = whole(view.acct, int(s["max_ns"]) - int(s["min_ns"]))
        severity = band(impact[1])
        if severity is None:
            return
        yield rule.finding(
            severity=severity,
            confidence=Confidence.MEDIUM,
            evidence=[
                f"from {ms(s['min_ns'])} to {ms(s['max_ns'])} of communication kernel time "
                f"across {label}"
            ],
            recommendation=[
                "The rank with the least communication time is the straggler the others wait for: "
                "compare its compute kernels and host gaps with the other ranks."
            ],
            title=f"Communication time differs {pct(s['skew_pct'])} across {label}",
            affected=affected,
            impact=impact,
            cause=Cause.COMMUNICATION,
        )
        return


RULE = Rule(
    id="NLE308",
    name="communication-skew",
    title="Communication time skewed across ranks",
    check=check,
    metric_ids=("communication",),
)
