"""Reading the big tables in a helper process while this one reads the kernels.

Python's sqlite3 builds a Python object for every value it returns and holds the GIL
while doing so, so two threads cannot read two tables faster than one; two processes
can. The helper is a fresh interpreter (`python -c`, not fork: this process already has
native threads, and a fork could re-run a user's script under some start methods) that
opens the same database through the same read-only URI, loads the tables it is given
with the same TraceData code, and streams the resulting columns back over a pipe
(trace/wire.py). Nothing else crosses: no options, no environment, no output paths.

A helper is only a shortcut. If it cannot start, dies, or fails on a table, the table is
loaded here as if there were no helper, with the same result and the same warnings.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from nsys_llm_explainer.model import Schema
from nsys_llm_explainer.trace import deadline
from nsys_llm_explainer.trace.nsys import wire
from nsys_llm_explainer.trace.nsys.export import Loaded
from nsys_llm_explainer.trace.nsys.fetch import rows_upper_bound
from nsys_llm_explainer.trace.nsys.probe import NVTX_TABLE, RUNTIME_TABLE

# What a helper can load (TraceData methods no option changes), with the table each reads.
HELPER_TABLES = {"runtime": RUNTIME_TABLE, "nvtx": NVTX_TABLE}
HELPER_KEYS = tuple(HELPER_TABLES)
# Below this many rows in the helpers' tables, starting an interpreter and sending the
# columns back costs more than reading them here saves. Measured A/B on the 2-core machine
# (docs/performance.md): 630,000 rows (the 500k-kernel export) 10% slower with a helper,
# 6.3 million rows (the 5M-kernel export) 22% faster.
HELPER_MIN_ROWS = 1_000_000
WAIT_STEP_S = 0.1  # how often a wait checks --timeout and reports progress
# A helper reports progress every CHUNK_ROWS rows; this long without a word, it is stuck
# (say, on a lock) and is stopped, and this process loads the tables itself.
STALL_S = 60.0
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from nsys_llm_explainer.trace.nsys.helper_main import main; main()"
)


class LoadHelper:
    """One helper process loading `keys` in order; take(key) waits for one of them."""

    def __init__(self, uri: str, keys: tuple[str, ...]) -> None:
        unknown = [k for k in keys if k not in HELPER_KEYS]
        if unknown:
            raise ValueError(f"a helper cannot load {unknown}")
        self.keys = keys
        self._done = {k: threading.Event() for k in keys}
        self._results: dict[str, Loaded | None] = {}
        self._rows: dict[str, int] = {}
        self._taken: set[str] = set()
        self._heard = time.monotonic()  # when the helper last wrote anything
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT, _PACKAGE_ROOT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        try:
            self._proc.stdin.write(json.dumps({"uri": uri, "keys": list(keys)}).encode() + b"\n")
            self._proc.stdin.close()
        except OSError:
            pass  # the helper died at once: the reader sees the end and every key fails
        self._reader = threading.Thread(
            target=self._read, args=(self._proc.stdout,), name="nsys-llm-explain-helper",
            daemon=True,
        )
        self._reader.start()

    def pending(self, key: str) -> bool:
        return key in self._done and key not in self._taken

    def take(self, key: str, progress: Callable[[str, int], None] | None = None) -> Loaded | None:
        """The helper's result for `key` (None: load it here), waiting for it if needed.

        Raises MetricTimeout when --timeout expires while waiting; the key stays pending."""
        done = self._done[key]
        while not done.wait(WAIT_STEP_S):
            deadline.check()
            if time.monotonic() - self._heard > STALL_S:
                self._proc.kill()  # the reader then sees the end: every pending key fails
            if progress is not None:
                progress(f"{key} (helper process)", self._rows.get(key, 0))
        self._taken.add(key)
        return self._results.pop(key, None)

    def close(self) -> None:
        """Stop the helper if it still runs and forget its results."""
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        self._reader.join(timeout=5)
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._results.clear()

    def _read(self, stream: IO[bytes]) -> None:
        try:
            while (header := wire.read_header(stream)) is not None:
                self._heard = time.monotonic()
                key = header["key"]
                if key not in self._done:
                    raise wire.WireError(f"the helper sent an unrequested key {key!r}")
                kind = header.get("type")
                if kind == "progress":
                    self._rows[key] = int(header.get("rows", 0))
                    continue
                if kind == "loaded":
                    self._results[key] = Loaded(
                        entries=wire.read_entries(stream, header),
                        warnings=[str(w) for w in header.get("warnings", [])],
                        row_counts={str(t): int(n) for t, n in header.get("row_counts", {}).items()},
                        missing=[int(i) for i in header.get("missing", [])],
                    )
                self._done[key].set()
        except (OSError, ValueError, KeyError, TypeError, wire.WireError):
            pass  # whatever did not arrive is loaded by the parent instead
        finally:
            for event in self._done.values():
                event.set()


def start_helpers(conn: sqlite3.Connection, schema: Schema, jobs: int) -> list[LoadHelper]:
    """Helpers for the big tables when they can pay off: jobs > 1, an interpreter to run
    them, a connection opened by trace/open.py, and at least HELPER_MIN_ROWS rows to read."""
    min_rows = HELPER_MIN_ROWS
    uri = getattr(conn, "uri", "")
    if jobs < 2 or not sys.executable or not uri:
        return []
    keys = [k for k, table in HELPER_TABLES.items() if table in schema.tables]
    if not keys or sum(rows_upper_bound(conn, HELPER_TABLES[k]) for k in keys) < min_rows:
        return []
    groups = [keys[i :: jobs - 1] for i in range(min(jobs - 1, len(keys)))]
    helpers: list[LoadHelper] = []
    for group in groups:
        try:
            helpers.append(LoadHelper(uri, tuple(group)))
        except OSError:
            break  # no helper process can be started: the rest loads here
    return helpers
