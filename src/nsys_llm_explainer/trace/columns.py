"""A tiny column store: named numpy arrays of equal length."""

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

