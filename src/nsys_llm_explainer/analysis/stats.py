"""Percentiles per group in one sort (never one query or one Python loop per group).

Definition (docs/metrics/top_kernels.md): nearest rank. The p-th percentile of n sorted
values d[0..n-1] is d[k-1] with k = ceil(p/100 * n), at least 1: the smallest value with at
least p% of the values at or below it. It is always a value that occurred (an interpolated
p50 of a kernel that alternates 7.9 ms and 0.16 ms calls would be a duration no call had).
k is computed in exact integer arithmetic, so p=90 of 10 values is d[8], never d[9].

Multi-modal durations: does a kernel (or a phase's steps) take two or more clearly
different times, e.g. a GEMM alternating 7.9 ms and 0.16 ms calls? Its p50 alone would
describe neither kind of call.

Criterion (docs/metrics/top_kernels.md), on the sorted durations d[0..n-1] of a group with
n >= MIN_SAMPLES:
- a gap is a place between d[i-1] and d[i] with d[i] >= GAP_FACTOR * max(d[i-1], 1 ns): a
  factor of at least 2 between consecutive sorted durations (a jump on the log scale, so it
  does not depend on the unit or on the size of the durations);
- walking left to right, a gap splits the durations when the part since the last split and
  the part after the gap both hold at least min_calls = max(ceil(MIN_MODE_PCT% of n),
  MIN_MODE_CALLS) durations;
- the parts are the modes; two or more modes is multi-modal.
A unimodal kernel, however noisy, has many durations close together and no factor-2 jump
with 10% of its calls beyond it; rare slow outliers (under 10% of calls) are not a mode.

Each mode: its nearest-rank p50, min, max, calls and share of the group's calls; listed by
calls descending, then p50 descending."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis.groups import PACK_LIMIT, group_max, group_min, group_sum
from nsys_llm_explainer.frozen import frozen


def rank_of(p: float, counts: np.ndarray) -> np.ndarray:
    """1-based nearest rank ceil(p/100 * n) per count n (at least 1), exactly."""
    frac = Fraction(str(p)) / 100  # str: 99.9 is 999/10, not its binary neighbour
    num, den = frac.numerator, frac.denominator
    counts = np.asarray(counts, dtype=np.int64)
    k = (counts * num + den - 1) // den
    return np.clip(k, 1, np.maximum(counts, 1))


def _sorted_within_groups(
    values: np.ndarray, groups: np.ndarray, ngroups: int
) -> Callable[[np.ndarray], np.ndarray]:
    """A picker: positions -> the values at those positions of `values` ordered by
    (group, value)."""
    if ngroups <= 1:
        return np.sort(values).__getitem__
    if not np.issubdtype(values.dtype, np.integer):
        return values[np.lexsort((values, groups))].__getitem__
    lo, hi = int(values.min()), int(values.max())
    span = hi - lo + 1
    if span * ngroups < PACK_LIMIT:
        # One int64 sort of a combined key is several times cheaper than a two-key lexsort
        # followed by a gather; a value is recovered from its key exactly, and only the
        # values at the picked positions are.
        key = groups.astype(np.int64, copy=False) * span
        key += values.astype(np.int64, copy=False)
        key -= lo
        key.sort()
        return lambda pos: key[pos] % span + lo
    return values[np.lexsort((values, groups))].__getitem__


def _nearest_rank(
    pick: Callable[[np.ndarray], np.ndarray], counts: np.ndarray, offsets: np.ndarray,
    ps: Sequence[float],
) -> dict[float, np.ndarray]:
    """Per-group percentiles from `pick(positions)`, the sorted values at those positions."""
    out = {p: np.zeros(len(counts), dtype=np.int64) for p in ps}
    has = counts > 0
    for p in ps:
        k = rank_of(p, counts[has])
        out[p][has] = pick(offsets[has] + k - 1).astype(np.int64)
    return out


def group_percentiles(
    values: np.ndarray, groups: np.ndarray, ngroups: int, ps: Sequence[float]
) -> dict[float, np.ndarray]:
    """Percentiles of `values` within each group code 0..ngroups-1 (empty groups -> 0)."""
    return group_summary(values, groups, ngroups, ps)[0]


def group_summary(
    values: np.ndarray, groups: np.ndarray, ngroups: int, ps: Sequence[float]
) -> tuple[dict[float, np.ndarray], np.ndarray]:
    """Percentiles and the maximum of `values` within each group code (empty groups: 0),
    from one sort."""
    if len(values) == 0:
        return {p: np.zeros(ngroups, dtype=np.int64) for p in ps}, np.zeros(ngroups, np.int64)
    if ngroups == 1:  # a partial sort around the needed ranks is enough
        one = percentiles(values, ps)
        return {p: np.array([one[p]], dtype=np.int64) for p in ps}, np.array([values.max()])
    pick = _sorted_within_groups(values, groups, ngroups)
    counts = np.bincount(groups, minlength=ngroups)
    ends = np.cumsum(counts)
    offsets = np.r_[0, ends[:-1]]
    top = np.zeros(ngroups, dtype=values.dtype)
    has = counts > 0
    top[has] = pick(ends[has] - 1)
    return _nearest_rank(pick, counts, offsets, ps), top


def percentiles(values: np.ndarray, ps: Sequence[float]) -> dict[float, int]:
    """Percentiles of one group: a partial sort around the needed ranks (O(n))."""
    n = len(values)
    if n == 0:
        return {p: 0 for p in ps}
    idx = {p: int(rank_of(p, np.array([n]))[0]) - 1 for p in ps}
    part = np.partition(values, sorted(set(idx.values())))
    return {p: int(part[i]) for p, i in idx.items()}


@frozen
class SortedGroups:
    """Values sorted by (group, value): group i's values are values[offsets[i]:][:counts[i]].

    For metrics that need more than percentiles from the one sort (analysis/stats.py)."""

    values: np.ndarray
    counts: np.ndarray
    offsets: np.ndarray

    def percentiles(self, ps: Sequence[float]) -> dict[float, np.ndarray]:
        return _nearest_rank(self.values.__getitem__, self.counts, self.offsets, ps)

    def quantile(self, q: float) -> np.ndarray:
        """Per group, float64: the value at rank q * (n - 1) counted from 0, interpolated
        linearly between its two neighbours (pandas' groupby quantile, same arithmetic:
        v + (next - v) * frac); NaN for an empty group."""
        out = np.full(len(self.counts), np.nan)
        has = self.counts > 0
        n = self.counts[has]
        pos = q * (n - 1).astype(np.float64)
        at = self.offsets[has] + pos.astype(np.int64)
        frac = pos % 1
        v = self.values[at].astype(np.float64)
        nxt = self.values[np.minimum(at + 1, self.offsets[has] + n - 1)].astype(np.float64)
        out[has] = np.where(frac == 0.0, v, v + (nxt - v) * frac)
        return out

    def median(self) -> np.ndarray:
        """Per group, float64: the middle value, or the mean of the two middle values (as
        pandas' groupby median computes it); NaN for an empty group."""
        out = np.full(len(self.counts), np.nan)
        has = self.counts > 0
        n, first = self.counts[has], self.offsets[has]
        upper = self.values[first + n // 2].astype(np.float64)
        lower = self.values[first + (n - 1) // 2].astype(np.float64)
        out[has] = (upper + lower) / 2
        return out


def sort_within_groups(values: np.ndarray, groups: np.ndarray, ngroups: int) -> SortedGroups:
    counts = np.bincount(groups, minlength=ngroups).astype(np.int64)
    offsets = np.cumsum(counts) - counts
    if len(values) == 0:
        return SortedGroups(values.astype(np.int64), counts, offsets)
    if ngroups <= 1:
        return SortedGroups(np.sort(values), counts, offsets)
    if np.issubdtype(values.dtype, np.integer):
        lo, hi = int(values.min()), int(values.max())
        span = hi - lo + 1
        if span * ngroups < PACK_LIMIT:
            key = groups.astype(np.int64, copy=False) * span
            key += values.astype(np.int64, copy=False)
            key.sort()
            # Sorted keys are grouped, so each key's group is known from the counts: one
            # multiply-subtract recovers the values (several times cheaper than a modulo).
            key -= np.repeat(np.arange(ngroups, dtype=np.int64) * span, counts)
            return SortedGroups(key, counts, offsets)
    return SortedGroups(values[np.lexsort((values, groups))], counts, offsets)


GAP_FACTOR = 2  # an integer, so the comparison stays in exact int64
MIN_MODE_PCT = 10.0
MIN_MODE_CALLS = 3
MIN_SAMPLES = 10


def min_calls(n: np.ndarray) -> np.ndarray:
    """Fewest durations each side of a split must hold, per group size n."""
    share = rank_of(MIN_MODE_PCT, n)  # ceil(10% of n), exactly
    return np.maximum(share, MIN_MODE_CALLS)


def group_modes(sg: SortedGroups) -> list[list[dict]]:
    """Per group: its modes when it is multi-modal, else an empty list."""
    v, counts, offsets = sg.values, sg.counts, sg.offsets
    out: list[list[dict]] = [[] for _ in range(len(counts))]
    if len(v) < 2:
        return out
    # One pass over all durations; everything after it touches the (few) gaps only.
    jump = v[1:] >= np.maximum(v[:-1], 1) * GAP_FACTOR
    first = offsets[(counts > 0) & (offsets > 0)]
    jump[first - 1] = False  # no gap between the last value of a group and the next group's
    at = np.flatnonzero(jump) + 1  # position of d[i], the first value after the gap
    if len(at) == 0:
        return out
    g = np.searchsorted(offsets + counts, at, side="right")
    i = at - offsets[g]  # durations below the gap
    need = min_calls(counts[g])
    ok = (counts[g] >= MIN_SAMPLES) & (i >= need) & (counts[g] - i >= need)
    by_group: dict[int, list[int]] = {}
    for gg, ii in zip(g[ok].tolist(), i[ok].tolist(), strict=True):
        by_group.setdefault(gg, []).append(ii)
    for gg, cuts in by_group.items():
        n, base, need_g = int(counts[gg]), int(offsets[gg]), int(min_calls(np.array([counts[gg]]))[0])
        splits = [0]
        for c in cuts:  # in ascending order: the greedy left-to-right walk
            if c - splits[-1] >= need_g and n - c >= need_g:
                splits.append(c)
        if len(splits) < 2:
            continue
        bounds = splits + [n]
        modes = []
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            part = v[base + a : base + b]
            k = int(rank_of(50, np.array([b - a]))[0])
            modes.append(
                {
                    "p50_ns": int(part[k - 1]),
                    "min_ns": int(part[0]),
                    "max_ns": int(part[-1]),
                    "calls": b - a,
                    "pct_of_calls": round(100.0 * (b - a) / n, 2),
                }
            )
        modes.sort(key=lambda m: (-m["calls"], -m["p50_ns"]))
        out[gg] = modes
    return out


def modes_text(modes: list[dict]) -> str:
    """CSV form: 'p50_ns:pct_of_calls' per mode, joined by ';' (empty when unimodal)."""
    return ";".join(f"{m['p50_ns']}:{m['pct_of_calls']:g}" for m in modes)


KERNEL_COLUMNS = (
    "name", "device_id", "calls", "total_ns", "avg_ns", "min_ns", "max_ns",
    "p50_ns", "p90_ns", "p99_ns", "pct_of_kernel_time", "multimodal", "modes",
)


def kernel_table(names: list[str], devices: np.ndarray, dur: np.ndarray, codes: np.ndarray) -> pd.DataFrame:
    """Per-group statistics of kernels grouped by `codes`, longest total first: the rows of
    top_kernels (per name and device) and per_process (per pid, name and device)."""
    g = len(names)
    calls = np.bincount(codes, minlength=g).astype(np.int64)
    total = group_sum(dur, codes, g)
    ordered = sort_within_groups(dur, codes, g)
    pct = ordered.percentiles((50, 90, 99))
    modes = group_modes(ordered)
    all_ns = int(total.sum())
    frame = pd.DataFrame(
        {
            "name": names,
            "device_id": devices.astype(np.int64),
            "calls": calls,
            "total_ns": total,
            "avg_ns": np.rint(total / np.maximum(calls, 1)).astype(np.int64),
            "min_ns": group_min(dur, codes, g),
            "max_ns": group_max(dur, codes, g),
            "p50_ns": pct[50],
            "p90_ns": pct[90],
            "p99_ns": pct[99],
            "pct_of_kernel_time": np.round(100.0 * total / all_ns, 4) if all_ns else 0.0,
            "multimodal": np.array([len(m) > 1 for m in modes], dtype=bool),
            "modes": modes,
        }
    )
    frame = frame.sort_values(["total_ns", "name", "device_id"], ascending=[False, True, True], kind="stable")
    return frame.reset_index(drop=True)


def csv_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The kernel rows with `modes` as text (see modes_text) for the CSV."""
    return frame.assign(modes=frame["modes"].map(modes_text))
