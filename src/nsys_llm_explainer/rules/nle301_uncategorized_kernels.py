from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct

MEDIUM_PCT = 30.0  # share of kernel time the category table could not name
SHOWN = 3


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Much kernel time falls in no kernel category ("other").

    Fires (a note, severity info) when at least 30% of kernel time is "other" in the categories
    metric: the category breakdown then says little, and the largest unnamed kernels are
    listed so they can be added with --kernel-categories.

    Example:

        NLE301 info: 42.0% of kernel time is in no kernel category
        - 42.0% of 812.300 ms kernel time is "other" (table: built-in)
        - largest: my_custom_kernel (301.200 ms)
    """
    res = view.metric("categories")
    if res is None or res.data["other_pct"] < MEDIUM_PCT:
        return
    d = res.data
    top = ", ".join(
        f"{view.kernel_label(k['name'])} ({ms(k['total_ns'])})" for k in d["top_uncategorized"][:SHOWN]
    )
    yield rule.note(
        confidence=Confidence.HIGH,
        evidence=[
            f'{pct(d["other_pct"])} of {ms(d["total_kernel_ns"])} kernel time is "other" '
            f"(table: {d['table_source']})",
            f"largest: {top}",
        ],
        recommendation=[
            "Add rules for these kernels in a JSON file and pass it with --kernel-categories "
            "(format: docs/metrics/categories.md)."
        ],
        title=f"{pct(d['other_pct'])} of kernel time is in no kernel category",
    )


RULE = Rule(
    id="NLE301",
    name="uncategorized-kernels",
    title="Kernel time in no category",
    check=check,
    metric_ids=("categories",),
)
