from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput, us

EVIDENCE = 5


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Nsight Compute timed matched kernels far from the trace's time for them.

    Reads the ncu metric's kernels (--ncu): the ratio of ncu's median launch duration to the
    trace's median call, flagged when it is outside [1/2, 2] (`ratio_far`, RATIO_FAR in
    metrics/ncu_results.py). ncu replays one kernel at a time with the caches flushed and
    the clocks locked to base, and may have profiled a launch of another size (a warm-up
    call, a different batch): its class and limiter then describe that launch, not the time
    the trace measured. A launch is matched only within 2x of the trace's calls of its name
    and launch shape (NLE332 lists the others), so this fires where the kernel's calls of
    that shape differ from its calls overall. A note (info) listing those kernels.

    Example:

        NLE331 info: 2 kernels took far longer or shorter under Nsight Compute than in the trace
        - elementwise_kernel_with_index<int, arange_cuda_out…>: ncu 3.4 us, trace median 60.0 us (ratio 0.06)
    """
    res = view.metric("ncu")
    if res is None:
        return
    far = [r for r in res.data["kernels"] if r["ratio_far"]]
    if not far:
        return
    far.sort(key=lambda r: -r["total_ns"])
    evidence = [
        f"{view.kernel_label(r['name'])}: ncu {us(r['ncu_p50_ns'])}, trace median {us(r['p50_ns'])} "
        f"(ratio {r['duration_ratio']:.2f})"
        for r in far[:EVIDENCE]
    ]
    if len(far) > EVIDENCE:
        evidence.append(f"and {len(far) - EVIDENCE} more (tables/ncu_kernels.csv)")
    n = len(far)
    yield rule.note(
        confidence=Confidence.HIGH,
        evidence=evidence,
        recommendation=[
            "Check that ncu profiled a launch like the ones that take the trace's time (same sizes, after "
            "warm-up: the launch skip in ncu_plan.sh), and compare like with like by rerunning with "
            "`--cache-control none --clock-control none`.",
        ],
        title=f"{n} kernel{'s' if n > 1 else ''} took far longer or shorter under Nsight Compute than in the trace",
    )


RULE = Rule(
    id="NLE331",
    name="ncu-duration-mismatch",
    title="Nsight Compute durations far from the trace's",
    check=check,
    metric_ids=("ncu",),
)
