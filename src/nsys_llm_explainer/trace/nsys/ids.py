"""Decoding Nsight Systems serialized global ids.

Real exports put hardware/VM bits above bit 48, so the pid is bits 24..47 and the tid
is bits 0..23: pid = (globalPid >> 24) & 0xFFFFFF, tid = globalTid & 0xFFFFFF.
"""

from __future__ import annotations

import numpy as np

PID_SHIFT = 24
ID_MASK = 0xFFFFFF
PID_MAX = 4_194_304  # Linux's largest possible pid (2^22)


def pid_of(global_id: int) -> int:
    return (global_id >> PID_SHIFT) & ID_MASK


def tid_of(global_tid: int) -> int:
    return global_tid & ID_MASK


def pids(global_ids: np.ndarray) -> np.ndarray:
    """Vectorized pid_of; negative (missing) ids decode to -1."""
    out = (global_ids >> PID_SHIFT) & ID_MASK
    return np.where(global_ids < 0, -1, out)


def tids(global_tids: np.ndarray) -> np.ndarray:
    out = global_tids & ID_MASK
    return np.where(global_tids < 0, -1, out)


def thread_keys(global_tids: np.ndarray) -> np.ndarray:
    """A per-thread key that keeps process and thread apart (vm bits dropped)."""
    return np.where(global_tids < 0, -1, global_tids & ((1 << 48) - 1))


def implausible_pids(global_pids: np.ndarray) -> int:
    """How many rows decode to a pid no Linux process can have (0 from a non-zero globalPid,
    negative, or above PID_MAX): the export may not use the usual (pid << 24) layout."""
    p = pids(global_pids)
    return int((((p == 0) & (global_pids > 0)) | (p > PID_MAX) | (p < 0)).sum())


def implausible_pids_note(count: int) -> str | None:
    if not count:
        return None
    return (f"{count} kernels decode to an implausible pid (0, negative or > {PID_MAX}); "
            "globalPid may not follow the usual (pid << 24) layout, so per-process figures are uncertain")
