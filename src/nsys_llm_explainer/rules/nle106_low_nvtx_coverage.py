from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct

VERY_LOW = 0.3


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """NVTX ranges explain too little of the GPU kernel time.

    Coverage = kernel time whose launch call lies inside some NVTX range on the launching
    thread / all kernel time. Fires below `--nvtx-coverage-warn-threshold` (default 0.7):
    medium below 0.3, low otherwise. Per-range and per-phase numbers then describe only part
    of the work.

    Example:

        NLE106 info: NVTX ranges cover only 12.0% of kernel time
        - 120.000 ms of 1,000.000 ms kernel time attributed; 310 kernels had no launch call in the trace
    """
    res = view.metric("nvtx_attribution")
    if res is None:
        return
    cov = float(res.data["coverage"])
    threshold = float(view.options.nvtx_coverage_warn_threshold)
    if cov >= threshold:
        return
    yield rule.note(
        Confidence.HIGH,
        [
            f"{ms(res.data['attributed_ns'])} of {ms(res.data['total_kernel_ns'])} kernel time attributed "
            f"(threshold {pct(100 * threshold)})",
            f"{res.data['kernels_without_launch']:,} kernels had no matching launch call; "
            f"{res.data['kernels_outside_ranges']:,} were launched outside any range",
        ],
        advice("nvtx", view.workload),
        title=f"NVTX ranges cover only {pct(100 * cov)} of kernel time",
    )


RULE = Rule(
    "NLE106", "low-nvtx-coverage", "Low NVTX coverage of kernel time", check, ("nvtx_attribution",)
)
