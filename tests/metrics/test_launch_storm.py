"""launch_storm: launch rate over the active kernel window, tiny shares, storm thresholds."""

from __future__ import annotations

import pytest

from nsys_llm_explainer.metrics import launch_storm
from tests.conftest import GENERATIONS, analyze, ok
from tests.fixtures.builder import TraceBuilder


def periodic(version: str, n: int, every_ns: int, dur_ns: int, pid: int = 100) -> TraceBuilder:
    b = TraceBuilder(version)
    for i in range(n):
        b.kernel(i * every_ns, i * every_ns + dur_ns, pid=pid, name="k")
    return b


@pytest.mark.parametrize("version", GENERATIONS)
def test_rate_is_kernels_over_active_window(version, build):
    # 10 kernels every 20 us, the last one 20 us long: window 9 * 20_000 + 20_000 = 200 us
    # (not the 10 kernel durations, not the first-to-last start) -> exactly 50,000/s.
    b = TraceBuilder(version)
    for i in range(10):
        dur = 20_000 if i == 9 else 10_000
        b.kernel(1_000_000 + i * 20_000, 1_000_000 + i * 20_000 + dur, name="k")
    g = ok(analyze(build(b)), "launch_storm")["global"]
    assert (g["kernels"], g["window_ns"]) == (10, 200_000)
    assert g["launches_per_s"] == 50_000.0
    # Nearest rank of 10: p90 is the 9th value (10 us), p99 the 10th (20 us).
    assert (g["p50_ns"], g["p90_ns"], g["p99_ns"]) == (10_000, 10_000, 20_000)
    assert g["storm"] is True  # exactly at both thresholds: >= 50,000/s and p50 <= 10 us


@pytest.mark.parametrize("version", GENERATIONS)
def test_storm_by_the_first_branch(version, build):
    # 1000 kernels of 2 us every 10 us: window 9_992_000 ns -> 100,080.1 launches/s.
    g = ok(analyze(build(periodic(version, 1000, 10_000, 2_000))), "launch_storm")["global"]
    assert g["window_ns"] == 9_992_000
    assert g["launches_per_s"] == pytest.approx(100_080.1, abs=0.05)
    assert g["p50_ns"] == 2_000
    assert g["pct_under_5us"] == 100.0
    assert g["storm"] is True


def test_storm_by_the_severe_branch_only(build):
    # 15 us kernels every 9 us (overlapping streams): 111,037/s; p50 15 us > 10 us but <= 20 us.
    g = ok(analyze(build(periodic("2024.6", 1000, 9_000, 15_000))), "launch_storm")["global"]
    assert g["launches_per_s"] == pytest.approx(111_037.1, abs=0.05)
    assert g["p50_ns"] == 15_000
    assert g["pct_under_10us"] == 0.0 and g["pct_under_20us"] == 100.0
    assert g["storm"] is True


@pytest.mark.parametrize(
    ("every_ns", "dur_ns"),
    [
        (9_000, 25_000),  # > 100,000/s but p50 25 us: too long for either branch
        (16_000, 15_000),  # ~62,500/s with p50 15 us: rate too low for the severe branch
        (25_000, 2_000),  # ~40,000/s with tiny kernels: rate too low for the first branch
    ],
)
def test_not_a_storm(every_ns, dur_ns, build):
    g = ok(analyze(build(periodic("2024.6", 200, every_ns, dur_ns))), "launch_storm")["global"]
    assert g["storm"] is False


@pytest.mark.parametrize(
    ("rate", "p50", "storm"),
    [
        (50_000, 10_000, True),
        (49_999.9, 10_000, False),
        (50_000, 10_001, False),
        (100_000, 20_000, True),
        (99_999.9, 20_000, False),
        (100_000, 20_001, False),
        (10_000_000, 1, True),
    ],
)
def test_is_storm_thresholds(rate, p50, storm):
    assert launch_storm.STORM_RATE_PER_S == 50_000 and launch_storm.STORM_P50_NS == 10_000
    assert launch_storm.SEVERE_STORM_RATE_PER_S == 100_000
    assert launch_storm.SEVERE_STORM_P50_NS == 20_000
    assert launch_storm.is_storm(rate, p50) is storm


@pytest.mark.parametrize("version", GENERATIONS)
def test_tiny_shares_are_strictly_under_the_threshold(version, build):
    durations = (4_999, 5_000, 9_999, 10_000, 19_999, 20_000, 30_000)
    b = TraceBuilder(version)
    for i, d in enumerate(durations):
        b.kernel(i * 100_000, i * 100_000 + d, name=f"k{i}")
    g = ok(analyze(build(b)), "launch_storm")["global"]
    assert g["pct_under_5us"] == round(100 * 1 / 7, 2)
    assert g["pct_under_10us"] == round(100 * 3 / 7, 2)
    assert g["pct_under_20us"] == round(100 * 5 / 7, 2)


def test_tiny_kernel_table_and_per_process_windows(build):
    b = TraceBuilder("2024.6")
    # pid 100: 4 x "small" (1 us) and 1 x "big" (50 us) in 0..100_000.
    for i in range(4):
        b.kernel(i * 10_000, i * 10_000 + 1_000, pid=100, name="small")
    b.kernel(50_000, 100_000, pid=100, name="big")
    # pid 200: 2 x "mid" (8 us) and 1 x "small" in 1_000_000..1_020_000.
    b.kernel(1_000_000, 1_008_000, pid=200, name="mid")
    b.kernel(1_010_000, 1_018_000, pid=200, name="mid")
    b.kernel(1_019_000, 1_020_000, pid=200, name="small")
    data = ok(analyze(build(b)), "launch_storm")
    assert data["global"]["kernels"] == 8
    assert data["global"]["window_ns"] == 1_020_000
    assert data["global"]["launches_per_s"] == round(8 / 1_020_000e-9, 1)
    tiny = [(t["name"], t["calls"], t["total_ns"], t["p50_ns"], t["pct_of_launches"])
            for t in data["tiny_kernels"]]
    assert tiny == [("small", 5, 5_000, 1_000, 62.5), ("mid", 2, 16_000, 8_000, 25.0)]
    procs = {p["pid"]: p for p in data["processes"]}
    assert [p["pid"] for p in data["processes"]] == [100, 200]  # by kernel count
    assert (procs[100]["kernels"], procs[100]["window_ns"]) == (5, 100_000)
    assert procs[100]["launches_per_s"] == 50_000.0
    assert procs[100]["p50_ns"] == 1_000
    assert (procs[200]["kernels"], procs[200]["window_ns"]) == (3, 20_000)
    assert procs[200]["launches_per_s"] == 150_000.0
    assert procs[200]["p50_ns"] == 8_000
    assert procs[100]["storm"] is True and procs[200]["storm"] is True
