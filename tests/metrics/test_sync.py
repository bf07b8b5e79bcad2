"""sync: blocking vs non-blocking API calls, suffixes stripped, global and per process."""

from __future__ import annotations

import pytest

from nsys_llm_explainer.analysis.blocking import classify
from tests.conftest import GENERATIONS, analyze, ok, table
from tests.fixtures.builder import TraceBuilder

# (pid, api as recorded, start, end)
CALLS = (
    (100, "cudaDeviceSynchronize_v3020", 1_000, 4_000),
    (100, "cudaStreamSynchronize_v3020", 5_000, 5_500),
    (100, "cudaStreamSynchronize_v3020", 6_000, 6_700),
    (100, "cudaMemcpy_v3020", 7_000, 9_000),
    (100, "cudaMemcpyAsync_v3020", 9_100, 9_200),
    (100, "cudaStreamWaitEvent_v3020", 9_300, 9_310),
    (100, "cudaEventQuery_v3020", 9_400, 9_405),
    (100, "cudaLaunchKernel_v7000", 9_500, 9_600),
    (100, "cuCtxSynchronize", 10_000, 10_100),
    (100, "cudaMemcpyToSymbol_v3020", 10_500, 10_800),
    (200, "cudaEventSynchronize_v3020", 1_000, 2_000),
    (200, "cudaMemcpyAsync_v3020", 2_000, 2_100),
)


def sync_trace(version: str) -> TraceBuilder:
    b = TraceBuilder(version)
    for pid in (100, 200):
        b.process(pid)
    for pid, api, start, end in CALLS:
        b.runtime(start, end, pid=pid, name=api)
    return b


@pytest.mark.parametrize(
    ("api", "kind"),
    [
        ("cudaDeviceSynchronize", "blocking"),
        ("cudaStreamSynchronize", "blocking"),
        ("cudaEventSynchronize", "blocking"),
        ("cuCtxSynchronize", "blocking"),
        ("cuStreamSynchronize", "blocking"),
        ("cuEventSynchronize", "blocking"),
        ("cudaMemcpy", "blocking"),
        ("cudaMemcpy2D", "blocking"),
        ("cudaMemcpyToSymbol", "blocking"),
        ("cuMemcpyDtoH", "blocking"),
        ("cudaMemcpyAsync", None),
        ("cudaMemcpy2DAsync", None),
        ("cuMemcpyHtoDAsync", None),
        ("cudaStreamWaitEvent", "non_blocking"),
        ("cudaEventQuery", "non_blocking"),
        ("cudaStreamQuery", "non_blocking"),
        ("cudaLaunchKernel", None),
        ("cudaMalloc", None),
        ("cudaMemset", None),
    ],
)
def test_classify(api, kind):
    assert classify(api) == kind


@pytest.mark.parametrize("version", GENERATIONS)
def test_global_totals_and_table(version, build):
    report = analyze(build(sync_trace(version)))
    data = ok(report, "sync")
    assert data["blocking_calls"] == 7
    assert data["blocking_ns"] == 3_000 + 1_200 + 2_000 + 100 + 300 + 1_000
    assert data["api_window_ns"] == 10_800 - 1_000
    # pid 200's [1000, 2000] lies inside pid 100's [1000, 4000]: the wall-clock union is 6,600.
    assert data["blocking_wall_ns"] == 6_600
    assert data["blocking_pct_of_window"] == round(100 * 6_600 / 9_800, 2)
    calls = [(c["api"], c["calls"], c["total_ns"], c["avg_ns"], c["blocking"])
             for c in data["calls"]]
    assert calls == [
        ("cudaDeviceSynchronize", 1, 3_000, 3_000, True),
        ("cudaMemcpy", 1, 2_000, 2_000, True),
        ("cudaStreamSynchronize", 2, 1_200, 600, True),
        ("cudaEventSynchronize", 1, 1_000, 1_000, True),
        ("cudaMemcpyToSymbol", 1, 300, 300, True),
        ("cuCtxSynchronize", 1, 100, 100, True),
        ("cudaStreamWaitEvent", 1, 10, 10, False),
        ("cudaEventQuery", 1, 5, 5, False),
    ]
    stream = next(c for c in data["calls"] if c["api"] == "cudaStreamSynchronize")
    assert (stream["p50_ns"], stream["max_ns"]) == (500, 700)  # nearest rank of 500 and 700
    csv = table(report, "sync", "sync")
    assert list(csv["api"]) == [c[0] for c in calls]
    assert not any("_v" in api for api in csv["api"])


@pytest.mark.parametrize("version", GENERATIONS)
def test_per_process(version, build):
    report = analyze(build(sync_trace(version)))
    procs = {p["pid"]: p for p in ok(report, "sync")["processes"]}
    assert procs[100]["blocking_calls"] == 6
    assert procs[100]["blocking_ns"] == 6_600
    assert procs[100]["api_window_ns"] == 9_800
    assert procs[100]["blocking_wall_ns"] == 6_600
    assert procs[100]["blocking_pct_of_window"] == round(100 * 6_600 / 9_800, 2)
    assert procs[200]["blocking_calls"] == 1
    assert procs[200]["blocking_ns"] == 1_000
    assert procs[200]["api_window_ns"] == 1_100
    assert procs[200]["blocking_pct_of_window"] == round(100 * 1_000 / 1_100, 2)
    by_pid = table(report, "sync", "sync_by_pid")
    rows = {(int(r.pid), r.api): (int(r.calls), int(r.total_ns)) for r in by_pid.itertuples()}
    assert rows[(100, "cudaStreamSynchronize")] == (2, 1_200)
    assert rows[(200, "cudaEventSynchronize")] == (1, 1_000)
    assert (200, "cudaMemcpyAsync") not in rows
    assert len(rows) == 8


def test_only_non_blocking_calls_count_zero_blocking(build):
    b = TraceBuilder("2024.6")
    b.runtime(0, 100, name="cudaStreamWaitEvent_v3020")
    b.runtime(200, 300, name="cudaLaunchKernel_v7000")
    data = ok(analyze(build(b)), "sync")
    assert (data["blocking_calls"], data["blocking_ns"]) == (0, 0)
    assert [(c["api"], c["blocking"]) for c in data["calls"]] == [("cudaStreamWaitEvent", False)]
