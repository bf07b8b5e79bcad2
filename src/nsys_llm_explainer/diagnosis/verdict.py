"""The verdict: which bottleneck an expert would name first, with the GPU time at stake.

Order of decision:
1. no_gpu_work: no kernels or graph executions were captured.
2. not_steady_state: start-up (JIT compilation, lazy loading, start-up calls, autotuning)
   covers at least capture.NOT_STEADY_PCT of the GPU window.
3. insufficient_data:
   - too few kernels or too little kernel time to judge (capture metric);
   - the idle time cannot be explained: the idle time no cause names (capture_edge: no CUDA
     API rows, or the host not visible; device_wait: the next work was queued and what it
     waited on is not in the trace) exceeds the busy time;
   - the verdict would blame idle time, and at least UNPLACED_GRAPH_SHARE of the CUDA graph
     launches have no device work joined to them (graphs traced whole without graph-trace
     rows): their GPU time may fill what looks idle.
4. gpu_compute_bound: busy time (the compute bucket) is at least COMPUTE_BOUND_PCT of the
   devices' windows.
5. Otherwise the idle cause with the most time at stake over all devices (accounting.py):
   transfer -> transfer_bound, communication -> communication_bound, sync -> sync_bound,
   host -> host_bound; provided it has time and at least as much as device_wait.
6. Otherwise (the largest idle is device_wait: the GPU works through a queue of its own)
   gpu_compute_bound.

Confidence: for an idle cause, high when it has at least CLEAR_RATIO times the next idle
cause's time, medium from CLOSE_RATIO, low below; one step lower when busy time still exceeds
it (a mixed picture: the GPU is busy most of the time and the cause holds the rest). For
gpu_compute_bound: high from COMPUTE_BOUND_PCT, medium from half the window, low below. One
step lower when some graph launches could not be placed, or when the idle time could not be
split (no CUDA API rows) and busy time is under COMPUTE_BOUND_PCT. insufficient_data is high
confidence, medium when the unexplained idle is queued work on a device that runs collectives
(a peer rank is then named as the likely dependency). The primary bottleneck
lists every device where the cause takes at least half the largest per-device share, and the
processes that drive them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nsys_llm_explainer.diagnosis.accounting import Accounting
from nsys_llm_explainer.fmt import dur
from nsys_llm_explainer.model import Confidence, MetricResult, Outcome

VERDICT_OF = {
    "compute": "gpu_compute_bound",
    "transfer": "transfer_bound",
    "communication": "communication_bound",
    "sync": "sync_bound",
    "host": "host_bound",
}
IDLE_CAUSES = ("transfer", "communication", "sync", "host")
VERDICTS = (
    "gpu_compute_bound", "transfer_bound", "host_bound", "sync_bound", "communication_bound",
    "not_steady_state", "insufficient_data", "no_gpu_work",
)
CLEAR_RATIO = 2.0
CLOSE_RATIO = 1.25
COMPUTE_BOUND_PCT = 80.0
UNPLACED_GRAPH_SHARE = 0.1
UNEXPLAINED = ("capture_edge", "device_wait")
_LOWER = {Confidence.HIGH: Confidence.MEDIUM, Confidence.MEDIUM: Confidence.LOW, Confidence.LOW: Confidence.LOW}


@dataclass(frozen=True)
class Decision:
    verdict: str
    cause: str | None
    confidence: Confidence
    why: str | None = None  # insufficient_data: what cannot be judged
    mixed: bool = False  # an idle cause named while busy time still exceeds it


def metric(metrics: dict[str, Outcome], mid: str) -> dict[str, Any] | None:
    out = metrics.get(mid)
    return out.data if isinstance(out, MetricResult) else None


def ranked_causes(acct: Accounting) -> list[tuple[str, int]]:
    """(cause, ns at stake over all devices), largest first (ties: the order of VERDICT_OF)."""
    order = list(VERDICT_OF)
    return sorted(((c, acct.total(c)) for c in VERDICT_OF), key=lambda t: (-t[1], order.index(t[0])))


def _ratio_confidence(top: int, second: int) -> Confidence:
    if second == 0 or top >= CLEAR_RATIO * second:
        return Confidence.HIGH
    if top >= CLOSE_RATIO * second:
        return Confidence.MEDIUM
    return Confidence.LOW


def _unexplained_why(metrics: dict[str, Outcome], acct: Accounting) -> tuple[str, bool] | None:
    """(why the idle time cannot be judged, whether a likely dependency is named), or None when
    the named causes explain enough."""
    busy = acct.total("compute")
    edge, waiting = acct.bucket_total("capture_edge"), acct.bucket_total("device_wait")
    window = acct.window()
    if edge + waiting <= busy or not window:
        return None
    pct = 100.0 * (edge + waiting) / window
    if metric(metrics, "idle_causes") is None:
        return (f"the export has no CUDA API rows, so the {pct:.1f}% of device time the GPU sat idle "
                "cannot be explained (what the host did is unknown)"), False
    if edge >= waiting:
        return (f"the GPU sat idle {pct:.1f}% of device time while the processes driving it made no "
                "CUDA call the capture recorded, so what the host did then is unknown"), False
    why = (f"the GPU sat idle {pct:.1f}% of device time with its next work already queued, and what "
           "that work waited on (an event on another stream or device) is not in the trace")
    comm = metric(metrics, "communication")
    comm_ns = int(comm.get("comm_kernel_ns", 0)) if comm is not None else 0
    if comm_ns:
        why += (f"; the device also runs collectives ({dur(comm_ns)} of communication kernels), so "
                "a wait on a peer rank (a pipeline stage or a collective's peers) is the likely dependency: "
                "`nsys-llm-explain fleet` over every rank's trace shows which rank arrives late")
    return why, bool(comm_ns)


def unplaced_graphs(metrics: dict[str, Outcome]) -> tuple[int, int]:
    """(graph launches no device work joins, all graph launches) from gpu_idle."""
    gi = metric(metrics, "gpu_idle")
    if gi is None:
        return 0, 0
    return int(gi.get("unplaced_graph_launches", 0)), int(gi.get("graph_launches", 0))


def graphs_hide_work(metrics: dict[str, Outcome]) -> str | None:
    """Why idle time cannot be blamed on anything when at least UNPLACED_GRAPH_SHARE of the
    graph launches have no execution record, else None."""
    n, total = unplaced_graphs(metrics)
    if not n or n < UNPLACED_GRAPH_SHARE * total:
        return None
    return (f"{n:,} of {total:,} CUDA graph launches have no execution record (graphs traced whole "
            "without graph-trace rows), so their GPU time cannot be placed and may fill what looks idle")


def _graph_why(metrics: dict[str, Outcome]) -> tuple[str | None, bool]:
    """(why the idle time cannot be judged, some graph launches unplaced)."""
    return graphs_hide_work(metrics), unplaced_graphs(metrics)[0] > 0


def decide(metrics: dict[str, Outcome], acct: Accounting) -> Decision:
    cap = metric(metrics, "capture")
    if not acct.devices:
        return Decision("no_gpu_work", None, Confidence.HIGH)
    if cap is not None:
        from nsys_llm_explainer.metrics.capture import NOT_STEADY_PCT

        if cap["startup_pct_of_window"] >= NOT_STEADY_PCT:
            return Decision("not_steady_state", "startup", Confidence.HIGH)
        if cap["checks"] and cap["checks"][0]["id"] == "too_little_data" and cap["checks"][0]["found"]:
            return Decision("insufficient_data", None, Confidence.HIGH, cap["checks"][0]["summary"])
    unexplained = _unexplained_why(metrics, acct)
    if unexplained is not None:
        # Queued work waiting on a dependency the trace does not name, on a device that runs
        # collectives: the likely dependency is named, so abstaining is less certain.
        why, named = unexplained
        return Decision("insufficient_data", None, Confidence.MEDIUM if named else Confidence.HIGH, why)
    window = acct.window()
    busy = acct.total("compute")
    idle = sorted(((c, acct.total(c)) for c in IDLE_CAUSES), key=lambda t: (-t[1], IDLE_CAUSES.index(t[0])))
    (top, top_ns), (_, second_ns) = idle[0], idle[1]
    waiting = acct.bucket_total("device_wait")
    graph_why, unplaced = _graph_why(metrics)
    clearly_busy = bool(window) and 100.0 * busy / window >= COMPUTE_BOUND_PCT
    if clearly_busy:
        decision = Decision("gpu_compute_bound", "compute", Confidence.HIGH)
    elif top_ns > 0 and top_ns >= waiting:
        if graph_why is not None:
            return Decision("insufficient_data", None, Confidence.HIGH, graph_why)
        conf = _ratio_confidence(top_ns, second_ns)
        mixed = busy > top_ns
        decision = Decision(VERDICT_OF[top], top, _LOWER[conf] if mixed else conf, mixed=mixed)
    elif busy == 0:
        return Decision("insufficient_data", None, Confidence.LOW, "no GPU time could be accounted for")
    else:
        conf = Confidence.MEDIUM if 2 * busy >= window else Confidence.LOW
        decision = Decision("gpu_compute_bound", "compute", conf)
    if unplaced or (metric(metrics, "idle_causes") is None and not clearly_busy):
        decision = Decision(decision.verdict, decision.cause, _LOWER[decision.confidence], mixed=decision.mixed)
    return decision


def primary_devices(acct: Accounting, cause: str) -> list[int]:
    shares = {d.device_id: d.pct(d.cause_ns(cause)) for d in acct.devices}
    best = max(shares.values(), default=0.0)
    if best <= 0:
        return []
    return [dev for dev, s in shares.items() if s >= best / 2]
