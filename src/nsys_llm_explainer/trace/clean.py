"""Repairs for damaged-but-readable tables, each announced in a warning with a row count.

Names as every trace source gives them to the analysis: API-name normalization, and the
bound on the length of a name the analysis reads."""

from __future__ import annotations

import hashlib
import re

import numpy as np

from nsys_llm_explainer.trace.columns import Columns, surely_distinct

# One stream runs one kernel at a time, so two rows agreeing on all of these are one kernel
# written twice (a merged or re-exported capture), not two kernels.
KERNEL_IDENTITY = ("device", "stream", "start", "end", "corr", "gpid")
# Summed durations beyond this leave too little headroom below int64 for the sums metrics
# take (nested NVTX inclusive sums count a kernel once per enclosing level).
MAX_TOTAL_DURATION_NS = float(1 << 56)
MAX_BYTES = (1 << 48) - 1  # 256 TiB in one copy: far beyond any device, far below int64 sums


def drop_duplicate_rows(
    cols: Columns, keys: tuple[str, ...], warnings: list[str], what: str
) -> Columns:
    """Keep the first of rows equal on `keys`; warn with how many were dropped."""
    if len(cols) < 2 or surely_distinct(*(cols[k] for k in keys)):
        return cols
    order = np.lexsort(tuple(cols[k] for k in reversed(keys)))
    same = np.ones(len(order) - 1, dtype=bool)
    for k in keys:
        v = cols[k][order]
        same &= v[1:] == v[:-1]
    if not same.any():
        return cols
    dup = np.zeros(len(order), dtype=bool)
    dup[1:] = same
    keep = np.sort(order[~dup])
    warnings.append(
        f"{cols.table}: {int(dup.sum())} duplicated {what} rows "
        f"(same {', '.join(keys)}) counted once"
    )
    return cols.take(keep)


def clamp_sizes(cols: Columns, column: str, warnings: list[str], what: str) -> Columns:
    """Byte counts that cannot be real (negative, or beyond MAX_BYTES) become 0 (unknown).

    Left as they are, one such row makes every byte total and bandwidth meaningless, and a
    few of them overflow int64 sums.
    """
    values = cols[column]
    bad = (values < 0) | (values > MAX_BYTES)
    if not bad.any():
        return cols
    warnings.append(
        f"{cols.table}: {int(bad.sum())} {what} rows with impossible byte counts (negative or "
        f"above 2^{MAX_BYTES.bit_length()}) counted as 0 bytes"
    )
    return cols.with_columns(**{column: np.where(bad, 0, values)})


def total_duration_problem(table: str, cols: dict[str, np.ndarray]) -> str | None:
    """Why a table's durations cannot be added up in int64, or None when they can.

    Every kept row lies in [0, 2^62), yet a handful of rows spanning most of that range
    already overflow a sum and would print as negative totals. Real exports stay far
    below MAX_TOTAL_DURATION_NS (summed over all rows), so past it the file is damaged or
    its times are not nanoseconds: the table is not used rather than wrongly added up.
    """
    if "start" not in cols or "end" not in cols or len(cols["start"]) == 0:
        return None
    total = float(np.sum(cols["end"] - cols["start"], dtype=np.float64))
    if total < MAX_TOTAL_DURATION_NS:
        return None
    return (
        f"{table}: its durations add up to more than 2^56 ns (2.3 years), so the times are "
        "not nanoseconds or the file is damaged"
    )


# The longest name the analysis reads, in characters. Real kernel names reach a few thousand
# (templated CUDA kernels: 5,123 in one of the shared PyTorch profiler traces). Reading a name
# (kernel categories, labels, the Nsight Compute filter) takes time in proportion to its
# length, several seconds per megabyte, so a longer name is cut to its first NAME_LIMIT
# characters plus a note of its length and a digest of the whole, which keeps names that
# differ only past the cut apart.
NAME_LIMIT = 16_384

_VERSION_SUFFIX = re.compile(r"_v\d+$")


def api_base_name(name: str) -> str:
    """`cudaLaunchKernel_v7000` -> `cudaLaunchKernel` (version suffixes are noise for readers)."""
    return _VERSION_SUFFIX.sub("", name)


def bounded(name: str) -> str:
    """`name` itself, or cut to NAME_LIMIT characters with its length and SHA-1 after it."""
    if len(name) <= NAME_LIMIT:
        return name
    digest = hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{name[:NAME_LIMIT]}... (name cut: {len(name):,} characters, sha1 {digest})"


def cut_warning(what: str, lengths: list[int]) -> str:
    """The report's warning for the texts of `what` ("event names") that bounded() cut."""
    return (
        f"{what}: {len(lengths):,} longer than {NAME_LIMIT:,} characters (the longest {max(lengths):,}) "
        f"cut to their first {NAME_LIMIT:,}; the rest of each is not analyzed"
    )
