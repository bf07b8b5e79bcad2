"""The verdict's decision rule on per-device buckets given by hand (diagnosis/verdict.py), and
what the host's blocking calls are said to have waited for (diagnosis/evidence.py)."""

from __future__ import annotations

from typing import Any

import pytest

from nsys_llm_explainer.diagnosis import accounting, evidence, verdict
from nsys_llm_explainer.model import Confidence
from tests.rule_inputs import WINDOW, device_metrics, outcomes

PCT = WINDOW // 100  # 1% of the 1 ms window


def decide(buckets: dict[str, int], extra: dict[str, Any] | None = None,
           skipped: dict[str, str] | None = None) -> verdict.Decision:
    data = device_metrics({0: buckets})
    for key, value in (extra or {}).items():
        data[key] = data.get(key, {}) | value
    for mid in skipped or {}:
        data.pop(mid, None)
    metrics = outcomes(data, skipped)
    return verdict.decide(metrics, accounting.build(metrics))


@pytest.mark.parametrize("idle, expected", [
    # Busy 80%: compute-bound even with 20% of host gaps.
    ({"host_other": 20 * PCT}, ("gpu_compute_bound", "compute", Confidence.HIGH, False)),
    # Busy 79%: the host's 21% is named, one step less sure because busy time exceeds it.
    ({"host_other": 21 * PCT}, ("host_bound", "host", Confidence.MEDIUM, True)),
    # Busy 60%, host 25%, transfer 15%: host is 1.67x the next idle cause (medium), mixed (low).
    ({"host_other": 25 * PCT, "transfer": 15 * PCT}, ("host_bound", "host", Confidence.LOW, True)),
    # Busy 30%, transfer 70%: not mixed, nothing else idle.
    ({"transfer": 70 * PCT}, ("transfer_bound", "transfer", Confidence.HIGH, False)),
    # Busy 60%, 30% queued work waiting, 10% host: the GPU works through its own queue.
    ({"device_wait": 30 * PCT, "launch_bound": 10 * PCT}, ("gpu_compute_bound", "compute", Confidence.MEDIUM, False)),
])
def test_compute_bound_only_when_busy_outweighs_every_idle_cause(
    idle: dict[str, int], expected: tuple[str, str, Confidence, bool]
) -> None:
    d = decide(idle)
    assert (d.verdict, d.cause, d.confidence, d.mixed) == expected


def test_unexplained_idle_beyond_busy_time_is_insufficient_data() -> None:
    # 55% capture_edge against 45% busy: nothing names the idle time.
    d = decide({"capture_edge": 55 * PCT})
    assert (d.verdict, d.cause) == ("insufficient_data", None)
    assert "55.0%" in (d.why or "") and "made no CUDA call" in (d.why or "")
    # The same without the CUDA API table (idle_causes skipped): all idle is unexplained.
    d = decide({"capture_edge": 95 * PCT}, skipped={"idle_causes": "the CUDA API table is empty"})
    assert d.verdict == "insufficient_data" and "no CUDA API rows" in (d.why or "")
    # 45% unexplained against 55% busy: judged, compute-bound but not sure.
    d = decide({"capture_edge": 45 * PCT}, skipped={"idle_causes": "the CUDA API table is empty"})
    assert (d.verdict, d.confidence) == ("gpu_compute_bound", Confidence.LOW)


def test_queued_waits_on_a_device_running_collectives_point_at_the_peers() -> None:
    # 60% queued work waiting on something the trace does not name, 40% busy: not judged.
    d = decide({"device_wait": 60 * PCT})
    assert (d.verdict, d.cause) == ("insufficient_data", None)
    assert "60.0%" in (d.why or "") and "peer rank" not in (d.why or "")
    # The same device also ran 2.5 ms of communication kernels: the likely dependency is named.
    d = decide({"device_wait": 60 * PCT}, extra={"communication": {"comm_kernel_ns": 2_500_000}})
    assert (d.verdict, d.confidence) == ("insufficient_data", Confidence.MEDIUM)
    assert "2.500 ms of communication kernels" in (d.why or "") and "peer rank" in (d.why or "")


def test_unplaced_graph_launches_stop_idle_verdicts() -> None:
    graphs = {"gpu_idle": {"graph_launches": 100, "unplaced_graph_launches": 10}}
    d = decide({"sync_wait": 70 * PCT}, extra=graphs)
    assert d.verdict == "insufficient_data" and "10 of 100 CUDA graph launches" in (d.why or "")
    # Below 10% unplaced: judged, one step less sure.
    few = {"gpu_idle": {"graph_launches": 100, "unplaced_graph_launches": 9}}
    d = decide({"sync_wait": 70 * PCT}, extra=few)
    assert (d.verdict, d.confidence) == ("sync_bound", Confidence.MEDIUM)
    # A busy GPU stays compute-bound: graph work can only add to busy time.
    d = decide({"sync_wait": 10 * PCT}, extra=graphs)
    assert (d.verdict, d.confidence) == ("gpu_compute_bound", Confidence.MEDIUM)


@pytest.mark.parametrize("busy, copies, drained, ending", [
    (1_000, 9_000, 500, "the host simply waited for the copies"),
    (9_000, 1_000, 500, "the host mostly waited for the GPU's own work, which costs the GPU nothing"),
    (1_000, 1_000, 8_000, "the GPU drained while the host waited"),
])
def test_what_the_host_waited_for(busy: int, copies: int, drained: int, ending: str) -> None:
    line = evidence.host_wait_line(3, {"ns": busy + copies + drained, "busy_ns": busy, "transfer_ns": copies,
                                       "sync_wait_ns": drained, "other_idle_ns": 0})
    assert line.startswith(f"GPU 3: the processes driving it were blocked in synchronizing calls for "
                           f"{(busy + copies + drained) / 1000:.1f} us")
    assert line.endswith(ending)
