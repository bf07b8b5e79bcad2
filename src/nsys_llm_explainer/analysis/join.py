"""Kernel -> launch call join on (process, correlationId).

Correlation ids are per process: real multi-process traces reuse them, so joining on the
id alone pairs kernels with other processes' calls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from nsys_llm_explainer.analysis.groups import MASK_SPLIT_MAX, distinct, distinct_few
from nsys_llm_explainer.trace.columns import Columns

if TYPE_CHECKING:
    from nsys_llm_explainer.trace.data import TraceData

_CORR_BITS = 39  # pid (24 bits) << 39 | corr keeps the key within int64
# The direct-address table may be this many times the number of calls (plus the slack)
# before the sorted join is used instead.
DENSE_FACTOR = 4
DENSE_SLACK = 1 << 20
# Items this many times fewer than the calls: only calls with an item's correlation id are
# joined (_may_match).
FEW_ITEMS = 16


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
    if call_mask is None and len(items_pid) * FEW_ITEMS < len(calls):
        call_mask = _may_match(items_corr, calls.corr)
    cand = np.arange(len(calls)) if call_mask is None else np.flatnonzero(call_mask)
    cpid, ccorr = calls.pid[cand], calls.corr[cand]
    cvalid = (cpid >= 0) & (ccorr > 0) & (ccorr < (1 << _CORR_BITS))
    if not cvalid.all():
        cand, cpid, ccorr = cand[cvalid], cpid[cvalid], ccorr[cvalid]
    if len(cand) == 0:
        return result
    found = _match_dense(items_pid, items_corr, cand, cpid, ccorr)
    if found is None:
        found = _match_sorted(items_pid, items_corr, cand, cpid, ccorr, calls.start[cand])
    return found


def _may_match(items_corr: np.ndarray, calls_corr: np.ndarray) -> np.ndarray:
    """Per call: some item has its correlation id. Only these can match, so a few items
    (copies, read-backs) join millions of calls without arrays as long as the calls."""
    wanted = distinct(items_corr[items_corr > 0])
    if len(wanted) == 0:
        return np.zeros(len(calls_corr), dtype=bool)
    pos = np.searchsorted(wanted, calls_corr)
    np.minimum(pos, len(wanted) - 1, out=pos)
    return wanted[pos] == calls_corr


def _match_dense(
    items_pid: np.ndarray, items_corr: np.ndarray, cand: np.ndarray, cpid: np.ndarray,
    ccorr: np.ndarray,
) -> np.ndarray | None:
    """match_calls by direct addressing: CUPTI numbers correlation ids densely per process,
    so one slot per (pid, id in that pid's range) is a table about as long as the calls,
    and the join is a gather instead of a sort and a binary search. None when there are
    many processes, the ids are too sparse, or a key is shared (the sorted join then
    picks the latest call)."""
    pids = distinct_few(cpid)
    if len(pids) > MASK_SPLIT_MAX:  # one comparison pass per process below
        return None
    masks = [cpid == pid for pid in pids.tolist()]
    corr_of = [ccorr[m] for m in masks]
    lo = np.array([int(c.min()) for c in corr_of], dtype=np.int64)
    width = np.array([int(c.max()) for c in corr_of], dtype=np.int64) - lo + 1
    size = int(width.sum())
    if size > DENSE_FACTOR * len(cand) + DENSE_SLACK:
        return None
    base = np.r_[0, np.cumsum(width)[:-1]]
    table = np.full(size, -1, dtype=np.int64)
    for j, (m, corr) in enumerate(zip(masks, corr_of, strict=True)):
        table[corr + (base[j] - lo[j])] = cand[m]
    if int(np.count_nonzero(table >= 0)) != len(cand):
        return None  # a (pid, corr) key is shared by several calls
    del masks, corr_of
    result = np.full(len(items_pid), -1, dtype=np.int64)
    for j, pid in enumerate(pids.tolist()):
        mine = np.flatnonzero(items_pid == pid)
        off = items_corr[mine] - lo[j]
        inside = (off >= 0) & (off < width[j])
        result[mine[inside]] = table[off[inside] + base[j]]
    return result


def _match_sorted(
    items_pid: np.ndarray, items_corr: np.ndarray, cand: np.ndarray, cpid: np.ndarray,
    ccorr: np.ndarray, cstart: np.ndarray,
) -> np.ndarray:
    """match_calls by sorting the call keys and a binary search per item."""
    result = np.full(len(items_pid), -1, dtype=np.int64)
    ckey, _ = _keys(cpid, ccorr)
    order = np.argsort(ckey)  # one key: several times cheaper than the lexsort below
    sorted_key = ckey[order]
    if (sorted_key[1:] == sorted_key[:-1]).any():  # shared keys: the latest start must win
        order = np.lexsort((cstart, ckey))
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
