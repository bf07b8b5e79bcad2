"""Decode a PNG screenshot with zlib and numpy (no Pillow): 8-bit RGB or RGBA, no interlace."""

from __future__ import annotations

import struct
import zlib

import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNELS = {2: 3, 6: 4, 0: 1, 4: 2}


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def _unfilter_row(kind: int, row: np.ndarray, prev: np.ndarray, bpp: int) -> np.ndarray:
    if kind == 0:
        return row
    if kind == 2:
        return (row + prev) & 0xFF
    if kind == 1:
        out = row.copy()
        for c in range(bpp):  # Sub is a running sum per channel
            out[c::bpp] = np.cumsum(row[c::bpp]) & 0xFF
        return out
    out = row.copy()
    for i in range(len(row)):  # Average and Paeth depend on the decoded left byte
        left = int(out[i - bpp]) if i >= bpp else 0
        if kind == 3:
            out[i] = (int(row[i]) + ((left + int(prev[i])) >> 1)) & 0xFF
        else:
            ul = int(prev[i - bpp]) if i >= bpp else 0
            out[i] = (int(row[i]) + _paeth(left, int(prev[i]), ul)) & 0xFF
    return out


def decode(data: bytes) -> np.ndarray:
    """(height, width, channels) uint8 array."""
    if not data.startswith(SIGNATURE):
        raise ValueError("not a PNG file")
    pos, idat, header = len(SIGNATURE), [], None
    while pos < len(data):
        length, kind = struct.unpack("!I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack("!IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + length
    if header is None:
        raise ValueError("PNG without IHDR")
    width, height, depth, color, _, _, interlace = header
    if depth != 8 or interlace or color not in CHANNELS:
        raise ValueError(
            f"unsupported PNG: depth {depth}, colour type {color}, interlace {interlace}"
        )
    ch = CHANNELS[color]
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), dtype=np.uint8).reshape(
        height, 1 + width * ch
    )
    out = np.zeros((height, width * ch), dtype=np.int64)
    prev = np.zeros(width * ch, dtype=np.int64)
    for y in range(height):
        prev = out[y] = _unfilter_row(int(raw[y, 0]), raw[y, 1:].astype(np.int64), prev, ch)
    return out.astype(np.uint8).reshape(height, width, ch)
