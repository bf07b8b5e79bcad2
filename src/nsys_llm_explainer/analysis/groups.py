"""Grouping several integer columns into one dense group code (hash-based, vectorized)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsys_llm_explainer.trace.columns import first_appearances


def group_codes(*columns: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """Dense codes 0..G-1 for the distinct tuples of `columns`, and each column's value per group.

    Groups are numbered in order of first appearance.
    """
    codes, first = group_rows(*columns)
    # First row of each group gives the group's column values.
    return codes, [col[first] for col in columns]


def group_rows(*columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """group_codes' codes, and per group the position of its first row."""
    n = len(columns[0]) if columns else 0
    if n == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    packed = _packed_key(columns)
    if packed is not None:
        return first_appearances(*packed)
    codes = np.zeros(n, dtype=np.int64)
    for col in columns:
        c, uniq = pd.factorize(col, sort=False)
        # Re-densify after each column so the combined code never overflows int64.
        codes, _ = pd.factorize(codes * len(uniq) + c, sort=False)
    codes = codes.astype(np.int64)
    first = np.zeros(int(codes.max()) + 1, dtype=np.int64)
    first[codes[::-1]] = np.arange(n - 1, -1, -1)
    return codes, first


PACK_LIMIT = 1 << 62  # a packed int64 key (code * span + value) must stay below this


def _packed_key(columns: tuple[np.ndarray, ...]) -> tuple[np.ndarray, int] | None:
    """All integer columns packed into one int64 key (mixed radix) and the keys' span
    (every key lies in [0, span)), or None if it won't fit. Built in place: one row-sized
    array, not a temporary per step."""
    if not all(c.dtype.kind == "i" or (c.dtype.kind == "u" and c.dtype.itemsize < 8)
               for c in columns):
        return None
    key: np.ndarray | None = None
    total = 1
    for col in columns:
        lo, hi = int(col.min()), int(col.max())
        span = hi - lo + 1
        if total * span >= PACK_LIMIT:
            return None
        if key is None:
            key = col.astype(np.int64)  # a copy, changed below
            key -= lo
        else:
            # key * span + (col - lo): a partial sum may wrap around int64, but the result
            # lies in [0, total * span) and integer arithmetic modulo 2^64 gives it exactly
            key *= span
            key += col
            key -= lo
        total *= span
    assert key is not None
    return key, total


def distinct(values: np.ndarray, runs: bool = False) -> np.ndarray:
    """Sorted distinct values, as np.unique(values).

    numpy >= 2.3 answers a plain np.unique with a hash table that is many times slower
    than a sort on large, high-cardinality arrays (seconds for a few million rows).
    `runs`: values often repeat the one before (the kernels of one launch or one operator,
    in launch order); dropping those repeats first leaves less to sort.
    """
    if runs and len(values) > 1:
        values = values[np.r_[True, values[1:] != values[:-1]]]
    s = np.sort(values)
    if len(s) < 2:
        return s
    return s[np.r_[True, s[1:] != s[:-1]]]


def distinct_per_group(codes: np.ndarray, values: np.ndarray, ngroups: int, runs: bool = False) -> np.ndarray:
    """Per group code 0..ngroups-1: how many distinct `values` (integers) its rows hold.

    One sort of the packed (code, value) keys: the distinct keys, counted by their code.
    Cheaper than numbering the pairs (group_codes) when values span millions. `runs`: as
    for distinct()."""
    if len(codes) == 0:
        return np.zeros(ngroups, dtype=np.int64)
    lo = int(values.min())
    span = int(values.max()) - lo + 1
    if ngroups * span >= PACK_LIMIT:
        _, (code, _) = group_codes(codes, values)
        return np.bincount(code, minlength=ngroups)
    keys = distinct(codes.astype(np.int64) * span + (values.astype(np.int64) - lo), runs)
    return np.bincount(keys // span, minlength=ngroups)


def distinct_few(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values, as np.unique(values), for a column with few distinct values
    (processes, devices, API codes): one hash pass instead of a sort of every row."""
    return np.sort(pd.unique(np.asarray(values)))


MASK_SPLIT_MAX = 64  # up to this many groups, one comparison pass each beats a stable sort


def rows_by_value(values: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """(value, ascending row indices holding it) for each distinct value, in value order."""
    uniq = distinct_few(values)
    if len(uniq) <= MASK_SPLIT_MAX:
        return [(int(v), np.flatnonzero(values == v)) for v in uniq.tolist()]
    order = np.argsort(values, kind="stable")
    bounds = np.r_[np.searchsorted(values[order], uniq), len(order)]
    return [(int(v), order[bounds[i] : bounds[i + 1]]) for i, v in enumerate(uniq.tolist())]


_EXACT_FLOAT = 1 << 53


def group_sum(values: np.ndarray, codes: np.ndarray, ngroups: int) -> np.ndarray:
    """Exact integer sums per group."""
    if len(codes) == 0:
        return np.zeros(ngroups, np.int64)
    if ngroups == 1:
        return np.array([values.sum(dtype=np.int64)], dtype=np.int64)
    if int(np.abs(values).max()) * len(values) < _EXACT_FLOAT:
        # bincount sums in float64, exact while every partial sum stays below 2^53.
        return np.rint(np.bincount(codes, weights=values, minlength=ngroups)).astype(np.int64)
    out = np.zeros(ngroups, dtype=np.int64)
    np.add.at(out, codes, values.astype(np.int64))
    return out


def group_min(values: np.ndarray, codes: np.ndarray, ngroups: int) -> np.ndarray:
    out = np.full(ngroups, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(out, codes, values)
    return out


def group_max(values: np.ndarray, codes: np.ndarray, ngroups: int) -> np.ndarray:
    out = np.full(ngroups, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(out, codes, values)
    return out


def sparse_rows(mask: np.ndarray) -> np.ndarray:
    """A boolean mask kept for a long time (a cache), compactly: its true rows (ascending)
    when they take less room than the mask itself (fewer than one row in eight), else the
    mask. marked_at() and as_mask() read either form."""
    count = int(np.count_nonzero(mask))
    return np.flatnonzero(mask) if count * 8 < len(mask) else mask


def marked_at(marked: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Per row of `rows`: whether sparse_rows() marked it."""
    if marked.dtype == bool:
        return marked[rows]
    if not len(marked):
        return np.zeros(len(rows), dtype=bool)
    pos = np.minimum(np.searchsorted(marked, rows), len(marked) - 1)
    return marked[pos] == rows


def as_mask(marked: np.ndarray, n: int) -> np.ndarray:
    """sparse_rows()'s mask again, as a new array of `n` rows."""
    if marked.dtype == bool:
        return marked.copy()
    out = np.zeros(n, dtype=bool)
    out[marked] = True
    return out
