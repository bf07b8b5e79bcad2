"""A tiny column store: named numpy arrays of equal length, and factorize() for integer id
columns (the readers and the analysis share it)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

# Columns a table may leave to be computed when read (Columns(..., derived=...)): at
# millions of rows, a column that is one subtraction away costs more to hold than to compute.
DERIVED = {"dur": ("end", "start")}  # name -> (minuend, subtrahend)
_INT32 = np.iinfo(np.int32)
Compute = Callable[[], np.ndarray]


class Columns:
    """Named columns of one table (or a selection of it). `len()` is the row count.

    Columns that are not stored are computed on each read: `derived` names columns of
    DERIVED (formulas over this table's columns), `computed` maps names to functions that
    build the whole column (e.g. from other tables' columns), and `size` gives the row
    count when no column is stored."""

    def __init__(
        self, table: str, cols: dict[str, np.ndarray], derived: tuple[str, ...] = (),
        computed: dict[str, Compute] | None = None, size: int | None = None,
    ) -> None:
        lengths = {len(v) for v in cols.values()}
        if size is not None:
            lengths.add(size)
        if len(lengths) > 1:
            raise ValueError(f"{table}: columns of different lengths {sorted(lengths)}")
        self.table = table
        self.cols = cols
        self.computed = {k: f for k, f in (computed or {}).items() if k not in cols}
        # A formula whose inputs are not all here is not a column of this table.
        self.derived = tuple(
            d for d in derived if d not in cols and all(x in cols or x in self.computed for x in DERIVED[d])
        )
        self.size = lengths.pop() if lengths else 0

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, key: str) -> np.ndarray:
        if key in self.cols:
            return self.cols[key]
        if key in self.derived:
            a, b = DERIVED[key]
            return self[a] - self[b]
        if key in self.computed:
            return self.computed[key]()
        raise KeyError(key)

    def rows_of(self, key: str, rows: np.ndarray) -> np.ndarray:
        """`self[key][rows]`, where a DERIVED column is computed over those rows alone (in a
        loop over blocks of rows, the whole column each time would cost a pass per block)."""
        if key in self.derived:
            a, b = DERIVED[key]
            return self.rows_of(a, rows) - self.rows_of(b, rows)
        return self[key][rows]

    def __contains__(self, key: object) -> bool:
        return key in self.cols or key in self.derived or key in self.computed

    def __getattr__(self, key: str) -> np.ndarray:
        cols = self.__dict__.get("cols", {})
        if key in cols:
            return cols[key]
        if key in self.__dict__.get("derived", ()) or key in self.__dict__.get("computed", {}):
            return self[key]
        raise AttributeError(key)

    @property
    def names(self) -> tuple[str, ...]:
        return (*self.cols, *self.computed, *self.derived)

    def take(self, index: np.ndarray) -> Columns:
        """Rows selected by a boolean mask or an index array (computed columns are stored)."""
        return Columns(
            self.table, {k: self[k][index] for k in (*self.cols, *self.computed)}, self.derived
        )

    def with_columns(self, **extra: np.ndarray) -> Columns:
        return Columns(self.table, {**self.cols, **extra}, self.derived, self.computed, self.size)

    def without(self, *names: str) -> Columns:
        """The same rows without the columns `names` (their memory goes with the last reference)."""
        return Columns(
            self.table, {k: v for k, v in self.cols.items() if k not in names}, self.derived,
            {k: f for k, f in self.computed.items() if k not in names}, self.size,
        )

    @staticmethod
    def empty(table: str, names: tuple[str, ...]) -> Columns:
        return Columns(table, {n: np.empty(0, dtype=np.int64) for n in names})


def narrow(values: np.ndarray) -> np.ndarray:
    """`values` as int32 when every value fits (ids, device and stream numbers: half the
    memory of int64 at millions of rows), else unchanged. Code reading such a column must not
    rely on its width: arithmetic that can leave int32 casts to int64 first."""
    if len(values) == 0 or (int(values.min()) >= _INT32.min and int(values.max()) <= _INT32.max):
        return values.astype(np.int32, copy=False)
    return values


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
    codes, first = first_appearances(key, span)
    return codes, len(first)


def first_appearances(key: np.ndarray, span: int) -> tuple[np.ndarray, np.ndarray]:
    """first_appearance_codes' codes, and per code the position of its first row."""
    n = len(key)
    if span > 4 * n + 4096:
        import pandas as pd  # only for sparse keys; the column store itself needs numpy alone

        codes, uniq = pd.factorize(key, sort=False)
        codes = codes.astype(np.int64)
        rows = np.empty(len(uniq), dtype=np.int64)
        rows[codes[::-1]] = np.arange(n - 1, -1, -1)
        return codes, rows
    first = np.full(span, n, dtype=np.int64)
    first[key[::-1]] = np.arange(n - 1, -1, -1)  # earliest position per key
    present = np.flatnonzero(first < n)
    order = np.argsort(first[present], kind="stable")
    rank = np.empty(span, dtype=np.int64)
    rank[present[order]] = np.arange(len(present))
    return rank[key], first[present[order]]


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
