"""Fast bulk insert of numpy columns into an export built from the fixture DDL.

TraceBuilder's row-at-a-time path is fine for fixtures; millions of rows need executemany
over zipped Python lists, with constant columns written as SQL literals so they cost no
binding, and -1 turned into NULL by SQLite (NULLIF) rather than by Python.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Mapping
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fixtures.schema_info import (  # noqa: E402
    default_for,
    table_columns,
    version_dependent_columns,
)

CHUNK_ROWS = 200_000
Value = np.ndarray | int | float | str | None


def _literal(v: int | float | str | None) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    return repr(v)


def insert_arrays(
    con: sqlite3.Connection,
    version: str,
    table: str,
    values: Mapping[str, Value],
    nullable: frozenset[str] = frozenset(),
) -> int:
    """Insert rows given as equal-length arrays (and scalars shared by every row).

    Columns this version lacks but others have (graphId, greenContextId ...) are dropped;
    NOT NULL columns left out get the fixtures' default value. In `nullable` columns, -1
    is written as NULL. Returns the number of rows.
    """
    spec = table_columns(version)[table]
    have = {c[0] for c in spec}
    optional = version_dependent_columns().get(table, frozenset())
    cols: dict[str, Value] = {}
    for name, v in values.items():
        if name in have:
            cols[name] = v
        elif name not in optional:
            raise ValueError(f"{table} has no column {name!r} in version {version}")
    for name, typ, notnull in spec:
        if notnull and name not in cols:
            cols[name] = default_for(name, typ)
    arrays = [(k, v) for k, v in cols.items() if isinstance(v, np.ndarray)]
    n = len(arrays[0][1]) if arrays else 0
    if any(len(v) != n for _, v in arrays):
        raise ValueError(f"{table}: columns of different lengths")
    places = []
    for k, v in cols.items():
        if isinstance(v, np.ndarray):
            places.append("NULLIF(?, -1)" if k in nullable else "?")
        else:
            places.append(_literal(v))
    names = ", ".join(f'"{k}"' for k in cols)
    sql = f"INSERT INTO {table} ({names}) VALUES ({', '.join(places)})"
    for lo in range(0, n, CHUNK_ROWS):
        lists = [v[lo : lo + CHUNK_ROWS].tolist() for _, v in arrays]
        con.executemany(sql, zip(*lists, strict=True))
    return n
