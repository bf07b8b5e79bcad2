"""The byte stream a load helper writes: loaded columns and progress, framed.

Each frame is a 4-byte little-endian length, a JSON header of that length, then the raw
bytes of the header's arrays (native byte order, in the order listed). Headers:

    {"type": "progress", "key": "runtime", "rows": 65536}
    {"type": "loaded", "key": "runtime", "entries": {...}, "warnings": [...],
     "row_counts": {...}, "missing": [...]}
    {"type": "failed", "key": "runtime", "why": "..."}

An entry is {"table": name, "columns": [[column, dtype, rows], ...]} for loaded columns,
or {"strings": [...]} for a list of names.
"""

from __future__ import annotations

import json
import struct
from typing import IO, Any

import numpy as np

from nsys_llm_explainer.trace.columns import Columns

_LEN = struct.Struct("<I")
MAX_HEADER = 1 << 28  # names lists can be long, but never this long


class WireError(Exception):
    """The stream is cut short or malformed."""


def write_header(out: IO[bytes], header: dict[str, Any]) -> None:
    body = json.dumps(header, separators=(",", ":")).encode("utf-8")
    out.write(_LEN.pack(len(body)))
    out.write(body)


def write_loaded(
    out: IO[bytes], key: str, entries: dict[str, Any], warnings: list[str],
    row_counts: dict[str, int], missing: list[int],
) -> None:
    """One loaded table: its cache entries (Columns or lists of names) and side effects."""
    described: dict[str, Any] = {}
    arrays: list[np.ndarray] = []
    for name, value in entries.items():
        if isinstance(value, Columns):
            cols = []
            for col in value.names:
                arr = np.ascontiguousarray(value[col])
                if arr.dtype.hasobject:
                    raise TypeError(f"{name}.{col}: object columns cannot be sent")
                cols.append([col, arr.dtype.str, len(arr)])
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


def read_header(stream: IO[bytes]) -> dict[str, Any] | None:
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
    header = json.loads(body)
    if not isinstance(header, dict) or not isinstance(header.get("key"), str):
        raise WireError("the helper sent a malformed header")
    return header


def read_entries(stream: IO[bytes], header: dict[str, Any]) -> dict[str, Any]:
    """The cache entries of a "loaded" header, reading its arrays from `stream`."""
    entries: dict[str, Any] = {}
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
