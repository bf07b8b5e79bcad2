"""The degraded-variant fixtures hold exactly the rows their docstrings list."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.fixtures import variants
from tests.fixtures.nsys_schema import META_TABLE, VERSIONS


def open_ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def table_names(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def one(con: sqlite3.Connection, sql: str) -> tuple:
    return con.execute(sql).fetchone()


@pytest.mark.parametrize("version", VERSIONS)
def test_empty_export(version, tmp_path):
    with open_ro(variants.empty_export(tmp_path / "t.sqlite", version)) as con:
        assert table_names(con) == {"StringIds", META_TABLE[version]}
        assert one(con, "SELECT count(*) FROM StringIds") == (0,)
        assert one(con, f"SELECT count(*) FROM {META_TABLE[version]}") == (6,)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("kernel_table", [False, True])
def test_no_kernels(version, kernel_table, tmp_path):
    path = variants.no_kernels(tmp_path / "t.sqlite", version, kernel_table=kernel_table)
    with open_ro(path) as con:
        assert ("CUPTI_ACTIVITY_KIND_KERNEL" in table_names(con)) is kernel_table
        q = "SELECT count(*), sum(end - start) FROM CUPTI_ACTIVITY_KIND_RUNTIME"
        assert one(con, q) == (4, 3700)


@pytest.mark.parametrize("version", VERSIONS)
def test_no_nvtx(version, tmp_path):
    with open_ro(variants.no_nvtx(tmp_path / "t.sqlite", version)) as con:
        assert "NVTX_EVENTS" not in table_names(con)
        q = (
            "SELECT sum(k.start - r.start), sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k"
            " JOIN CUPTI_ACTIVITY_KIND_RUNTIME r USING (correlationId)"
        )
        assert one(con, q) == (1900, 1200)


@pytest.mark.parametrize("version", VERSIONS)
def test_null_ends(version, tmp_path):
    with open_ro(variants.null_ends(tmp_path / "t.sqlite", version)) as con:
        q = "SELECT count(*), sum(end - start) FROM NVTX_EVENTS WHERE end IS NOT NULL"
        assert one(con, q) == (2, 11000)
        q = "SELECT group_concat(text, ',') FROM NVTX_EVENTS WHERE end IS NULL"
        assert one(con, q) == ("forward,mark",)


@pytest.mark.parametrize("version", VERSIONS)
def test_mixed_text(version, tmp_path):
    with open_ro(variants.mixed_text(tmp_path / "t.sqlite", version)) as con:
        assert one(con, "SELECT count(*) FROM NVTX_EVENTS WHERE textId IS NOT NULL") == (2,)
        q = (
            "SELECT coalesce(n.text, s.value) AS k, count(*), sum(n.end - n.start)"
            " FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId GROUP BY k ORDER BY k"
        )
        assert con.execute(q).fetchall() == [
            ("backward", 1, 1000),
            ("forward", 2, 2500),
            ("optimizer", 1, 500),
        ]


@pytest.mark.parametrize("version", VERSIONS)
def test_multi_process_colliding_corr(version, tmp_path):
    path = variants.multi_process_colliding_corr(tmp_path / "t.sqlite", version)
    with open_ro(path) as con:
        join = (
            "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k"
            " JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId"
        )
        same_proc = " AND (r.globalTid >> 24) & 16777215 = (k.globalPid >> 24) & 16777215"
        assert one(con, join) == (12,)
        assert one(con, join + same_proc) == (6,)
        busy = con.execute(
            "SELECT deviceId, sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL"
            " GROUP BY deviceId ORDER BY deviceId"
        ).fetchall()
        assert busy == [(0, 600), (1, 3500)]
        assert one(con, "SELECT group_concat(pid, ',') FROM PROCESSES") == ("100,200",)
        assert one(con, "SELECT count(*) FROM TARGET_INFO_GPU") == (2,)


def test_variant_registry_lists_all_six():
    assert sorted(variants.VARIANTS) == [
        "empty_export",
        "mixed_text",
        "multi_process_colliding_corr",
        "no_kernels",
        "no_nvtx",
        "null_ends",
    ]
