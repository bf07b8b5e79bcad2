"""How kernel time splits into phases and steps: one phase dominates (NLE105), NVTX covers too
little (NLE106) or nothing (NLE108) of the kernel time, steps much slower than the median
(NLE212), steps not identified (NLE213)."""

from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Cause, Confidence, Finding, IdleCause
from nsys_llm_explainer.results.ranges import NvtxAttribution
from nsys_llm_explainer.results.run import StepOutlier, Steps
from nsys_llm_explainer.results.serving import Serving
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct, shorten, us
from nsys_llm_explainer.rules.impact import band, whole
from nsys_llm_explainer.trace.formats import capture_hint

DOMINANT_PCT = 80.0
MIN_PHASES = 2  # with a single phase there is nothing to compare


def phase_dominates(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """One phase takes almost all attributed GPU kernel time.

    Phases come from `--phase-map` (e.g. prefill/decode); without one, from the serving
    iterations' phases (prefill, mixed, decode: the serving metric's kernel time per phase), else
    the top-level NVTX ranges stand in for phases. Fires (a note, severity info: it points where to look, it is not a
    defect) when at least two phases received kernel time and one of them holds >= 80% of
    the attributed kernel time.

    Example:

        NLE105 info: Phase "decode" takes 91.0% of attributed kernel time
        - decode: 910.000 ms of 1,000.000 ms attributed kernel time; prefill: 90.000 ms
    """
    res = view.result(NvtxAttribution)
    if res is None:
        return
    s = view.result(Serving)
    if res.phases:
        rows = [(p.phase, int(p.kernel_ns)) for p in res.phases]
        source = "phase map"
    elif s is not None and s.phases:
        rows = [(p.phase, sum(p.categories.values())) for p in s.phases]
        source = "serving iterations"
    else:
        rows = [(r.name, int(r.inclusive_kernel_ns)) for r in res.top_level]
        source = "top-level NVTX ranges"
    rows = [r for r in rows if r[1] > 0]
    total = sum(ns for _, ns in rows)
    if len(rows) < MIN_PHASES or total <= 0:
        return
    name, ns = max(rows, key=lambda r: r[1])
    share = 100.0 * ns / total
    if share < DOMINANT_PCT:
        return
    others = "; ".join(
        f"{shorten(n, 40)}: {ms(v)}" for n, v in sorted(rows, key=lambda r: -r[1])[1:4]
    )
    yield rule.note(
        confidence=Confidence.LOW if source == "top-level NVTX ranges" else Confidence.MEDIUM,
        evidence=[
            f"{shorten(name, 60)}: {ms(ns)} of {ms(total)} kernel time attributed to {source}",
            f"others: {others}",
        ],
        recommendation=[
            f'Optimize inside "{shorten(name, 60)}" first: the other phases cannot move the total much.'
        ],
        title=f'Phase "{shorten(name, 60)}" takes {pct(share)} of attributed kernel time',
    )


NLE105 = Rule(
    id="NLE105",
    name="phase-dominates",
    title="One phase dominates kernel time",
    check=phase_dominates,
    metric_ids=("nvtx_attribution", "serving"),
)


VERY_LOW = 0.3


def low_nvtx_coverage(view: RuleInput, rule: Rule) -> Iterator[Finding]:
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
    res = view.result(NvtxAttribution)
    if res is None:
        return
    launched_ns = int(res.total_kernel_ns) - int(res.kernels_without_launch_ns)
    if launched_ns <= 0:
        return
    cov = min(int(res.attributed_ns) / launched_ns, 1.0)
    threshold = float(view.options.nvtx_coverage_warn_threshold)
    if cov >= threshold:
        return
    yield rule.note(
        confidence=Confidence.HIGH,
        evidence=[
            f"{ms(res.attributed_ns)} of {ms(launched_ns)} kernel time attributed "
            f"(threshold {pct(100 * threshold)})"
            + (f"; the {res.kernels_without_launch:,} kernels without a launch call (NLE202) "
               "are left out" if res.kernels_without_launch else ""),
            f"{res.kernels_outside_ranges:,} kernels were launched outside any range",
        ],
        recommendation=_advice(view),
        title=f"NVTX ranges cover only {pct(100 * cov)} of kernel time",
    )


def _advice(view: RuleInput) -> tuple[str, ...]:
    hint = capture_hint(view.schema.format, "ranges")
    return (hint,) if hint else advice("nvtx", view.workload)


NLE106 = Rule(
    id="NLE106",
    name="low-nvtx-coverage",
    title="Low NVTX coverage of kernel time",
    check=low_nvtx_coverage,
    metric_ids=("nvtx_attribution",),
)


def no_nvtx(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Kernels were captured but there are no NVTX ranges to say which step launched them.

    Fires when kernels exist and the NVTX table is absent or holds no ranges. Without ranges
    the report cannot split time into prefill and decode, per-phase verdicts are impossible,
    and steps must be guessed.

    Example:

        NLE108 info: No NVTX ranges: kernel time cannot be split into phases
        - the export has no NVTX_EVENTS table (NVTX not captured)
    """
    if view.metric("top_kernels") is None:
        return
    skipped = view.skipped("nvtx_ranges")
    if skipped is None:
        return
    yield rule.note(
        confidence=Confidence.HIGH,
        evidence=[skipped.reason],
        recommendation=advice("nvtx", view.workload),
        title="No NVTX ranges: kernel time cannot be split into phases",
    )


NLE108 = Rule(id="NLE108", name="no-nvtx", title="No NVTX ranges", check=no_nvtx, metric_ids=("nvtx_ranges",))


RECOMMENDATION = (
    "Look at the slow steps in tables/steps.csv on the Nsight Systems timeline: a long idle gap "
    "points at the host (its cause is in idle_causes), a slow kernel at shapes or contention.",
    "Periodic slow steps often come from batching changes, KV-cache allocation, garbage "
    "collection or logging every N steps.",
)
# The idle sweep's gap cause -> the diagnosis cause whose finding reports that time.
GAP_CAUSE: dict[str, Cause] = {
    IdleCause.TRANSFER: Cause.TRANSFER, IdleCause.COMMUNICATION: Cause.COMMUNICATION,
    IdleCause.SYNC_WAIT: Cause.SYNC, IdleCause.LAUNCH_BOUND: Cause.HOST, IdleCause.HOST_OTHER: Cause.HOST,
}


def _shared_cause(view: RuleInput, outliers: list[StepOutlier]) -> Cause | None:
    """The diagnosis cause most slow steps' gaps belong to, when that cause is large enough to
    have its own finding (then the steps' excess is not reported twice)."""
    causes = [GAP_CAUSE.get(o.gap_cause or "") for o in outliers if o.reason == "idle_gap"]
    if not causes or len(causes) * 2 < len(outliers):
        return None
    cause = max(set(causes), key=causes.count)
    if cause is None:
        return None
    window = view.acct.window()
    return cause if window and band(100.0 * view.acct.total(cause) / window) is not None else None


def slow_steps(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Some steps take more than twice the median step time of their phase.

    Per phase, from the steps metric: outliers are steps longer than 2x the phase's median
    latency. Fires when a phase has any. Impact: the slow steps' time beyond the median (what
    they would give back at median speed), over all devices' windows; severity from the
    impact bands (rules/impact.py).
    The evidence names the slowest step and what made it slow: its longest GPU idle gap
    (with cause), its slowest kernel against that kernel's median, or its longest CUDA call.
    When most slow steps are slow because of idle gaps of one cause that has its own finding
    (e.g. NLE208 for copies), the finding is a note (INFO, no impact): it is the same time,
    at stake in that finding (one finding per cause).
    Confidence follows how the steps were found (NVTX: high; automatic: as detected).

    Example:

        NLE212 medium: 3 of 40 decode steps take over 2x the median (28.100 ms)
        - slowest: step 17, 120.400 ms (4.3x): idle gap of 80.000 ms (sync_wait)
    """
    d = view.result(Steps)
    if d is None:
        return
    for p in d.phases:
        if p.outliers <= 0:
            continue
        share = 100.0 * p.outliers / p.steps
        noun = "steps" if p.phase == "step" else f"{p.phase} steps"
        mine = [o for o in d.outliers if o.phase == p.phase]
        evidence = [
            f"{p.outliers:,} of {p.steps:,} steps ({pct(share)}); median {ms(p.p50_ns)}, "
            f"max {ms(p.max_ns)}"
        ]
        if mine:
            o = mine[0]
            why = {
                "idle_gap": f"idle gap of {ms(o.gap_ns)} ({o.gap_cause})",
                "slow_kernel": f"kernel {view.kernel_label(o.kernel_name or '')} ran "
                f"{us(o.kernel_ns or 0)} "
                f"(median {us(o.kernel_median_ns or 0)})",
                "host_call": f"{o.host_call} took {ms(o.host_call_ns)}",
            }.get(o.reason or "", "no single cause stands out")
            evidence.append(
                f"slowest: step {o.step}, {ms(o.latency_ns)} ({o.ratio_to_median}x): {why}"
            )
        excess = sum(max(0, int(o.latency_ns) - int(p.p50_ns)) for o in mine)
        affected, impact = whole(view.acct, excess)
        severity = band(impact[1])
        if severity is None:
            continue
        cause = _shared_cause(view, mine)
        title = f"{p.outliers:,} of {p.steps:,} {noun} take over 2x the median ({ms(p.p50_ns)})"
        if cause is not None:  # the gaps are the same time the cause's own finding reports
            evidence.append(f"the slow steps' gaps are {cause} time ({ms(excess)} beyond the median), "
                            "at stake in that cause's own finding, not here")
            yield rule.note(
                confidence=Confidence(d.confidence),
                evidence=evidence,
                recommendation=RECOMMENDATION,
                title=title,
            )
            continue
        yield rule.finding(
            severity=severity,
            confidence=Confidence(d.confidence),
            evidence=evidence,
            recommendation=RECOMMENDATION,
            title=title,
            affected=affected,
            impact=impact,
        )


NLE212 = Rule(
    id="NLE212",
    name="slow-steps",
    title="Steps much slower than the median",
    check=slow_steps,
    metric_ids=("steps",),
)


NOT_FOUND_PREFIX = "no steps found"


def steps_not_found(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Serving steps could not be found, or only with low confidence.

    Fires (low) when the steps metric was skipped because no NVTX step ranges were named and
    no repeating pattern was found, or when automatic detection succeeded with low confidence.
    Step timing is the per-token view of an LLM server; naming the step range fixes it.

    Example:

        NLE213 info: Steps were not identified
        - no steps found: no phase map or --step-range, and neither a repeating launch sequence ...
    """
    skipped = view.skipped("steps")
    res = view.result(Steps)
    if skipped is not None and skipped.reason.startswith(NOT_FOUND_PREFIX):
        evidence = [skipped.reason]
        title = "Steps were not identified"
    elif res is not None and res.confidence == "low":
        evidence = [f"automatic detection ({res.method}): {res.detail}"]
        title = "Steps were identified with low confidence"
    else:
        return
    yield rule.note(
        confidence=Confidence.HIGH,
        evidence=evidence,
        recommendation=advice("steps", view.workload),
        title=title,
    )


NLE213 = Rule(
    id="NLE213",
    name="steps-not-found",
    title="Steps not identified",
    check=steps_not_found,
    metric_ids=("steps",),
)


RULES = (NLE105, NLE106, NLE108, NLE212, NLE213)
