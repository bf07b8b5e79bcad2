from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding, Severity
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct

MEDIUM_PCT = 10.0


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Sampling kernels (top-k/top-p, sorts, argmax, penalties) take >= 10% of kernel time.

    In a healthy decode step sampling is a few percent. Sort-based top-p over the full
    vocabulary, repeated penalty passes or per-request sampling loops push it higher.

    Example:

        NLE303 medium: Sampling takes 14.2% of kernel time
        - 14.2% of 96.000 ms kernel time in category sampling (812 kernels)
    """
    res = view.metric("categories")
    if res is None:
        return
    row = next((c for c in res.data["categories"] if c["category"] == "sampling"), None)
    if row is None or row["pct_of_scope_time"] < MEDIUM_PCT:
        return
    yield rule.finding(
        Severity.MEDIUM,
        Confidence.MEDIUM,
        [
            f"{pct(row['pct_of_scope_time'])} of {ms(res.data['total_kernel_ns'])} "
            "kernel time in category "
            f"sampling ({row['kernel_count']:,} kernels)"
        ],
        [
            "Use sorting-free fused sampling kernels (e.g. FlashInfer top-k/top-p "
            "sampling) and batch "
            "sampling across requests."
        ],
        title=f"Sampling takes {pct(row['pct_of_scope_time'])} of kernel time",
    )


RULE = Rule(
    "NLE303", "sampling-heavy", "Sampling kernels take a large share", check, ("categories",)
)
