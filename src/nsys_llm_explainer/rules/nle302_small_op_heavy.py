from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.metrics.casts import CAST_NAME
from nsys_llm_explainer.metrics.fusion_candidates import SHORT_KERNEL_NS
from nsys_llm_explainer.model import Cause, Confidence, Finding
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct, us
from nsys_llm_explainer.rules.idle_cause_common import where
from nsys_llm_explainer.rules.impact import band, per_device
from nsys_llm_explainer.rules.nle101_dominant_kernel import claims
from nsys_llm_explainer.rules.nle312_fusion_candidate import chain as fusion_chain
from nsys_llm_explainer.rules.nle315_repeated_casts import reports as casts_finding

SMALL_OP_CATEGORIES = ("activation_elementwise", "memory", "cast_copy", "layout", "reduction", "norm")
MEDIUM_PCT = 35.0  # of a device's kernel time
# SHORT_KERNEL_NS (30 us, from fusion_candidates): a kernel counts only when its median call is
# at most this long. A 17 ms elementwise kernel streams memory at full speed: fusing gains little.


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Short memory-bound ops (elementwise, copies, reductions, norms) take a large share.

    Per device, from top_kernels: the kernels of the categories activation_elementwise,
    memory, cast_copy, layout, reduction and norm whose median call lasts at most
    SHORT_KERNEL_NS (30 us, fusion_candidates' short kernel). Long ones are left out: a
    kernel that runs for milliseconds streams memory at full speed, and fusing it with its
    neighbours saves little. Fires on the devices where the short ones hold at least 35% of
    the device's kernel time: the GPU mostly streams tensors through unfused ops instead of
    doing GEMM/attention math, and fusion (torch.compile, fused norm and activation kernels)
    is the lever; see fusion_candidates for concrete chains.

    Impact: those kernels' time per device (the ceiling of what fusing them away can give
    back), without the time other compute findings already put at stake: a dominant kernel
    whose roof is known (NLE101) and the dtype casts NLE315 reports (the same casts in every
    step, FSDP's mixed precision among them) are left out, and NLE312's per-launch saving is
    taken off, spread over the devices by their share. Severity from the impact bands (rules/impact.py).

    Example:

        NLE302 medium: Short unfused ops take 41.3% of GPU 0's kernel time
        - GPU 0: activation_elementwise 20.1%, memory 11.0%, reduction 6.2%, norm 4.0% of 120.000 ms
        - 3 small-op kernels with a median over 30.0 us (8.200 ms) are not counted: they are not short
    """
    res = view.metric("top_kernels")
    if res is None:
        return
    taken = claims(view)
    casts_reported = casts_finding(view)
    total: dict[int, int] = {}
    small: dict[int, dict[str, int]] = {}
    long_n, long_ns, cast_ns = 0, 0, 0
    for k in res.data["kernels"]:
        dev = int(k["device_id"])
        total[dev] = total.get(dev, 0) + int(k["total_ns"])
        cat = view.kernel_category(k["name"])
        if cat not in SMALL_OP_CATEGORIES or (k["name"], dev) in taken:
            continue
        if casts_reported and CAST_NAME.search(k["name"]):
            cast_ns += int(k["total_ns"])
            continue
        if int(k["p50_ns"]) > SHORT_KERNEL_NS:
            long_n, long_ns = long_n + 1, long_ns + int(k["total_ns"])
            continue
        per = small.setdefault(dev, {})
        per[cat] = per.get(cat, 0) + int(k["total_ns"])
    heavy = {dev: per for dev, per in small.items()
             if total.get(dev) and 100.0 * sum(per.values()) / total[dev] >= MEDIUM_PCT}
    if not heavy:
        return
    ns = {dev: sum(per.values()) for dev, per in heavy.items()}
    chain = fusion_chain(view)
    if chain is not None and chain.saving_ns:
        all_ns = sum(ns.values())
        ns = {dev: max(0, v - chain.saving_ns * v // all_ns) for dev, v in ns.items()}
    affected, impact = per_device(view.acct, ns)
    severity = band(impact[1])
    if severity is None:
        return
    evidence = []
    for dev, per in sorted(heavy.items())[:8]:
        parts = sorted(per.items(), key=lambda kv: -kv[1])
        evidence.append(f"GPU {dev}: " + ", ".join(f"{c} {pct(100.0 * v / total[dev])}" for c, v in parts)
                        + f" of {ms(total[dev])}")
    if long_n:
        evidence.append(f"{long_n} small-op kernels with a median over {us(SHORT_KERNEL_NS)} ({ms(long_ns)}) are "
                        "not counted: they are not short")
    if chain is not None and chain.saving_ns:
        evidence.append(f"{ms(chain.saving_ns)} of launch savings is NLE312's, not counted here")
    if cast_ns:
        evidence.append(f"{ms(cast_ns)} of dtype-cast kernels is NLE315's (the same casts in every step), not "
                        "counted here")
    worst = max(heavy, key=lambda d: sum(heavy[d].values()) / total[d])
    share = 100.0 * sum(heavy[worst].values()) / total[worst]
    title = (f"Short unfused ops take {pct(share)} of {where(affected)} kernel time" if len(heavy) == 1
             else f"Short unfused ops take up to {pct(share)} of the kernel time of {len(heavy)} GPUs")
    yield rule.finding(
        severity=severity,
        confidence=Confidence.MEDIUM,
        evidence=evidence,
        recommendation=advice("fusion", view.workload),
        title=title,
        affected=affected,
        impact=impact,
        cause=Cause.COMPUTE,
    )


RULE = Rule(
    id="NLE302",
    name="small-op-heavy",
    title="Short memory-bound ops dominate kernel time",
    check=check,
    metric_ids=("top_kernels", "categories", "fusion_candidates"),
)
