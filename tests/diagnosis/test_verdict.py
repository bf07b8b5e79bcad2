"""The verdict's decision rule on per-device buckets given by hand (diagnosis/verdict.py), and
what the host's blocking calls are said to have waited for (diagnosis/evidence.py)."""

from __future__ import annotations

from typing import Any

import pytest

from nsys_llm_explainer.diagnosis import accounting, diagnose, evidence, verdict
from nsys_llm_explainer.model import Confidence, TraceInfo
from nsys_llm_explainer.results.devices import HostBlocked
from tests.rule_inputs import WINDOW, device_metrics, outcomes

PCT = WINDOW // 100  # 1% of the 1 ms window
TRACE = TraceInfo("t.sqlite", 1, None, None, (), (), 0, WINDOW, {})


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
    # Compute 80%, host 20%: GPU-bound (compute >= 50% and >= 2x the host), host named second.
    ({"host_other": 20 * PCT}, ("gpu_bound", "compute", "host", Confidence.HIGH)),
    # Compute 79%, host 21%: still GPU-bound, never host-bound while the GPU is busy most of the time.
    ({"host_other": 21 * PCT}, ("gpu_bound", "compute", "host", Confidence.HIGH)),
    # Compute 60%, host 25%, transfer 15%: GPU-bound; 60 < 3 x 25, so medium.
    ({"host_other": 25 * PCT, "transfer": 15 * PCT}, ("gpu_bound", "compute", "host", Confidence.MEDIUM)),
    # Compute 55%, host 45%: busy most of the time but under 2x the host: mixed, both named.
    ({"host_other": 45 * PCT}, ("mixed", "compute", "host", Confidence.MEDIUM)),
    # Compute 30%, transfer 70%: transfer-bound, the GPU's work second.
    ({"transfer": 70 * PCT}, ("transfer_bound", "transfer", "compute", Confidence.HIGH)),
    # Compute 45%, host 55%: host leads by under 1.25x, compute >= 40%: mixed, host first.
    ({"host_other": 55 * PCT}, ("mixed", "host", "compute", Confidence.LOW)),
    # Compute 35%, host 40%, transfer 25%: the GPU is clearly underused (< 40%): host-bound; its
    # rival is the GPU's work (40 vs 35: under 1.25x): low confidence.
    ({"host_other": 40 * PCT, "transfer": 25 * PCT}, ("host_bound", "host", "compute", Confidence.LOW)),
    # Compute 20%, host 42%, sync 38%: two idle causes within 1.25x: mixed.
    ({"host_other": 42 * PCT, "sync_wait": 38 * PCT}, ("mixed", "host", "sync", Confidence.LOW)),
    # Compute 60%, 30% queued work waiting, 10% host: GPU-bound (the GPU works through its own queue).
    ({"device_wait": 30 * PCT, "launch_bound": 10 * PCT}, ("gpu_bound", "compute", "host", Confidence.HIGH)),
])
def test_gpu_bound_unless_an_idle_cause_outweighs_the_gpus_own_work(
    idle: dict[str, int], expected: tuple[str, str, str, Confidence]
) -> None:
    d = decide(idle)
    assert (d.verdict, d.cause, d.second, d.confidence) == expected


def test_exposed_communication_is_second_to_a_busy_gpu() -> None:
    # 80.2% busy: 62.6% compute and 17.6% communication kernels with nothing beside them, 0.4%
    # idle waiting on them, 19.4% host. Communication holds 18.0%: GPU-bound, never
    # communication-bound, and the summary's busy figure is the key numbers' 80.2%.
    buckets = {"exposed": 176 * PCT // 10, "communication": 4 * PCT // 10, "host_other": 194 * PCT // 10}
    metrics = outcomes(device_metrics({0: buckets}))
    acct = accounting.build(metrics)
    d = verdict.decide(metrics, acct)
    assert (d.verdict, d.cause, d.second) == ("gpu_bound", "compute", "host")
    diag = diagnose(TRACE, metrics, acct)
    assert diag.summary.startswith("GPU-bound: GPU 0 is busy 80.2% of its window")
    assert diag.second is not None and diag.second["kind"] == "host"
    assert "62.6%" not in diag.summary


@pytest.mark.parametrize(("a", "b", "same"), [
    (("gpu_bound", "compute", "host"), ("mixed", "compute", "host"), True),
    (("mixed", "compute", "host"), ("host_bound", "host", "compute"), True),
    (("gpu_bound", "compute", "host"), ("host_bound", "host", "compute"), False),
    (("host_bound", "host", "sync"), ("mixed", "sync", "host"), True),
    (("host_bound", "host", "sync"), ("sync_bound", "sync", "host"), False),
    (("transfer_bound", "transfer", None), ("transfer_bound", "transfer", "compute"), True),
])
def test_verdicts_agree_when_they_name_the_same_lead(a, b, same) -> None:
    da = verdict.Decision(a[0], a[1], Confidence.HIGH, second=a[2])
    db = verdict.Decision(b[0], b[1], Confidence.HIGH, second=b[2])
    assert verdict.agree(da, db) is same and verdict.agree(db, da) is same


def test_a_few_percent_never_turns_one_cause_into_another() -> None:
    # Every split of the window into compute and the four idle causes on a 2% grid, against the
    # same split moved by up to 5% of each share (two captures of one workload): the verdicts agree.
    import itertools

    causes = ("transfer", "communication", "sync", "host")
    steps = range(0, 101, 4)
    checked = 0
    for c, t, m, s in itertools.product(steps, steps, steps, steps):
        h = 100 - c - t - m - s
        if h < 0:
            continue
        shares = dict(zip(causes, (t, m, s, h), strict=True))
        for scale in (0.95, 1.05):
            moved = {k: v * (scale if k == "host" else 1.0) for k, v in shares.items()}
            base = _rule(c, shares)
            other = _rule(c * (2.0 - scale), moved)
            assert verdict.agree(base, other), (c, shares, base, other)
            checked += 1
    assert checked > 1000


def _rule(compute: float, shares: dict[str, float]) -> verdict.Decision:
    idle = sorted(((k, int(v * PCT)) for k, v in shares.items()),
                  key=lambda kv: (-kv[1], verdict.IDLE_CAUSES.index(kv[0])))
    return verdict.rule(int(compute * PCT), 100 * PCT, idle, 0)


def test_unexplained_idle_beyond_busy_time_is_insufficient_data() -> None:
    # 55% capture_edge against 45% busy: nothing names the idle time.
    d = decide({"capture_edge": 55 * PCT})
    assert (d.verdict, d.cause) == ("insufficient_data", None)
    assert "55.0%" in (d.why or "") and "made no CUDA call" in (d.why or "")
    # The same without the CUDA API table (idle_causes skipped): all idle is unexplained.
    d = decide({"capture_edge": 95 * PCT}, skipped={"idle_causes": "the CUDA API table is empty"})
    assert d.verdict == "insufficient_data" and "no CUDA API rows" in (d.why or "")
    # 45% unexplained against 55% busy: judged, GPU-bound but not sure (no idle cause has time).
    d = decide({"capture_edge": 45 * PCT}, skipped={"idle_causes": "the CUDA API table is empty"})
    assert (d.verdict, d.confidence) == ("gpu_bound", Confidence.LOW)


def test_queued_waits_on_a_device_running_collectives_point_at_the_peers() -> None:
    # 60% queued work waiting on something the trace does not name, 40% busy: not judged.
    d = decide({"device_wait": 60 * PCT})
    assert (d.verdict, d.cause) == ("insufficient_data", None)
    assert "60.0%" in (d.why or "") and "peer rank" not in (d.why or "")
    # The same device also spent 2.5 ms in communication kernels (their union, as NLE307 states
    # it; 2.6 ms summed, two overlapped): the likely dependency is named.
    row = {"device_id": 0, "comm_kernels": 3, "comm_kernel_ns": 2_600_000, "comm_union_ns": 2_500_000,
           "overlapped_ns": 0, "exposed_ns": 0, "overlap_pct": 0.0, "window_ns": 100 * PCT,
           "exposed_pct_of_window": 0.0, "shared_streams": [], "shared_stream_comm_ns": 0}
    comm = {"comm_kernel_ns": 2_600_000, "devices": [row]}
    d = decide({"device_wait": 60 * PCT}, extra={"communication": comm})
    assert (d.verdict, d.confidence) == ("insufficient_data", Confidence.MEDIUM)
    assert "2.50 ms of communication kernels" in (d.why or "") and "peer rank" in (d.why or "")


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
    assert (d.verdict, d.confidence) == ("gpu_bound", Confidence.MEDIUM)


@pytest.mark.parametrize("busy, copies, drained, ending", [
    (1_000, 9_000, 500, "the host simply waited for the copies"),
    (9_000, 1_000, 500, "the host mostly waited for the GPU's own work, which costs the GPU nothing"),
    (1_000, 1_000, 8_000, "the GPU drained while the host waited"),
])
def test_what_the_host_waited_for(busy: int, copies: int, drained: int, ending: str) -> None:
    line = evidence.host_wait_line(3, HostBlocked(ns=busy + copies + drained, busy_ns=busy, transfer_ns=copies,
                                                  sync_wait_ns=drained, other_idle_ns=0))
    assert line.startswith(f"GPU 3: the processes driving it were blocked in synchronizing calls for "
                           f"{(busy + copies + drained) / 1000:.1f} µs")
    assert line.endswith(ending)
