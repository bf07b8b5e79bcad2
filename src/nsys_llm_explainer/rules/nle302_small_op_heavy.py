from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct
from nsys_llm_explainer.rules.impact import band, per_device

SMALL_OP_CATEGORIES = ("activation_elementwise", "memory", "cast_copy", "layout", "reduction", "norm")
MEDIUM_PCT = 35.0


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Memory-bound small ops (elementwise, copies, reductions, norms) take a large share.

    Sums the categories activation_elementwise, memory, cast_copy, layout, reduction and norm. From 35% of
    kernel time the GPU mostly streams tensors through unfused ops instead of doing
    GEMM/attention math: fusion (torch.compile, fused norm and activation kernels) is the
    lever; see fusion_candidates for concrete chains. Impact: those kernels' time per device
    (the ceiling of what fusion can give back); severity from the impact bands (rules/impact.py).

    Example:

        NLE302 medium: Unfused small ops take 41.3% of kernel time
        - activation_elementwise 20.1%, memory 11.0%, reduction 6.2%, norm 4.0% of 120.000 ms
    """
    res = view.metric("categories")
    if res is None:
        return
    shares = {c["category"]: float(c["pct_of_scope_time"]) for c in res.data["categories"]}
    parts = [(c, shares.get(c, 0.0)) for c in SMALL_OP_CATEGORIES]
    total = sum(v for _, v in parts)
    if total < MEDIUM_PCT:
        return
    ns_by_device = {
        d["device_id"]: sum(c["total_ns"] for c in d["categories"] if c["category"] in SMALL_OP_CATEGORIES)
        for d in res.data["by_device"]
    }
    affected, impact = per_device(view.acct, ns_by_device)
    severity = band(impact[1])
    if severity is None:
        return
    yield rule.finding(
        severity,
        Confidence.MEDIUM,
        [
            ", ".join(f"{c} {pct(v)}" for c, v in parts if v > 0)
            + f" of {ms(res.data['total_kernel_ns'])}"
        ],
        advice("fusion", view.workload),
        title=f"Unfused small ops take {pct(total)} of kernel time",
        affected=affected, impact=impact, cause="compute",
    )


RULE = Rule(
    "NLE302",
    "small-op-heavy",
    "Small memory-bound ops dominate kernel time",
    check,
    ("categories",),
)
