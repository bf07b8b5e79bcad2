"""Which source reads a trace file, decided by its content (never by its name).

An Nsight Systems SQLite export starts with the SQLite header; a PyTorch profiler trace is
JSON (a Chrome trace), plain or gzip-compressed, under any name. JSON that is not a profiler
trace is refused by the Kineto reader with the reason. Anything else is refused with the
reason worded for what the file's name says it should be: the SQLite source's checks for
.sqlite and .nsys-rep names (and gzip-compressed exports), PyTorch profiler terms for .json
names, both formats for any other name.
"""

from __future__ import annotations

import os
from pathlib import Path

from nsys_llm_explainer.errors import InputError
from nsys_llm_explainer.trace.data import TraceData
from nsys_llm_explainer.trace.nsys.fetch import Progress
from nsys_llm_explainer.trace.nsys.open import GZIP_MAGIC, SQLITE_MAGIC, check_input_file
from nsys_llm_explainer.trace.sniff import KINETO, NSYS, SNIFF_BYTES, head_bytes, sniff

__all__ = ["KINETO", "NSYS", "open_trace", "sniff", "unreadable"]

# Names that say which format a file should be; other names get messages naming both.
JSON_SUFFIXES = (".json", ".json.gz")
NSYS_SUFFIXES = (".sqlite", ".sqlite3", ".db", ".nsys-rep", ".qdrep")
KINETO_WANT = "the trace torch.profiler wrote (export_chrome_trace or tensorboard_trace_handler: .json or .json.gz)"
KINETO_AGAIN = "save the PyTorch profiler trace again (export_chrome_trace or tensorboard_trace_handler)"
EITHER_WANT = ("an Nsight Systems SQLite export (`nsys export --type sqlite`) or a PyTorch profiler trace "
               "(.json or .json.gz)")


def open_trace(
    path: Path,
    kernel_name: str = "demangled",
    progress: Progress | None = None,
    jobs: int = 1,
) -> TraceData:
    """The TraceData of `path`; InputError (exit 3) when no source can read it."""
    kind = sniff(path)
    if kind == KINETO:
        from nsys_llm_explainer.trace.kineto.source import open_kineto

        return open_kineto(path, kernel_name=kernel_name)
    if kind is None:
        if _nsys_named(path) or _gzipped_sqlite(path):
            check_input_file(path)  # raises with the specific reason, in Nsight Systems terms
        raise unreadable(path)
    from nsys_llm_explainer.trace.nsys.source import open_nsys

    return open_nsys(path, kernel_name=kernel_name, progress=progress, jobs=jobs)


def _nsys_named(path: Path) -> bool:
    return path.name.lower().endswith(NSYS_SUFFIXES)


def _json_named(path: Path) -> bool:
    return path.name.lower().endswith(JSON_SUFFIXES)


def _gzipped_sqlite(path: Path) -> bool:
    if not os.path.isfile(path):
        return False
    try:
        with path.open("rb") as fh:
            if fh.read(2) != GZIP_MAGIC:
                return False
        return head_bytes(path).startswith(SQLITE_MAGIC)
    except OSError:
        return False


def unreadable(path: Path) -> InputError:
    """Why `path` is neither format, worded for what its name says it is: a PyTorch
    profiler trace (.json, .json.gz), or either format (any other name)."""
    want = KINETO_WANT if _json_named(path) else EITHER_WANT
    if not os.path.lexists(path):
        return InputError(f"{path}: no such file; pass {want}")
    if path.is_dir():
        return InputError(f"{path}: is a directory; pass one trace file, {want}; `fleet` reads a directory "
                          "of traces")
    if not path.is_file():
        return InputError(f"{path}: is not a regular file; pass {want}")
    try:
        with path.open("rb") as fh:
            raw = fh.read(SNIFF_BYTES)
    except OSError as exc:
        return InputError(f"{path}: cannot be read ({exc.strerror or exc}); check the path and its permissions")
    if not raw:
        again = KINETO_AGAIN if _json_named(path) else "write or export the trace again"
        return InputError(f"{path}: is empty; {again}")
    if raw.startswith(GZIP_MAGIC):
        if not head_bytes(path):
            return InputError(f"{path}: is gzip-compressed but cannot be decompressed (damaged); pass {want}")
        return InputError(f"{path}: is gzip-compressed but holds no JSON, so it is not a PyTorch profiler "
                          "trace; pass " + want)
    if _json_named(path):
        return InputError(f"{path}: is not a PyTorch profiler trace (its content is not JSON); pass {want}")
    return InputError(f"{path}: is neither an Nsight Systems SQLite export nor a PyTorch profiler trace "
                      f"(JSON); pass {want}")


__all__ = ["KINETO", "NSYS", "open_trace", "sniff", "unreadable"]
