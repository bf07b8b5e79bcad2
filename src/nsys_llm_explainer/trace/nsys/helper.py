"""Open an Nsight Systems SQLite export as TraceData (open_nsys: read-only, probed, helpers
started), and read its big tables in a helper process while this one reads the kernels:
both sides of it, and the byte stream between them.

Python's sqlite3 builds a Python object for every value it returns and holds the GIL
while doing so, so two threads cannot read two tables faster than one; two processes
can. The helper is a fresh interpreter (`python -c`, not fork: this process already has
native threads, and a fork could re-run a user's script under some start methods) that
reads one request on stdin, opens the same database through the same read-only URI, loads
the tables it is given with the same NsysTraceData code (serve, main), and streams the
resulting columns back over a pipe. Nothing else crosses: no options, no environment, no
output paths.

A helper is only a shortcut. If it cannot start, dies, or fails on a table, the table is
loaded here as if there were no helper, with the same result and the same warnings.

The stream is a run of frames: a 4-byte little-endian length, a JSON header of that length,
then the raw bytes of the header's arrays (native byte order, in the order listed). Headers:

    {"type": "progress", "key": "runtime", "rows": 65536}
    {"type": "loaded", "key": "runtime", "entries": {...}, "warnings": [...],
     "row_counts": {...}, "missing": [...]}
    {"type": "failed", "key": "runtime", "why": "..."}

An entry is {"table": name, "columns": [[column, dtype, rows], ...]} for loaded columns,
or {"strings": [...]} for a list of names."""

from __future__ import annotations

import json
import sqlite3
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Required, TypedDict

import numpy as np

from nsys_llm_explainer.errors import InputError
from nsys_llm_explainer.model import Schema
from nsys_llm_explainer.trace import deadline
from nsys_llm_explainer.trace.columns import Columns
from nsys_llm_explainer.trace.nsys import open as trace_open
from nsys_llm_explainer.trace.nsys.export import Loaded
from nsys_llm_explainer.trace.nsys.fetch import Progress, rows_upper_bound
from nsys_llm_explainer.trace.nsys.load import NsysTraceData
from nsys_llm_explainer.trace.nsys.open import reopen
from nsys_llm_explainer.trace.nsys.probe import NVTX_TABLE, RUNTIME_TABLE, describe, looks_like_nsys, probe

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
    "from nsys_llm_explainer.trace.nsys.helper import main; main()"
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
            while (header := read_header(stream)) is not None:
                self._heard = time.monotonic()
                key = header["key"]
                if key not in self._done:
                    raise WireError(f"the helper sent an unrequested key {key!r}")
                kind = header.get("type")
                if kind == "progress":
                    self._rows[key] = int(header.get("rows", 0))
                    continue
                if kind == "loaded":
                    self._results[key] = Loaded(
                        entries=read_entries(stream, header),
                        warnings=[str(w) for w in header.get("warnings", [])],
                        row_counts={str(t): int(n) for t, n in header.get("row_counts", {}).items()},
                        missing=[int(i) for i in header.get("missing", [])],
                    )
                self._done[key].set()
        except (OSError, ValueError, KeyError, TypeError, WireError):
            pass  # whatever did not arrive is loaded by the parent instead
        finally:
            for event in self._done.values():
                event.set()


def start_helpers(conn: sqlite3.Connection, schema: Schema, jobs: int) -> list[LoadHelper]:
    """Helpers for the big tables when they can pay off: jobs > 1, an interpreter to run
    them, a connection opened by trace/nsys/open.py, and at least HELPER_MIN_ROWS rows to read."""
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


# -- the helper's side -----------------------------------------------------------------

def serve(uri: str, keys: list[str], out: IO[bytes]) -> None:
    """Load each of `keys` from the export at `uri` and write it to `out`: progress while it
    loads, then its columns, or why it failed (the parent then loads it itself)."""
    conn = reopen(uri, Path("trace"))
    try:
        data = NsysTraceData(conn, probe(conn))
        for key in keys:
            if key not in HELPER_KEYS:
                write_header(out, {"type": "failed", "key": key, "why": "not a helper key"})
                continue
            data.progress = lambda _label, rows, key=key: write_header(
                out, {"type": "progress", "key": key, "rows": rows}
            )
            before = set(data.cache_keys())
            warned, counted = len(data.warnings), set(data.row_counts)
            missing = set(data.strings.missing)
            try:
                getattr(data, key)()
                entries = {k: data.cached_value(k) for k in data.cache_keys() if k not in before}
                write_loaded(
                    out, key, entries, data.warnings[warned:],
                    {t: n for t, n in data.row_counts.items() if t not in counted},
                    sorted(data.strings.missing - missing),
                )
            except Exception as exc:  # noqa: BLE001 - the parent loads this table itself
                write_header(out, {"type": "failed", "key": key, "why": type(exc).__name__})
            out.flush()
            data.release(*(k for k in data.cache_keys() if k not in before))
    finally:
        conn.close()


def main() -> None:
    """The helper process (_BOOT): one request on stdin, the stream on stdout."""
    request = json.loads(sys.stdin.readline())
    serve(str(request["uri"]), [str(k) for k in request["keys"]], sys.stdout.buffer)


# -- the stream (the module's docstring) ----------------------------------------------

_LEN = struct.Struct("<I")
MAX_HEADER = 1 << 28  # names lists can be long, but never this long


class WireError(Exception):
    """The stream is cut short or malformed."""


class Entry(TypedDict, total=False):
    """One cache entry of a "loaded" header: columns, or a list of names."""

    table: str
    columns: list[tuple[str, str, int]]  # column, dtype, rows (a JSON array each)
    strings: list[str]


class Header(TypedDict, total=False):
    """A frame's header (the module's docstring): progress, loaded or failed."""

    type: str
    key: Required[str]
    rows: int  # progress
    entries: dict[str, Entry]  # loaded
    warnings: list[str]
    row_counts: dict[str, int]
    missing: list[int]
    why: str  # failed


def write_header(out: IO[bytes], header: Header) -> None:
    body = json.dumps(header, separators=(",", ":")).encode("utf-8")
    out.write(_LEN.pack(len(body)))
    out.write(body)


def write_loaded(
    out: IO[bytes], key: str, entries: dict[str, Columns | list[str]], warnings: list[str],
    row_counts: dict[str, int], missing: list[int],
) -> None:
    """One loaded table: its cache entries (Columns or lists of names) and side effects."""
    described: dict[str, Entry] = {}
    arrays: list[np.ndarray] = []
    for name, value in entries.items():
        if isinstance(value, Columns):
            cols = []
            for col in value.names:
                arr = np.ascontiguousarray(value[col])
                if arr.dtype.hasobject:
                    raise TypeError(f"{name}.{col}: object columns cannot be sent")
                cols.append((col, arr.dtype.str, len(arr)))
                arrays.append(arr)
            described[name] = {"table": value.table, "columns": cols}
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            described[name] = {"strings": value}
        else:
            raise TypeError(f"{name}: a {type(value).__name__} cannot be sent")
    write_header(out, {
        "type": "loaded", "key": key, "entries": described, "warnings": warnings,
        "row_counts": row_counts, "missing": missing,
    })
    for arr in arrays:
        out.write(arr.data.cast("B"))
    out.flush()


def _read_exact(stream: IO[bytes], buf: memoryview) -> None:
    got = 0
    while got < len(buf):
        n = stream.readinto(buf[got:])  # type: ignore[attr-defined]
        if not n:
            raise WireError("the helper's output ended early")
        got += n


def read_header(stream: IO[bytes]) -> Header | None:
    """The next header, or None at a clean end of stream."""
    raw = stream.read(_LEN.size)
    if not raw:
        return None
    if len(raw) < _LEN.size:
        raise WireError("the helper's output ended inside a frame")
    (size,) = _LEN.unpack(raw)
    if size > MAX_HEADER:
        raise WireError("the helper sent an oversized header")
    body = bytearray(size)
    _read_exact(stream, memoryview(body))
    header: Header = json.loads(body)  # checked here, and by what reads each field
    if not isinstance(header, dict) or not isinstance(header.get("key"), str):
        raise WireError("the helper sent a malformed header")
    return header


def read_entries(stream: IO[bytes], header: Header) -> dict[str, Columns | list[str]]:
    """The cache entries of a "loaded" header, reading its arrays from `stream`."""
    entries: dict[str, Columns | list[str]] = {}
    for name, desc in header["entries"].items():
        if "strings" in desc:
            entries[name] = [str(s) for s in desc["strings"]]
            continue
        cols: dict[str, np.ndarray] = {}
        for col, dtype, rows in desc["columns"]:
            arr = np.empty(int(rows), dtype=np.dtype(dtype))
            if arr.dtype.hasobject:
                raise WireError("the helper sent an object column")
            _read_exact(stream, arr.data.cast("B"))
            cols[str(col)] = arr
        entries[name] = Columns(str(desc["table"]), cols)
    return entries


def open_export(path: Path) -> tuple[sqlite3.Connection, Schema]:
    """Open and probe; InputError when the file is not a usable Nsight Systems export."""
    trace_open.check_input_file(path)
    conn = trace_open.connect_readonly(path)
    try:
        schema = probe(conn)
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise InputError(
            f"{path}: cannot read its schema ({exc}); export the capture again"
        ) from None
    if not looks_like_nsys(schema):
        conn.close()
        what = "has no tables" if not schema.tables else "has none of the Nsight Systems tables"
        raise InputError(
            f"{path}: is a SQLite database but not an Nsight Systems export ({what}); "
            "pass the file written by `nsys export --type sqlite`"
        )
    return conn, schema


def open_nsys(
    path: Path, kernel_name: str = "demangled", progress: Progress | None = None, jobs: int = 1
) -> NsysTraceData:
    conn, schema = open_export(path)
    data = NsysTraceData(conn, schema, kernel_name=kernel_name, progress=progress)
    try:
        data.helpers = start_helpers(conn, schema, jobs)
    except BaseException:
        data.close()
        raise
    return data


def describe_export(path: Path) -> str:
    """--print-schema for an export: its tables, their columns and row counts."""
    conn, schema = open_export(path)
    try:
        return describe(schema, NsysTraceData(conn, schema).table_counts())
    finally:
        conn.close()
