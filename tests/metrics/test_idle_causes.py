"""idle_causes: one gap per cause with known answers, priority order, owners, exact sums."""

from __future__ import annotations

import jsonschema
import numpy as np
import pytest

from nsys_llm_explainer.schema import load_fragment
from tests.conftest import GENERATIONS, analyze, ok, table
from tests.fixtures import planted
from tests.fixtures.builder import TraceBuilder

SYNC = "cudaDeviceSynchronize_v3020"
MS = 1_000_000


def cause_trace(version: str) -> TraceBuilder:
    """Times in ms (x MS). Device 0, pid 100, kernels [0,1] [2,3] [5,6] [10,11] [20,21] [30,31]
    [40,41]: gaps G1 [1,2] G2 [3,5] G3 [6,10] G4 [11,20] G5 [21,30] G6 [31,40] (34 ms idle).

    G1: sync [0.5,1.2] + its refill launch [1.21,1.25] (10 us after the return) -> sync 0.25;
        a copy [1.5,1.6] -> transfer 0.1; the rest host_other 0.65.
    G2: copy [3,4.5] -> transfer 1.5; sync [3.2,4.8] covers only [4.5,4.8] -> sync 0.3
        (the next call is 1.2 ms later: no refill); host_other 0.2.
    G3: launches [6,7] [7.1,8] [8.1,9.5] -> launch_bound 3.3, host_other 0.7.
    G4: ncclAllReduce range [12,15] -> communication 3; launch [19.6,19.7] -> launch 0.1;
        host_other 5.9. A "schedule" range [10.5,19.5] is innermost at the middle (15.5).
    G5: the host's last call ends at 25 -> host_other [21,25] 4, capture_edge [25,30] 5.
    G6: capture_edge 9.
    Totals: transfer 1.6, communication 3, sync_wait 0.55, launch_bound 3.4, capture_edge 14,
    host_other 11.45 (sum 34).
    """
    b = TraceBuilder(version)
    for i, (s, e) in enumerate(((0, 1), (2, 3), (5, 6), (10, 11), (20, 21), (30, 31), (40, 41))):
        b.kernel(s * MS, e * MS, pid=100, corr=100 + i, name=f"k{i}")
    b.runtime(500_000, 1_200_000, pid=100, corr=1, name=SYNC)
    b.runtime(1_210_000, 1_250_000, pid=100, corr=2)
    b.memcpy(1_500_000, 1_600_000, bytes=1024, copy_kind=1, pid=100)
    b.memcpy(3 * MS, 4_500_000, bytes=1024, copy_kind=1, pid=100)
    b.runtime(3_200_000, 4_800_000, pid=100, corr=3, name=SYNC)
    for s, e in ((6_000_000, 7_000_000), (7_100_000, 8_000_000), (8_100_000, 9_500_000)):
        b.runtime(s, e, pid=100, corr=200 + s // 1000)
    b.nvtx(12 * MS, 15 * MS, text="ncclAllReduce", pid=100)
    b.nvtx(10_500_000, 19_500_000, text="schedule", pid=100)
    b.runtime(19_600_000, 19_700_000, pid=100, corr=104)  # launches k4, which ends G4
    b.runtime(24 * MS, 25 * MS, pid=100, corr=4, name="cudaMalloc_v3020")
    # Device 1, pid 200: gap [1,3]; a sync [0.9,1.1] is in flight but a copy on the kernel's
    # stream covers the whole gap: transfer wins (the host's wait cost the GPU nothing). The
    # kernel ending it was launched at 0.1, before the gap: queued, behind that copy.
    b.kernel(0, MS, pid=200, device=1, corr=1, name="a")
    b.kernel(3 * MS, 4 * MS, pid=200, device=1, corr=2, name="b")
    b.runtime(100_000, 200_000, pid=200, corr=2)
    b.runtime(900_000, 1_100_000, pid=200, corr=3, name=SYNC)
    b.memcpy(MS, 3 * MS, bytes=1024, copy_kind=1, pid=200, device=1)
    # Device 2, pid 300: gap [1,5]; pid 100's calls must not count (not an owner). Host
    # visible [0.1,4.9]: host_other [1,4.8] 3.8, launch_bound 0.1, capture_edge 0.1.
    b.kernel(0, MS, pid=300, device=2, corr=1, name="c")
    b.kernel(5 * MS, 6 * MS, pid=300, device=2, corr=2, name="c")
    b.runtime(100_000, 200_000, pid=300, corr=1)
    b.runtime(4_800_000, 4_900_000, pid=300, corr=2)
    return b


def by_device(data):
    return {
        d["device_id"]: {c["cause"]: c for c in d["causes"]} | {"_": d} for d in data["devices"]
    }


@pytest.mark.parametrize("version", GENERATIONS)
def test_each_cause_by_hand(version, build):
    report = analyze(build(cause_trace(version)), min_gap_us=0)
    data = ok(report, "idle_causes")
    jsonschema.validate(data, load_fragment("idle_causes"))
    dev = by_device(data)
    d0 = dev[0]
    assert {c: d0[c]["idle_ns"] for c in data["causes"]} == {
        "transfer": 1_600_000,
        "communication": 3_000_000,
        "sync_wait": 550_000,
        "launch_bound": 3_400_000,
        "capture_edge": 14_000_000,
        "host_other": 11_450_000,
        "device_wait": 0,
    }
    assert d0["_"]["idle_ns"] == 34_000_000
    # Gaps by the cause covering most of each: G1, G4 host_other; G2 transfer; G3 launch;
    # G5 (5 of 9 ms), G6 capture_edge.
    assert {c: d0[c]["gaps"] for c in data["causes"]} == {
        "transfer": 1, "communication": 0, "sync_wait": 0, "launch_bound": 1, "capture_edge": 2,
        "host_other": 2, "device_wait": 0,
    }
    refill = d0["_"]["refill"]  # G1: 2 - 1.2; G2: 5 - 4.8
    assert (refill["gaps"], refill["total_ns"], refill["max_ns"]) == (2, 1_000_000, 800_000)
    assert d0["_"]["dominant_cause"] == "capture_edge"
    assert dev[1]["transfer"]["idle_ns"] == 2_000_000 and dev[1]["sync_wait"]["idle_ns"] == 0
    assert (dev[1]["_"]["queued_gaps"], dev[1]["_"]["copy_ahead_gaps"]) == (1, 1)
    assert dev[1]["_"]["refill"]["total_ns"] == 1_900_000
    assert {c: dev[2][c]["idle_ns"] for c in ("host_other", "launch_bound", "capture_edge")} == {
        "host_other": 3_800_000, "launch_bound": 100_000, "capture_edge": 100_000,
    }
    assert dev[2]["_"]["owner_pids"] == [300]


US = 1_000
NCCL = "ncclKernel_AllReduce_RING_LL_Sum_bfloat16(ncclDevComm*, unsigned long, ncclWork*)"


def queued_trace() -> TraceBuilder:
    """Times in us. The host is blocked in a synchronize call through most gaps, yet the work
    that ends them was queued: that time is not the host's.

    Device 0, pid 100 (its first API call has correlation id 10): kernels A [0,100] corr 5 and
    B [300,400] corr 6 have no launch row and ids below 10: launched before the capture.
    C [600,700] was launched at 350, D [1000,1100] at 900. A sync is in flight [50,580].
    G1 [100,300] ends at B (queued: device_wait 200); G2 [400,600] ends at C (queued: device_wait
    200); G3 [700,1000] ends at D, launched late: host_other [700,900] 200, launch_bound 10,
    capture_edge [910,1000] 90 (the last API call ends at 910).

    Device 1, pid 200: compute X [0,100], an all-reduce [50,300] on stream 13, Y [400,500] and
    Z [600,700] launched at 10 and 30; a sync is in flight [45,800]. G1 [300,400] begins where
    the all-reduce ends: communication 100; G2 [500,600] begins at Y's end: device_wait 100.
    """
    b = TraceBuilder("2024.6")
    b.kernel(0, 100 * US, pid=100, corr=5, name="a")
    b.kernel(300 * US, 400 * US, pid=100, corr=6, name="a")
    b.kernel(600 * US, 700 * US, pid=100, corr=10, name="a")
    b.kernel(1000 * US, 1100 * US, pid=100, corr=11, name="a")
    b.runtime(350 * US, 360 * US, pid=100, corr=10)
    b.runtime(900 * US, 910 * US, pid=100, corr=11)
    b.runtime(50 * US, 580 * US, pid=100, tid=101, corr=12, name=SYNC)
    b.kernel(0, 100 * US, pid=200, device=1, corr=20, name="x")
    b.kernel(50 * US, 300 * US, pid=200, device=1, stream=13, corr=21, name=NCCL)
    b.kernel(400 * US, 500 * US, pid=200, device=1, corr=22, name="y")
    b.kernel(600 * US, 700 * US, pid=200, device=1, corr=23, name="z")
    for corr, (s, e) in zip((20, 21, 22, 23), ((0, 5), (5, 10), (10, 20), (30, 40)), strict=True):
        b.runtime(s * US, e * US, pid=200, corr=corr)
    b.runtime(45 * US, 800 * US, pid=200, tid=201, corr=24, name=SYNC)
    return b


def test_queued_gaps_are_not_host_time(build):
    data = ok(analyze(build(queued_trace()), min_gap_us=0), "idle_causes")
    dev = by_device(data)
    assert {c: dev[0][c]["idle_ns"] for c in data["causes"]} == {
        "transfer": 0, "communication": 0, "sync_wait": 0, "launch_bound": 10 * US, "capture_edge": 90 * US,
        "host_other": 200 * US, "device_wait": 400 * US,
    }
    assert (dev[0]["_"]["gap_count"], dev[0]["_"]["launch_known_gaps"], dev[0]["_"]["queued_gaps"]) == (3, 3, 2)
    assert {c: dev[1][c]["idle_ns"] for c in ("communication", "sync_wait", "device_wait")} == {
        "communication": 100 * US, "sync_wait": 0, "device_wait": 100 * US,
    }
    assert (dev[1]["_"]["queued_gaps"], dev[1]["_"]["dependency_ns"]) == (2, 100 * US)
    # Device 0's sync [50,580] overlapped its work [50,100] and [300,400], and 380 us of idle
    # with work queued.
    assert dev[0]["_"]["host_blocked"] == {"ns": 530 * US, "busy_ns": 150 * US, "transfer_ns": 0,
                                           "sync_wait_ns": 0, "other_idle_ns": 380 * US}


def test_a_host_barely_ahead_is_launch_bound(build):
    # Kernels of 4 us launched by calls of 5 us (planted.Sim): kernel k runs [h+8, h+12] after its
    # call [h, h+5]; the next call [h+5, h+10] returned only 2 us before the 1 us gap [h+12, h+13]
    # began, so the host's issue rate limits the GPU: launch_bound (the call [h+10, h+15] is in
    # flight; for the last gap the final synchronize is), never device_wait.
    b = TraceBuilder("2024.6")
    b.process(100)
    sim = planted.Sim(b)
    for _ in range(200):
        sim.launch(4 * US)
    sim.sync()
    (d,) = ok(analyze(build(b), min_gap_us=0), "idle_causes")["devices"]
    causes = {c["cause"]: c["idle_ns"] for c in d["causes"]}
    assert (causes["launch_bound"], causes["sync_wait"], causes["device_wait"]) == (198 * US, 1 * US, 0)
    assert d["queued_gaps"] == 0


def test_causes_sum_to_gpu_idle_exactly(build):
    report = analyze(build(cause_trace("2024.6")))
    idle = {d["device_id"]: d["idle_ns"] for d in ok(report, "gpu_idle")["devices"]}
    for d in ok(report, "idle_causes")["devices"]:
        assert sum(c["idle_ns"] for c in d["causes"]) == d["idle_ns"] == idle[d["device_id"]]
        assert sum(c["gaps"] for c in d["causes"]) == d["gap_count"]


def test_top_gaps_carry_cause_and_nvtx_range(build):
    report = analyze(build(cause_trace("2024.6")), min_gap_us=0)
    top = ok(report, "idle_causes")["top_gaps"]
    g4 = next(g for g in top if g["device_id"] == 0 and g["start_ns"] == 11 * MS)
    assert (g4["cause"], g4["nvtx_range"], g4["refill_ns"]) == ("host_other", "schedule", None)
    assert (g4["communication_ns"], g4["launch_bound_ns"]) == (3 * MS, 100_000)
    g1 = next(g for g in top if g["device_id"] == 0 and g["start_ns"] == MS)
    assert (g1["sync_wait_ns"], g1["transfer_ns"], g1["refill_ns"]) == (250_000, 100_000, 800_000)
    gaps = table(report, "idle_causes", "idle_causes_gaps")
    assert len(gaps) == 8
    parts = gaps[[f"{c}_ns" for c in ok(report, "idle_causes")["causes"]]].sum(axis=1)
    assert (parts == gaps["duration_ns"]).all()


def reference_gaps(kernels: list[tuple[int, int]]) -> int:
    """Idle time of one device by brute force over every nanosecond-free interval walk."""
    ks = sorted(kernels)
    idle, reach = 0, ks[0][1]
    for s, e in ks[1:]:
        if s > reach:
            idle += s - reach
        reach = max(reach, e)
    return idle


@pytest.mark.parametrize("seed", range(4))
def test_random_traces_sum_exactly(seed, build):
    rng = np.random.default_rng(seed)
    b = TraceBuilder("2024.6")
    kernels: dict[int, list[tuple[int, int]]] = {0: [], 1: []}
    t = 0
    for i in range(300):
        pid, dev = (100, 0) if rng.random() < 0.6 else (200, 1)
        t += int(rng.integers(0, 5_000))
        launch = t - int(rng.integers(-200, 3_000))  # sometimes after the kernel start: skew
        dur = int(rng.integers(1, 4_000))
        b.runtime(launch, launch + int(rng.integers(1, 2_000)), pid=pid, corr=i + 1)
        b.kernel(t, t + dur, pid=pid, device=dev, corr=i + 1, stream=int(rng.integers(1, 3)))
        kernels[dev].append((t, t + dur))
        if rng.random() < 0.1:
            b.runtime(t, t + int(rng.integers(1, 9_000)), pid=pid, corr=10_000 + i, name=SYNC)
        if rng.random() < 0.1:
            b.memcpy(t, t + int(rng.integers(1, 9_000)), bytes=8, copy_kind=1, pid=pid, device=dev)
    report = analyze(build(b))
    for d in ok(report, "idle_causes")["devices"]:
        assert (
            sum(c["idle_ns"] for c in d["causes"])
            == d["idle_ns"]
            == reference_gaps(kernels[d["device_id"]])
        )
    lo = ok(report, "launch_overhead")
    assert lo["global"]["latency_p50_ns"] >= 0 and lo["skew_clamped"] > 0
    assert all(p[k] >= 0 for p in lo["processes"] for k in p if k.startswith("latency_"))
