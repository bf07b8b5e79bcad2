"""The trace formats this tool reads: the one registry of how each is recognized, opened,
described, prefetched and captured better. model.TraceFormat names a format (its
report.json id and its label); code outside trace/ asks this module, or the TraceData it
got (`data.format`), and never compares a format's id.

A format is told by the file's content, never by its name: an Nsight Systems SQLite export
starts with the SQLite header; a PyTorch profiler trace is JSON (a Chrome trace), plain or
gzip-compressed, under any name. JSON that is not a profiler trace is refused by the Kineto
reader with the reason. Anything else is refused with the reason worded for what the file's
name says it should be: the SQLite source's checks for .sqlite and .nsys-rep names (and
gzip-compressed exports), PyTorch profiler terms for .json names, both formats for any
other name.

Light to import (no numpy, no reader): the command line sniffs a trace and starts its
prefetch before the analysis is imported, so the readers are imported where they are used.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from nsys_llm_explainer.errors import InputError
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.model import JsonObject, TraceFormat
from nsys_llm_explainer.trace.nsys.open import GZIP_MAGIC, REPORT_SUFFIXES, SQLITE_MAGIC, check_input_file

if TYPE_CHECKING:
    from nsys_llm_explainer.trace.data import TraceData
    from nsys_llm_explainer.trace.nsys.fetch import Progress

__all__ = ["TraceFormat", "capture_hint", "describe", "open_trace", "prefetch", "sniff", "source_text",
           "unreadable"]

SNIFF_BYTES = 4096
# Names that say which format a file should be; other names get messages naming both.
JSON_SUFFIXES = (".json", ".json.gz")
NSYS_SUFFIXES = (".sqlite", ".sqlite3", ".db", ".nsys-rep", ".qdrep")
KINETO_WANT = "the trace torch.profiler wrote (export_chrome_trace or tensorboard_trace_handler: .json or .json.gz)"
KINETO_AGAIN = "save the PyTorch profiler trace again (export_chrome_trace or tensorboard_trace_handler)"
EITHER_WANT = ("an Nsight Systems SQLite export (`nsys export --type sqlite`) or a PyTorch profiler trace "
               "(.json or .json.gz)")


def _open_nsys(path: Path, kernel_name: str, progress: Progress | None, jobs: int) -> TraceData:
    from nsys_llm_explainer.trace.nsys.helper import open_nsys

    return open_nsys(path, kernel_name=kernel_name, progress=progress, jobs=jobs)


def _open_kineto(path: Path, kernel_name: str, progress: Progress | None, jobs: int) -> TraceData:
    from nsys_llm_explainer.trace.kineto.load import open_kineto

    return open_kineto(path, kernel_name=kernel_name)


def _describe_nsys(path: Path) -> str:
    from nsys_llm_explainer.trace.nsys.helper import describe_export

    return describe_export(path)


def _describe_kineto(path: Path) -> str:
    from nsys_llm_explainer.trace.kineto.load import describe_trace

    return describe_trace(path)


def _prefetch_kineto(path: Path) -> bool:
    from nsys_llm_explainer.trace.kineto import prefetch as kineto_prefetch

    return kineto_prefetch.start(path)


def _cancel_kineto() -> None:
    from nsys_llm_explainer.trace.kineto import prefetch as kineto_prefetch

    kineto_prefetch.cancel()


@frozen
class Reader:
    """What this tool does with one format."""

    open: Callable[[Path, str, Progress | None, int], TraceData]
    describe: Callable[[Path], str]  # --print-schema: the tables (or event categories) found
    # Read in a helper process while the command line imports the analysis (trace/kineto/
    # prefetch.py): start(path) -> started, and cancel() for a prefetch nobody took.
    prefetch: tuple[Callable[[Path], bool], Callable[[], None]] | None
    # topic -> how to record it. "launches": kernels whose launch call is missing; "ranges":
    # host ranges (NVTX, or record_function) that would name the work. "" or absent: the
    # caller's general advice applies.
    capture_hints: dict[str, str]


READERS: dict[TraceFormat, Reader] = {
    TraceFormat.NSYS: Reader(
        open=_open_nsys,
        describe=_describe_nsys,
        prefetch=None,
        capture_hints={
            "launches": "Start the capture before the workload (or widen the window) and keep CUDA API tracing "
                        "on (nsys profile --trace=cuda) so every kernel's launch is recorded.",
            "ranges": "",  # the workload's NVTX advice (rules/advice.py) applies as it is
        },
    ),
    TraceFormat.KINETO: Reader(
        open=_open_kineto,
        describe=_describe_kineto,
        prefetch=(_prefetch_kineto, _cancel_kineto),
        capture_hints={
            "launches": "Start the profiler before the part you measure, or give it a schedule "
                        "(`torch.profiler.schedule(wait=1, warmup=1, active=3)`, calling `prof.step()` once per "
                        "iteration) so recording is on when the measured steps launch their kernels; kernels "
                        "still queued from the step before the first active one run there without a launch "
                        "call (`torch.cuda.synchronize()` before that `prof.step()` keeps them out).",
            "ranges": "Wrap the steps and phases in `torch.profiler.record_function('decode')` (recorded as "
                      "user_annotation ranges) and call `prof.step()` once per iteration; the PyTorch "
                      "profiler does not record `torch.cuda.nvtx` ranges.",
        },
    ),
}


def head_bytes(path: Path) -> bytes:
    """The file's first SNIFF_BYTES, decompressed when it is gzip ("" when that fails)."""
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


def sniff(path: Path) -> TraceFormat | None:
    """The format of the file at `path`, from its first bytes; None when neither (the SQLite
    checks then explain what it is). An Nsight Systems report (.nsys-rep, .qdrep) is None
    whatever its bytes look like: it is read only once exported."""
    if not os.path.isfile(path) or path.suffix.lower() in REPORT_SUFFIXES:
        return None
    try:
        head = head_bytes(path)
    except OSError:
        return None
    if head.startswith(SQLITE_MAGIC):
        with path.open("rb") as fh:
            if fh.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC:
                return TraceFormat.NSYS
        return None  # a gzip-compressed export: the SQLite checks say to decompress it
    if _looks_like_json(head):
        return TraceFormat.KINETO
    return None


def open_trace(
    path: Path,
    kernel_name: str = "demangled",
    progress: Progress | None = None,
    jobs: int = 1,
) -> TraceData:
    """The TraceData of `path`; InputError (exit 3) when no reader can read it."""
    fmt = sniff(path)
    if fmt is None:
        if _nsys_named(path) or _gzipped_sqlite(path):
            check_input_file(path)  # raises with the specific reason, in Nsight Systems terms
        raise unreadable(path)
    return READERS[fmt].open(path, kernel_name, progress, jobs)


def describe(path: Path) -> str:
    """--print-schema's text: the tables and columns found (an export), or the event
    categories (a PyTorch profiler trace). A file of neither format gets the Nsight Systems
    export's checks and their error."""
    return READERS[sniff(path) or TraceFormat.NSYS].describe(path)


def prefetch(path: Path) -> bool:
    """Start reading `path` in a helper process where its format has one and it pays
    (trace/kineto/prefetch.py); False when nothing started. cancel_prefetch() stops one
    nobody took."""
    try:
        fmt = sniff(path)
    except (OSError, ValueError):
        return False
    hooks = READERS[fmt].prefetch if fmt is not None else None
    return hooks is not None and hooks[0](path)


def cancel_prefetch() -> None:
    """Stop any prefetch nobody took (the command ended before it read the trace)."""
    for reader in READERS.values():
        if reader.prefetch is not None:
            reader.prefetch[1]()


def capture_hint(fmt: TraceFormat, topic: str) -> str | None:
    """The format's advice for `topic`; None when the format has none of its own (the
    caller's general advice applies)."""
    return READERS[fmt].capture_hints.get(topic) or None


def source_text(trace: JsonObject) -> str:
    """One line naming a report's input format and its version facts, from report.json's
    trace section: "Nsight Systems 2024.5.1 (export schema 3.11.1)", "PyTorch profiler
    trace (schema 1, CUPTI 22)"."""
    if TraceFormat.parse(trace.get("format")) is TraceFormat.KINETO:
        facts = trace.get("kineto")
        facts = facts if isinstance(facts, dict) else {}
        parts = [f"schema {facts.get('schemaVersion', 'unknown')}"]
        for key, label in (("cupti_version", "CUPTI"), ("roctracer_version", "roctracer")):
            value = facts.get(key)
            if value is not None:
                parts.append(f"{label} {value}")
        return f"PyTorch profiler trace ({', '.join(parts)})"
    version = trace.get("nsys_version") or "version unknown"
    return f"Nsight Systems {version} (export schema {trace.get('export_schema_version') or 'unknown'})"


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
