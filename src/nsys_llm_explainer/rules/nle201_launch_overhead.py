from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding, Severity
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct, us

MEDIUM_RATIO = 0.5  # launch API time >= half the process's kernel time
HIGH_RATIO = 1.0  # launching takes longer than the kernels run
MIN_LAUNCHES = 100


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """The host spends about as long launching kernels as the GPU spends running them.

    Per process: the typical launch cost, launch calls x median launch API duration
    (cudaLaunchKernel*, cuLaunchKernel*, cudaGraphLaunch ... joined to their kernels), against
    the sum of its kernel durations. The median, not the total, is used because a launch blocks
    when the GPU's launch queue is full: long calls then mean a GPU-bound process, not a slow host.
    Fires at >= 0.5x (medium) or >= 1x (high), with at least 100 launch calls. When each
    launch costs as much host time as its kernel runs, the GPU cannot be kept busy by one
    launching thread, however fast the kernels are.

    Example:

        NLE201 high: Launching takes 1.8x the kernel time in process 4242
        - 120,000 launch calls, 540.000 ms of typical launch time vs 300.000 ms of kernel time
        - launch API time p50 4.5 us, p99 12.0 us
    """
    res = view.metric("launch_overhead")
    if res is None:
        return
    for p in res.data["processes"]:
        if p["launch_calls"] < MIN_LAUNCHES or p["kernel_ns"] <= 0:
            continue
        typical = p["launch_calls"] * p["api_p50_ns"]
        ratio = typical / p["kernel_ns"]
        if ratio < MEDIUM_RATIO:
            continue
        yield rule.finding(
            Severity.HIGH if ratio >= HIGH_RATIO else Severity.MEDIUM,
            Confidence.HIGH,
            [
                f"{p['launch_calls']:,} launch calls, {ms(typical)} of typical launch time "
                "vs "
                f"{ms(p['kernel_ns'])} of kernel time ({pct(100 * ratio)})",
                f"launch API time p50 {us(p['api_p50_ns'])}, p99 {us(p['api_p99_ns'])}, "
                f"total {ms(p['api_total_ns'])}",
            ],
            [
                "Capture the steady-state loop in a CUDA graph (torch.cuda.graphs / CUDA graph "
                "mode "
                "in the serving engine): one graph launch replaces many kernel launches.",
                "Fuse small kernels (torch.compile, fused attention/norm/activation kernels).",
                "Raise the batch size so each launch does more work.",
            ],
            title=f"Launching takes {ratio:.1f}x the kernel time in process {p['pid']}",
        )


RULE = Rule(
    "NLE201", "launch-overhead", "Launch API time rivals kernel time", check, ("launch_overhead",)
)
