"""idle_causes: one gap per cause with known answers, priority order, owners, exact sums."""

from __future__ import annotations

import jsonschema
import numpy as np
import pytest

from nsys_llm_explainer.schema import load_fragment
from tests.conftest import GENERATIONS, analyze, ok, table
from tests.fixtures.builder import TraceBuilder

SYNC = "cudaDeviceSynchronize_v3020"


def cause_trace(version: str) -> TraceBuilder:
    b = TraceBuilder(version)
    # Device 0, pid 100: gaps G1 [1000,2000] G2 [3000,5000] G3 [6000,10000] G4 [11000,20000]
    # G5 [21000,30000].
    for i, (s, e) in enumerate(
        (
            (0, 1_000),
            (2_000, 3_000),
            (5_000, 6_000),
            (10_000, 11_000),
            (20_000, 21_000),
            (30_000, 31_000),
        )
    ):
        b.kernel(s, e, pid=100, corr=100 + i, name=f"k{i}")
    b.runtime(500, 1_200, pid=100, corr=1, name=SYNC)  # G1: sync in flight at 1000, returns at 1200
    b.memcpy(3_000, 4_500, bytes=1024, copy_kind=1, pid=100)  # G2: copies cover 1500 of 2000
    for s, e in ((6_000, 7_000), (7_100, 8_000), (8_100, 9_500)):  # G3: launches cover 3300 of 4000
        b.runtime(s, e, pid=100, corr=200 + s)
    b.runtime(19_600, 19_700, pid=100, corr=104)  # launches k4, which ends G4 (host_other)
    b.nvtx(10_500, 19_500, text="schedule", pid=100)  # active at G4's middle on the launch thread
    b.runtime(24_000, 25_000, pid=100, corr=3, name="cudaMalloc_v3020")  # host visible until 25000
    # Device 1, pid 200: one gap [1000,3000], sync in flight at 1000 AND fully copied: sync wins;
    # the kernel ending it was launched at 100, before the gap: queued.
    b.kernel(0, 1_000, pid=200, device=1, corr=1, name="a")
    b.kernel(3_000, 4_000, pid=200, device=1, corr=2, name="b")
    b.runtime(100, 200, pid=200, corr=2)
    b.runtime(900, 1_100, pid=200, corr=3, name=SYNC)
    b.memcpy(1_000, 3_000, bytes=1024, copy_kind=1, pid=200, device=1)
    # Device 2, pid 300: gap [1000,5000]; pid 100's sync must not count (not an owner).
    b.kernel(0, 1_000, pid=300, device=2, corr=1, name="c")
    b.kernel(5_000, 6_000, pid=300, device=2, corr=2, name="c")
    b.runtime(100, 200, pid=300, corr=1)
    b.runtime(4_800, 4_900, pid=300, corr=2)
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
        "sync_wait": 1_000,
        "memcpy": 2_000,
        "launch_bound": 4_000,
        "host_other": 9_000,
        "capture_edge": 9_000,
    }
    assert all(d0[c]["gaps"] == 1 for c in data["causes"])
    assert d0["_"]["idle_ns"] == 25_000
    assert d0["_"]["refill"] == {
        "gaps": 1,
        "total_ns": 800,
        "p50_ns": 800,
        "p90_ns": 800,
        "max_ns": 800,
    }
    assert d0["_"]["dominant_cause"] == "host_other"  # tie with capture_edge: earlier cause wins
    assert dev[1]["sync_wait"]["idle_ns"] == 2_000 and dev[1]["_"]["queued_gaps"] == 1
    assert dev[1]["_"]["refill"]["total_ns"] == 1_900
    assert dev[2]["host_other"]["idle_ns"] == 4_000 and dev[2]["_"]["owner_pids"] == [300]


def test_causes_sum_to_gpu_idle_exactly(build):
    report = analyze(build(cause_trace("2024.6")))
    idle = {d["device_id"]: d["idle_ns"] for d in ok(report, "gpu_idle")["devices"]}
    for d in ok(report, "idle_causes")["devices"]:
        assert sum(c["idle_ns"] for c in d["causes"]) == d["idle_ns"] == idle[d["device_id"]]
        assert sum(c["gaps"] for c in d["causes"]) == d["gap_count"]


def test_top_gaps_carry_cause_and_nvtx_range(build):
    report = analyze(build(cause_trace("2024.6")), min_gap_us=0)
    top = ok(report, "idle_causes")["top_gaps"]
    g4 = next(g for g in top if g["device_id"] == 0 and g["start_ns"] == 11_000)
    assert (g4["cause"], g4["nvtx_range"], g4["refill_ns"]) == ("host_other", "schedule", None)
    g1 = next(g for g in top if g["device_id"] == 0 and g["start_ns"] == 1_000)
    assert (g1["cause"], g1["refill_ns"], g1["nvtx_range"]) == ("sync_wait", 800, None)
    gaps = table(report, "idle_causes", "idle_causes_gaps")
    assert len(gaps) == 7 and set(gaps["cause"]) == set(ok(report, "idle_causes")["causes"])


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
