"""How many processes a run may use (no heavy imports: the command line asks before forking).

Allocator tuning for the command-line run (glibc only; a no-op elsewhere).

The analysis allocates and frees hundreds of temporary arrays of tens of MB each. glibc
serves every block above 32 MiB with a fresh mmap and unmaps it on free, so each one costs
page faults and kernel zeroing again: on a 5M-kernel trace that was about 4 s of system
time. Taking large blocks from the heap instead lets freed memory be reused; the heap is
still trimmed once TRIM_THRESHOLD bytes are free at its top, so the process keeps little
it no longer needs. Metrics may run in threads (runtime/runner.py); glibc would give each its own
arena, whose freed blocks the others cannot reuse, so one arena serves them all (on a
5M-kernel trace: about 1.8 GB peak instead of 2.1 GB). Peak RSS is otherwise unchanged
(it is set by the live arrays, not by this).
Freed blocks inside the heap stay resident, though, and the next metric's arrays do not
always fit the holes the last one left: on a 5M-kernel trace the process held several
hundred MB more than its live arrays. So between metrics, when the runner has released the
tables and intermediates no later metric reads, release_free_memory() hands the free pages
inside the heap back (malloc_trim): a metric reuses freed memory while it runs, and the
next one starts from what is live.
Only the CLI calls tune_allocator: a library caller's process keeps its own allocator
settings, and release_free_memory does nothing there.

The CLI also collects cyclic garbage less often (tune_gc): the run allocates millions of
small containers that die by reference counting (the reader's events, the writers' rows),
and at Python's default thresholds the collector visits every live object (pandas' and
numpy's included) hundreds of times a run: 0.07 s of a 1.2 s report. Cycles are rare in
the analysis, and the few there are wait a little longer."""

from __future__ import annotations

import ctypes
import gc
import os
import sys
from collections.abc import Callable

MAX_JOBS = 3  # one report: this process and up to two that read or render beside it


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the platform says)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


def default_jobs() -> int:
    """Processes one report reads and renders with: the usable CPUs, at most MAX_JOBS."""
    return min(usable_cpus(), MAX_JOBS)


M_TRIM_THRESHOLD = -1  # glibc mallopt parameter numbers (malloc.h)
M_MMAP_MAX = -4
M_ARENA_MAX = -8
TRIM_THRESHOLD = 256 << 20
_trim: Callable[[int], int] | None = None  # glibc malloc_trim, once tune_allocator succeeded
# Allocations between young collections, and collections between older ones (the defaults:
# 700, 10, 10).
GC_THRESHOLDS = (10_000, 20, 20)


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
    tuned = (
        bool(mallopt(M_ARENA_MAX, 1))
        and bool(mallopt(M_MMAP_MAX, 0))
        and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    )
    if tuned:
        global _trim
        trim = ctypes.CDLL(None).malloc_trim
        trim.argtypes = [ctypes.c_size_t]
        trim.restype = ctypes.c_int
        _trim = trim
    return tuned


def tune_gc() -> None:
    """Collect cyclic garbage less often (see above); the CLI only."""
    gc.set_threshold(*GC_THRESHOLDS)


def release_free_memory() -> None:
    """Give the free pages inside the heap back to the system (after tune_allocator only)."""
    if _trim is not None:
        _trim(0)
