"""How many processes a run may use (no heavy imports: the command line asks before forking)."""

from __future__ import annotations

import os

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
