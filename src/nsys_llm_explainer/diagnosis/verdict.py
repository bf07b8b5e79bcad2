"""The verdict: which bottleneck an expert would name first, with the GPU time at stake.

Order of decision:
1. no_gpu_work: no kernels were captured.
2. not_steady_state: start-up (JIT compilation, lazy loading, start-up calls, autotuning)
   covers at least capture.NOT_STEADY_PCT of the GPU window.
3. insufficient_data: too few kernels or too little kernel time to judge.
4. Otherwise the cause with the most time at stake over all devices (accounting.py):
   compute -> gpu_compute_bound, transfer -> transfer_bound, communication ->
   communication_bound, sync -> sync_bound, host -> host_bound.

Confidence: high when the winning cause has at least CLEAR_RATIO times the runner-up's time,
medium from CLOSE_RATIO, low below; one step lower when the idle time could not be split
(no CUDA API rows). The primary bottleneck lists every device where the cause takes at least
half the largest per-device share, and the processes that drive them.
"""

from __future__ import annotations

from typing import Any

from nsys_llm_explainer.diagnosis.accounting import Accounting
from nsys_llm_explainer.model import Confidence, MetricResult, Outcome

VERDICT_OF = {
    "compute": "gpu_compute_bound",
    "transfer": "transfer_bound",
    "communication": "communication_bound",
    "sync": "sync_bound",
    "host": "host_bound",
}
VERDICTS = (
    "gpu_compute_bound", "transfer_bound", "host_bound", "sync_bound", "communication_bound",
    "not_steady_state", "insufficient_data", "no_gpu_work",
)
CLEAR_RATIO = 2.0
CLOSE_RATIO = 1.25
_LOWER = {Confidence.HIGH: Confidence.MEDIUM, Confidence.MEDIUM: Confidence.LOW, Confidence.LOW: Confidence.LOW}


def metric(metrics: dict[str, Outcome], mid: str) -> dict[str, Any] | None:
    out = metrics.get(mid)
    return out.data if isinstance(out, MetricResult) else None


def ranked_causes(acct: Accounting) -> list[tuple[str, int]]:
    """(cause, ns at stake over all devices), largest first (ties: the order of VERDICT_OF)."""
    order = list(VERDICT_OF)
    return sorted(((c, acct.total(c)) for c in VERDICT_OF), key=lambda t: (-t[1], order.index(t[0])))


def decide(metrics: dict[str, Outcome], acct: Accounting) -> tuple[str, str | None, Confidence]:
    """(verdict, cause or None, confidence)."""
    cap = metric(metrics, "capture")
    if not acct.devices:
        return "no_gpu_work", None, Confidence.HIGH
    if cap is not None:
        from nsys_llm_explainer.metrics.capture import NOT_STEADY_PCT

        if cap["startup_pct_of_window"] >= NOT_STEADY_PCT:
            return "not_steady_state", "startup", Confidence.HIGH
        if cap["checks"] and cap["checks"][0]["id"] == "too_little_data" and cap["checks"][0]["found"]:
            return "insufficient_data", None, Confidence.HIGH
    ranked = ranked_causes(acct)
    (top, top_ns), (_, second_ns) = ranked[0], ranked[1]
    if top_ns == 0:
        return "insufficient_data", None, Confidence.LOW
    if second_ns == 0 or top_ns >= CLEAR_RATIO * second_ns:
        conf = Confidence.HIGH
    elif top_ns >= CLOSE_RATIO * second_ns:
        conf = Confidence.MEDIUM
    else:
        conf = Confidence.LOW
    if metric(metrics, "idle_causes") is None and top != "compute":
        conf = _LOWER[conf]
    return VERDICT_OF[top], top, conf


def primary_devices(acct: Accounting, cause: str) -> list[int]:
    shares = {d.device_id: d.pct(d.cause_ns(cause)) for d in acct.devices}
    best = max(shares.values(), default=0.0)
    if best <= 0:
        return []
    return [dev for dev, s in shares.items() if s >= best / 2]
