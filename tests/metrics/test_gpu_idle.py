"""gpu_idle: busy = union of each device's own work (kernels, whole-graph executions, device-local
copies and memsets), gaps, histogram, transfers over idle."""

from __future__ import annotations

import pytest

from tests import reference
from tests.conftest import GENERATIONS, analyze, ok, table
from tests.fixtures.builder import TraceBuilder

# Device 0: overlapping and touching kernels, then gaps of 5 ns, 10 us, 100 us, 1 ms, 20 ms.
DEV0 = (
    (1_000, 2_000),
    (1_500, 2_500),  # overlaps the first: the union counts it once
    (2_500, 3_000),  # touches the second: no gap
    (3_005, 3_010),
    (13_010, 13_020),
    (113_020, 113_030),
    (1_113_030, 1_113_040),
    (21_113_040, 21_113_050),
)
DEV1 = ((500, 700),)
GAPS0 = [(3_000, 3_005), (3_010, 13_010), (13_020, 113_020), (113_030, 1_113_030),
         (1_113_040, 21_113_040)]


COPY_TABLES = ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")


def idle_trace(version: str, copies: bool = True) -> TraceBuilder:
    b = TraceBuilder(version, omit=() if copies else COPY_TABLES)
    for s, e in DEV0:
        b.kernel(s, e, device=0, name="k0")
    for s, e in DEV1:
        b.kernel(s, e, device=1, name="k1")
    if copies:
        b.memcpy(3_000, 3_008, bytes=64, copy_kind=1, device=0)  # covers all of the 5 ns gap
        b.memcpy(3_010, 8_010, bytes=1 << 20, copy_kind=1, device=0)  # half of the 10 us gap
        b.memcpy(4_010, 6_010, bytes=1 << 20, copy_kind=1, device=0)  # inside the one above
        b.memcpy(113_030, 1_113_030, bytes=1 << 30, copy_kind=2, device=0)  # the whole 1 ms gap
        b.memcpy(13_020, 113_020, bytes=1 << 30, copy_kind=2, device=1)  # other device: ignored
    return b


@pytest.mark.parametrize("version", GENERATIONS)
def test_busy_idle_and_gaps_by_hand(version, build):
    data = ok(analyze(build(idle_trace(version))), "gpu_idle")
    devs = {d["device_id"]: d for d in data["devices"]}
    d0 = devs[0]
    assert (d0["window_start_ns"], d0["window_end_ns"]) == (1_000, 21_113_050)
    assert d0["busy_ns"] == 2_000 + 5 + 10 + 10 + 10 + 10
    assert d0["busy_ns"] == reference.union_length(DEV0)
    assert d0["idle_ns"] == 21_112_050 - 2_045
    assert d0["idle_ns"] == sum(e - s for s, e in GAPS0)
    assert d0["idle_pct"] == round(100 * 21_110_005 / 21_112_050, 2)
    assert d0["gap_count"] == 5
    assert d0["idle_covered_by_copies_ns"] == 5 + 5_000 + 1_000_000
    assert d0["idle_covered_by_copies_pct"] == round(100 * 1_005_005 / 21_110_005, 2)
    d1 = devs[1]
    assert (d1["busy_ns"], d1["idle_ns"], d1["idle_pct"], d1["gap_count"]) == (200, 0, 0.0, 0)
    assert d1["idle_covered_by_copies_ns"] == 0


@pytest.mark.parametrize("version", GENERATIONS)
def test_histogram_buckets(version, build):
    data = ok(analyze(build(idle_trace(version))), "gpu_idle")
    hist = {h["device_id"]: h["buckets"] for h in data["histograms"]}
    assert [b["label"] for b in hist[0]] == ["<10us", "10-100us", "0.1-1ms", "1-10ms", ">10ms"]
    # Bucket edges are lower-inclusive: exactly 10 us is "10-100us", exactly 1 ms is "1-10ms".
    assert [b["count"] for b in hist[0]] == [1, 1, 1, 1, 1]
    assert [b["total_ns"] for b in hist[0]] == [5, 10_000, 100_000, 1_000_000, 20_000_000]
    assert [b["count"] for b in hist[1]] == [0, 0, 0, 0, 0]


@pytest.mark.parametrize("version", GENERATIONS)
def test_min_gap_filter_and_max_gaps(version, build):
    report = analyze(build(idle_trace(version)), max_gaps=2)
    data = ok(report, "gpu_idle")
    assert data["min_gap_ns"] == 10_000
    assert data["gaps_listed"] == 4  # the 10 us gap is at the threshold and is listed
    gaps = [(g["device_id"], g["start_ns"], g["end_ns"], g["duration_ns"]) for g in data["gaps"]]
    assert gaps == [
        (0, 1_113_040, 21_113_040, 20_000_000),
        (0, 113_030, 1_113_030, 1_000_000),
    ]
    csv = table(report, "gpu_idle", "gpu_idle_gaps")
    assert [tuple(int(x) for x in r) for r in csv.itertuples(index=False)] == [
        (0, s, e, e - s) for s, e in GAPS0[1:]
    ]


def test_min_gap_zero_lists_every_gap(build):
    report = analyze(build(idle_trace("2024.6")), min_gap_us=0.0)
    data = ok(report, "gpu_idle")
    assert data["gaps_listed"] == 5
    csv = table(report, "gpu_idle", "gpu_idle_gaps")
    assert [(int(r.start_ns), int(r.end_ns)) for r in csv.itertuples()] == GAPS0
    for min_gap_us, listed in ((0.005, 5), (0.006, 4)):
        report = analyze(build(idle_trace("2024.6")), min_gap_us=min_gap_us)
        assert ok(report, "gpu_idle")["gaps_listed"] == listed


def test_max_gaps_zero_keeps_the_csv(build):
    report = analyze(build(idle_trace("2024.6")), max_gaps=0)
    assert ok(report, "gpu_idle")["gaps"] == []
    assert len(table(report, "gpu_idle", "gpu_idle_gaps")) == 4


def test_without_copy_tables_coverage_is_zero(build):
    d0 = ok(analyze(build(idle_trace("2024.6", copies=False))), "gpu_idle")["devices"][0]
    assert d0["device_id"] == 0
    assert d0["idle_covered_by_copies_ns"] == 0
    assert d0["busy_ns"] == 2_045


def test_host_bound_trace_lists_only_max_gaps_in_json(build):
    # 5000 kernels with a 20 us gap after each: every gap qualifies, report.json keeps 50.
    b = TraceBuilder("2024.6")
    b.bulk(
        "CUPTI_ACTIVITY_KIND_KERNEL",
        ("start", "end", "deviceId", "globalPid", "demangledName", "shortName", "correlationId"),
        ((i * 30_000, i * 30_000 + 10_000, 0, b.gpid(100), b.string("k"), b.string("k"), i + 1)
         for i in range(5_000)),
    )
    report = analyze(build(b))
    data = ok(report, "gpu_idle")
    assert data["devices"][0]["gap_count"] == 4_999
    assert data["devices"][0]["busy_ns"] == 5_000 * 10_000
    assert data["gaps_listed"] == 4_999
    assert len(data["gaps"]) == 50
    assert len(table(report, "gpu_idle", "gpu_idle_gaps")) == 4_999


def test_device_local_copies_and_memsets_are_busy_transfers_are_not(build):
    # Kernels [0, 10 us) and [100 us, 110 us); between them a memset [10, 20 us), a device-to-device
    # copy [30, 50 us), a peer copy (device-to-device to GPU 1) [60, 70 us) and a host-to-device copy
    # [80, 90 us). Busy: 10 + 10 + 20 + 10 = 50 us; idle 60 us, 20 us of it under transfers.
    b = TraceBuilder("2024.6")
    b.kernel(0, 10_000, device=0, name="k")
    b.kernel(100_000, 110_000, device=0, name="k")
    b.memset(10_000, 20_000, bytes=64, device=0)
    b.memcpy(30_000, 50_000, bytes=1 << 20, copy_kind=8, device=0)
    b.memcpy(60_000, 70_000, bytes=1 << 20, copy_kind=8, device=0, src_device=0, dst_device=1)
    b.memcpy(80_000, 90_000, bytes=1 << 20, copy_kind=1, device=0)
    b.memset(200_000, 300_000, bytes=64, device=3)  # a device that ran no kernel is not listed
    (d0,) = ok(analyze(build(b)), "gpu_idle")["devices"]
    assert (d0["device_id"], d0["window_start_ns"], d0["window_end_ns"]) == (0, 0, 110_000)
    assert (d0["busy_ns"], d0["idle_ns"], d0["gap_count"]) == (50_000, 60_000, 2)  # [20, 30), [50, 100)
    assert (d0["kernel_busy_ns"], d0["graph_busy_ns"], d0["device_copy_busy_ns"]) == (20_000, 0, 30_000)
    assert d0["idle_covered_by_copies_ns"] == 20_000


def test_graphs_traced_whole_are_busy(build):
    # A kernel [0, 10 us), a graph execution [20, 920 us) launched by call corr 5, a kernel
    # [930, 940 us); a second graph launch (corr 6) has no execution row: it cannot be placed.
    b = TraceBuilder("2024.6")
    b.runtime(0, 1_000, corr=4)
    b.kernel(2_000, 10_000, corr=4, name="k")
    b.runtime(1_000, 2_000, corr=5, name="cudaGraphLaunch_v10000")
    b.graph_trace(20_000, 920_000, corr=5)
    b.runtime(2_000, 3_000, corr=6, name="cudaGraphLaunch_v10000")
    b.runtime(3_000, 4_000, corr=7)
    b.kernel(930_000, 940_000, corr=7, name="k")
    data = ok(analyze(build(b)), "gpu_idle")
    (d0,) = data["devices"]
    assert (d0["window_start_ns"], d0["window_end_ns"]) == (2_000, 940_000)
    assert (d0["busy_ns"], d0["graph_busy_ns"], d0["kernel_busy_ns"]) == (8_000 + 900_000 + 10_000, 900_000, 18_000)
    assert d0["idle_ns"] == 10_000 + 10_000
    assert (data["graph_launches"], data["unplaced_graph_launches"]) == (2, 1)


def test_gpu_work_rows_and_the_kernels_own_arrays(build):
    """Kernels first, then device-local copies and memsets of compute devices (source, row in
    their table); with kernels alone the columns are the kernels' own arrays, not copies."""
    from nsys_llm_explainer.metrics.gpu_idle import DEVICE_COPY, KERNEL, MEMSET, gpu_work
    from nsys_llm_explainer.trace import formats

    b = TraceBuilder("2024.6")
    b.kernel(0, 10_000, device=0, name="k")
    b.kernel(100_000, 110_000, device=1, name="k")
    b.memcpy(30_000, 50_000, bytes=1 << 20, copy_kind=1, device=0)  # a transfer: not work
    b.memcpy(60_000, 70_000, bytes=1 << 20, copy_kind=8, device=1)
    b.memset(10_000, 20_000, bytes=64, device=0)
    b.memset(200_000, 300_000, bytes=64, device=3)  # no kernel ran there
    data = formats.open_trace(build(b), jobs=1)
    try:
        w = gpu_work(data)
        got = list(zip(w.start.tolist(), w.device.tolist(), w.source.tolist(), w.row.tolist(), strict=True))
        assert got == [(0, 0, KERNEL, 0), (100_000, 1, KERNEL, 1), (60_000, 1, DEVICE_COPY, 1),
                       (10_000, 0, MEMSET, 0)]
    finally:
        data.close()
    only = TraceBuilder("2024.6")
    only.kernel(0, 10, name="k")
    data = formats.open_trace(build(only), jobs=1)
    try:
        w, k = gpu_work(data), data.kernels()
        assert w.start is k.start and w.device is k.device and w.source.tolist() == [KERNEL]
    finally:
        data.close()
