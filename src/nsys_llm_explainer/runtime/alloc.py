"""Allocator tuning for the command-line run (glibc only; a no-op elsewhere).

The analysis allocates and frees hundreds of temporary arrays of tens of MB each. glibc
serves every block above 32 MiB with a fresh mmap and unmaps it on free, so each one costs
page faults and kernel zeroing again: on a 5M-kernel trace that was about 4 s of system
time. Taking large blocks from the heap instead lets freed memory be reused; the heap is
still trimmed once TRIM_THRESHOLD bytes are free at its top, so the process keeps little
it no longer needs. Metrics may run in threads (runtime/runner.py); glibc would give each its own
arena, whose freed blocks the others cannot reuse, so one arena serves them all (on a
5M-kernel trace: about 1.8 GB peak instead of 2.1 GB). Peak RSS is otherwise unchanged
(it is set by the live arrays, not by this).
Only the CLI calls this: a library caller's process keeps its own allocator settings.
"""

from __future__ import annotations

import ctypes
import os
import sys

M_TRIM_THRESHOLD = -1  # glibc mallopt parameter numbers (malloc.h)
M_MMAP_MAX = -4
M_ARENA_MAX = -8
TRIM_THRESHOLD = 256 << 20


def tune_allocator() -> bool:
    """Apply the settings above; False when not glibc or the user set MALLOC_* variables."""
    if not sys.platform.startswith("linux") or any(k.startswith("MALLOC_") for k in os.environ):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return (
        bool(mallopt(M_ARENA_MAX, 1))
        and bool(mallopt(M_MMAP_MAX, 0))
        and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    )
