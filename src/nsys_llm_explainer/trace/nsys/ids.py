"""Decoding Nsight Systems serialized global ids.

Real exports put hardware/VM bits above bit 48, so the pid is bits 24..47 and the tid
is bits 0..23: pid = (globalPid >> 24) & 0xFFFFFF, tid = globalTid & 0xFFFFFF.

StringIds lookups: names are resolved on demand, only for ids that are used."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable

import numpy as np

from nsys_llm_explainer.trace.nsys.probe import STRINGS_TABLE

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
