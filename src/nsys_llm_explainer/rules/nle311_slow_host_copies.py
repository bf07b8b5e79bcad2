from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer import fmt
from nsys_llm_explainer.model import Cause, Confidence, Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct
from nsys_llm_explainer.rules.impact import band, per_device

LOW_PCT = 25.0  # achieved / PCIe peak per direction
MIN_TIME_NS = 10_000_000  # only copies that add up to 10 ms matter


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Large host-device copies reach less than 25% of the PCIe bandwidth.

    Uses gpu_context's achieved bandwidth of copies of at least 1 MiB (Host-to-Device and
    Device-to-Host) against the PCIe bandwidth per direction from the built-in table, when
    those copies add up to >= 10 ms. Typical causes: pageable host memory, a PCIe link
    running narrower or slower than x16, or a bad NUMA placement. Impact: the copy time a
    link at full speed would save (time x (1 - achieved/reference)); severity from the impact bands (rules/impact.py).

    Example:

        NLE311 medium: Host-to-Device copies on GPU 0 reach 12.0% of PCIe bandwidth
        - 7.7 GB/s achieved vs 64.0 GB/s per direction over 250.000 ms of copies
    """
    res = view.metric("gpu_context")
    if res is None:
        return
    for c in res.data["copy_bandwidth"]:
        if c["kind"] == "Device-to-Device" or c["pct_of_reference"] is None:
            continue
        if c["pct_of_reference"] >= LOW_PCT or c["time_ns"] < MIN_TIME_NS:
            continue
        saved = int(c["time_ns"] * (1.0 - c["pct_of_reference"] / 100.0))  # at full link speed
        affected, impact = per_device(view.acct, {c["device_id"]: saved})
        severity = band(impact[1])
        if severity is None:
            continue
        yield rule.finding(
            severity=severity,
            confidence=Confidence.MEDIUM,
            evidence=[
                f"{fmt.sig(c['achieved_gbps'])} GB/s achieved vs {fmt.sig(c['reference_gbps'])} GB/s "
                "per direction "
                f"over {ms(c['time_ns'])} of copies"
            ],
            recommendation=[
                "Pin host memory; check the link with nvidia-smi -q (PCIe generation and "
                "width) and "
                "the process's NUMA placement."
            ],
            title=(f"{c['kind']} copies on GPU {c['device_id']} reach "
                f"{pct(c['pct_of_reference'])} of PCIe bandwidth"),
            affected=affected,
            impact=impact,
            cause=Cause.TRANSFER,
        )


RULE = Rule(
    id="NLE311",
    name="slow-host-copies",
    title="Host-device copies far below PCIe bandwidth",
    check=check,
    metric_ids=("gpu_context",),
)
