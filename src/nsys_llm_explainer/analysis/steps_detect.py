"""Finding serving steps: from NVTX (phase map / --step-range) or from the repeating pattern.

Automatic detection runs on each process that ran kernels, on its own kernels in launch order
(launch call start; kernel start when no launch call joins), so every rank of a multi-process
capture gets its own steps:

1. "launch_sequence": for every kernel name seen at least MIN_STEPS + 1 times, the distance
   (in kernels) between its consecutive occurrences; a name is periodic when one distance
   (its period) covers >= REGULAR_SHARE of them. Periods that are multiples of a smaller
   period are dropped; among periods supported by >= SUPPORT_SHARE of the best-supported
   period's names, the longest wins (a decode step repeats its layers, so the layer period
   is shorter and better supported). Steps start at the position within the period that
   has the longest median launch gap before it (the host pause between iterations).
   Confidence: share of steps exactly one period long (>= 0.9 high, >= 0.6 medium).
2. "blocking_sync": each blocking synchronize (sync.py) that returns after at least one
   launch closes a step; a step runs from the previous such return to this one.
   Confidence: share of steps with the most common launch count (>= 0.8 high, >= 0.5 medium).
   With fewer than FEW_STEPS steps, confidence is at most medium.

Per process, the sequence result is used when its confidence is at least medium, else the
sync result, else a low-confidence sequence result. The process with the most kernels keeps
its result whatever the confidence (as a single-process trace does); every other process
keeps its result only at medium confidence or more, so a helper process with a handful of
irregular kernels does not add noise steps. No result for any process means steps cannot
be found.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsys_llm_explainer.analysis.groups import group_codes
from nsys_llm_explainer.analysis.join import kernel_launch_index
from nsys_llm_explainer.analysis.sync_calls import sync_kinds
from nsys_llm_explainer.trace.data import TraceData

MIN_STEPS = 3
REGULAR_SHARE = 0.8
SUPPORT_SHARE = 0.2
FEW_STEPS = 10  # with fewer steps, confidence is at most medium
CONFIDENCE_RANK = {"low": 0, "medium": 1, "high": 2}


@dataclass(frozen=True)
class Detected:
    method: str
    confidence: str
    detail: str
    pid: int
    start: np.ndarray  # per step
    end: np.ndarray
    kernel_step: np.ndarray  # per kernel: step index or -1


def _ordered_kernels(data: TraceData, pid: int) -> tuple[np.ndarray, np.ndarray, str]:
    """The process's kernels in launch order, and their launch times.

    Kernels without a launch call are left out when at least half have one (mixing kernel
    start and launch times would scramble the order when the GPU queue is deep); otherwise
    all kernels are ordered by kernel start.
    """
    k = data.kernels()
    kidx = np.flatnonzero(k.pid == pid)
    call = kernel_launch_index(data)[kidx]
    if 2 * int((call >= 0).sum()) >= len(kidx):
        kidx, t, basis = kidx[call >= 0], data.runtime().start[call[call >= 0]], "launch call start"
    else:
        t, basis = k.start[kidx], "kernel start (most kernels have no launch call)"
    o = np.lexsort((k.start[kidx], t))
    return kidx[o], t[o], basis


def _confidence(share: float, steps: int, high: float, medium: float) -> str:
    level = 2 if share >= high else 1 if share >= medium else 0
    if steps < FEW_STEPS:
        level = min(level, 1)
    return ("low", "medium", "high")[level]


def _periods(names: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Periodic names: (name, period, occurrences) arrays."""
    n = len(names)
    order = np.lexsort((np.arange(n), names))
    sname = names[order]
    same = sname[1:] == sname[:-1]
    diff = np.diff(order)[same]
    dname = sname[1:][same]
    if len(diff) == 0:
        return (np.empty(0, np.int64),) * 3
    codes, (pname, pdiff) = group_codes(dname, diff)
    pair_count = np.bincount(codes)
    # Most frequent distance per name: sort pairs by (name, -count) and take each name's first.
    o = np.lexsort((pdiff, -pair_count, pname))
    first = np.r_[True, pname[o][1:] != pname[o][:-1]]
    best_name, best_diff, best_count = pname[o][first], pdiff[o][first], pair_count[o][first]
    uniq, occ = np.unique(names, return_counts=True)
    occurrences = occ[np.searchsorted(uniq, best_name)]
    regular = (
        (occurrences >= MIN_STEPS + 1)
        & (best_diff >= 2)
        & (best_count >= REGULAR_SHARE * (occurrences - 1))
    )
    return best_name[regular], best_diff[regular], occurrences[regular]


def _choose_period(period: np.ndarray) -> tuple[int, int] | None:
    """(period, support) per the rules in the module docstring, or None."""
    if len(period) == 0:
        return None
    values, support = np.unique(period, return_counts=True)
    keep = np.array([not any(v % w == 0 for w in values if w < v) for v in values.tolist()])
    values, support = values[keep], support[keep]
    strong = support >= max(1.0, SUPPORT_SHARE * support.max())
    best = int(np.flatnonzero(strong)[-1])
    return int(values[best]), int(support[best])


def by_sequence(data: TraceData, pid: int) -> Detected | None:
    k = data.kernels()
    kidx, t, basis = _ordered_kernels(data, pid)
    names = k.name_id[kidx]
    pname, pdiff, pocc = _periods(names)
    chosen = _choose_period(pdiff)
    if chosen is None:
        return None
    period, support = chosen
    cand = pdiff == period
    anchor = int(pname[cand][np.argmax(pocc[cand])])
    pos = np.flatnonzero(names == anchor)
    pos = pos[pos + period <= len(names)]
    gaps = np.r_[0, np.diff(t)]
    grid = pos[:, None] + np.arange(period)[None, :]
    offset = int(np.argmax(np.median(gaps[grid], axis=0))) if len(pos) else 0
    bounds = np.flatnonzero(names == anchor) + offset
    bounds = bounds[bounds < len(names)]
    if len(bounds) < MIN_STEPS + 1:
        return None
    seg = np.diff(bounds)
    share = float((seg == period).mean())
    conf = _confidence(share, len(seg), 0.9, 0.6)
    step_of = np.searchsorted(bounds, np.arange(len(names)), side="right") - 1
    valid = (step_of >= 0) & (step_of < len(bounds) - 1)
    kernel_step = np.full(len(k), -1, dtype=np.int64)
    kernel_step[kidx[valid]] = step_of[valid]
    detail = (
        f"a sequence of {period} kernels repeats ({support} kernel names recur every {period} "
        f"launches); {100 * share:.0f}% of steps are exactly that long; timed by {basis}"
    )
    return Detected(
        "launch_sequence", conf, detail, pid, t[bounds[:-1]], t[bounds[1:]], kernel_step
    )


def by_sync(data: TraceData, pid: int) -> Detected | None:
    rt = data.runtime()
    k = data.kernels()
    names = data.runtime_api_names()
    blocking = (rt.pid == pid) & (sync_kinds(names)[rt.api] == 1)
    ends = np.sort(rt.end[blocking])
    kidx = np.flatnonzero(k.pid == pid)
    call = kernel_launch_index(data)[kidx]
    kidx, call = kidx[call >= 0], call[call >= 0]
    if len(ends) < MIN_STEPS + 1 or len(kidx) == 0:
        return None
    t = rt.start[call]
    # A launch at time t belongs to the first sync returning at or after it.
    bin_of = np.searchsorted(ends, t, side="left")
    counts = np.bincount(bin_of, minlength=len(ends) + 1)[: len(ends)]
    closing = np.flatnonzero(counts > 0)
    if len(closing) < MIN_STEPS + 1:
        return None
    bounds = ends[closing]
    step_of = np.searchsorted(bounds, t, side="left") - 1  # step i: (bounds[i], bounds[i + 1]]
    valid = (step_of >= 0) & (step_of < len(bounds) - 1)
    kernel_step = np.full(len(k), -1, dtype=np.int64)
    kernel_step[kidx[valid]] = step_of[valid]
    per_step = counts[closing[1:]]
    _, c = np.unique(per_step, return_counts=True)
    share = float(c.max() / len(per_step))
    conf = _confidence(share, len(per_step), 0.8, 0.5)
    detail = (
        f"{len(bounds) - 1} blocking synchronize calls each close a run of launches; "
        f"{100 * share:.0f}% of steps have the most common launch count"
    )
    return Detected("blocking_sync", conf, detail, pid, bounds[:-1], bounds[1:], kernel_step)


def detect_pid(data: TraceData, pid: int) -> Detected | None:
    """Steps of one process (module docstring: sequence first, then sync)."""
    seq = by_sequence(data, pid)
    if seq is not None and CONFIDENCE_RANK[seq.confidence] >= 1:
        return seq
    sync = by_sync(data, pid)
    return sync if sync is not None else seq


def detect_all(data: TraceData) -> list[Detected]:
    """Steps of every process that has them, the process with the most kernels first (then by
    kernel count, ties by pid); see the module docstring for which results are kept."""
    k = data.kernels()
    pids, counts = np.unique(k.pid, return_counts=True)
    order = np.lexsort((pids, -counts))
    found = []
    for i, pid in enumerate(pids[order].tolist()):
        det = detect_pid(data, int(pid))
        if det is not None and (i == 0 or CONFIDENCE_RANK[det.confidence] >= 1):
            found.append(det)
    return found
