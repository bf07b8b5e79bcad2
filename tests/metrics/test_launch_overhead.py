"""launch_overhead: API time, queue, launch-to-start latency and TKLQT on a hand-built trace."""

from __future__ import annotations

import jsonschema
import pytest

from nsys_llm_explainer.schema import load_fragment
from tests.conftest import GENERATIONS, analyze, ok, table
from tests.fixtures.builder import TraceBuilder


def launch_trace(version: str) -> TraceBuilder:
    b = TraceBuilder(version)
    # pid 100: plain launch (api 500, queue 500, latency 1000)
    b.runtime(1_000, 1_500, pid=100, corr=1)
    b.kernel(2_000, 5_000, pid=100, corr=1, name="gemm")
    # kernel starts before the call returns: queue -100 -> 0, latency 300
    b.runtime(6_000, 6_400, pid=100, corr=2, name="cuLaunchKernel")
    b.kernel(6_300, 9_000, pid=100, corr=2, name="gemm")
    # clock skew: kernel starts 100 ns before the call: latency clamped to 0, queue -300 -> 0
    b.runtime(10_000, 10_200, pid=100, corr=3, name="cudaLaunchKernelExC_v11060")
    b.kernel(9_900, 12_000, pid=100, corr=3, name="attn")
    # graph launch: two kernels, one pair with the first kernel (latency 1000, queue 900)
    b.runtime(20_000, 20_100, pid=100, corr=4, name="cudaGraphLaunch_v10000")
    b.kernel(22_000, 23_000, pid=100, corr=4, name="attn")
    b.kernel(21_000, 22_000, pid=100, corr=4, name="attn")
    # no launch call at all, and a kernel whose key joins a memset call (not a launch API)
    b.kernel(24_000, 25_000, pid=100, corr=99, name="orphan")
    b.runtime(25_500, 25_600, pid=100, corr=5, name="cudaMemsetAsync_v3020")
    b.kernel(26_000, 27_000, pid=100, corr=5, name="orphan")
    # pid 200 reuses correlation id 1: api 1000, queue 500, latency 1500
    b.runtime(30_000, 31_000, pid=200, corr=1)
    b.kernel(31_500, 32_000, pid=200, corr=1, device=1, name="gemm")
    return b


@pytest.mark.parametrize("version", GENERATIONS)
def test_launch_figures_by_hand(version, build):
    report = analyze(build(launch_trace(version)))
    d = ok(report, "launch_overhead")
    jsonschema.validate(d, load_fragment("launch_overhead"))
    assert d["kernels"] == 8
    assert d["launch_calls"] == 5
    assert d["graph_launch_calls"] == 1
    assert d["kernels_without_launch"] == 2
    assert d["kernels_joined_to_other_api"] == 1
    assert d["skew_clamped"] == 1
    assert d["started_before_call_returned"] == 2
    # latencies 1000, 300, 0 (clamped), 1000, 1500
    assert d["tklqt_ns"] == 3_800
    g = d["global"]
    assert g["api_total_ns"] == 500 + 400 + 200 + 100 + 1_000
    assert g["api_p50_ns"] == 400
    assert (g["queue_p50_ns"], g["queue_max_ns"], g["queue_total_ns"]) == (500, 900, 1_900)
    assert (g["latency_p50_ns"], g["latency_max_ns"]) == (1_000, 1_500)
    procs = {p["pid"]: p for p in d["processes"]}
    assert procs[100]["launch_calls"] == 4 and procs[100]["latency_total_ns"] == 2_300
    assert procs[100]["kernels_without_launch"] == 2 and procs[100]["kernels"] == 7
    assert procs[200]["latency_total_ns"] == 1_500 and procs[200]["api_p50_ns"] == 1_000
    names = {k["name"]: k for k in d["top_kernels"]}
    assert names["gemm"]["launch_calls"] == 3 and names["gemm"]["kernel_ns"] == 3_000 + 2_700 + 500
    assert names["attn"]["launch_calls"] == 2 and names["attn"]["latency_total_ns"] == 1_000


def test_latencies_never_negative_in_tables(build):
    report = analyze(build(launch_trace("2024.6")))
    for name in ("launch_overhead", "launch_overhead_kernels"):
        frame = table(report, "launch_overhead", name)
        cols = [c for c in frame.columns if c.startswith(("latency_", "queue_"))]
        assert (frame[cols] >= 0).all().all()


def test_skipped_without_runtime_rows(build):
    b = TraceBuilder("2024.6")
    b.kernel(0, 10, corr=1)
    report = analyze(build(b))
    assert report.metrics["launch_overhead"].status == "skipped"
