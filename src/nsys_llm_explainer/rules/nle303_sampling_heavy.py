from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Cause, Confidence, Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct
from nsys_llm_explainer.rules.impact import band, per_device

MEDIUM_PCT = 10.0
LLM_WORKLOADS = ("llm_inference", "llm_prefill", "llm_training")


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Sampling kernels (top-k/top-p, sorts, argmax, penalties) take >= 10% of kernel time.

    In a healthy decode step sampling is a few percent. Sort-based top-p over the full
    vocabulary, repeated penalty passes or per-request sampling loops push it higher. Only
    for LLM workloads (workload metric). Impact: the sampling kernels' time per device;
    severity from the impact bands (rules/impact.py).

    Example:

        NLE303 medium: Sampling takes 14.2% of kernel time
        - 14.2% of 96.000 ms kernel time in category sampling (812 kernels)
    """
    res = view.metric("categories")
    if res is None or view.workload not in LLM_WORKLOADS:
        return
    row = next((c for c in res.data["categories"] if c["category"] == "sampling"), None)
    if row is None or row["pct_of_scope_time"] < MEDIUM_PCT:
        return
    affected, impact = per_device(view.acct, {
        d["device_id"]: sum(c["total_ns"] for c in d["categories"] if c["category"] == "sampling")
        for d in res.data["by_device"]
    })
    severity = band(impact[1])
    if severity is None:
        return
    yield rule.finding(
        severity=severity,
        confidence=Confidence.MEDIUM,
        evidence=[
            f"{pct(row['pct_of_scope_time'])} of {ms(res.data['total_kernel_ns'])} "
            "kernel time in category "
            f"sampling ({row['kernel_count']:,} kernels)"
        ],
        recommendation=[
            "Use sorting-free fused sampling kernels (e.g. FlashInfer top-k/top-p "
            "sampling) and batch "
            "sampling across requests."
        ],
        title=f"Sampling takes {pct(row['pct_of_scope_time'])} of kernel time",
        affected=affected,
        impact=impact,
        cause=Cause.COMPUTE,
    )


RULE = Rule(
    id="NLE303",
    name="sampling-heavy",
    title="Sampling kernels take a large share",
    check=check,
    metric_ids=("categories",),
)
