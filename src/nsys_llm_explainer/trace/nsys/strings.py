"""StringIds lookups: names are resolved on demand, only for ids that are used."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable

from nsys_llm_explainer.trace.nsys.probe import STRINGS_TABLE

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
