"""SQLite safety: read-only and inert connections, WAL files, other writers' locks, --timeout."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nsys_llm_explainer import api, cli
from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.api import explain
from nsys_llm_explainer.errors import InputError, MetricTimeout
from nsys_llm_explainer.metrics import REGISTRY
from nsys_llm_explainer.model import Skipped
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.runtime import runner
from nsys_llm_explainer.trace import deadline
from nsys_llm_explainer.trace.nsys import helper
from nsys_llm_explainer.trace.nsys.helper import open_export
from nsys_llm_explainer.trace.nsys.open import connect_readonly, is_wal_mode
from nsys_llm_explainer.trace.nsys.probe import probe
from tests.fixtures import hostile as h
from tests.fixtures.builder import TraceBuilder

HOLD_LOCK = """
import sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("BEGIN " + sys.argv[2])
con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL")
print("locked", flush=True)
sys.stdin.read()
con.execute("ROLLBACK")
"""


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    (tmp_path / "in").mkdir()
    return h.good(tmp_path / "in")


def listing(d: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in d.iterdir()}


def test_connection_is_read_only_and_inert(trace: Path) -> None:
    conn = connect_readonly(trace)
    try:
        assert conn.execute("PRAGMA query_only").fetchone() == (1,)
        assert conn.execute("PRAGMA trusted_schema").fetchone() == (0,)
        with pytest.raises(sqlite3.OperationalError):
            conn.execute("DELETE FROM StringIds")
        conn.execute("PRAGMA query_only = OFF")  # the read-only URI still holds
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            conn.execute("DELETE FROM StringIds")
        with pytest.raises(sqlite3.OperationalError):  # no extension loading from SQL
            conn.execute("SELECT load_extension('/nonexistent/evil')")
    finally:
        conn.close()


def test_probe_sees_only_real_tables(tmp_path: Path) -> None:
    trace = h.view_named_kernel(tmp_path)
    conn = connect_readonly(trace)
    try:
        schema = probe(conn)
    finally:
        conn.close()
    assert schema.kernel_table is None and h.KERNEL not in schema.tables
    assert any("is a view" in w for w in schema.warnings)


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "private"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    return d


def test_wal_copy_is_private_and_removed(tmp_path: Path, private_tmp: Path) -> None:
    (tmp_path / "in").mkdir()
    trace = h.wal_mode(tmp_path / "in")
    assert is_wal_mode(trace) and Path(f"{trace}-wal").stat().st_size > 0
    before = listing(trace.parent)
    report = explain(trace)
    assert report.ok("top_kernels").data["kernel_count"] == 5  # 2 of them only in -wal
    assert listing(trace.parent) == before
    assert list(private_tmp.iterdir()) == []


def test_wal_without_wal_file_creates_nothing(tmp_path: Path, private_tmp: Path) -> None:
    (tmp_path / "in").mkdir()
    trace = h.wal_mode_clean(tmp_path / "in")
    assert is_wal_mode(trace) and sorted(listing(trace.parent)) == ["trace.sqlite"]
    assert explain(trace).ok("top_kernels").data["kernel_count"] == 3
    assert sorted(listing(trace.parent)) == ["trace.sqlite"]
    assert list(private_tmp.iterdir()) == []


@pytest.fixture
def writer(trace: Path, request: pytest.FixtureRequest) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(trace), request.param],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    yield proc
    proc.communicate("", timeout=30)


@pytest.mark.parametrize("writer", ["EXCLUSIVE"], indirect=True)
def test_write_locked_database(
    trace: Path, tmp_path: Path, writer: subprocess.Popen[str], capsys: pytest.CaptureFixture[str]
) -> None:
    before = listing(trace.parent)
    t0 = time.monotonic()
    code = cli.run([str(trace), "--out", str(tmp_path / "out"), "-q"])
    elapsed = time.monotonic() - t0
    err = capsys.readouterr().err
    assert code == 3 and len(err.splitlines()) == 1, err
    assert "locked by another process" in err and "retry" in err
    assert elapsed < 6, elapsed
    assert listing(trace.parent) == before
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("writer", ["IMMEDIATE"], indirect=True)
def test_pending_write_is_not_seen(trace: Path, writer: subprocess.Popen[str]) -> None:
    # A RESERVED lock still lets readers in; they see the last committed state.
    before = listing(trace.parent)
    assert explain(trace).ok("top_kernels").data["kernel_count"] == h.GOOD_KERNELS
    assert listing(trace.parent) == before


def runaway(ctx: Context) -> Skipped:
    """A query that would run for hours: count to 10^12."""
    ctx.data.query(
        "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 1000000000000) "
        "SELECT count(*) FROM c"
    )
    return Skipped("sync", "unreachable")


def slow_numpy(ctx: Context) -> Skipped:
    time.sleep(0.3)  # stands for a long array phase; the next cached() step checks the deadline
    ctx.data.cached("never-built", lambda: 1)
    return Skipped("sync", "unreachable")


@pytest.mark.parametrize("jobs", [1, 2], ids=["one-thread", "threads"])
@pytest.mark.parametrize("body", [runaway, slow_numpy], ids=["sql", "numpy"])
def test_timeout_stops_one_metric(
    trace: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    body: object,
    jobs: int,
) -> None:
    patched = tuple(dataclasses.replace(m, run=body) if m.id == "sync" else m for m in REGISTRY)
    monkeypatch.setattr(api, "REGISTRY", patched)
    monkeypatch.setattr(runner, "THREADS_MIN_KERNELS", 0)
    t0 = time.monotonic()
    code = cli.run([str(trace), "--out", str(tmp_path / "out"), "-q", "--timeout", "0.2", "--jobs", str(jobs)])
    assert time.monotonic() - t0 < 20
    assert code == 0, capsys.readouterr().err
    doc = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    assert doc["metrics"]["sync"] == {
        "status": "skipped",
        "reason": "it was stopped by --timeout 0.2s before it finished",
    }
    assert any(w.startswith("metric sync was stopped by --timeout 0.2s") for w in doc["warnings"])
    assert doc["metrics"]["top_kernels"]["status"] == "ok"
    md = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "Not measured, because it was stopped by --timeout 0.2s" in md


def big_trace(path: Path, n: int = 100_000) -> Path:
    b = TraceBuilder("2024.6")
    b.process(100)
    b.bulk(
        h.RUNTIME,
        ("start", "end", "globalTid", "correlationId", "nameId"),
        (
            (i * 1000, i * 1000 + 50, b.gtid(100, 100), i + 1, b.string("cudaLaunchKernel_v7000"))
            for i in range(n)
        ),
    )
    b.bulk(
        h.KERNEL,
        (
            "start",
            "end",
            "deviceId",
            "streamId",
            "correlationId",
            "globalPid",
            "demangledName",
            "shortName",
        ),
        (
            (
                i * 1000 + 100,
                i * 1000 + 600,
                0,
                7,
                i + 1,
                b.gpid(100),
                b.string(f"k{i % 50}"),
                b.string(f"k{i % 50}"),
            )
            for i in range(n)
        ),
    )
    return b.write(path)


@pytest.mark.parametrize("jobs", [1, 2], ids=["one-thread", "threads"])
def test_tiny_timeout_on_large_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int) -> None:
    monkeypatch.setattr(runner, "THREADS_MIN_KERNELS", 0)
    trace = big_trace(tmp_path / "big.sqlite")
    report = explain(trace, Options(timeout_s=1e-4), jobs=jobs)
    stopped = [
        m for m, o in report.metrics.items() if isinstance(o, Skipped) and "--timeout" in o.reason
    ]
    reasons = {m: o.reason for m, o in report.metrics.items() if isinstance(o, Skipped)}
    assert "top_kernels" in stopped and "launch_storm" in stopped, reasons
    assert report.trace.window_start_ns == 0  # the rest of the report is still there
    assert report.trace.window_end_ns == (100_000 - 1) * 1000 + 600


def test_input_error_for_unreadable_schema(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="damaged"):
        open_export(h.corrupt_schema_page(tmp_path))


READ_ONLY_ACTIONS = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    sqlite3.SQLITE_PRAGMA,
    sqlite3.SQLITE_RECURSIVE,
}
ALLOWED_PRAGMAS = {"table_info", "query_only", "trusted_schema"}


@pytest.mark.parametrize(
    "build",
    [h.good, h.view_named_kernel, h.trigger_named_kernel, h.hostile_identifiers],
    ids=lambda f: f.__name__,
)
def test_every_statement_reads_real_tables_only(
    build: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An authorizer on the tool's connection sees every table each statement touches."""
    seen: list[tuple[int, str | None, str | None]] = []
    through: set[str | None] = set()  # the view or trigger responsible for an access
    real_connect = helper.trace_open.connect_readonly

    def audited(path: Path) -> sqlite3.Connection:
        conn = real_connect(path)

        def authorize(
            action: int, a: str | None, b: str | None, db: object, via: str | None
        ) -> int:
            seen.append((action, a, b))
            through.add(via)
            return sqlite3.SQLITE_OK

        conn.set_authorizer(authorize)
        return conn

    monkeypatch.setattr(helper.trace_open, "connect_readonly", audited)
    trace = build(tmp_path)  # type: ignore[operator]
    explain(trace, Options(include_capture_info=True))
    con = sqlite3.connect(trace)
    real = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    con.close()
    assert seen and through == {None}
    assert {a for a, _, _ in seen} <= READ_ONLY_ACTIONS
    assert {t for a, t, _ in seen if a == sqlite3.SQLITE_READ} <= real | {"sqlite_master"}
    assert {p.lower() for a, p, _ in seen if a == sqlite3.SQLITE_PRAGMA} <= ALLOWED_PRAGMAS


STRESS = """
import sys, threading
from pathlib import Path
from nsys_llm_explainer.trace import deadline
from nsys_llm_explainer.trace.nsys.load import NsysTraceData
from nsys_llm_explainer.trace.nsys.helper import open_export

for _ in range(4):
    conn, schema = open_export(Path(sys.argv[1]))
    data = NsysTraceData(conn, schema)

    def load(read):
        with deadline.limit(data.interruptible, 600.0):
            getattr(data, read)()

    threads = [threading.Thread(target=load, args=(r,)) for r in ("kernels", "runtime")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(len(data.kernels()), len(data.runtime()))
    data.close()
"""


def test_threads_reading_one_connection_under_a_deadline_never_deadlock(tmp_path: Path) -> None:
    """Two threads load different tables over the shared connection while the --timeout progress
    handler is installed. SQLite runs that handler (which needs the GIL) holding the connection's
    mutex, and reading a row takes the mutex holding the GIL: statements from two threads must
    not interleave (NsysTraceData.sql), or both threads wait forever, the GIL with them. So the
    threads run in a child process that is killed if it does not finish."""
    trace = big_trace(tmp_path / "big.sqlite", n=60_000)
    try:
        proc = subprocess.run([sys.executable, "-c", STRESS, str(trace)], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("threads deadlocked on the shared connection")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["60000"] * 8


def test_a_limit_that_ends_leaves_the_others_on_the_connection_their_deadline(trace: Path) -> None:
    """Metrics in several threads each hold a limit on the one connection. When one ends, the
    handler must stay for the others: a runaway statement after it is still stopped. (Each
    metric used to get its own wrapper object, so the first limit to end removed the handler
    and the runaway ran for hours.) A watchdog interrupts the statement if it is not stopped."""
    data = helper.open_nsys(trace)
    watchdog = threading.Timer(30, data.conn.interrupt)
    watchdog.start()
    try:
        t0 = time.monotonic()
        with pytest.raises(MetricTimeout), deadline.limit(data.interruptible, 0.5):
            with deadline.limit(data.interruptible, 60):  # another metric's limit, ended
                pass
            data.query(
                "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c "
                "WHERE n < 1000000000000) SELECT count(*) FROM c"
            )
        assert time.monotonic() - t0 < 10
    finally:
        watchdog.cancel()
        data.close()
