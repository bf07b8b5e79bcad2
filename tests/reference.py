"""Deliberately simple reference implementations that tests compare the tool against.

Plain Python loops over lists, written for obviousness rather than speed, so a bug in the
vectorized code cannot hide behind the same cleverness in the test.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

Interval = tuple[int, int]


def merged(intervals: Iterable[Interval]) -> list[Interval]:
    """Disjoint sorted intervals covering the union; touching intervals are joined."""
    out: list[list[int]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def union_length(intervals: Iterable[Interval]) -> int:
    return sum(e - s for s, e in merged(intervals))


def gaps(intervals: Iterable[Interval]) -> list[Interval]:
    """Holes between the merged intervals, in time order."""
    m = merged(intervals)
    return [(m[i][1], m[i + 1][0]) for i in range(len(m) - 1)]


def covered(query: Interval, cover: Iterable[Interval]) -> int:
    """Length of `query` that the union of `cover` overlaps."""
    qs, qe = query
    return sum(max(0, min(qe, e) - max(qs, s)) for s, e in merged(cover))


def percentile(values: Sequence[int], p: float) -> int:
    """Nearest rank: the smallest value with at least p% of the values at or below it."""
    ordered = sorted(values)
    for v in ordered:
        at_or_below = sum(1 for x in ordered if x <= v)
        if 100 * at_or_below >= p * len(ordered):
            return v
    return ordered[-1]


def pid_of(global_id: int) -> int:
    return (global_id >> 24) & 0xFFFFFF


def tid_of(global_tid: int) -> int:
    return global_tid & 0xFFFFFF


@dataclass(frozen=True)
class Range:
    name: str
    start: int
    end: int | None  # None: never ended
    pid: int
    tid: int


def innermost(ranges: Sequence[Range], pid: int, tid: int, t0: int, t1: int) -> Range | None:
    """The enclosing ended range on (pid, tid) with the latest start; ties: earliest end."""
    best: Range | None = None
    for r in ranges:
        if r.end is None or (r.pid, r.tid) != (pid, tid):
            continue
        if not (r.start <= t0 and t1 <= r.end):
            continue
        if best is None or (r.start, -r.end) > (best.start, -best.end):  # type: ignore[operator]
            best = r
    return best


def contains(outer: Range, inner: Range) -> bool:
    """`inner` lies within `outer` on the same thread (a range contains itself)."""
    assert outer.end is not None and inner.end is not None
    return (
        (outer.pid, outer.tid) == (inner.pid, inner.tid)
        and outer.start <= inner.start
        and inner.end <= outer.end
    )


@dataclass(frozen=True)
class Kernel:
    start: int
    end: int
    pid: int
    corr: int
    device: int = 0


@dataclass(frozen=True)
class Launch:
    start: int
    end: int
    pid: int
    tid: int
    corr: int


def attribution(
    kernels: Sequence[Kernel], launches: Sequence[Launch], ranges: Sequence[Range]
) -> dict[str, object]:
    """NVTX attribution by brute force over every (kernel, launch) and (kernel, range) pair.

    A kernel's launch is the call with the same (pid, corr); the kernel is credited to the
    innermost range enclosing that call. Inclusive time of a name counts each kernel once
    if its innermost range lies within any range of that name.
    """
    total = sum(k.end - k.start for k in kernels)
    own: dict[str, list[int]] = {}
    inclusive: dict[str, int] = {}
    attributed = 0
    without_launch = 0
    for k in kernels:
        calls = [c for c in launches if (c.pid, c.corr) == (k.pid, k.corr)]
        if not calls:
            without_launch += 1
            continue
        call = max(calls, key=lambda c: c.start)
        inner = innermost(ranges, call.pid, call.tid, call.start, call.end)
        if inner is None:
            continue
        dur = k.end - k.start
        attributed += dur
        cnt_ns = own.setdefault(inner.name, [0, 0])
        cnt_ns[0] += 1
        cnt_ns[1] += dur
        names = {r.name for r in ranges if r.end is not None and contains(r, inner)}
        for name in names:
            inclusive[name] = inclusive.get(name, 0) + dur
    return {
        "total": total,
        "attributed": attributed,
        "without_launch": without_launch,
        "own": {n: (c, ns) for n, (c, ns) in own.items()},
        "inclusive": inclusive,
    }


def modes(values: Sequence[int]) -> list[tuple[int, int]]:
    """Multi-modality by the documented criterion, written out plainly: the (p50, calls) of
    each cluster when there are two or more clusters, else []. A gap sits between
    consecutive sorted values a < b with b >= 2 * max(a, 1); walking left to right, a gap
    splits when both the part since the last split and everything after it hold at least
    max(ceil(10% of n), 3) values; n must be at least 10."""
    d = sorted(values)
    n = len(d)
    if n < 10:
        return []
    need = max(-(-n // 10), 3)
    splits = [0]
    for i in range(1, n):
        if d[i] >= 2 * max(d[i - 1], 1) and i - splits[-1] >= need and n - i >= need:
            splits.append(i)
    if len(splits) < 2:
        return []
    parts = [d[a:b] for a, b in zip(splits, splits[1:] + [n], strict=True)]
    out = [(percentile(p, 50), len(p)) for p in parts]
    return sorted(out, key=lambda m: (-m[1], -m[0]))
