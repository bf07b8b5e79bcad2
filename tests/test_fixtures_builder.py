"""The synthetic export builder writes what each nsys generation writes."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from tests.fixtures.builder import TraceBuilder, gpid, gtid
from tests.fixtures.nsys_schema import (
    BORROWED,
    DDL,
    ENUM_ROWS,
    META_ROWS,
    META_TABLE,
    SOURCE_EXPORT,
    VERSIONS,
)
from tests.fixtures.schema_info import table_columns

REAL_TRACES = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces" / "nsys"
# Columns someone added to the 2022.2 source file after nsys exported it.
POST_EXPORT_COLUMNS = {
    ("2022.2", "CUPTI_ACTIVITY_KIND_MEMCPY"): "name",
    ("2022.2", "CUPTI_ACTIVITY_KIND_RUNTIME"): "name",
}
EXPECTED_TABLE_COUNT = {"2022.2": 12, "2022.4": 17, "2024.5": 18, "2024.6": 18, "2026.2": 18}


def open_ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def table_info(con: sqlite3.Connection, table: str) -> list[tuple]:
    # (name, declared type, notnull, pk) — everything the DDL pins down.
    return [(r[1], r[2], r[3], r[5]) for r in con.execute(f"PRAGMA table_info({table})")]


def full_trace(version: str, path: Path) -> Path:
    """One row through every helper, with minimal arguments."""
    b = TraceBuilder(version, capture_meta=[("CAPTURE_PARAM", "x")])
    b.process(4242, name="trainer")
    b.thread_name(4242, 4243, "worker")
    b.gpu(0)
    b.session_start(1_700_000_000_000_000_000)
    b.runtime(10, 20, pid=4242, tid=4243, corr=1)
    b.kernel(30, 80, pid=4242, corr=1, name="void at::native::vec_kernel<4, float>(int, float*)")
    b.nvtx(0, None, pid=4242, tid=4243, text_id_for="step")
    b.memcpy(90, 95, bytes=4096, copy_kind=1, pid=4242, corr=2)
    b.memset(96, 97, bytes=512, pid=4242, corr=3)
    b.sync(98, 99, pid=4242, corr=4)
    return b.write(path)


@pytest.mark.parametrize("version", VERSIONS)
def test_written_file_has_exactly_the_versions_create_statements(version, tmp_path):
    with open_ro(full_trace(version, tmp_path / "t.sqlite")) as con:
        stored = dict(con.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"))
    assert len(stored) == EXPECTED_TABLE_COUNT[version]
    assert stored == DDL[version]
    assert META_TABLE[version] in stored
    has_enums = version != "2022.2"
    assert ("ENUM_CUDA_MEMCPY_OPER" in stored) is has_enums
    assert ("META_DATA_CAPTURE" in stored) is (version >= "2024.5")


@pytest.mark.parametrize("version", VERSIONS)
def test_columns_match_real_export(version, tmp_path):
    if not REAL_TRACES.is_dir():
        pytest.skip(f"real Nsight Systems exports not found at {REAL_TRACES.resolve()}")
    fixture = full_trace(version, tmp_path / "t.sqlite")
    with open_ro(fixture) as ours:
        for table in DDL[version]:
            source_version = BORROWED[version].get(table, version)
            real_path = REAL_TRACES / f"{SOURCE_EXPORT[source_version]}.sqlite"
            digest = hashlib.sha256(real_path.read_bytes()).hexdigest()
            with open_ro(real_path) as real:
                expected = table_info(real, table)
            extra = POST_EXPORT_COLUMNS.get((source_version, table))
            if extra:
                assert expected[-1][0] == extra
                expected = expected[:-1]
            assert table_info(ours, table) == expected, table
            assert hashlib.sha256(real_path.read_bytes()).hexdigest() == digest


@pytest.mark.parametrize("version", VERSIONS)
def test_borrowed_tables_really_are_missing_from_the_source(version):
    if not REAL_TRACES.is_dir():
        pytest.skip(f"real Nsight Systems exports not found at {REAL_TRACES.resolve()}")
    with open_ro(REAL_TRACES / f"{SOURCE_EXPORT[version]}.sqlite") as real:
        names = {r[0] for r in real.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert names.isdisjoint(BORROWED[version])
    assert set(DDL[version]) - set(BORROWED[version]) <= names


def test_gpid_gtid_encoding_round_trips():
    assert gpid(100) == (1 << 48) | (100 << 24) == 281476654432256
    assert gtid(100, 123) == 281476654432379
    assert (gtid(100, 123) >> 24) & 0xFFFFFF == 100
    assert gtid(100, 123) & 0xFFFFFF == 123
    assert gpid(100) >> 48 == 1
    assert gpid(7, vm=3) >> 48 == 3
    assert (gtid(0xFFFFFF, 0xFFFFFF) >> 24) & 0xFFFFFF == 0xFFFFFF
    with pytest.raises(ValueError):
        gpid(1 << 24)
    with pytest.raises(ValueError):
        gtid(1, 1 << 24)


@pytest.mark.parametrize("version", VERSIONS)
def test_ids_decode_from_written_rows(version, tmp_path):
    with open_ro(full_trace(version, tmp_path / "t.sqlite")) as con:
        (rt_tid,) = con.execute("SELECT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()
        (k_pid,) = con.execute("SELECT globalPid FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
        proc = con.execute("SELECT globalPid, pid, name FROM PROCESSES").fetchone()
        thread = con.execute(
            "SELECT t.globalTid, s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId"
        ).fetchone()
    assert ((rt_tid >> 24) & 0xFFFFFF, rt_tid & 0xFFFFFF) == (4242, 4243)
    assert (k_pid >> 24) & 0xFFFFFF == 4242 and k_pid & 0xFFFFFF == 0
    assert proc == (k_pid, 4242, "trainer")
    assert thread == (rt_tid, "worker")


@pytest.mark.parametrize("version", VERSIONS)
def test_not_null_columns_get_defaults(version, tmp_path):
    path = full_trace(version, tmp_path / "t.sqlite")
    with open_ro(path) as con:
        for table, cols in table_columns(version).items():
            for name, _, notnull in cols:
                if notnull:
                    n = con.execute(f'SELECT count(*) FROM {table} WHERE "{name}" IS NULL')
                    assert n.fetchone()[0] == 0, (table, name)
        k = con.execute(
            "SELECT registersPerThread, gridId, gridX, gridY, gridZ, blockX, blockY, blockZ,"
            " staticSharedMemory, launchType, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL"
            " JOIN StringIds s ON s.id = shortName"
        ).fetchone()
        assert k == (32, 1, 1, 1, 1, 128, 1, 1, 0, 1, "vec_kernel")
        m = con.execute(
            "SELECT bytes, copyKind, srcKind, dstKind, srcDeviceId, dstDeviceId, contextId"
            " FROM CUPTI_ACTIVITY_KIND_MEMCPY"
        ).fetchone()
        assert m == (4096, 1, 0, 1, 0, 0, 1)
        s = con.execute("SELECT syncType, eventId FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")
        assert s.fetchone() == (1, 0)
        nv = con.execute("SELECT end, text, eventType, domainId FROM NVTX_EVENTS").fetchone()
        assert nv == (None, None, 59, 0)
        if version == "2026.2":
            tsz = con.execute("SELECT tensorSizeMinusOneElements FROM CUPTI_ACTIVITY_KIND_KERNEL")
            assert tsz.fetchone() == ("[]",)


@pytest.mark.parametrize("version", VERSIONS)
def test_add_row_and_bulk_fill_missing_not_null_columns(version, tmp_path):
    b = TraceBuilder(version)
    b.add_row("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", {"start": 1, "end": 2})
    rows = ((i * 10, i * 10 + 5, i % 2) for i in range(1000))
    b.bulk("CUPTI_ACTIVITY_KIND_KERNEL", ["start", "end", "deviceId"], rows)
    with open_ro(b.write(tmp_path / "t.sqlite")) as con:
        sync = con.execute(
            "SELECT deviceId, streamId, syncType, eventId FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
        ).fetchone()
        agg = con.execute(
            "SELECT count(*), sum(end - start), sum(deviceId), max(demangledName), max(gridId)"
            " FROM CUPTI_ACTIVITY_KIND_KERNEL"
        ).fetchone()
    assert sync == (0, 0, 0, 0)
    assert agg == (1000, 5000, 500, 0, 0)


def test_version_dependent_columns_are_dropped_unknown_ones_raise(tmp_path):
    for version, expected in (("2022.2", None), ("2024.6", 3)):
        b = TraceBuilder(version)
        b.kernel(0, 1, greenContextId=3, graph_id=9)
        with open_ro(b.write(tmp_path / f"{version}.sqlite")) as con:
            cols = [r[0] for r in table_info(con, "CUPTI_ACTIVITY_KIND_KERNEL")]
            row = con.execute("SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
        assert "graphId" not in cols
        got = row[cols.index("greenContextId")] if "greenContextId" in cols else None
        assert got == expected
    b = TraceBuilder("2026.2")
    b.kernel(0, 1, graph_id=9, graph_node_id=4)
    with open_ro(b.write(tmp_path / "2026.sqlite")) as con:
        assert con.execute(
            "SELECT graphId, graphNodeId FROM CUPTI_ACTIVITY_KIND_KERNEL"
        ).fetchone() == (9, 4)
    with pytest.raises(ValueError, match="no column 'bogus'"):
        TraceBuilder("2024.6").kernel(0, 1, bogus=1)
    with pytest.raises(ValueError, match="no column"):
        TraceBuilder("2024.6").bulk("NVTX_EVENTS", ["start", "nonsense"], [])


def test_enum_and_metadata_rows(tmp_path):
    b = TraceBuilder("2024.6", capture_meta=[("CAPTURE_PARAM", "x")])
    with open_ro(b.write(tmp_path / "new.sqlite")) as con:
        assert con.execute("SELECT name, value FROM META_DATA_EXPORT").fetchall() == [
            ("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"),
            ("EXPORT_PRODUCT_VERSION", "2024.6.2.25"),
            ("EXPORT_SCHEMA_VERSION", "3.16.1"),
            ("EXPORT_SCHEMA_VERSION_MAJOR", "3"),
            ("EXPORT_SCHEMA_VERSION_MINOR", "16"),
            ("EXPORT_SCHEMA_VERSION_MICRO", "1"),
        ]
        assert con.execute("SELECT * FROM META_DATA_CAPTURE").fetchall() == [("CAPTURE_PARAM", "x")]
        htod = con.execute("SELECT name, label FROM ENUM_CUDA_MEMCPY_OPER WHERE id = 1")
        assert htod.fetchone() == ("CUDA_MEMCPY_KIND_HTOD", "Host-to-Device")
        push_pop = con.execute("SELECT name FROM ENUM_NSYS_EVENT_TYPE WHERE id = 59")
        assert push_pop.fetchone() == ("NvtxPushPopRange",)
        assert con.execute("SELECT count(*) FROM ENUM_NSYS_EVENT_CLASS").fetchone() == (89,)
    # 2022.4 has no META_DATA_CAPTURE table, so capture_meta is ignored there.
    old = TraceBuilder("2022.4", capture_meta=[("CAPTURE_PARAM", "x")])
    with open_ro(old.write(tmp_path / "old.sqlite")) as con:
        meta = dict(con.execute("SELECT name, value FROM EXPORT_META_DATA"))
    assert meta["EXPORT_SCHEMA_VERSION"] == "3.0.0"
    assert meta["EXPORT_PRODUCT_VERSION"] == "2022.4.2.1"
    assert META_ROWS["2022.2"][2] == ("EXPORT_SCHEMA_VERSION", "2.9.1")
    assert ENUM_ROWS["2022.2"] == {}
    assert len(ENUM_ROWS["2026.2"]["ENUM_NSYS_EVENT_TYPE"]) == 155


def test_omit_drops_table_and_its_rows_and_errors_are_loud(tmp_path):
    b = TraceBuilder("2024.6", omit=["NVTX_EVENTS", "ENUM_NSYS_EVENT_CLASS"])
    b.nvtx(0, 10, text="dropped")
    path = b.write(tmp_path / "t.sqlite")
    with open_ro(path) as con:
        names = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
        strings = con.execute("SELECT count(*) FROM StringIds").fetchone()
    assert "NVTX_EVENTS" not in names and "ENUM_NSYS_EVENT_CLASS" not in names
    assert len(names) == 16 and strings == (0,)
    with pytest.raises(FileExistsError):
        TraceBuilder("2024.6").write(path)
    with pytest.raises(RuntimeError):
        b.write(tmp_path / "again.sqlite")
    with pytest.raises(ValueError, match="omit"):
        TraceBuilder("2024.6", omit=["NO_SUCH_TABLE"])
    with pytest.raises(ValueError, match="unknown version"):
        TraceBuilder("2023.1")
    with pytest.raises(ValueError):
        TraceBuilder("2024.6").nvtx(0, 1, text="a", text_id_for="a")
    with pytest.raises(ValueError, match="not part of the 2022.2 schema"):
        TraceBuilder("2022.2").add_row("META_DATA_CAPTURE", {"name": "x"})


def test_strings_are_interned_once(tmp_path):
    b = TraceBuilder("2024.6")
    assert b.string("a") == 1 and b.string("b") == 2 and b.string("a") == 1
    b.runtime(0, 1, corr=5, name="a")
    b.runtime(2, 3, name="a")
    with open_ro(b.write(tmp_path / "t.sqlite")) as con:
        assert con.execute("SELECT id, value FROM StringIds").fetchall() == [(1, "a"), (2, "b")]
        rows = con.execute("SELECT nameId, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME")
        assert rows.fetchall() == [(1, 5), (1, 1_000_000)]  # auto ids start at 1e6
