"""The ADBC reader (trace/nsys/fetch.py): the same columns as sqlite3, or None to fall back."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from nsys_llm_explainer.api import explain
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.render import json_writer
from nsys_llm_explainer.trace.nsys import fetch
from nsys_llm_explainer.trace.nsys.fetch import fetch_ints
from tests.conftest import GENERATIONS, nsys_trace_files
from tests.fixtures import hostile as h
from tests.fixtures.builder import TraceBuilder

pytest.importorskip("adbc_driver_sqlite", reason="the ADBC SQLite driver is not installed")


def _table(path: Path, rows: list[tuple[object, object]]) -> str:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (a, b)")
    con.executemany("INSERT INTO t VALUES (?, ?)", rows)
    con.commit()
    con.close()
    return f"file:{path}?mode=ro"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fetch, "BATCH_ROWS", 100)


def test_columns_equal_sqlite3_across_batches_and_growth(tmp_path: Path, small_batches: None) -> None:
    rng = np.random.default_rng(7)
    a = rng.integers(-(2**62), 2**62, 1234)
    rows = [(int(x), i * 3) for i, x in enumerate(a)]
    uri = _table(tmp_path / "t.sqlite", rows)
    sql = "SELECT a, (CASE WHEN typeof(b) = 'integer' THEN b ELSE -1 END) FROM t"
    # capacity below the row count: the arrays grow as sqlite3's do
    got = fetch.ArrowReader(uri).read(sql, ("a", "b"), 10)
    assert got is not None
    np.testing.assert_array_equal(got["a"], a)
    np.testing.assert_array_equal(got["b"], np.arange(1234) * 3)
    con = sqlite3.connect(uri, uri=True)
    want = fetch_ints(con, sql, ("a", "b"), 10)
    for k in ("a", "b"):
        assert got[k].dtype == np.int64
        np.testing.assert_array_equal(got[k], want[k])


def test_empty_result_is_empty_columns(tmp_path: Path) -> None:
    uri = _table(tmp_path / "t.sqlite", [(1, 2)])
    got = fetch.ArrowReader(uri).read("SELECT a, b FROM t WHERE 0", ("a", "b"), 5)
    assert got is not None and [len(v) for v in got.values()] == [0, 0]


@pytest.mark.parametrize(
    ("rows", "why"),
    [
        ([(i, i) for i in range(300)] + [(5.5, 1)], "a REAL after 300 integers (3 batches)"),
        ([(i, i) for i in range(300)] + [("x", 1)], "a TEXT after 300 integers"),
        ([(i, None) for i in range(50)], "NULL in a column"),
        ([(i, i) for i in range(250)] + [(1, None)], "one NULL in the third batch"),
    ],
)
def test_anything_but_int64_falls_back(
    tmp_path: Path, small_batches: None, rows: list[tuple[object, object]], why: str
) -> None:
    uri = _table(tmp_path / "t.sqlite", rows)
    assert fetch.ArrowReader(uri).read("SELECT a, b FROM t", ("a", "b"), len(rows)) is None, why


def test_missing_driver_or_file_falls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = _table(tmp_path / "t.sqlite", [(1, 2)])
    assert fetch.ArrowReader(uri).read("SELECT a FROM nosuch", ("a",), 1) is None
    missing = f"file:{tmp_path / 'gone.sqlite'}?mode=ro"
    assert fetch.ArrowReader(missing).read("SELECT 1", ("a",), 1) is None
    assert not (tmp_path / "gone.sqlite").exists()  # mode=ro never creates the file
    monkeypatch.setenv(fetch.OFF_VAR, "1")
    assert fetch.ArrowReader(uri).read("SELECT a FROM t", ("a",), 1) is None


def test_reads_leave_the_file_unchanged_and_cannot_write(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    uri = _table(path, [(i, i) for i in range(500)])
    before, mtime = _sha(path), os.stat(path).st_mtime_ns
    reader = fetch.ArrowReader(uri)
    assert reader.read("SELECT a, b FROM t", ("a", "b"), 500) is not None
    conn = reader._connection()
    import adbc_driver_manager as dm

    stmt = dm.AdbcStatement(conn)
    stmt.set_sql_query("CREATE TABLE evil (x)")
    with pytest.raises(dm.Error):
        stmt.execute_update()
    stmt.close()
    reader.close()
    assert (_sha(path), os.stat(path).st_mtime_ns) == (before, mtime)


def test_interrupt_stops_the_read_as_sqlite3_does(tmp_path: Path, small_batches: None) -> None:
    """An interrupt stops the statement running then (at its next batch), not a later one."""
    uri = _table(tmp_path / "t.sqlite", [(i, i) for i in range(1000)])
    reader = fetch.ArrowReader(uri)
    batches: list[int] = []

    def progress(n: int) -> None:
        batches.append(n)
        reader.interrupt()  # as Ctrl-C from another thread would, mid-read

    with pytest.raises(sqlite3.OperationalError, match="interrupted"):
        reader.read("SELECT a, b FROM t", ("a", "b"), 1000, progress)
    assert batches == [100]
    got = reader.read("SELECT a, b FROM t", ("a", "b"), 1000)  # the next statement runs
    assert got is not None and len(got["a"]) == 1000


CORE = ('"CUPTI_ACTIVITY_KIND_KERNEL"', '"CUPTI_ACTIVITY_KIND_RUNTIME"')


def _core_tables(path: Path) -> set[str]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    names = {f'"{r[0]}"' for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    con.close()
    return names & set(CORE)


def _report(path: Path, monkeypatch: pytest.MonkeyPatch, adbc: bool) -> str:
    """The report with every table read through the driver (adbc) or through sqlite3."""
    monkeypatch.setattr(fetch, "MIN_ROWS", 0)
    read = fetch.ArrowReader.read
    tables: list[str] = []

    def spy(self: fetch.ArrowReader, sql: str, *a: object, **k: object) -> object:
        got = read(self, sql, *a, **k)  # type: ignore[arg-type]
        if got is not None:
            tables.append(sql.split(" FROM ")[1].split()[0])
        return got

    monkeypatch.setattr(fetch.ArrowReader, "read", spy)
    if adbc:
        monkeypatch.delenv(fetch.OFF_VAR, raising=False)
    else:
        monkeypatch.setenv(fetch.OFF_VAR, "1")
    text = json_writer.render(explain(path, Options(), jobs=1))
    if adbc:  # the kernels and the CUDA API calls came through the driver
        assert _core_tables(path) <= set(tables)
    else:
        assert tables == []
    return text


def test_report_equals_sqlite3s_on_damaged_exports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows the queries leave out (NULL start, end before start) and duplicated rows give the
    same warnings and figures through either reader."""
    path = h.mutate(
        h.good(tmp_path),
        f'INSERT INTO {h.RUNTIME} SELECT * FROM {h.RUNTIME} WHERE correlationId = 2',
        f"UPDATE {h.RUNTIME} SET start = NULL WHERE correlationId = 4",
        f'UPDATE {h.KERNEL} SET "end" = start - 1 WHERE correlationId = 3',
        loosen=(h.RUNTIME, h.KERNEL),
    )
    before = _sha(path)
    through_adbc = _report(path, monkeypatch, adbc=True)
    assert through_adbc == _report(path, monkeypatch, adbc=False)
    assert "duplicated API rows" in through_adbc and "rows ignored" in through_adbc
    assert _sha(path) == before


@pytest.mark.parametrize("generation", GENERATIONS)
def test_report_equals_sqlite3s_on_each_generation(
    generation: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    b = TraceBuilder(generation)
    for i in range(400):  # launches, kernels on two devices, NVTX ranges around each step
        t = i * 2_000
        b.runtime(t, t + 50, pid=100, corr=i + 1)
        b.kernel(t + 60, t + 900 + (i % 7) * 100, pid=100, corr=i + 1, device=i % 2,
                 name=("gemm", "norm", "copy")[i % 3])
    path = b.write(tmp_path / "t.sqlite")
    assert _report(path, monkeypatch, adbc=True) == _report(path, monkeypatch, adbc=False)


def test_report_equals_sqlite3s_on_real_exports(monkeypatch: pytest.MonkeyPatch) -> None:
    files = nsys_trace_files()
    if not files:
        pytest.skip("shared real traces not found")
    used = [p for p in files if _core_tables(p) == set(CORE)][:3]
    assert used, "no shared export with both kernels and CUDA API calls"
    for path in used:
        assert _report(path, monkeypatch, adbc=True) == _report(path, monkeypatch, adbc=False), path.name


def test_unused_graph_ids_hold_no_memory() -> None:
    from nsys_llm_explainer.trace.nsys.load import _unless_unused

    none = _unless_unused(np.full(1_000_000, -1, np.int64))
    assert none.shape == (1_000_000,) and none.dtype == np.int64 and bool((none == -1).all())
    assert none.strides == (0,) and not none.flags.writeable  # one value, read-only
    some = np.array([-1, 4, -1], np.int64)
    assert _unless_unused(some) is some
    assert len(_unless_unused(np.empty(0, np.int64))) == 0
