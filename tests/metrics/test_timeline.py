"""metrics.timeline: bins, busy shares, device windows and NVTX bands; hand-computed answers."""

from __future__ import annotations

import numpy as np
import pytest

from nsys_llm_explainer.metrics.timeline import BINS, band_name, bin_edges, runs
from nsys_llm_explainer.options import PhaseMap
from tests.conftest import GENERATIONS, analyze, ok, skipped
from tests.fixtures import variants
from tests.fixtures.builder import TraceBuilder


def test_bin_edges_are_exact_integers_covering_the_window():
    e = bin_edges(100, 10_100)
    assert len(e) == BINS + 1 and e[0] == 100 and e[-1] == 10_100
    assert set(np.diff(e).tolist()) == {10}
    odd = bin_edges(0, 1_003)  # 1003 ns in 1000 bins: widths 1 or 2, summing exactly
    assert int(np.diff(odd).sum()) == 1_003 and set(np.diff(odd).tolist()) <= {1, 2}
    assert len(bin_edges(0, 7)) == 8  # never more bins than nanoseconds


def test_runs():
    assert runs(np.array([0, 1, 1, 0, 1], dtype=bool)) == [[1, 3], [4, 5]]
    assert runs(np.zeros(3, dtype=bool)) == []


@pytest.mark.parametrize("version", GENERATIONS)
def test_busy_share_per_bin_and_device_window(build, version):
    b = TraceBuilder(version)
    b.process(100)
    # Device 0 spans the whole window 0..10,000 ns: 1000 bins of 10 ns.
    b.kernel(0, 2_500, device=0)
    b.kernel(2_505, 2_510, device=0)  # half of bin 250
    b.kernel(5_000, 10_000, device=0)
    b.kernel(1_000, 3_000, device=1)  # device 1's own window is bins 100..299
    tl = ok(analyze(build(b)), "timeline")
    assert tl["bins"] == 1000 and tl["window_start_ns"] == 0 and tl["window_end_ns"] == 10_000
    assert tl["bin_ns"] == 10.0
    d0, d1 = tl["devices"]
    assert d0["device_id"] == 0 and d1["device_id"] == 1
    assert d0["busy_pct"][:250] == [100.0] * 250
    assert d0["busy_pct"][250] == 50.0
    assert d0["busy_pct"][251:500] == [0.0] * 249
    assert d0["busy_pct"][500:] == [100.0] * 500
    assert d1["busy_pct"][:100] == [None] * 100 and d1["busy_pct"][300:] == [None] * 700
    assert d1["busy_pct"][100:300] == [100.0] * 200


def test_top_level_bands_merge_names_and_skip_nested_ranges(build):
    b = TraceBuilder("2024.6")
    b.process(100)
    b.kernel(0, 10_000)
    b.nvtx(0, 5_000, text="forward, op_id = 1")
    b.nvtx(100, 200, text="inner")  # nested in forward: not a band
    b.nvtx(7_000, 8_000, text="forward, op_id = 2")
    b.nvtx(8_000, 9_000, text="sample")
    tl = ok(analyze(build(b)), "timeline")
    assert tl["bands_source"] == "top_level_nvtx"
    by_name = {x["name"]: x for x in tl["bands"]}
    assert set(by_name) == {"forward", "sample"}
    assert by_name["forward"]["covered_ns"] == 6_000
    assert by_name["forward"]["runs"] == [[0, 500], [700, 800]]
    assert by_name["sample"]["runs"] == [[800, 900]]
    assert [x["name"] for x in tl["bands"]] == ["forward", "sample"]  # by time, descending


def test_phase_map_bands(build):
    b = TraceBuilder("2024.6")
    b.process(100)
    b.kernel(0, 1_000)
    b.nvtx(0, 300, text="prefill step")
    b.nvtx(600, 900, text="decode step")
    b.nvtx(650, 700, text="attention")
    pm = PhaseMap((("prefill", "prefill"), ("decode", "decode"), ("idle", "nothing matches")))
    tl = ok(analyze(build(b), phase_map=pm), "timeline")
    assert tl["bands_source"] == "phase_map"
    assert [(x["name"], x["covered_ns"], x["runs"]) for x in tl["bands"]] == [
        ("prefill", 300, [[0, 300]]),
        ("decode", 300, [[600, 900]]),
    ]


def test_band_name_strips_trailing_annotations():
    assert band_name("aten::mm, seq = 4, op_id = 17") == "aten::mm"
    assert band_name("ProfilerStep#551") == "ProfilerStep#N"  # numbered repeats share a band
    assert band_name("step#2 warmup") == "step#2 warmup"
    assert band_name("decode") == "decode"
    assert band_name(", op_id = 3") == ", op_id = 3"  # never empty


def test_without_nvtx_there_are_no_bands_and_a_reason(build):
    b = TraceBuilder("2024.6")
    b.process(100)
    b.kernel(0, 1_000)
    tl = ok(analyze(build(b)), "timeline")
    assert tl["bands"] == [] and tl["bands_reason"]


def test_skipped_without_kernels(tmp_path):
    reason = skipped(analyze(variants.no_kernels(tmp_path / "t.sqlite", "2024.6")), "timeline")
    assert "kernel" in reason


def test_idle_causes_colour_the_idle_bins(build):
    b = TraceBuilder("2024.6")
    b.process(100)
    b.runtime(0, 10, corr=1)
    b.kernel(20, 1_000, corr=1)
    b.runtime(1_000, 9_000, name="cudaDeviceSynchronize_v3020")  # host waits across the gap
    b.runtime(9_000, 9_010, corr=2)
    b.kernel(9_020, 10_000, corr=2)
    report = analyze(build(b))
    tl = ok(report, "timeline")
    if report.ok("idle_causes") is None:
        pytest.skip("the idle_causes metric is not registered in this tree")
    causes = tl["causes"]
    codes = tl["devices"][0]["idle_cause"]
    assert len(codes) == tl["bins"]
    gap_bins = {codes[i] for i in range(110, 890)}  # bins fully inside the 1,000..9,020 gap
    assert len(gap_bins) == 1 and causes[gap_bins.pop()] == "sync_wait"
    assert codes[50] == -1  # a fully busy bin has no idle cause


def test_numbered_steps_are_one_band_in_time_order(build):
    b = TraceBuilder("2024.6")
    b.process(100)
    b.kernel(0, 10_000)
    for n, (start, end) in zip((552, 550, 551), ((6_000, 9_000), (0, 2_000), (2_500, 5_000)), strict=True):
        b.nvtx(start, end, text=f"ProfilerStep#{n}")
    tl = ok(analyze(build(b)), "timeline")
    assert [(x["name"], x["covered_ns"], x["runs"]) for x in tl["bands"]] == [
        ("ProfilerStep#N", 2_000 + 2_500 + 3_000, [[0, 200], [250, 500], [600, 900]]),
    ]
