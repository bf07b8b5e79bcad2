"""Which format a trace file is, from its first bytes (no heavy imports)."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

from nsys_llm_explainer.trace.nsys.open import GZIP_MAGIC, SQLITE_MAGIC

SNIFF_BYTES = 4096
NSYS = "nsys"
KINETO = "kineto"


def head_bytes(path: Path) -> bytes:
    with path.open("rb") as fh:
        raw = fh.read(SNIFF_BYTES)
    if raw.startswith(GZIP_MAGIC):
        try:
            return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, SNIFF_BYTES)
        except zlib.error:
            return b""
    return raw


def looks_like_json(head: bytes) -> bool:
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return text.startswith((b"{", b"["))


def sniff(path: Path) -> str | None:
    """NSYS, KINETO, or None when neither (the SQLite checks then explain what it is)."""
    if not os.path.isfile(path):
        return None
    try:
        head = head_bytes(path)
    except OSError:
        return None
    if head.startswith(SQLITE_MAGIC):
        with path.open("rb") as fh:
            if fh.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC:
                return NSYS
        return None  # a gzip-compressed export: the SQLite checks say to decompress it
    if looks_like_json(head):
        return KINETO
    return None
