"""Columnar fetch: run one SELECT and return its integer columns as numpy arrays.

Rows are pulled in chunks and written into preallocated arrays, so a table of millions of
rows never exists as Python tuples all at once.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Callable, Sequence
from operator import itemgetter

import numpy as np

from nsys_llm_explainer.trace.nsys.probe import quote_ident

CHUNK_ROWS = 65536
MAX_TIMESTAMP = 1 << 62  # beyond this, sums of timestamps could overflow int64
Progress = Callable[[str, int], None]


def int_or(column: str, default: int = -1) -> str:
    """SQL for an integer column that may be NULL or hold a non-integer value."""
    col = quote_ident(column)
    return f"(CASE WHEN typeof({col}) = 'integer' THEN {col} ELSE {default} END)"


def is_int(column: str) -> str:
    return f"typeof({quote_ident(column)}) = 'integer'"


def count_rows(conn: sqlite3.Connection, table: str) -> int:
    return int(conn.execute(f"SELECT count(*) FROM {quote_ident(table)}").fetchone()[0])


def rows_upper_bound(conn: sqlite3.Connection, table: str | None) -> int:
    """At least the row count of `table`, from the rowid range (two b-tree seeks, no
    scan); 0 when there is no such table, it has no rowid (a view) or cannot be read."""
    if table is None:
        return 0
    try:
        row = conn.execute(f"SELECT max(rowid) - min(rowid) + 1 FROM {quote_ident(table)}").fetchone()
    except sqlite3.Error:
        return 0
    return int(row[0]) if row and isinstance(row[0], int) else 0


def grown(column: np.ndarray, n: int, need: int) -> np.ndarray:
    """A longer int64 column (twice as long, or `need`) holding `column`'s first n values."""
    out = np.empty(max(2 * len(column), need), dtype=np.int64)
    out[:n] = column[:n]
    return out


def fetch_ints(
    conn: sqlite3.Connection,
    sql: str,
    names: Sequence[str],
    capacity: int,
    params: Sequence[object] = (),
    progress: Progress | None = None,
    label: str = "",
    text_names: Sequence[str] = (),
) -> dict[str, np.ndarray]:
    """Fetch `sql` into one int64 array per name in `names`.

    The SELECT lists the integer columns first, then `text_names` columns, which come back
    as object arrays. `capacity` is an upper bound on the row count (the table's count(*)).
    """
    ncols = len(names)
    ntext = len(text_names)
    texts: list[list[object]] = [[] for _ in text_names]
    # One array per column (not one 2-D block) so a caller can drop a column it no longer
    # needs and get its memory back.
    out = [np.empty(max(capacity, 0), dtype=np.int64) for _ in names]
    int_part = itemgetter(slice(0, ncols))
    cur = conn.execute(sql, params)
    n = 0
    while True:
        rows = cur.fetchmany(CHUNK_ROWS)
        if not rows:
            break
        k = len(rows)
        size = len(out[0]) if out else 0
        if n + k > size:  # the table grew or count(*) lied: grow geometrically
            out = [grown(o, n, n + k) for o in out]
        if ntext:
            # itemgetter maps run in C: no per-row Python generator or zip(*rows).
            for j, col in enumerate(texts):
                col.extend(map(itemgetter(ncols + j), rows))
            ints = itertools.chain.from_iterable(map(int_part, rows))
        else:
            ints = itertools.chain.from_iterable(rows)
        flat = np.fromiter(ints, dtype=np.int64, count=k * ncols)
        for i, column in enumerate(out):
            column[n : n + k] = flat[i::ncols]
        n += k
        if progress is not None:
            progress(label, n)
    result = {name: out[i][:n] for i, name in enumerate(names)}
    for j, name in enumerate(text_names):
        arr = np.empty(n, dtype=object)
        arr[:] = texts[j]
        result[name] = arr
    return result

