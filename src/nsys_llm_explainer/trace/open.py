"""Open a trace file read-only, or fail with one clear line.

The input is someone's capture: it is opened through a read-only URI with
`query_only` and `trusted_schema=OFF`, so no statement this tool runs can change it,
and nothing is created beside it.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import urllib.parse
from pathlib import Path

from nsys_llm_explainer.errors import InputError

SQLITE_MAGIC = b"SQLite format 3\x00"
GZIP_MAGIC = b"\x1f\x8b"
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
BUSY_TIMEOUT_S = 2.0


def export_hint(path: Path) -> str:
    target = path.with_suffix(".sqlite").name
    return f"nsys export --type sqlite --output {target} {path.name}"


def check_input_file(path: Path) -> None:
    """Validate that `path` names a readable SQLite file, raising InputError otherwise."""
    if not os.path.lexists(path):
        raise InputError(f"{path}: no such file; pass the .sqlite file written by `nsys export`")
    if path.is_dir():
        raise InputError(f"{path}: is a directory; pass the .sqlite file written by `nsys export`")
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
        raise InputError(f"{path}: cannot be read ({exc.strerror}); check its permissions") from None
    if not head:
        raise InputError(f"{path}: is empty; export the capture again with `nsys export --type sqlite`")
    if head.startswith(GZIP_MAGIC):
        raise InputError(f"{path}: is gzip-compressed; decompress it (gunzip) and pass the .sqlite file")
    if not head.startswith(SQLITE_MAGIC):
        raise InputError(
            f"{path}: is not a SQLite database; pass the file written by `nsys export --type sqlite`"
        )
    if len(head) < 100:
        raise InputError(f"{path}: is truncated (incomplete SQLite header); export the capture again")
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


def connect_readonly(path: Path) -> sqlite3.Connection:
    """Open `path` read-only. Call check_input_file first."""
    uri_path = urllib.parse.quote(str(path.resolve()))
    wal = is_wal_mode(path)
    # A WAL database opened read-only would create a -shm file beside the input; exclusive
    # locking mode keeps the wal-index in private memory, so nothing is created there.
    uri = f"file:{uri_path}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
    except sqlite3.Error as exc:
        raise InputError(f"{path}: cannot be opened as SQLite ({exc}); check the file") from None
    conn.text_factory = _decode_text
    try:
        conn.execute("PRAGMA query_only = ON")
        conn.execute("PRAGMA trusted_schema = OFF")
        if wal:
            conn.execute("PRAGMA locking_mode = EXCLUSIVE")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        conn.close()
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

