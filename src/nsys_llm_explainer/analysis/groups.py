"""Grouping several integer columns into one dense group code (hash-based, vectorized)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def group_codes(*columns: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """Dense codes 0..G-1 for the distinct tuples of `columns`, and each column's value per group."""
    n = len(columns[0]) if columns else 0
    if n == 0:
        return np.empty(0, np.int64), [np.empty(0, np.int64) for _ in columns]
    codes = np.zeros(n, dtype=np.int64)
    key_uniq: np.ndarray | pd.Index = np.zeros(1)
    for col in columns:
        c, uniq = pd.factorize(col, sort=False)
        # Re-densify after each column so the combined code never overflows int64.
        codes, key_uniq = pd.factorize(codes * len(uniq) + c, sort=False)
    first = np.zeros(len(key_uniq), dtype=np.int64)
    # First row of each group gives the group's column values.
    first[codes[::-1]] = np.arange(n - 1, -1, -1)
    return codes.astype(np.int64), [col[first] for col in columns]


_EXACT_FLOAT = 1 << 53


def group_sum(values: np.ndarray, codes: np.ndarray, ngroups: int) -> np.ndarray:
    """Exact integer sums per group."""
    if len(codes) == 0:
        return np.zeros(ngroups, np.int64)
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
