"""fleet building blocks against plain reference computations, and the real shared traces."""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsys_llm_explainer import fleet
from nsys_llm_explainer.api import explain
from nsys_llm_explainer.errors import InputError, UsageError
from nsys_llm_explainer.fleet import align, inputs, render_files, robust, worker
from nsys_llm_explainer.options import Options
from tests.conftest import NSYS_TRACES, SHARED_TRACES
from tests.fixtures.builder import TraceBuilder
from tests.fleet_support import schema_errors

TWO_GPU = NSYS_TRACES / "nsysai_h100_2gpu_1s.sqlite"
KINETO = SHARED_TRACES / "kineto"


def test_robust_band_by_hand() -> None:
    med, mad, upper = robust.band(np.array([10.0, 11.0, 12.0, 13.0, 100.0]))
    assert (med, mad) == (12.0, 1.0)
    assert upper == pytest.approx(12.0 + 3 * 1.4826)
    assert robust.above(np.array([10.0, 11.0, 12.0, 13.0, 100.0])).tolist() == [False] * 4 + [True]
    # Identical ranks: the 2% floor, not a zero-width band.
    assert robust.band(np.array([100.0] * 5))[2] == pytest.approx(102.0)


@given(st.integers(0, 60), st.integers(1, 60), st.integers(1, 16))
@settings(max_examples=120)
def test_binomial_tail_equals_the_exact_sum(k: int, n: int, m: int) -> None:
    p = Fraction(1, m + 1)
    want = float(sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k, n + 1)))
    assert robust.binom_sf(k, n, 1 / (m + 1)) == pytest.approx(want, rel=1e-9, abs=1e-300)


def test_binomial_tail_by_hand() -> None:
    assert robust.binom_sf(2, 2, 0.5) == pytest.approx(0.25)
    assert robust.binom_sf(1, 3, 0.5) == pytest.approx(7 / 8)
    assert robust.binom_sf(0, 5, 0.1) == 1.0 and robust.binom_sf(6, 5, 0.1) == 0.0
    # 1000 of 1000 collectives last among 64 ranks: far below any float, still not negative.
    assert 0.0 <= robust.binom_sf(1000, 1000, 1 / 64) < 1e-300


@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 50)), max_size=30),
       st.lists(st.integers(-10, 1100), min_size=1, max_size=20))
@settings(max_examples=200)
def test_cumulative_union_equals_counting_covered_nanoseconds(spans: list[tuple[int, int]], at: list[int]) -> None:
    s = np.array([a for a, _ in spans], dtype=np.int64)
    e = np.array([a + d for a, d in spans], dtype=np.int64)
    covered = np.zeros(1200, dtype=bool)
    for a, b in zip(s.tolist(), e.tolist(), strict=True):
        covered[a:b] = True
    got = worker.cumulative_union(s, e, np.array(sorted(at), dtype=np.int64))
    want = [int(covered[: max(t, 0)].sum()) for t in sorted(at)]
    assert got.tolist() == want


@given(st.integers(-20, 20), st.integers(-5_000_000, 5_000_000))
@settings(max_examples=60)
def test_best_shift_recovers_a_planted_index_shift_and_clock_offset(shift: int, offset: int) -> None:
    rng = np.random.default_rng(abs(shift) * 7 + 3)
    ends = np.cumsum(rng.integers(40_000, 120_000, 300))
    if shift >= 0:  # the other rank's capture holds `shift` earlier collectives
        other = np.r_[ends[:shift] - 10**9, ends] + offset
    else:  # ... or started `-shift` collectives late
        other = ends[-shift:] + offset
    got = align.best_shift(ends, other)
    # Collective j of the reference is collective j + shift of the other.
    assert got == shift


def test_collective_kinds() -> None:
    assert worker.collective_kind("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)") == "AllReduce"
    assert worker.collective_kind("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8") == "SendRecv"
    assert worker.collective_kind("void vllm::cross_device_reduce_1stage<float, 8>(x)") == "AllReduce"
    assert worker.collective_kind("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL") == "ReduceScatter"
    assert worker.collective_kind("void ns::my_custom_comm<int>(int)") == "my_custom_comm"


def test_cache_key_follows_content_options_and_version(tmp_path: Path) -> None:
    f = tmp_path / "t.sqlite"
    f.write_bytes(b"a" * (3 << 20))
    ident = worker.trace_identity(f)
    k1 = worker.cache_key(ident, {"kernel_name": "demangled"})
    assert worker.cache_key(worker.trace_identity(f), {"kernel_name": "demangled"}) == k1
    assert worker.cache_key(ident, {"kernel_name": "short"}) != k1
    with f.open("r+b") as fh:  # same size, a changed last MiB
        fh.seek((3 << 20) - 10)
        fh.write(b"b")
    assert worker.trace_identity(f)["edges_sha256"] != ident["edges_sha256"]
    summary = {"format": "nsys-sqlite", "ranks": [], "warnings": 0}
    assert worker.store_cached(tmp_path / "c", k1, "{}\n", summary)
    assert worker.load_cached(tmp_path / "c", k1) == summary
    assert worker.load_cached(tmp_path / "c", "0" * 64) is None


def test_cache_key_follows_the_installed_code(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    f = tmp_path / "t.sqlite"
    f.write_bytes(b"a" * 100)
    k1 = worker.cache_key(worker.trace_identity(f), {})
    monkeypatch.setattr(worker, "code_identity", lambda: "an edited checkout")
    assert worker.cache_key(worker.trace_identity(f), {}) != k1


def test_inputs_natural_order_globs_and_own_outputs(tmp_path: Path) -> None:
    for n in (10, 2, 1):
        b = TraceBuilder()
        b.process(100)
        b.kernel(1_000, 2_000 + n, pid=100)
        b.write(tmp_path / f"report_{n}.sqlite")
    (tmp_path / "same_as_1.sqlite").symlink_to(tmp_path / "report_1.sqlite")  # one trace, counted once
    (tmp_path / "report.json").write_text("{}")
    (tmp_path / "report_1.sqlite.expected.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("x")
    got = inputs.collect([str(tmp_path)], [], None)
    assert [Path(t.path).name for t in got] == ["report_1.sqlite", "report_2.sqlite", "report_10.sqlite"]
    got = inputs.collect([str(tmp_path / "report_*.sqlite")], ["r=report_(?P<r>\\d+)"], None)
    assert [t.label for t in got] == ["1", "2", "10"]
    got = inputs.collect([str(tmp_path / "report_1*.sqlite")], ["r=report_\\d+"], None)
    assert [t.label for t in got] == ["report_1", "report_10"]  # no group named r: whole match
    with pytest.raises(UsageError):
        inputs.collect([str(tmp_path)], ["a=x", "b"], None)
    with pytest.raises(InputError):
        inputs.collect([str(tmp_path / "empty")], [], None)


def _by_pid_reference(path: Path) -> dict[int, tuple[int, float]]:
    """kernel ns and busy % per process straight from SQL, with a plain sweep for the union."""
    uri = f"file:{path}?mode=ro"
    con = sqlite3.connect(uri, uri=True)
    try:
        rows = con.execute("SELECT (globalPid >> 24) & 16777215, start, end FROM CUPTI_ACTIVITY_KIND_KERNEL "
                           "ORDER BY start").fetchall()
    finally:
        con.close()
    out = {}
    for pid in sorted({r[0] for r in rows}):
        mine = [(s, e) for p, s, e in rows if p == pid]
        busy, frontier = 0, -1
        for s, e in mine:
            if e > frontier:
                busy += e - max(s, frontier)
                frontier = e
        window = max(e for _, e in mine) - min(s for s, _ in mine)
        out[pid] = (sum(e - s for s, e in mine), round(100.0 * busy / window, 2))
    return out


def test_shared_two_gpu_trace_is_two_ranks(tmp_path: Path) -> None:
    if not TWO_GPU.is_file():
        pytest.skip(f"shared real traces not found at {NSYS_TRACES} (a clone outside /work)")
    before = hashlib.sha256(TWO_GPU.read_bytes()).hexdigest()
    result = fleet.run(inputs.collect([str(TWO_GPU)], [], None), jobs=1, use_cache=False)
    assert hashlib.sha256(TWO_GPU.read_bytes()).hexdigest() == before
    run = result.doc["runs"][0]
    ref = _by_pid_reference(TWO_GPU)
    assert [r["pid"] for r in run["ranks"]] == sorted(ref) == [111, 112]
    for r in run["ranks"]:
        assert (r["kernel_ns"], r["gpu_busy_pct"]) == ref[r["pid"]]
        assert r["name"] == f"pid {r['pid']}"
        # What repeats in this 1 s window are the text encoder's layers (encoder.block.N.layer.M,
        # 27 on each rank), not steps: no complete step, so no per-step figures.
        assert (r["steps"], r["step_p50_ns"]) == (0, None)
    assert run["imbalance"]["per_step"] == {"status": "skipped", "reason": "steps were not found on every rank"}
    assert run["clock"]["method"] == "shared_clock"
    assert run["collectives"]["status"] == "skipped"  # this capture has no NCCL kernels
    assert run["stragglers"]["status"] == "skipped"
    assert schema_errors(json.loads(render_files.dumps(result.doc))) == []


@pytest.mark.slow
def test_kineto_traces_as_a_mixed_sweep(tmp_path: Path) -> None:
    traces = sorted(KINETO.glob("*.json.gz")) if KINETO.is_dir() else []
    if not traces or not TWO_GPU.is_file():
        pytest.skip(f"shared real traces not found at {SHARED_TRACES}")
    try:
        explain(traces[0], Options())
    except InputError as exc:
        pytest.skip(f"PyTorch profiler (Kineto) input is not available yet: {exc.message}")
    found = inputs.collect([str(KINETO), str(TWO_GPU)], ["source=(kineto|nsys)"], None)
    result = fleet.run(found, jobs=1, use_cache=False)
    doc = result.doc
    assert doc["inputs"]["failed"] == 0, [t["error"] for t in doc["traces"] if t["error"]]
    assert [r["label"] for r in doc["sweep"]["rows"]] == ["kineto", "nsys"]
    assert {t["format"] for t in doc["traces"]} == {"kineto", "nsys"}
    assert schema_errors(json.loads(render_files.dumps(doc))) == []


def test_one_capture_counts_once_a_link_or_a_copy_is_listed(tmp_path: Path) -> None:
    """A symlink, a hard link and a byte-identical copy of a trace are the same capture: counted
    once and listed with the trace they repeat; a file of the same size with other contents is
    another trace."""
    import os
    import shutil

    b = TraceBuilder()
    b.process(100)
    b.kernel(1_000, 2_000, pid=100)
    b.write(tmp_path / "rank_0.sqlite")
    shutil.copyfile(tmp_path / "rank_0.sqlite", tmp_path / "rank_1.sqlite")
    os.link(tmp_path / "rank_0.sqlite", tmp_path / "rank_2.sqlite")
    (tmp_path / "rank_3.sqlite").symlink_to(tmp_path / "rank_1.sqlite")
    raw = bytearray((tmp_path / "rank_0.sqlite").read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # same size, other contents (past the first and last MiB when large)
    (tmp_path / "rank_4.sqlite").write_bytes(bytes(raw))
    dups: list[dict[str, str]] = []
    got = inputs.collect([str(tmp_path)], [], None, None, dups)
    assert [Path(t.path).name for t in got] == ["rank_0.sqlite", "rank_4.sqlite"]
    assert [(Path(d["path"]).name, Path(d["same_as"]).name, d["how"]) for d in dups] == [
        ("rank_1.sqlite", "rank_0.sqlite", "the same contents"),
        ("rank_2.sqlite", "rank_0.sqlite", "the same file"),
        ("rank_3.sqlite", "rank_1.sqlite", "the same file"),
    ]


def test_repeated_traces_are_named_on_the_first_screen() -> None:
    from nsys_llm_explainer.fleet.render_text import input_notes

    doc = {"traces": [], "inputs": {"skipped": [], "duplicates": [
        {"path": "b.sqlite", "same_as": "a.sqlite", "how": "the same contents"}]}}
    assert input_notes(doc, plain=True) == [
        "Counted once: 1 path(s) repeat a trace already taken, not analyzed again: "
        "b.sqlite (the same contents as a.sqlite)."]
