"""A tiny column store: named numpy arrays of equal length, and factorize() for integer id
columns (the readers and the analysis share it)."""

from __future__ import annotations

import numpy as np


class Columns:
    """Named columns of one table (or a selection of it). `len()` is the row count."""

    def __init__(self, table: str, cols: dict[str, np.ndarray]) -> None:
        lengths = {len(v) for v in cols.values()}
        if len(lengths) > 1:
            raise ValueError(f"{table}: columns of different lengths {sorted(lengths)}")
        self.table = table
        self.cols = cols
        self.size = lengths.pop() if lengths else 0

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, key: str) -> np.ndarray:
        return self.cols[key]

    def __contains__(self, key: object) -> bool:
        return key in self.cols

    def __getattr__(self, key: str) -> np.ndarray:
        cols = self.__dict__.get("cols", {})
        if key in cols:
            return cols[key]
        raise AttributeError(key)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.cols)

    def take(self, index: np.ndarray) -> Columns:
        """Rows selected by a boolean mask or an index array."""
        return Columns(self.table, {k: v[index] for k, v in self.cols.items()})

    def with_columns(self, **extra: np.ndarray) -> Columns:
        return Columns(self.table, {**self.cols, **extra})

    @staticmethod
    def empty(table: str, names: tuple[str, ...]) -> Columns:
        return Columns(table, {n: np.empty(0, dtype=np.int64) for n in names})


_MIX = np.uint64(0x9E3779B97F4A7C15)


def surely_distinct(*columns: np.ndarray) -> bool:
    """True when no two rows agree on all `columns` (cheap exact check for the usual case).

    Rows are hashed to one uint64 and the hashes sorted: distinct hashes prove distinct rows.
    False means "maybe duplicated": the caller then runs its exact (lexsort) path.
    """
    n = len(columns[0]) if columns else 0
    if n < 2:
        return True
    h = np.zeros(n, dtype=np.uint64)
    for col in columns:
        h ^= col.astype(np.int64).view(np.uint64)
        h *= _MIX  # wraps modulo 2^64, which is what a hash wants
        h ^= h >> np.uint64(31)
    h.sort()
    return not bool((h[1:] == h[:-1]).any())


def first_appearance_codes(key: np.ndarray, span: int) -> tuple[np.ndarray, int]:
    """Codes of pd.factorize(key, sort=False) (numbered by first appearance) and their
    count, for keys in [0, span): a table lookup instead of a hash table when the span
    is small next to the row count, which is several times cheaper at millions of rows."""
    if span > 4 * len(key) + 4096:
        import pandas as pd  # only for sparse keys; the column store itself needs numpy alone

        codes, uniq = pd.factorize(key, sort=False)
        return codes.astype(np.int64), len(uniq)
    first = np.full(span, len(key), dtype=np.int64)
    first[key[::-1]] = np.arange(len(key) - 1, -1, -1)  # earliest position per key
    present = np.flatnonzero(first < len(key))
    rank = np.empty(span, dtype=np.int64)
    rank[present[np.argsort(first[present], kind="stable")]] = np.arange(len(present))
    return rank[key], len(present)


def factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """pd.factorize(values, sort=False) for an integer array: (int64 codes, distinct
    values in order of first appearance)."""
    if len(values) == 0:
        return np.empty(0, np.int64), values[:0]
    lo = int(values.min())
    codes, count = first_appearance_codes(values.astype(np.int64) - lo, int(values.max()) - lo + 1)
    uniq = np.empty(count, dtype=values.dtype)
    uniq[codes] = values
    return codes, uniq
