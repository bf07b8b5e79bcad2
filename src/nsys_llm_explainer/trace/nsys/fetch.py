"""Columnar fetch: run one SELECT and return its integer columns as numpy arrays.

Rows are pulled in chunks and written into preallocated arrays, so a table of millions of
rows never exists as Python tuples all at once.

Columnar reads through the ADBC SQLite driver: integer columns straight into numpy.

Python's sqlite3 builds a Python object for every value of every row. The ADBC SQLite
driver (`adbc-driver-sqlite`) steps the same statement in C and hands back Arrow record
batches: one int64 buffer per column, which numpy copies as it is. On the 5M-kernel
export that reads the kernel table in 2.9 s, where sqlite3's row fetch alone takes 4.75 s
(docs/performance.md).

The batches come through the Arrow C stream interface, called with ctypes: ctypes lets
go of the GIL for the call, so the metrics in other threads go on while SQLite steps.

This is only a faster way to the same columns. `read` returns None, and the caller reads
with sqlite3 as before, whenever the driver is not installed or cannot open the file,
or the result is anything but non-NULL 64-bit integers (a column the driver typed
otherwise, a value whose type changed mid-table, an error). The database is opened
through the same read-only URI as the sqlite3 connection."""

from __future__ import annotations

import ctypes
import itertools
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

import numpy as np

from nsys_llm_explainer.trace import deadline
from nsys_llm_explainer.trace.nsys.open import SAFETY_PRAGMAS
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


# Below this many rows the sqlite3 path is as fast (the driver's load and open cost a
# few milliseconds; the per-value saving pays from about here).
MIN_ROWS = 100_000
BATCH_ROWS = 65536
INT64 = b"l"
# Set to 1: read every table with sqlite3 (the read helper process inherits it).
OFF_VAR = "NSYS_LLM_EXPLAIN_NO_ADBC"


class _Schema(ctypes.Structure):
    pass


_Schema._fields_ = [
    ("format", ctypes.c_char_p),
    ("name", ctypes.c_char_p),
    ("metadata", ctypes.c_void_p),
    ("flags", ctypes.c_int64),
    ("n_children", ctypes.c_int64),
    ("children", ctypes.POINTER(ctypes.POINTER(_Schema))),
    ("dictionary", ctypes.c_void_p),
    ("release", ctypes.CFUNCTYPE(None, ctypes.POINTER(_Schema))),
    ("private_data", ctypes.c_void_p),
]


class _Array(ctypes.Structure):
    pass


_Array._fields_ = [
    ("length", ctypes.c_int64),
    ("null_count", ctypes.c_int64),
    ("offset", ctypes.c_int64),
    ("n_buffers", ctypes.c_int64),
    ("n_children", ctypes.c_int64),
    ("buffers", ctypes.POINTER(ctypes.c_void_p)),
    ("children", ctypes.POINTER(ctypes.POINTER(_Array))),
    ("dictionary", ctypes.c_void_p),
    ("release", ctypes.CFUNCTYPE(None, ctypes.POINTER(_Array))),
    ("private_data", ctypes.c_void_p),
]


class _Stream(ctypes.Structure):
    pass


_Stream._fields_ = [
    ("get_schema", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_Stream), ctypes.POINTER(_Schema))),
    ("get_next", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_Stream), ctypes.POINTER(_Array))),
    ("get_last_error", ctypes.CFUNCTYPE(ctypes.c_char_p, ctypes.POINTER(_Stream))),
    ("release", ctypes.CFUNCTYPE(None, ctypes.POINTER(_Stream))),
    ("private_data", ctypes.c_void_p),
]


class NotColumns(Exception):
    """The result is not what this reader hands over: read it with sqlite3 instead."""


def _driver() -> tuple[Any, str] | None:
    if os.environ.get(OFF_VAR, "") not in ("", "0"):
        return None
    try:
        import adbc_driver_manager
        import adbc_driver_sqlite
    except ImportError:
        return None
    return adbc_driver_manager, str(adbc_driver_sqlite._driver_path())


class ArrowReader:
    """One ADBC connection to a read-only URI, opened on first use, one statement at a time."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self._lock = threading.Lock()
        self._conn: Any = None
        self._db: Any = None
        self._broken = not uri
        self._stop = threading.Event()

    def _connection(self) -> Any:
        if self._conn is None and not self._broken:
            found = _driver()
            if found is None:
                self._broken = True
                return None
            dm, path = found
            try:
                self._db = dm.AdbcDatabase(driver=path, uri=self.uri)
                self._conn = dm.AdbcConnection(self._db)
                for pragma in SAFETY_PRAGMAS:
                    stmt = dm.AdbcStatement(self._conn)
                    try:
                        stmt.set_sql_query(pragma)
                        stmt.execute_update()
                    finally:
                        stmt.close()
            except Exception:  # noqa: BLE001 - any failure means: read with sqlite3
                self._broken = True
                self.close()
        return self._conn

    def read(
        self,
        sql: str,
        names: Sequence[str],
        capacity: int,
        progress: Callable[[int], None] | None = None,
    ) -> dict[str, np.ndarray] | None:
        """The int64 columns of `sql`, one per name, or None: read them with sqlite3."""
        with self._lock:
            self._stop.clear()  # as sqlite3's: an interrupt stops the statement running then
            conn = self._connection()
            if conn is None:
                return None
            try:
                return self._read(conn, sql, names, capacity, progress)
            except NotColumns:
                return None

    def _read(
        self,
        conn: Any,
        sql: str,
        names: Sequence[str],
        capacity: int,
        progress: Callable[[int], None] | None,
    ) -> dict[str, np.ndarray]:
        import adbc_driver_manager as dm

        stmt = dm.AdbcStatement(conn)
        try:
            try:
                stmt.set_options(**{"adbc.sqlite.query.batch_rows": str(BATCH_ROWS)})
                stmt.set_sql_query(sql)
                handle, _ = stmt.execute_query()
            except dm.Error as exc:
                raise NotColumns(str(exc)) from None
            stream = _Stream.from_address(handle.address)
            try:
                return self._drain(stream, len(names), capacity, names, progress)
            finally:
                if stream.release:
                    stream.release(ctypes.byref(stream))
        finally:
            stmt.close()

    def _drain(
        self,
        stream: _Stream,
        ncols: int,
        capacity: int,
        names: Sequence[str],
        progress: Callable[[int], None] | None,
    ) -> dict[str, np.ndarray]:
        schema = _Schema()
        if stream.get_schema(ctypes.byref(stream), ctypes.byref(schema)) != 0:
            raise NotColumns("no schema")
        try:
            if schema.n_children != ncols or any(
                schema.children[i].contents.format != INT64 for i in range(ncols)
            ):
                raise NotColumns("not all int64")
        finally:
            if schema.release:
                schema.release(ctypes.byref(schema))
        out = [np.empty(max(capacity, 0), dtype=np.int64) for _ in range(ncols)]
        n = 0
        while True:
            if self._stop.is_set():  # as sqlite3 reports conn.interrupt()
                raise sqlite3.OperationalError("interrupted")
            deadline.check()
            batch = _Array()
            try:  # released whatever happens once get_next filled it (Ctrl-C included)
                if stream.get_next(ctypes.byref(stream), ctypes.byref(batch)) != 0:
                    raise NotColumns("the driver stopped")  # e.g. a type change mid-table
                if not batch.release:
                    break  # end of stream
                k = int(batch.length)
                if batch.offset != 0 or batch.n_children != ncols:
                    raise NotColumns("unexpected batch layout")
                if n + k > len(out[0]):  # the table grew or count(*) lied
                    out = [grown(o, n, n + k) for o in out]
                for i in range(ncols):
                    out[i][n : n + k] = _int64_values(batch.children[i].contents, k)
            finally:
                if batch.release:
                    batch.release(ctypes.byref(batch))
            n += k
            if progress is not None:
                progress(n)
        return {name: out[i][:n] for i, name in enumerate(names)}

    def interrupt(self) -> None:
        """Stop the statement now running at its next batch (Ctrl-C)."""
        self._stop.set()

    def close(self) -> None:
        for obj in (self._conn, self._db):
            if obj is not None:
                try:
                    obj.close()
                except Exception:  # noqa: BLE001,S110 - closing what failed to open
                    pass
        self._conn = self._db = None


def _int64_values(child: _Array, length: int) -> np.ndarray:
    """A child array's `length` values as a numpy view (no copy); NotColumns if any is
    NULL or the child is not as long as its batch."""
    if int(child.length) != length:
        raise NotColumns("a column shorter or longer than its batch")
    offset = int(child.offset)
    if length == 0:
        return np.empty(0, dtype=np.int64)
    if child.n_buffers != 2:
        raise NotColumns("unexpected layout")
    validity, data = child.buffers[0], child.buffers[1]
    if child.null_count != 0 and validity:
        bits = np.ctypeslib.as_array(
            ctypes.cast(validity, ctypes.POINTER(ctypes.c_uint8)), ((offset + length + 7) // 8,)
        )
        if not np.unpackbits(bits, count=offset + length, bitorder="little")[offset:].all():
            raise NotColumns("NULL values")
    values = np.ctypeslib.as_array(
        ctypes.cast(data, ctypes.POINTER(ctypes.c_int64)), (offset + length,)
    )
    return values[offset:]
