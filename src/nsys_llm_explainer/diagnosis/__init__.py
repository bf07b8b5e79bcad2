"""The diagnosis: from metric results to a verdict, the primary bottleneck with the GPU time at
stake, the workload that ran, and the capture's own sanity. Reads metric results only.

    acct = accounting.build(metrics)           # where each device's time went
    diagnosis = diagnose(trace, metrics, acct)  # verdict, summary, primary, workload, capture
"""

from __future__ import annotations

from typing import Any

from nsys_llm_explainer.diagnosis import accounting, capture, evidence, verdict
from nsys_llm_explainer.diagnosis.accounting import Accounting
from nsys_llm_explainer.fmt import dur
from nsys_llm_explainer.model import Confidence, Diagnosis, Outcome, Primary, TraceInfo, Workload, round_pct

__all__ = ["Accounting", "accounting", "diagnose", "workload_of"]


def workload_of(metrics: dict[str, Outcome]) -> Workload:
    w = verdict.metric(metrics, "workload")
    if w is None:
        return Workload("unknown", Confidence.LOW, ("the workload metric did not run",))
    return Workload(w["kind"], Confidence(w["confidence"]), tuple(w["evidence"]))


def _no_gpu_reason(metrics: dict[str, Outcome]) -> str:
    out = metrics.get("top_kernels")
    reason = getattr(out, "reason", None)
    return reason or "the capture has no CUDA kernels"


def _startup_primary(cap: dict[str, Any], acct: Accounting) -> Primary:
    devices = tuple(d.device_id for d in acct.devices)
    pids = tuple(sorted({p for d in acct.devices for p in d.pids}))
    window = cap["window_end_ns"] - cap["window_start_ns"]
    lines = tuple(
        f"{c['id']}: {c['summary']}; {dur(c['time_ns'])} in all, merged ({c['pct_of_window']:.1f}% of the time "
        "from the first to the last kernel)"
        for c in cap["checks"] if c["found"] and c["time_ns"]
    )
    pct = round_pct(100.0 * cap["startup_ns"] / window) if window else 0.0
    return Primary("startup", devices, pids, int(cap["startup_ns"]), pct, lines)


def diagnose(trace: TraceInfo, metrics: dict[str, Outcome], acct: Accounting) -> Diagnosis:
    decision = verdict.decide(metrics, acct)
    result, cause, confidence = decision.verdict, decision.cause, decision.confidence
    cap = verdict.metric(metrics, "capture")
    primary: Primary | None = None
    extra: dict[str, Any] = {}
    devices: list[int] = []
    if result == "no_gpu_work":
        extra["why"] = _no_gpu_reason(metrics)
    elif result == "not_steady_state" and cap is not None:
        primary = _startup_primary(cap, acct)
        extra.update(what=capture.startup_what(cap), pct=cap["startup_pct_of_window"],
                     window=cap["window_end_ns"] - cap["window_start_ns"])
    elif result == "insufficient_data":
        check = cap["checks"][0] if cap is not None and cap["checks"] else None
        extra["what"] = decision.why or "the idle time could not be explained"
        extra["too_little"] = bool(check and check["id"] == "too_little_data" and check["found"])
    elif cause is not None:
        devices = verdict.primary_devices(acct, cause)
        chosen = [acct.device(d) for d in devices]
        window = sum(d.window_ns for d in chosen if d is not None)
        ns = sum(d.cause_ns(cause) for d in chosen if d is not None)
        lines = evidence.per_device_lines(acct, cause, devices)
        lines += evidence.CAUSE_EVIDENCE[cause](metrics, acct, devices)
        pids = tuple(sorted({p for d in chosen if d is not None for p in d.pids}))
        primary = Primary(cause, tuple(devices), pids, ns, round_pct(100.0 * ns / window) if window else 0.0,
                          tuple(lines))
        extra["mixed"] = decision.mixed
        runner_up = verdict.ranked_causes(acct)[1]
        if runner_up[1] > 0:
            total = acct.window()
            extra["tail"] = (f"Next largest: {runner_up[0]} ({100.0 * runner_up[1] / total:.1f}% of all "
                             "device time).") if total else None
    return Diagnosis(
        verdict=result,
        summary=evidence.summary(result, cause, acct, devices, extra),
        confidence=confidence,
        primary=primary,
        workload=workload_of(metrics),
        capture=capture.review(trace, metrics, result),
        devices=tuple(d.to_json() for d in acct.devices),
    )
