"""Kernel -> launch call join on (process, correlationId).

Correlation ids are per process: real multi-process traces reuse them, so joining on the
id alone pairs kernels with other processes' calls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from nsys_llm_explainer.trace.columns import Columns

if TYPE_CHECKING:
    from nsys_llm_explainer.trace.load import TraceData

_CORR_BITS = 39  # pid (24 bits) << 39 | corr keeps the key within int64


def _keys(pid: np.ndarray, corr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    valid = (pid >= 0) & (corr > 0) & (corr < (1 << _CORR_BITS))
    return (pid.astype(np.int64) << _CORR_BITS) | np.where(valid, corr, 0), valid


def match_calls(
    items_pid: np.ndarray, items_corr: np.ndarray, calls: Columns, call_mask: np.ndarray | None = None
) -> np.ndarray:
    """Index into `calls` of the API call with the same (pid, corr), or -1.

    When several calls share the key, the one that started last (the innermost) wins.
    """
    result = np.full(len(items_pid), -1, dtype=np.int64)
    if len(items_pid) == 0 or len(calls) == 0:
        return result
    cand = np.arange(len(calls)) if call_mask is None else np.flatnonzero(call_mask)
    ckey, cvalid = _keys(calls.pid[cand], calls.corr[cand])
    cand, ckey = cand[cvalid], ckey[cvalid]
    order = np.argsort(ckey)  # one key: several times cheaper than the lexsort below
    sorted_key = ckey[order]
    if (sorted_key[1:] == sorted_key[:-1]).any():  # shared keys: the latest start must win
        order = np.lexsort((calls.start[cand], ckey))
        sorted_key = ckey[order]
    ckey, cand = sorted_key, cand[order]
    ikey, ivalid = _keys(items_pid, items_corr)
    pos = np.searchsorted(ckey, ikey, side="right") - 1
    ok = ivalid & (pos >= 0)
    ok[ok] &= ckey[pos[ok]] == ikey[ok]
    result[ok] = cand[pos[ok]]
    return result


def kernel_launch_index(data: TraceData) -> np.ndarray:
    """For each kernel, the row of its launch call in data.runtime(), or -1 (cached)."""

    def build() -> np.ndarray:
        k = data.kernels()
        return match_calls(k.pid, k.corr, data.runtime())

    return data.cached("kernel_launch_index", build)
