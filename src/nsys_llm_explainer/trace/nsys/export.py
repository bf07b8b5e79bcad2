"""An opened Nsight Systems export as its table readers see it: the connection, one
statement at a time (and the --timeout handler that stops it), the string table, what the
load helpers read, and the checked load of a table's integer columns. Rows that cannot be
used (NULL or non-integer required values, end < start, timestamps outside [0, 2^62)) are
left out by the query itself and counted in a warning.

NsysTraceData (load.py) builds the core tables on it. The readers of the other tables
(activity.py, metadata.py) take an NsysExport, and the load helpers (helper.py) hand back
Loaded values, so that none of them needs load.py.

Its ids (pids, tids, pid_of, thread_keys): Nsight Systems serialized global ids, decoded.

Real exports put hardware/VM bits above bit 48, so the pid is bits 24..47 and the tid
is bits 0..23: pid = (globalPid >> 24) & 0xFFFFFF, tid = globalTid & 0xFFFFFF.

Its string table (StringTable): StringIds lookups, names resolved on demand, only for ids
that are used."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from nsys_llm_explainer.model import Schema
from nsys_llm_explainer.trace.clean import total_duration_problem
from nsys_llm_explainer.trace.columns import Columns
from nsys_llm_explainer.trace.data import MISSING, TraceData, Unavailable
from nsys_llm_explainer.trace.nsys import fetch
from nsys_llm_explainer.trace.nsys.fetch import MAX_TIMESTAMP, Progress, count_rows, fetch_ints, is_int
from nsys_llm_explainer.trace.nsys.probe import STRINGS_TABLE, quote_ident

MAX_DEVICE_ID = 65535


@dataclass
class Loaded:
    """What loading one key produced in a load helper, to be merged into the trace data."""

    entries: dict[str, Columns | list[str]]  # cache key -> its value
    warnings: list[str] = field(default_factory=list)
    row_counts: dict[str, int] = field(default_factory=dict)
    missing: list[int] = field(default_factory=list)


class TableHelper(Protocol):
    """A process loading some tables beside this one (helper.LoadHelper)."""

    def pending(self, key: str) -> bool: ...
    def take(self, key: str, progress: Progress | None = None) -> Loaded | None: ...
    def close(self) -> None: ...


class SerialHandler:
    """The connection as deadline.limit sees it: its progress handler is set with the
    connection to itself (see NsysExport.sql)."""

    def __init__(self, conn: sqlite3.Connection, lock: threading.RLock) -> None:
        self._conn, self._lock = conn, lock

    def set_progress_handler(self, handler: Callable[[], Any] | None, n: int) -> None:
        with self._lock:
            self._conn.set_progress_handler(handler, n)


class NsysExport(TraceData):
    """One opened export: its connection and what reads it (see the module's docstring)."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        schema: Schema,
        kernel_name: str = "demangled",
        progress: Progress | None = None,
    ) -> None:
        super().__init__(schema, kernel_name)
        self.conn = conn
        # One statement at a time on the shared connection, from its execute to its last row.
        # SQLite holds the connection's mutex while it runs the --timeout progress handler,
        # which needs the GIL; a second thread reading a row holds the GIL and waits for that
        # mutex. Statements from two threads interleaved would deadlock.
        self.sql = threading.RLock()
        self.progress = progress
        self.strings = StringTable(conn, schema.has(STRINGS_TABLE, "id", "value"), self.sql)
        # One object for every metric's deadline, so that deadline.limit counts the limits
        # active on this connection and removes the handler only after the last one ends.
        self._interruptible = SerialHandler(conn, self.sql)
        self.helpers: Sequence[TableHelper] = []  # load some tables in parallel (nsys/helper.py)
        self.arrow = fetch.ArrowReader(getattr(conn, "uri", ""))
        self._tables: set[str] | None = None

    def _prefetched(self, key: str) -> Any:
        """Take `key` from the load helper if it has it; MISSING: build it here."""
        helper = next((h for h in self.helpers if h.pending(key)), None)
        if helper is None:
            return MISSING
        loaded = helper.take(key, self.progress)
        if loaded is None or key not in loaded.entries:
            return MISSING
        with self._lock:
            self._cache.update(loaded.entries)
            self.warnings.extend(loaded.warnings)
            for table, rows in loaded.row_counts.items():
                self.row_counts.setdefault(table, rows)
        self.strings.add_missing(loaded.missing)
        return loaded.entries[key]

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        """All rows of a small statement, run with the connection to itself (see self.sql)."""
        with self.sql:
            return self.conn.execute(sql, params).fetchall()

    def close_helpers(self) -> None:
        for helper in self.helpers:
            helper.close()
        self.helpers = []

    def close(self) -> None:
        self.close_helpers()
        self.arrow.close()
        self.conn.close()

    def interrupt(self) -> None:
        self.arrow.interrupt()
        self.conn.interrupt()

    @property
    def interruptible(self) -> SerialHandler:
        return self._interruptible

    def require(self, table: str | None, what: str, *columns: str) -> str:
        if table is None or table not in self.schema.tables:
            raise Unavailable(f"the export has no {table or what} table ({what} not captured)")
        missing = [c for c in columns if c not in self.schema.tables[table]]
        if missing:
            raise Unavailable(f"{table} lacks column(s) {', '.join(missing)}")
        return table

    def load_table(
        self,
        table: str,
        select: dict[str, str],
        required: tuple[str, ...],
        extra_where: str = "",
        text: dict[str, str] | None = None,
        interval: bool = True,
    ) -> Columns:
        conds = [is_int(c) for c in required]
        if interval:
            conds += ['"start" >= 0', '"end" >= "start"', f'"end" < {MAX_TIMESTAMP}']
        if "deviceId" in required:  # CUDA device ordinals are small; anything else is damage
            conds.append(f'"deviceId" BETWEEN 0 AND {MAX_DEVICE_ID}')
        if extra_where:
            conds.append(extra_where)
        text = text or {}
        exprs = list(select.values()) + list(text.values())
        sql = f"SELECT {', '.join(exprs)} FROM {quote_ident(table)} WHERE {' AND '.join(conds)}"
        with self.sql:
            total = self.row_counts.setdefault(table, count_rows(self.conn, table))
        cols = self._columnar(table, sql, tuple(select), total) if not text else None
        with self.sql:
            if cols is None:
                cols = fetch_ints(
                    self.conn, sql, tuple(select), total, progress=self.progress, label=table,
                    text_names=tuple(text),
                )
            loaded = len(next(iter(cols.values()))) if cols else 0
            self._note_ignored(table, total, loaded, required, extra_where)
        problem = total_duration_problem(table, cols) if interval else None
        if problem:
            raise Unavailable(problem)
        return Columns(table, cols)

    def _columnar(
        self, table: str, sql: str, names: tuple[str, ...], total: int
    ) -> dict[str, np.ndarray] | None:
        """The columns through the ADBC driver (trace/nsys/fetch.py) when the table is big
        enough to pay and a real table (a view's statement could run long between rows,
        where only sqlite3's progress handler can stop it); None: read with sqlite3."""
        if total < fetch.MIN_ROWS or table not in self._base_tables():
            return None
        progress = self.progress
        return self.arrow.read(
            sql, names, total, None if progress is None else (lambda n: progress(table, n))
        )

    def _base_tables(self) -> set[str]:
        if self._tables is None:
            rows = self.query("SELECT name FROM sqlite_master WHERE type = 'table'")
            self._tables = {str(r[0]) for r in rows}
        return self._tables

    def _note_ignored(
        self, table: str, total: int, loaded: int, required: tuple[str, ...], extra: str
    ) -> None:
        if extra:  # rows outside the filter (e.g. NVTX marks) are not damage
            total = int(
                self.conn.execute(
                    f"SELECT count(*) FROM {quote_ident(table)} WHERE {extra}"
                ).fetchone()[0]
            )
        ignored = total - loaded
        if ignored > 0:
            self.warnings.append(
                f"{table}: {ignored} of {total} rows ignored (NULL or non-integer "
                f"{'/'.join(required)}, end before start, timestamps outside [0, 2^62)"
                f"{', deviceId outside [0, 65535]' if 'deviceId' in required else ''})"
            )


PID_SHIFT = 24
ID_MASK = 0xFFFFFF
PID_MAX = 4_194_304  # Linux's largest possible pid (2^22)


def pid_of(global_id: int) -> int:
    return (global_id >> PID_SHIFT) & ID_MASK


def tid_of(global_tid: int) -> int:
    return global_tid & ID_MASK


def pids(global_ids: np.ndarray) -> np.ndarray:
    """Vectorized pid_of; negative (missing) ids decode to -1."""
    out = (global_ids >> PID_SHIFT) & ID_MASK
    return np.where(global_ids < 0, -1, out)


def tids(global_tids: np.ndarray) -> np.ndarray:
    out = global_tids & ID_MASK
    return np.where(global_tids < 0, -1, out)


def thread_keys(global_tids: np.ndarray) -> np.ndarray:
    """A per-thread key that keeps process and thread apart (vm bits dropped)."""
    return np.where(global_tids < 0, -1, global_tids & ((1 << 48) - 1))


def implausible_pids(global_pids: np.ndarray) -> int:
    """How many rows decode to a pid no Linux process can have (0 from a non-zero globalPid,
    negative, or above PID_MAX): the export may not use the usual (pid << 24) layout."""
    p = pids(global_pids)
    return int((((p == 0) & (global_pids > 0)) | (p > PID_MAX) | (p < 0)).sum())


def implausible_pids_note(count: int) -> str | None:
    if not count:
        return None
    return (f"{count} kernels decode to an implausible pid (0, negative or > {PID_MAX}); "
            "globalPid may not follow the usual (pid << 24) layout, so per-process figures are uncertain")


_LOOKUP_CHUNK = 500
UNKNOWN_NAME = "(unknown name)"



class StringTable:
    """Resolves StringIds ids on demand; only ids that are actually used are read."""

    def __init__(self, conn: sqlite3.Connection, available: bool, lock: threading.RLock) -> None:
        self._conn = conn
        self._available = available
        self._cache: dict[int, str] = {}
        self.missing: set[int] = set()
        # Metrics running in threads share one table; the lock is the connection's own
        # (NsysExport.sql): a lookup is a statement like any other.
        self._lock = lock

    def resolve(self, ids: Iterable[int]) -> dict[int, str]:
        wanted = {int(i) for i in ids}
        with self._lock:
            return self._resolve(wanted)

    def _resolve(self, wanted: set[int]) -> dict[int, str]:
        # Negative ids are "no name" (or damage): answered without a lookup, never missing.
        todo = sorted(i for i in wanted - self._cache.keys() - self.missing if i >= 0)
        if todo and self._available:
            for i in range(0, len(todo), _LOOKUP_CHUNK):
                chunk = todo[i : i + _LOOKUP_CHUNK]
                marks = ",".join("?" for _ in chunk)
                sql = f"SELECT id, value FROM {STRINGS_TABLE} WHERE id IN ({marks})"
                for sid, value in self._conn.execute(sql, chunk):
                    if isinstance(sid, int):
                        self._cache[sid] = value if isinstance(value, str) else str(value)
        self.missing |= {i for i in todo if i not in self._cache}
        return {i: self._cache.get(i, f"{UNKNOWN_NAME} #{i}") for i in wanted}

    def add_missing(self, ids: Iterable[int]) -> None:
        """Record ids another process found missing (the load helper's lookups)."""
        with self._lock:
            self.missing.update(int(i) for i in ids)

    def get(self, sid: int) -> str:
        return self.resolve([sid]).get(int(sid), UNKNOWN_NAME)
