from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct
from nsys_llm_explainer.trace.formats import capture_hint

VERY_LOW = 0.3


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """NVTX ranges explain too little of the GPU kernel time.

    Coverage = kernel time whose launch call lies inside some NVTX range on the launching
    thread / kernel time of the kernels that have a launch call (kernels without one cannot
    be placed in any range: NLE202 reports them). Fires below
    `--nvtx-coverage-warn-threshold` (default 0.7): medium below 0.3, low otherwise.
    Per-range and per-phase numbers then describe only part of the work. In PyTorch
    profiler traces the ranges are record_function annotations and operators, and the
    advice says so.

    Example:

        NLE106 info: NVTX ranges cover only 12.0% of kernel time
        - 120.000 ms of 1,000.000 ms kernel time attributed (threshold 70.0%)
        - 310 kernels were launched outside any range
    """
    res = view.metric("nvtx_attribution")
    if res is None:
        return
    launched_ns = int(res.data["total_kernel_ns"]) - int(res.data.get("kernels_without_launch_ns", 0))
    if launched_ns <= 0:
        return
    cov = min(int(res.data["attributed_ns"]) / launched_ns, 1.0)
    threshold = float(view.options.nvtx_coverage_warn_threshold)
    if cov >= threshold:
        return
    yield rule.note(
        confidence=Confidence.HIGH,
        evidence=[
            f"{ms(res.data['attributed_ns'])} of {ms(launched_ns)} kernel time attributed "
            f"(threshold {pct(100 * threshold)})"
            + (f"; the {res.data['kernels_without_launch']:,} kernels without a launch call (NLE202) "
               "are left out" if res.data["kernels_without_launch"] else ""),
            f"{res.data['kernels_outside_ranges']:,} kernels were launched outside any range",
        ],
        recommendation=_advice(view),
        title=f"NVTX ranges cover only {pct(100 * cov)} of kernel time",
    )


def _advice(view: RuleInput) -> tuple[str, ...]:
    hint = capture_hint(view.schema.format, "ranges")
    return (hint,) if hint else advice("nvtx", view.workload)


RULE = Rule(
    id="NLE106",
    name="low-nvtx-coverage",
    title="Low NVTX coverage of kernel time",
    check=check,
    metric_ids=("nvtx_attribution",),
)
