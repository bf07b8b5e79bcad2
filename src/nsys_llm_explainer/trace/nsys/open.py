"""Open a trace file read-only, or fail with one clear line.

The input is someone's capture: it is opened through a read-only URI with
`query_only` and `trusted_schema=OFF` and without extension loading, so no statement this
tool runs can change it, and nothing is created beside it (see connect_readonly for WAL files).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import tempfile
import urllib.parse
import weakref
from pathlib import Path

from nsys_llm_explainer.errors import InputError

SQLITE_MAGIC = b"SQLite format 3\x00"
GZIP_MAGIC = b"\x1f\x8b"
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
EXPORT_CMD = "`nsys export --type sqlite`"
BUSY_TIMEOUT_S = 2.0  # how long to wait for another process's write lock before giving up
# query_only: no statement can write even if a URI flag were lost; trusted_schema=OFF: views
# and triggers in the file cannot call functions with side effects.
SAFETY_PRAGMAS = ("PRAGMA query_only = ON", "PRAGMA trusted_schema = OFF")


def export_hint(path: Path) -> str:
    target = path.with_suffix(".sqlite").name
    return f"nsys export --type sqlite --output {target} {path.name}"


def check_input_file(path: Path) -> None:
    """Validate that `path` names a readable SQLite file, raising InputError otherwise."""
    if not os.path.lexists(path):
        raise InputError(f"{path}: no such file; pass the .sqlite file written by {EXPORT_CMD}")
    if path.is_dir():
        raise InputError(
            f"{path}: is a directory; pass the .sqlite file written by {EXPORT_CMD}"
        )
    try:
        st = path.stat()
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror}); check the path") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{path}: is not a regular file; pass the .sqlite export")
    if path.suffix.lower() in REPORT_SUFFIXES:
        raise InputError(
            f"{path}: is an Nsight Systems report, not a SQLite export; "
            f"convert it first with: {export_hint(path)}"
        )
    try:
        with path.open("rb") as fh:
            head = fh.read(100)
    except OSError as exc:
        raise InputError(
            f"{path}: cannot be read ({exc.strerror}); check its permissions"
        ) from None
    if not head:
        raise InputError(f"{path}: is empty; export the capture again with {EXPORT_CMD}")
    if head.startswith(GZIP_MAGIC):
        raise InputError(
            f"{path}: is gzip-compressed; decompress it (gunzip) and pass the .sqlite file"
        )
    if not head.startswith(SQLITE_MAGIC):
        raise InputError(
            f"{path}: is not a SQLite database; pass the file written by {EXPORT_CMD}"
        )
    if len(head) < 100:
        raise InputError(
            f"{path}: is truncated (incomplete SQLite header); export the capture again"
        )
    _check_size_against_header(path, head, st.st_size)


def _check_size_against_header(path: Path, head: bytes, size: int) -> None:
    page_size = int.from_bytes(head[16:18], "big")
    if page_size == 1:
        page_size = 65536
    page_count = int.from_bytes(head[28:32], "big")
    # The in-header page count is valid only when the change counters agree (SQLite >= 3.7.0).
    if head[24:28] == head[92:96] and page_size and page_count and size < page_size * page_count:
        raise InputError(
            f"{path}: is truncated ({size} of {page_size * page_count} bytes); "
            "copy or export the capture again"
        )


def _decode_text(raw: bytes) -> str:
    # Real exports hold invalid UTF-8 in some text columns; never let it raise.
    return raw.decode("utf-8", "replace")


def is_wal_mode(path: Path) -> bool:
    with path.open("rb") as fh:
        head = fh.read(20)
    return len(head) >= 20 and head[18] == 2 and head[19] == 2


class ReadOnlyConnection(sqlite3.Connection):
    """A connection opened here; `uri` opens the same database again (see reopen)."""

    uri: str = ""


class _PrivateCopy(ReadOnlyConnection):
    """A connection to a private copy of the input; closing it removes the copy."""

    copy_dir: str | None = None

    def close(self) -> None:
        super().close()
        if self.copy_dir is not None:
            shutil.rmtree(self.copy_dir, ignore_errors=True)
            self.copy_dir = None


def connect_readonly(path: Path) -> ReadOnlyConnection:
    """Open `path` read-only without creating, changing or locking anything beside it.

    Call check_input_file first. A rollback-journal database is opened through a read-only
    URI. A WAL database cannot be: even read-only, SQLite creates -shm/-wal files beside it,
    and exclusive locking mode needs a write lock a read-only descriptor cannot take. So a
    WAL database with no pending -wal content is opened immutable (nothing to merge), and
    one with pending content is read from a private copy of the file and its -wal.
    """
    real = path.resolve()
    uri = f"file:{urllib.parse.quote(str(real))}?mode=ro"
    if not is_wal_mode(real):
        return _connect(path, uri)
    wal = Path(f"{real}-wal")
    if not wal.is_file() or wal.stat().st_size == 0:
        return _connect(path, uri + "&immutable=1")
    return _connect_copy(path, real, wal)


def _connect_copy(path: Path, real: Path, wal: Path) -> ReadOnlyConnection:
    tmp = tempfile.mkdtemp(prefix="nsys-llm-explain-wal-")
    try:
        copy = Path(tmp) / "trace.sqlite"
        shutil.copyfile(real, copy)
        shutil.copyfile(wal, Path(f"{copy}-wal"))
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise InputError(
            f"{path}: is a WAL database with pending changes and could not be copied for "
            f"reading ({exc.strerror}); free space in {tempfile.gettempdir()} or set TMPDIR"
        ) from None
    uri = f"file:{urllib.parse.quote(str(copy))}?mode=ro"
    conn = _connect(path, uri, factory=_PrivateCopy, cleanup=tmp)
    assert isinstance(conn, _PrivateCopy)
    conn.copy_dir = tmp
    weakref.finalize(conn, shutil.rmtree, tmp, True)  # also on an interrupted run
    return conn


def reopen(uri: str, path: Path) -> ReadOnlyConnection:
    """Another read-only connection, with the same safety settings, to a database opened
    by connect_readonly (`uri` is that connection's). A private copy is not copied again
    and is not removed when this connection closes."""
    return _connect(path, uri)


def _connect(
    path: Path,
    uri: str,
    factory: type[ReadOnlyConnection] = ReadOnlyConnection,
    cleanup: str | None = None,
) -> ReadOnlyConnection:
    try:
        conn = sqlite3.connect(
            uri, uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False, factory=factory
        )
    except sqlite3.Error as exc:
        if cleanup is not None:
            shutil.rmtree(cleanup, ignore_errors=True)
        raise InputError(f"{path}: cannot be opened as SQLite ({exc}); check the file") from None
    conn.uri = uri
    conn.text_factory = _decode_text
    if hasattr(conn, "enable_load_extension"):  # absent when Python's SQLite cannot load any
        conn.enable_load_extension(False)
    try:
        for pragma in SAFETY_PRAGMAS:
            conn.execute(pragma)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        conn.close()
        if cleanup is not None:
            shutil.rmtree(cleanup, ignore_errors=True)
        raise InputError(_describe_db_error(path, exc)) from None
    return conn


def _describe_db_error(path: Path, exc: sqlite3.DatabaseError) -> str:
    text = str(exc)
    if "locked" in text or "busy" in text:
        return (
            f"{path}: is locked by another process's write (is `nsys export` still running?); "
            "wait for it to finish and retry"
        )
    if "not a database" in text or "malformed" in text:
        return f"{path}: is damaged ({text}); export the capture again"
    return f"{path}: cannot be read as SQLite ({text}); export the capture again"
