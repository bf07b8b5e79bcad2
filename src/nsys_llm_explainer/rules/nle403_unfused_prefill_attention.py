from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Cause, Confidence, Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput, dur, pct
from nsys_llm_explainer.rules.impact import band
from nsys_llm_explainer.rules.serving_common import largest, per_device, serving

FUSED_SHARE_PCT = 1.0  # attention-category kernels below this share of the prefill's kernel time


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """A prefill computes attention as separate kernels (matrix products and a softmax), not
    one fused attention kernel.

    Fires when the prefill iterations run softmax kernels outside the attention class (the
    serving metric's softmax_kernels) while attention kernels (the categories metric's
    attention class: FlashAttention, FlashInfer, SDPA's fused kernels) hold under 1% of their
    kernel time. A fused kernel never writes the score matrix to memory, so the softmax passes
    over it disappear: their time is the impact, a lower bound (the score GEMMs shrink too),
    per device, the largest device's.

    Example:

        NLE403 low: Prefill attention is not a fused kernel: 4 softmax kernels per prefill
    """
    s = serving(view)
    ph = s.phase("prefill") if s is not None else None
    if s is None or ph is None:
        return
    total = sum(ph.categories.values())
    if not total or 100.0 * ph.categories.get("attention", 0) / total >= FUSED_SHARE_PCT:
        return
    rows = s.of_phase("prefill")
    calls = sum(r.softmax_kernels for r in rows)
    if not calls:
        return
    affected = per_device(view, rows, lambda r: r.softmax_ns)
    top = largest(affected)
    if top is None or band(top[1]) is None:
        return
    per = calls / len(rows)
    yield rule.finding(
        severity=band(top[1]),  # type: ignore[arg-type]
        confidence=Confidence.MEDIUM,
        evidence=[f"{per:,.0f} softmax kernels per prefill iteration, {dur(sum(r.softmax_ns for r in rows))} in all; "
                  f"attention kernels hold {pct(100.0 * ph.categories.get('attention', 0) / total)} of the prefill's "
                  "kernel time"],
        recommendation=["Use a fused attention kernel for prefill: `torch.nn.functional.scaled_dot_product_attention` "
                        "(FlashAttention backend), FlashAttention or FlashInfer; the engine's attention backend "
                        "setting where there is one."],
        title=f"Prefill attention is not a fused kernel: {per:,.0f} softmax kernels per prefill",
        affected=affected,
        impact=top,
        cause=Cause.COMPUTE,
    )


RULE = Rule(
    id="NLE403",
    name="unfused-prefill-attention",
    title="Prefill attention not fused",
    check=check,
    metric_ids=("serving",),
)
