"""Which source reads a trace file, decided by its content (never by its name).

An Nsight Systems SQLite export starts with the SQLite header; a PyTorch profiler trace is
JSON (a Chrome trace), plain or gzip-compressed, under any name. JSON that is not a profiler
trace is refused by the Kineto reader with the reason. Anything else is handled by the
SQLite source's checks, which name the problem (a .nsys-rep report, an empty or truncated
file ...).
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

from nsys_llm_explainer.trace.data import TraceData
from nsys_llm_explainer.trace.nsys.fetch import Progress
from nsys_llm_explainer.trace.nsys.open import GZIP_MAGIC, SQLITE_MAGIC, check_input_file

SNIFF_BYTES = 4096
NSYS = "nsys"
KINETO = "kineto"


def _head(path: Path) -> bytes:
    with path.open("rb") as fh:
        raw = fh.read(SNIFF_BYTES)
    if raw.startswith(GZIP_MAGIC):
        try:
            return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, SNIFF_BYTES)
        except zlib.error:
            return b""
    return raw


def _looks_like_json(head: bytes) -> bool:
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return text.startswith((b"{", b"["))


def sniff(path: Path) -> str | None:
    """NSYS, KINETO, or None when neither (the SQLite checks then explain what it is)."""
    if not os.path.isfile(path):
        return None
    try:
        head = _head(path)
    except OSError:
        return None
    if head.startswith(SQLITE_MAGIC):
        with path.open("rb") as fh:
            if fh.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC:
                return NSYS
        return None  # a gzip-compressed export: the SQLite checks say to decompress it
    if _looks_like_json(head):
        return KINETO
    return None


def open_trace(
    path: Path, kernel_name: str = "demangled", progress: Progress | None = None, jobs: int = 1
) -> TraceData:
    """The TraceData of `path`; InputError (exit 3) when no source can read it."""
    kind = sniff(path)
    if kind == KINETO:
        from nsys_llm_explainer.trace.kineto.source import open_kineto

        return open_kineto(path, kernel_name=kernel_name)
    if kind is None:
        check_input_file(path)  # raises with the specific reason
    from nsys_llm_explainer.trace.nsys.source import open_nsys

    return open_nsys(path, kernel_name=kernel_name, progress=progress, jobs=jobs)


__all__ = ["KINETO", "NSYS", "open_trace", "sniff"]
