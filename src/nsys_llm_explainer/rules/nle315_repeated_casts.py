from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Cause, Confidence, Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct
from nsys_llm_explainer.rules.idle_cause_common import device_lines, where
from nsys_llm_explainer.rules.impact import band, per_device

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


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """The same dtype casts run in every step: typically weights re-cast each forward.

    From the casts metric: with at least 3 steps, cast kernels appear in at least 80% of them
    with a stable count (p90 at most 1.5 x p10). Impact: the cast kernels' time per device (the
    ceiling of what casting once gives back); severity from the impact bands (rules/impact.py).

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
    evidence = [
        *device_lines(affected, "of cast kernels"),
        f"{s['casts_per_step_p50']:,} casts per step at the median, {ms(s['cast_ns_per_step_p50'])} per step; "
        f"in {s['steps_with_casts']:,} of {s['steps']:,} steps",
        "largest: " + ", ".join(f"{view.kernel_label(t['name'])} ({ms(t['total_ns'])})" for t in d["top"][:3]),
    ]
    yield rule.finding(
        severity=severity,
        confidence=Confidence.MEDIUM,
        evidence=evidence,
        recommendation=ADVICE[group],
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
