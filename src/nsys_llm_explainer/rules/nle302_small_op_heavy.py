from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding, Severity
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct

SMALL_OP_CATEGORIES = ("activation_elementwise", "memory", "reduction", "norm")
MEDIUM_PCT = 35.0
HIGH_PCT = 55.0


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Memory-bound small ops (elementwise, copies, reductions, norms) take a large share.

    Sums the categories activation_elementwise, memory, reduction and norm. At >= 35%
    (medium) or >= 55% (high) of kernel time, the GPU mostly streams tensors through
    unfused ops instead of doing GEMM/attention math: fusion (torch.compile, fused norm and
    activation kernels) is the lever. See fusion_candidates for concrete chains.

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
    yield rule.finding(
        Severity.HIGH if total >= HIGH_PCT else Severity.MEDIUM,
        Confidence.MEDIUM,
        [
            ", ".join(f"{c} {pct(v)}" for c, v in parts if v > 0)
            + f" of {ms(res.data['total_kernel_ns'])}"
        ],
        [
            "Fuse elementwise/norm chains: torch.compile, fused RMSNorm+residual and "
            "SiLU-and-mul kernels.",
            "Check fusion_candidates for the most frequent chains of short kernels.",
        ],
        title=f"Unfused small ops take {pct(total)} of kernel time",
    )


RULE = Rule(
    "NLE302",
    "small-op-heavy",
    "Small memory-bound ops dominate kernel time",
    check,
    ("categories",),
)
