"""The diagnosis: from metric results to a verdict, the primary bottleneck with the GPU time at
stake, the workload that ran, and the capture's own sanity. Reads metric results only.

    acct = accounting.build(metrics)           # where each device's time went
    diagnosis = diagnose(trace, metrics, acct)  # verdict, summary, primary, workload, capture
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nsys_llm_explainer.analysis.program import Ending
from nsys_llm_explainer.diagnosis import accounting, capture, evidence, kernel_mix, verdict
from nsys_llm_explainer.diagnosis.accounting import BUSY, Accounting, Figure
from nsys_llm_explainer.diagnosis.evidence import Second, SummaryParts
from nsys_llm_explainer.fmt import dur
from nsys_llm_explainer.model import (
    Cause,
    Confidence,
    Diagnosis,
    JsonObject,
    Outcome,
    Primary,
    TraceInfo,
    Verdict,
    Workload,
    round_pct,
    typed_result,
)
from nsys_llm_explainer.results.run import Capture, RunFacts
from nsys_llm_explainer.results.run import Workload as WorkloadResult
from nsys_llm_explainer.results.serving import Serving

__all__ = ["Accounting", "accounting", "diagnose", "workload_of"]


def workload_of(metrics: dict[str, Outcome]) -> Workload:
    w = typed_result(metrics, WorkloadResult)
    if w is None:
        return Workload("unknown", Confidence.LOW, ("the workload metric did not run",))
    return Workload(w.kind, Confidence(w.confidence), tuple(w.evidence), w.model)


def _no_gpu_reason(metrics: dict[str, Outcome]) -> str:
    out = metrics.get("top_kernels")
    reason = getattr(out, "reason", None)
    return reason or "the capture has no CUDA kernels"


def _startup_primary(cap: Capture, acct: Accounting) -> Primary:
    """Start-up as the primary bottleneck: on every device, the idle time before the steady
    part begins (the GPU time start-up costs), with what the capture checks found."""
    devices = tuple(d.device_id for d in acct.devices)
    pids = tuple(sorted({p for d in acct.devices for p in d.pids}))
    ns, window = max(((d.before_steady_ns(), d.window_ns) for d in acct.devices), default=(0, 0))
    lines = [f"GPU {d.device_id}: {dur(d.before_steady_ns())} idle before the steady part begins "
             f"({d.pct(d.before_steady_ns()):.1f}% of its {dur(d.window_ns)} window)"
             for d in acct.devices[: evidence.MAX_DEVICES_LISTED]]
    lines += [f"{capture.STARTUP_WORDS[c.id]}: {c.summary}; {dur(c.time_ns)} in all"
              for c in cap.checks if c.found and c.time_ns and c.id in capture.STARTUP_WORDS]
    return Primary(Cause.STARTUP, devices, pids, ns, round_pct(100.0 * ns / window) if window else 0.0, tuple(lines))


def _figure(cause: Cause) -> Figure:
    """The figure a cause is written as: compute as the busy figure."""
    return BUSY if cause == Cause.COMPUTE else cause


def _share(acct: Accounting, cause: Cause, devices: list[int]) -> tuple[int, int]:
    """(ns of `cause` on the device of `devices` where it holds the most, that device's window):
    the time at stake is one device's, never a sum over devices running side by side (their
    own figures are the evidence's per-device lines); compute is written as the busy figure."""
    key = _figure(cause)
    return max(((d.cause_ns(key), d.window_ns) for d in acct.chosen(devices)), default=(0, 0))


def _failed_primary(run: RunFacts, ending: Ending, acct: Accounting) -> Primary:
    lines = [f"{ending.stream}: {ending.line}" + (f" / {ending.context}" if ending.context else "")]
    if ending.conflict:
        lines.insert(0, f"the program's own profiler under Nsight Systems: {ending.conflict}")
    pids = tuple(sorted({p for d in acct.devices for p in d.pids} | {ending.pid}))
    return Primary(run.outcome, tuple(d.device_id for d in acct.devices), pids, 0, 0.0, tuple(lines))


@dataclass
class _Judged:
    """A cause-led verdict worked out: its devices, primary bottleneck and summary parts."""

    devices: list[int] = field(default_factory=list)
    primary: Primary | None = None
    extra: SummaryParts = field(default_factory=lambda: SummaryParts())
    second: Second | None = None
    kernels: JsonObject | None = None  # report.json `diagnosis.kernels` (kernel_mix.KernelMix.to_json)


def _judge(decision: verdict.Decision, metrics: dict[str, Outcome], acct: Accounting) -> _Judged:
    cause = decision.cause
    out = _Judged()
    if cause is None:
        return out
    devices = verdict.primary_devices(acct, _figure(cause))
    ns, window = _share(acct, cause, devices)
    lines = evidence.per_device_lines(acct, _figure(cause), devices)
    lines += evidence.CAUSE_EVIDENCE[cause](metrics, acct, devices)
    pids = tuple(sorted({p for d in acct.chosen(devices) for p in d.pids}))
    out.devices = devices
    out.primary = Primary(cause, tuple(devices), pids, ns, round_pct(100.0 * ns / window) if window else 0.0,
                          tuple(lines))
    if decision.second is not None:
        sns, swindow = _share(acct, decision.second, devices)
        if sns > 0:
            out.second = Second(decision.second, sns, round_pct(100.0 * sns / swindow) if swindow else 0.0)
    if Cause.COMPUTE in decision.named():
        mix = kernel_mix.of_devices(metrics, devices)
        if mix is not None and mix.compute_ns:
            out.kernels = mix.to_json()
            every = {d.device_id for d in acct.devices}
            scope = "kernel time" if set(devices) >= every else f"the kernel time of {evidence.devices_text(devices)}"
            out.extra["kernels"] = evidence.kernel_clause(mix, metrics, scope)
    out.extra["second"] = out.second
    return out


def _summary_before(metrics: dict[str, Outcome], acct: Accounting) -> str:
    """What the figures say up to a failure: the summary the verdict would get had the run not
    failed (empty when that verdict is about start-up or cannot judge)."""
    before = verdict.decide(metrics, acct, failure=False)
    if before.cause in (None, Cause.STARTUP, Cause.PROGRAM_FAILED):
        return ""
    j = _judge(before, metrics, acct)
    return evidence.summary(before.verdict, before.cause, acct, j.devices, j.extra, metrics)


def diagnose(trace: TraceInfo, metrics: dict[str, Outcome], acct: Accounting) -> Diagnosis:
    decision = verdict.decide(metrics, acct)
    result, cause, confidence = decision.verdict, decision.cause, decision.confidence
    cap = typed_result(metrics, Capture)
    run = cap.run if cap is not None else None
    primary: Primary | None = None
    extra: SummaryParts = {}
    devices: list[int] = []
    second: Second | None = None
    mix_json: JsonObject | None = None
    if result == Verdict.NO_GPU_WORK:
        text, primary = capture.no_gpu_work(run, _no_gpu_reason(metrics))
        extra["text"] = text
    elif cause == Cause.PROGRAM_FAILED and run is not None and run.ending is not None:
        primary = _failed_primary(run, run.ending, acct)
        extra["failed"] = capture.failed_with_work(run)
        extra["fix"] = capture.failure_fix(run)
        extra["before"] = _summary_before(metrics, acct)
    elif result == Verdict.NOT_STEADY_STATE and cap is not None:
        primary = _startup_primary(cap, acct)
        extra["parts"], extra["one_shot"] = capture.startup_parts(cap), capture.one_shot(cap)
    elif result == Verdict.INSUFFICIENT_DATA:
        check = cap.checks[0] if cap is not None and cap.checks else None
        extra["what"] = decision.why or "the idle time could not be explained"
        extra["too_little"] = bool(check and check.id == "too_little_data" and check.found)
        if extra["too_little"] and check is not None:
            extra["check"] = check
    elif cause is not None:
        j = _judge(decision, metrics, acct)
        devices, primary, second, mix_json = j.devices, j.primary, j.second, j.kernels
        extra.update(j.extra)
    extra["second"] = second
    return Diagnosis(
        verdict=result,
        summary=verdict.with_serving(evidence.summary(result, cause, acct, devices, extra, metrics),
                                     typed_result(metrics, Serving) if result != Verdict.NO_GPU_WORK else None),
        confidence=confidence,
        primary=primary,
        workload=workload_of(metrics),
        capture=capture.review(trace, metrics, result),
        devices=tuple(d.to_json() for d in acct.devices),
        second=second.to_json() if second is not None else None,
        kernels=mix_json,
    )
