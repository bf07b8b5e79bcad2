"""The peer comparison's own parts: the simple reference, our CLI's agreement with it, and the
way benchmarks/peers.py reports a tool that cannot read an input or a driver that fails.

The peers themselves (HTA, nsys-ai) are never imported or run here: they live in their own
virtual environments. Expected values are worked out by hand in the comments.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import peers  # noqa: E402
from benchmarks.peers_reference import nsys_reference, stream_gaps, union_ns  # noqa: E402
from benchmarks.peers_reference_kineto import kineto_reference  # noqa: E402
from tests.fixtures.builder import TraceBuilder  # noqa: E402

MS = 1_000_000
OURS = [sys.executable, "-m", "nsys_llm_explainer"]


def test_union_and_stream_gaps_by_hand() -> None:
    assert union_ns([(0, 10), (5, 20), (30, 40)]) == 30  # [0,20) + [30,40)
    assert union_ns([(0, 10), (10, 20)]) == 20  # touching intervals merge
    assert union_ns([]) == 0
    assert stream_gaps([(30, 40), (0, 10), (12, 20)]) == 2 + 10  # sorted by start first
    assert stream_gaps([(0, 10), (12, 20), (30, 40)], threshold_ns=5) == 10


@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 20)), max_size=25))
def test_union_matches_counting_covered_points(pairs: list[tuple[int, int]]) -> None:
    intervals = [(s, s + d) for s, d in pairs]
    covered = {t for s, e in intervals for t in range(s, e)}
    assert union_ns(intervals) == len(covered)


def two_stream_trace(path: Path) -> Path:
    """Device 0: stream 7 kernels a [1,3) ms and b [5,6) ms, stream 8 kernel a [2,4) ms, a
    memcpy [6.5,7) ms on stream 7; device 1: one kernel c [0.1,0.2) ms."""
    b = TraceBuilder("2024.6")
    b.process(100)
    for corr, (start, end, stream, name) in enumerate([(1 * MS, 3 * MS, 7, "void a(int)"),
                                                        (5 * MS, 6 * MS, 7, "void b(int)"),
                                                        (2 * MS, 4 * MS, 8, "void a(int)")], start=1):
        b.runtime(start - 500_000, start - 400_000, corr=corr)
        b.kernel(start, end, stream=stream, corr=corr, name=name)
    b.runtime(int(6.4 * MS), int(6.45 * MS), corr=4, name="cudaMemcpyAsync_v3020")
    b.memcpy(int(6.5 * MS), 7 * MS, bytes=1 << 20, copy_kind=1, corr=4)
    b.runtime(50_000, 60_000, corr=5)
    b.kernel(100_000, 200_000, device=1, corr=5, name="void c(int)")
    return b.write(path)


def test_nsys_reference_by_hand(tmp_path: Path) -> None:
    ref = nsys_reference(two_stream_trace(tmp_path / "t.sqlite"))
    d0 = ref["devices"][0]
    assert d0["kernel_sum_ns"] == 5 * MS  # 2 + 1 + 2 ms
    assert d0["window_ns"] == 5 * MS  # [1, 6) ms
    assert d0["busy_ns"] == 4 * MS  # [1, 4) + [5, 6)
    assert d0["idle_ns"] == 1 * MS and d0["idle_pct"] == 20.0
    assert d0["stream_gap_ns"] == 2 * MS  # stream 7: 3 -> 5 ms; stream 8 has one kernel
    assert d0["window_with_copies_ns"] == 6 * MS  # [1, 7) ms
    assert d0["busy_with_copies_ns"] == int(4.5 * MS)
    assert d0["idle_with_copies_ns"] == int(1.5 * MS)
    assert d0["stream_gap_with_copies_ns"] == int(2.5 * MS)  # + 6 -> 6.5 ms before the copy
    assert ref["devices"][1]["busy_ns"] == 100_000
    top = {(k["device"], k["name"]): (k["calls"], k["total_ns"]) for k in ref["top_kernels"]}
    assert top[(0, "void a(int)")] == (2, 4 * MS)
    assert top[(1, "void c(int)")] == (1, 100_000)


def test_our_cli_agrees_with_the_reference(tmp_path: Path) -> None:
    trace = two_stream_trace(tmp_path / "t.sqlite")
    ref = nsys_reference(trace)
    ours = peers.run_ours(trace, OURS)
    assert "error" not in ours, ours.get("error")
    for dev in ours["gpu_idle"]["devices"]:
        r = ref["devices"][dev["device_id"]]
        assert dev["window_end_ns"] - dev["window_start_ns"] == r["window_ns"]
        assert (dev["busy_ns"], dev["idle_ns"], dev["idle_pct"]) == (r["busy_ns"], r["idle_ns"], r["idle_pct"])
    mine = {(k["device_id"], k["name"]): k["total_ns"] for k in ours["top_kernels"]["kernels"]}
    assert mine == {(k["device"], k["name"]): k["total_ns"] for k in ref["top_kernels"]}


def test_table_shows_reference_and_ours_side_by_side(tmp_path: Path, capsys) -> None:
    trace = two_stream_trace(tmp_path / "t.sqlite")
    res = peers.compare(trace, None, None, OURS, top_n=3)
    peers.print_trace(res, 3)
    out = capsys.readouterr().out
    busy = next(ln for ln in out.splitlines() if ln.strip().startswith("busy, union of kernel intervals"))
    assert busy.split()[-3:-1] == ["4.000", "4.000"]  # reference, ours; no nsys-ai column filled
    idle = next(ln for ln in out.splitlines() if ln.strip().startswith("idle % of window"))
    assert idle.split()[-3:-1] == ["20.00%", "20.00%"]


def test_ours_that_cannot_read_the_input_is_reported(tmp_path: Path) -> None:
    failing = [sys.executable, "-c", "import sys; print('x: error: not a trace', file=sys.stderr); sys.exit(3)"]
    res = peers.run_ours(tmp_path / "trace.json.gz", failing)
    assert res["error"] == "our tool could not read this input (exit 3: x: error: not a trace)"


def test_failing_driver_is_reported(tmp_path: Path) -> None:
    driver = tmp_path / "driver.py"
    driver.write_text("import sys\nprint('ImportError: no module named hta', file=sys.stderr)\nsys.exit(1)\n")
    res = peers.run_driver(sys.executable, driver, tmp_path / "t.json")
    assert res["error"] == "driver exited 1: ImportError: no module named hta"
    res = peers.run_driver(str(tmp_path / "no-such-python"), driver, tmp_path / "t.json")
    assert res["error"].startswith("could not run ")


def _event(cat: str, name: str, ts: float, dur: float, **args: object) -> dict[str, object]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 1, "ts": ts, "dur": dur, "args": args}


def test_kineto_reference_by_hand(tmp_path: Path) -> None:
    """Two profiler steps (#1 at 0 us, #2 at 100 us). Launches before 100 us: kernel k1
    [20.25, 30.75) us on stream 7, kernel k2 [25, 35) on stream 8, a memset [40, 45); after:
    k1 again [160, 170). A Context Sync [200, 220) us on the GPU timeline."""
    events = [
        _event("user_annotation", "ProfilerStep#1", 0, 100),
        _event("user_annotation", "ProfilerStep#2", 100, 100),
        _event("cuda_runtime", "cudaLaunchKernel", 10, 5, correlation=1),
        _event("kernel", "k1", 20.25, 10.5, device=0, stream=7, correlation=1),
        _event("cuda_runtime", "cudaLaunchKernel", 50, 5, correlation=2),
        _event("kernel", "k2", 25, 10, device=0, stream=8, correlation=2),
        _event("cuda_runtime", "cudaMemsetAsync", 60, 5, correlation=3),
        _event("gpu_memset", "Memset (Device)", 40, 5, device=0, stream=7, correlation=3),
        _event("cuda_runtime", "cudaLaunchKernel", 150, 5, correlation=4),
        _event("kernel", "k1", 160, 10, device=0, stream=7, correlation=4),
        _event("cuda_sync", "Context Sync", 200, 20, device=0, stream=4294967295, correlation=5),
    ]
    path = tmp_path / "trace.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump({"traceEvents": events}, fh)
    ref = kineto_reference(path)
    d0 = ref["devices"][0]
    assert ref["fractional_timestamps"] is True
    assert d0["kernel_sum_ns"] == 30_500  # 10.5 + 10 + 10 us
    assert d0["window_ns"] == 149_750  # [20.25, 170) us
    assert d0["busy_ns"] == 24_750  # [20.25, 35) + [160, 170)
    assert d0["idle_ns"] == 125_000
    assert (d0["busy_with_copies_ns"], d0["idle_with_copies_ns"]) == (29_750, 120_000)
    assert ref["rounded_kernel_sum_ns"] == 29_000  # k1: floor(30.75) - ceil(20.25) = 9 us; 10; 10
    steps = ref["steps"]["devices"][0]  # only what was launched before step #2 began
    assert (steps["kernels"], steps["window_ns"], steps["busy_ns"], steps["idle_ns"]) == (2, 14_750, 14_750, 0)
    assert (steps["window_with_copies_ns"], steps["idle_with_copies_ns"]) == (24_750, 5_000)
    sync = ref["cuda_sync"][0]  # the sync counted as GPU activity widens the window to 220 us
    assert (sync["window_ns"], sync["busy_ns"], sync["idle_ns"]) == (199_750, 49_750, 150_000)
    launch = ref["launch"]  # delays 5.25, 0 (clipped), 0 (clipped), 5 us
    assert (launch["matched"], launch["delay_median_ns"], launch["delay_sum_ns"]) == (4, 5_000, 10_250)
    assert (launch["kernels_matched"], launch["kernel_delay_median_ns"]) == (3, 5_000)  # 0, 5, 5.25 us
