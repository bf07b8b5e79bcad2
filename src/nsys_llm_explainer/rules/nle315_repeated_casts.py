from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Cause, Confidence, Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct
from nsys_llm_explainer.rules.idle_cause_common import device_lines, where
from nsys_llm_explainer.rules.impact import band, per_device

FSDP_SHARE = 0.5  # of the cast time inside FSDP ranges: FSDP's mixed precision
FSDP_ADVICE = (
    "These are FSDP's mixed-precision casts (`MixedPrecision(param_dtype=...)`): each unit's fp32 shard is "
    "cast before its all-gather and the gradients back after the reduce-scatter, one cause. FSDP2 "
    "(`fully_shard` with `MixedPrecisionPolicy`) casts inside the all-gather's copy-in; keeping the sharded "
    "parameters in the compute dtype (fp32 only in the optimizer state) removes them.",
)
ADVICE = {
    "training": (
        "If these casts convert weights, keep a low-precision copy instead of re-casting in every "
        "step, or let the optimizer own the fp32 master weights (mixed-precision optimizers, FSDP "
        "`MixedPrecision(param_dtype=...)`).",
    ),
    "inference": (
        "If these casts convert weights, cast the model once at load (`model.to(torch.bfloat16)`) "
        "instead of running it under autocast with fp32 weights, which re-casts them every forward.",
        "Keep activations in the compute dtype end to end so no cast is needed between layers.",
    ),
    "generic": (
        "Store the data in the dtype the kernels consume and convert once, not on every iteration.",
    ),
}


def reports(view: RuleInput) -> bool:
    """Whether this rule yields a finding: the cast kernels are then its, and the other
    compute findings (NLE302, NLE312) leave them out (one cause, one finding)."""
    return any(True for _ in check(view, RULE))


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """The same dtype casts run in every step: typically weights re-cast each forward.

    From the casts metric: with at least 3 steps, cast kernels appear in at least 80% of them
    with a stable count (p90 at most 1.5 x p10). Impact: the cast kernels' time per device (the
    ceiling of what casting once gives back); severity from the impact bands (rules/impact.py).
    When at least half of the cast time is launched inside FSDP's ranges, the casts are FSDP's
    mixed precision (parameters cast before each all-gather, gradients after each
    reduce-scatter): one cause, named as such, with FSDP's advice. Either way the cast kernels
    are this finding's: NLE302 and NLE312 leave them out.

    Example:

        NLE315 low: 392 dtype casts in every step (2.1% of GPU 0's time)
        - GPU 0: 21.000 ms of cast kernels (2.1% of its window)
        - 392 casts per step at the median, 3.500 ms per step; in 24 of 24 steps
    """
    res = view.metric("casts")
    if res is None or not res.data["per_step"] or not res.data["per_step"]["every_step"]:
        return
    d = res.data
    affected, impact = per_device(view.acct, {r["device_id"]: r["cast_ns"] for r in d["devices"]})
    severity = band(impact[1])
    if severity is None:
        return
    s = d["per_step"]
    group = "training" if "training" in view.workload else "inference" if view.workload != "generic_cuda" else "generic"
    fsdp = int(d.get("fsdp_ns") or 0) >= FSDP_SHARE * int(d["cast_ns"]) > 0
    evidence = [
        *device_lines(affected, "of cast kernels"),
        f"{s['casts_per_step_p50']:,} casts per step at the median, {ms(s['cast_ns_per_step_p50'])} per step; "
        f"in {s['steps_with_casts']:,} of {s['steps']:,} steps",
        "largest: " + ", ".join(f"{view.kernel_label(t['name'])} ({ms(t['total_ns'])})" for t in d["top"][:3]),
    ]
    if fsdp:
        evidence.append(f"{ms(d['fsdp_ns'])} of them launched inside FSDP's ranges: its mixed-precision parameter "
                        "and gradient casts, one cause (the short-kernel and fusion findings leave them to this one)")
    yield rule.finding(
        severity=severity,
        confidence=Confidence.MEDIUM,
        evidence=evidence,
        recommendation=FSDP_ADVICE if fsdp else ADVICE[group],
        title=f"{s['casts_per_step_p50']:,} dtype casts in every step ({pct(impact[1])} of {where(affected)} time)",
        affected=affected,
        impact=impact,
        cause=Cause.COMPUTE,
    )


RULE = Rule(
    id="NLE315",
    name="repeated-casts",
    title="The same dtype casts in every step",
    check=check,
    metric_ids=("casts",),
)
