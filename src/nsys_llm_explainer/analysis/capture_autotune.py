"""Algorithm searches in a capture: cuBLAS/cuDNN (cudnn.benchmark, cublasLt heuristics) or a
framework autotuner timing several kernels for one operation before settling on one.

A search looks like this on one (process, device, stream): several variants of one GEMM or
convolution family (the kernel's function name with its digits removed, so tile sizes and
stage counts differ, the operation does not) run close together, each once, and afterwards
one of them, the winner, runs again and again. The trace has no operand shapes, so "the same
operation" is read from that pattern:

1. Per family and stream, the family's kernels in start order are cut into bursts: a burst
   ends when a name repeats or the next variant starts more than BURST_GAP_NS after the
   previous one ended.
2. A burst is a search when it has at least VARIANTS distinct names; afterwards at least one
   of them (a winner) runs at least WINNER_RUNS more times on that stream while fewer than
   half of them do; and at least half of them are rare, run at most RARE_RUNS times on that
   stream in the whole capture (the variants that lost are not run again). The last two
   matter: a steady loop of layers with different tiles (or a TensorRT engine, where every
   layer has its own tactic) also runs each name once per pass, but then every name repeats,
   and a workload whose shapes vary from step to step picks among the same tiles again and
   again, so none of them is rare.

The time counted is each search's variants' own kernel intervals (not the span from the
first variant to the last: the gaps between trials are reported by the idle split).
TensorRT engines are left out by the caller: TensorRT chooses tactics when the engine is
built, not while it runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from nsys_llm_explainer.analysis import intervals
from nsys_llm_explainer.analysis.groups import group_codes
from nsys_llm_explainer.kernels.categories import BUILTIN_TABLE
from nsys_llm_explainer.trace.columns import factorize
from nsys_llm_explainer.trace.data import TraceData

VARIANTS = 4
WINNER_RUNS = 3
RARE_RUNS = 2
BURST_GAP_NS = 100_000_000  # 100 ms between one trial's end and the next trial's start
SEARCHED = ("gemm", "conv")
_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True)
class Searches:
    starts: np.ndarray  # merged kernel intervals of the variants of every search
    ends: np.ndarray
    searches: int
    variants: int  # distinct variant names over all searches
    example: str | None  # the family of the largest search
    winner: str | None  # its winner


def _burst_starts(end: np.ndarray) -> np.ndarray:
    """Positions visited from 0 by following end[] (end[n] = n): the starts of the bursts,
    found by pointer doubling (log n vectorized rounds) instead of a walk per kernel."""
    n = len(end) - 1
    on = np.zeros(n + 1, dtype=bool)
    on[0] = True
    jump = end.copy()
    for _ in range(max(1, int(n).bit_length() + 1)):
        on[jump[on]] = True
        jump = jump[jump]
    return np.flatnonzero(on[:n])


def find(data: TraceData) -> Searches:
    """The searches in the trace's kernels (module docstring)."""
    k = data.kernels()
    empty = np.empty(0, np.int64)
    none = Searches(empty, empty, 0, 0, None, None)
    if not len(k):
        return none
    codes, uniq = factorize(k.name_id)
    lookup = data.kernel_names(np.asarray(uniq))
    names = [lookup.get(int(i), "") for i in uniq]
    cats, _ = BUILTIN_TABLE.classify(names)
    families: dict[str, int] = {}
    fam_of_name = np.full(len(uniq), -1, np.int64)
    for i, (name, cat) in enumerate(zip(names, cats, strict=True)):
        if cat in SEARCHED:
            family = _DIGITS.sub("#", name.split("(")[0])
            fam_of_name[i] = families.setdefault(family, len(families))
    family_names = list(families)
    kfam = fam_of_name[codes] if len(codes) else empty
    rows = np.flatnonzero(kfam >= 0)
    if not len(rows):
        return none
    key, _ = group_codes(k.pid[rows], k.device[rows], k.stream[rows], kfam[rows])
    del kfam  # kernel-sized arrays go as soon as they are used: this runs beside heavy metrics
    sort = np.lexsort((k.start[rows], key))
    pos, grp = rows[sort], key[sort]  # kernel rows, per (stream, family) in start order
    del rows, key, sort
    seq, start, end = codes[pos], k.start[pos], k.end[pos]
    del codes
    n = len(pos)
    at = np.arange(n)
    # prev: the previous position of the same name in the same group (-1: none); rank: how
    # many came before it; total: how many there are.
    by_name = np.lexsort((at, seq, grp))
    same = np.r_[False, (grp[by_name][1:] == grp[by_name][:-1]) & (seq[by_name][1:] == seq[by_name][:-1])]
    prev = np.full(n, -1, np.int64)
    prev[by_name[same]] = by_name[np.flatnonzero(same) - 1]
    run_start = np.maximum.accumulate(np.where(~same, np.arange(n), 0))
    rank = np.empty(n, np.int64)
    rank[by_name] = np.arange(n) - run_start
    run_len = np.diff(np.r_[np.flatnonzero(~same), n])
    total = np.empty(n, np.int64)
    total[by_name] = np.repeat(run_len, run_len)
    del by_name, same, run_start, run_len
    later = total - rank - 1
    del rank
    # A burst from f ends at the first position whose name already ran since f, or at a break
    # (a new group, or a gap longer than BURST_GAP_NS).
    first_repeat = np.full(n + 1, n, np.int64)
    np.minimum.at(first_repeat, prev[prev >= 0], at[prev >= 0])
    conflict = np.minimum.accumulate(first_repeat[::-1])[::-1]
    del first_repeat, prev
    brk = np.r_[False, (grp[1:] != grp[:-1]) | (start[1:] - end[:-1] > BURST_GAP_NS)]
    brk_at = np.r_[np.flatnonzero(brk), n]
    next_break = brk_at[np.searchsorted(brk_at, at, side="right")]
    stop = np.r_[np.minimum(conflict[:n], next_break), n]
    del conflict, next_break, brk, brk_at
    first = _burst_starts(stop)
    length = stop[first] - first
    first, length = first[length >= VARIANTS], length[length >= VARIANTS]
    if not len(first):
        return none
    member = np.repeat(np.arange(len(first)), length)
    where = np.repeat(first, length) + (np.arange(int(length.sum())) - np.repeat(np.cumsum(length) - length, length))
    winners = np.bincount(member, weights=later[where] >= WINNER_RUNS, minlength=len(first)).astype(np.int64)
    rare = np.bincount(member, weights=total[where] <= RARE_RUNS, minlength=len(first)).astype(np.int64)
    hit = (winners >= 1) & (2 * winners < length) & (2 * rare >= length)
    if not hit.any():
        return none
    chosen = where[hit[member]]
    s, e = intervals.merge(start[chosen], end[chosen])
    big = int(np.flatnonzero(hit)[np.argmax(length[hit])])
    trial = where[member == big]
    winner = trial[np.argmax(later[trial])]
    return Searches(
        s, e, int(hit.sum()), len(set(seq[chosen].tolist())),
        family_names[int(fam_of_name[seq[trial[0]]])], names[int(seq[winner])],
    )
