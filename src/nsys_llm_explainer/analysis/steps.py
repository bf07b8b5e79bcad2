"""Finding steps automatically: the outermost repeating unit of each process's work.

Detection runs on each process that ran kernels, on its units in launch order (units():
one per eager kernel, one per CUDA graph replay with everything inside it), so every rank of
a multi-process capture gets its own steps:

1. "nvtx_range": the outermost NVTX range on the launching thread that repeats, tiles the
   thread's time and encloses most launches (nvtx_steps()). Each instance is a step.
2. "launch_sequence": for every unit token seen at least MIN_STEPS + 1 times, the distance
   (in units) between its consecutive occurrences; a token is periodic when one distance
   (its period) covers >= REGULAR_SHARE of them (a graph replay may repeat every unit, a
   kernel at least every second one). Each candidate period is cut into repeats, starting at
   the position with the longest median launch gap before it, and checked for a step
   boundary (boundary(): a host pause, a synchronize or a graph replay at each
   repeat). The shortest period with a boundary is the step: layers repeat inside it back to
   back and show none. Without any boundary the longest well-supported period is used (among
   periods supported by >= SUPPORT_SHARE of the best-supported one's tokens, dropping those
   that are multiples of a smaller one), at most at medium confidence; when the units outside
   its repeats are tokens the repeats never hold (an embedding before, a head after), the
   repeats are the layers of one pass: one step, from the first launch to the last; when they
   fill the capture (WALL_TO_WALL of the units) the window cuts a step inside its layers and
   there is no step (layers_only() says so).
   Confidence: share of steps exactly one period long (>= 0.9 high, >= 0.6 medium).
3. "blocking_sync": each blocking synchronize (sync.py) that returns after at least one
   launch closes a run of launches. Runs of at most OPERATOR_RUN launches (median) are
   operators with a synchronize after each: runs whose kernel sequences repeat with a period
   of q runs (periodic_groups()) make steps of q runs; runs that never repeat are
   one pass (a forward pass with a synchronize after every operator), one step. Longer runs
   are steps. Confidence: share
   of steps with the most common launch count (>= 0.8 high, >= 0.5 medium); low for one pass.
   With fewer than FEW_STEPS steps, confidence is at most medium.

The step inside which a unit repeats at least MIN_LAYERS times in most steps is
reported with its layers (Detected.layers). Per process, the NVTX result is used when found,
then the sequence result when its confidence is at least medium, else the sync result, else
a low-confidence sequence result. The process with the most kernels keeps its result
whatever the confidence (as a single-process trace does); every other process keeps its
result only at medium confidence or more, so a helper process with a handful of irregular
kernels does not add noise steps. No result for any process means steps cannot be found.

What a step is: the outermost repeating unit of work, and the GPU window of its own work.

A step is a ProfilerStep, a serving iteration, a training iteration: not the layers inside
it. The helpers below serve automatic step detection and every per-step figure:

- units(): a process's GPU work in launch order as units: one per eager kernel, and one per
  CUDA graph launch with every kernel inside it (a graph replay is one unit). A unit's token
  is its kernel name, or its graph (graph id, else first kernel name and size) for a replay.
- boundary(): whether a repeating unit shows a step boundary: a host pause before each
  repeat (the median launch gap at the unit's start is at least BOUNDARY_RATIO times the
  median gap inside it), a blocking synchronize between
  repeats (and rarely inside them: a synchronize after every launch marks nothing), or
  repeats that are graph replays. Layers repeat back to back with none of these.
- nested(): the repeating sub-unit inside a step (layers), when one repeats at least
  MIN_LAYERS times in most steps.
- periodic_groups(): sync-delimited runs of launches grouped into steps: runs whose kernel
  sequences repeat with a period of q runs form steps of q runs; runs that never repeat are
  one pass (a forward pass with a synchronize after every operator is one step, not many).
- nvtx_steps(): the outermost NVTX range that repeats, tiles its thread's time (at least
  TILE_SHARE of the span from its first to its last instance) and encloses at least
  ENCLOSE_SHARE of the process's launches. Operator ranges (`aten::` ...), communication
  ranges and ranges too short to tile are never steps.
- own_windows(): per step, the GPU window of its own work: from the first start to the last
  end of the kernels it launched (not the host range, which can begin with a synchronize
  waiting for the previous step's kernels), with their count, summed time and union.

What made a slow step slow. Three candidates, the largest wins: the longest GPU idle gap
inside the step (with idle_causes' cause), the slowest kernel (largest excess over that kernel
name's median duration), and the longest CUDA API call the process made in the step (a
blocking sync, or a launch that blocked on a full launch queue)."""

from __future__ import annotations

import re
from typing import TypedDict

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis import intervals
from nsys_llm_explainer.analysis.blocking import sync_kinds
from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.analysis.groups import distinct, distinct_few, group_codes
from nsys_llm_explainer.analysis.idle_sweep import CAUSES, gap_at, gap_causes
from nsys_llm_explainer.analysis.join import kernel_launch_index
from nsys_llm_explainer.analysis.nvtx import normalize
from nsys_llm_explainer.analysis.stats import group_percentiles
from nsys_llm_explainer.fmt import dur
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.trace.data import TraceData, Unavailable

BOUNDARY_RATIO = 3.0
MIN_LAYERS = 3
LAYER_SHARE = 0.6  # of steps holding the nested unit MIN_LAYERS times or more
PERIOD_SHARE = 0.8  # of runs equal to the run q places later
TILE_SHARE = 0.5
ENCLOSE_SHARE = 0.5
MIN_NVTX_STEPS = 2
# Range names that are operators or calls, never steps.
NOT_A_STEP = re.compile(
    r"^(aten::|c10d::|nccl|MPI_|cuda|cu[A-Z]|torch\.|autograd::|Memcpy|Memset)|"
    r"^(all_?reduce|all_?gather|reduce_?scatter|broadcast|barrier)\b",
    re.IGNORECASE,
)
LAUNCH_BASIS = "launch call start"
STEP_WORD = re.compile(r"step|iter|batch|forward|decode|prefill|generate|request|infer", re.IGNORECASE)


@frozen
class Units:
    """A process's GPU work in launch order, one row per unit (module docstring)."""

    token: np.ndarray  # >= 0: kernel name_id; < 0: a graph replay's key
    time: np.ndarray  # launch call start (kernel start when no call joins)
    first_kernel: np.ndarray  # index into kernels() of the unit's first kernel
    kernel_unit: np.ndarray  # per kernel of the process (in `kernels`): its unit
    kernels: np.ndarray  # the process's kernels, in unit order
    graph: np.ndarray  # per unit: a CUDA graph replay
    basis: str

    @property
    def host_times(self) -> bool:
        """Timed by launch calls: gaps between units are host pauses, not GPU idle."""
        return self.basis == LAUNCH_BASIS


def _graph_calls(data: TraceData) -> np.ndarray:
    """Per runtime row: a CUDA graph launch call."""
    from nsys_llm_explainer.analysis.join import GRAPH_API, launch_api_mask

    rt = data.runtime()
    return launch_api_mask(data.runtime_api_names(), GRAPH_API)[rt.api] if len(rt) else np.zeros(0, bool)


def units(data: TraceData, pid: int) -> Units:
    """The process's units (module docstring). Kernels without a launch call are left out
    when at least half have one (mixing kernel start and launch times would scramble the
    order when the GPU queue is deep); otherwise all are ordered by kernel start."""
    k = data.kernels()
    kidx = np.flatnonzero(k.pid == pid)
    call = kernel_launch_index(data)[kidx]
    rt = data.runtime()
    if 2 * int((call >= 0).sum()) >= len(kidx) and len(kidx):
        kidx, call = kidx[call >= 0], call[call >= 0]
        t, basis = rt.start[call], LAUNCH_BASIS
        graph = _graph_calls(data)[call]
    else:
        t, basis = k.start[kidx], "kernel start (most kernels have no launch call)"
        graph = np.zeros(len(kidx), dtype=bool)
        call = np.where(call >= 0, call, -1)
    o = np.lexsort((k.start[kidx], t))
    kidx, t, call, graph = kidx[o], t[o], call[o], graph[o]
    # One unit per eager kernel; one per graph launch call (its kernels are adjacent here:
    # they share the call's start time).
    new = np.ones(len(kidx), dtype=bool)
    if len(kidx) > 1:
        new[1:] = ~(graph[1:] & graph[:-1] & (call[1:] == call[:-1]))
    unit = np.cumsum(new) - 1
    first = np.flatnonzero(new)
    token = k.name_id[kidx[first]].astype(np.int64)
    g = graph[first]
    if g.any():
        size = np.diff(np.r_[first, len(kidx)])
        gid = k.cols.get("graph_id")
        key_a = gid[kidx[first]] if gid is not None else np.full(len(first), -1, np.int64)
        key_a = np.where(key_a >= 0, key_a, -2 - token)
        codes, _ = group_codes(key_a[g], size[g])
        token[g] = -1 - codes
    return Units(token, t[first], kidx[first], unit, kidx, g, basis)


def boundary(units_: Units, bounds: np.ndarray, period: int, sync_ends: np.ndarray) -> str | None:
    """What marks the start of each repeat (module docstring), or None: layer-like repeats."""
    if len(bounds) < 2:
        return None
    if units_.graph[bounds[:-1]].mean() >= 0.5 and period <= 3:
        return "each repeat is a CUDA graph replay"
    t = units_.time
    gaps = np.diff(t)
    if len(gaps) == 0:
        return None
    at = bounds[(bounds > 0) & (bounds < len(t))]
    edge = gaps[at - 1]
    inside = np.setdiff1d(np.arange(1, len(t)), at) - 1
    if units_.host_times and len(edge) and len(inside):
        e50, i50 = float(np.median(edge)), float(np.median(gaps[inside]))
        if e50 >= BOUNDARY_RATIO * max(i50, 1.0):
            return (f"the host pauses before each repeat (median launch gap {dur(int(e50))} there, "
                    f"{dur(int(i50))} inside)")
    if len(sync_ends) and len(at) and len(inside):
        def synced(pos: np.ndarray) -> np.ndarray:
            lo, hi = t[pos], t[pos + 1]
            return np.searchsorted(sync_ends, hi, "right") > np.searchsorted(sync_ends, lo, "right")

        if synced(at - 1).mean() >= 0.8 and synced(inside).mean() <= 0.2:
            return "a blocking synchronize separates the repeats"
    return None


MAX_LAYER_STEPS = 50  # steps looked at for layers (they repeat alike)


def _longest_run(match: np.ndarray) -> int:
    """Length of the longest run of True."""
    if not match.any():
        return 0
    edges = np.diff(np.r_[0, match.astype(np.int8), 0])
    return int((np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)).max())


def nested(tokens: np.ndarray, bounds: np.ndarray) -> tuple[int, int] | None:
    """(sub-unit length, repeats per step) of a unit of at least 2 units that repeats back to
    back at least MIN_LAYERS times inside most steps (the layers), or None.

    Candidates are the distances at which tokens recur inside a step (each token's most
    common one). A candidate p fits a step when the step's longest run of positions i with
    token[i] == token[i + p] covers at least (MIN_LAYERS - 1) x p; its repeats are that run
    divided by p, plus one. The sub-unit is the shortest candidate that fits at least
    LAYER_SHARE of the steps looked at (the first MAX_LAYER_STEPS) and whose repeats cover at
    least half of the median step; repeats per step is their median."""
    if len(bounds) < 2:
        return None
    bounds = bounds[: MAX_LAYER_STEPS + 1]
    steps = np.searchsorted(bounds, np.arange(len(tokens)), "right") - 1
    ok = (steps >= 0) & (steps < len(bounds) - 1)
    pos = np.flatnonzero(ok)
    if len(pos) < 2 * MIN_LAYERS:
        return None
    order = np.lexsort((pos, tokens[pos], steps[pos]))
    p = pos[order]
    same = (tokens[p][1:] == tokens[p][:-1]) & (steps[p][1:] == steps[p][:-1])
    dist, tok = np.diff(p)[same], tokens[p][1:][same]
    if len(dist) == 0:
        return None
    codes, (t_of, d_of) = group_codes(tok, dist)
    pair = np.bincount(codes)
    o = np.lexsort((d_of, -pair, t_of))
    first = np.r_[True, t_of[o][1:] != t_of[o][:-1]]
    step_len = np.diff(bounds)
    median_len = float(np.median(step_len))
    for sub in np.unique(d_of[o][first]).tolist():
        if sub < 2 or sub * MIN_LAYERS > median_len:
            continue
        repeats = []
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            seg = tokens[a:b]
            run = _longest_run(seg[sub:] == seg[:-sub]) if len(seg) > sub else 0
            repeats.append(run // sub + 1 if run >= (MIN_LAYERS - 1) * sub else 0)
        r = np.array(repeats)
        if np.mean(r >= MIN_LAYERS) >= LAYER_SHARE and float(np.median(r)) * sub >= 0.5 * median_len:
            return sub, int(np.median(r))
    return None


def periodic_groups(signature: list[tuple[int, ...]]) -> int | None:
    """The period q (in runs) of sync-delimited runs whose kernel sequences repeat, 1 when
    every run is alike, None when they never repeat (module docstring)."""
    n = len(signature)
    if n < 2:
        return None
    codes = {s: i for i, s in enumerate(dict.fromkeys(signature))}
    seq = np.array([codes[s] for s in signature])
    for q in range(1, n // 2 + 1):
        if float((seq[q:] == seq[:-q]).mean()) >= PERIOD_SHARE:
            return q
    return None


def _may_tile(tkey: np.ndarray, code: np.ndarray, start: np.ndarray, end: np.ndarray,
              sel: np.ndarray) -> np.ndarray:
    """Per row: its (thread, name) could tile: all its ranges together last at least
    TILE_SHARE of the span from the first to the last (nested instances only add to the sum,
    so this never drops a name the exact test keeps). Cheap, vectorized, before the per-name
    checks."""
    keep = np.zeros(len(sel), dtype=bool)
    rows = np.flatnonzero(sel)
    if len(rows) == 0:
        return keep
    groups, _ = group_codes(tkey[rows], code[rows])
    n = int(groups.max()) + 1
    total = np.bincount(groups, weights=(end[rows] - start[rows]).astype(np.float64), minlength=n)
    first = np.full(n, np.iinfo(np.int64).max, np.int64)
    last = np.full(n, np.iinfo(np.int64).min, np.int64)
    np.minimum.at(first, groups, start[rows])
    np.maximum.at(last, groups, end[rows])
    ok = total >= TILE_SHARE * (last - first)
    keep[rows] = ok[groups]
    return keep


@frozen
class NvtxSteps:
    name: str
    pid: int
    start: np.ndarray
    end: np.ndarray
    detail: str


def nvtx_steps(data: TraceData, names: list[str]) -> list[NvtxSteps]:
    """Per process, the outermost repeating NVTX range that tiles and encloses (module
    docstring); `names`: normalized range names (analysis.nvtx order)."""
    try:
        nv = data.nvtx()
        rt = data.runtime()
    except Unavailable:
        return []
    k = data.kernels()
    call = kernel_launch_index(data)
    if len(nv) == 0 or not (call >= 0).any():
        return []
    ok_name = np.array([not NOT_A_STEP.search(n) for n in names] or [False])
    norm_codes = {n: i for i, n in enumerate(dict.fromkeys(names))}
    code_name = list(norm_codes)
    norm = np.array([norm_codes[n] for n in names] or [0], np.int64)
    ended = (nv.end >= 0) & ok_name[nv.name]
    ended &= _may_tile(nv.tkey, norm[nv.name], nv.start, nv.end, ended)
    out = []
    for pid in distinct_few(k.pid[call >= 0]).tolist():
        lc = call[(k.pid == pid) & (call >= 0)]
        lc = distinct(lc)
        lt, lk = rt.start[lc], rt.tkey[lc]
        best: tuple[float, int, NvtxSteps] | None = None
        for tkey in distinct_few(lk).tolist():
            mine = np.flatnonzero(ended & (nv.tkey == tkey))
            if len(mine) == 0:
                continue
            tl = np.sort(lt[lk == tkey])
            for code in np.unique(norm[nv.name[mine]]).tolist():
                rows = mine[norm[nv.name[mine]] == code]
                rows = rows[np.argsort(nv.start[rows], kind="stable")]
                s, e = nv.start[rows], nv.end[rows]
                # Outermost instances only (a name nested in itself counts once).
                outer = np.r_[True, s[1:] >= np.maximum.accumulate(e)[:-1]]
                s, e = s[outer], e[outer]
                name = code_name[code]
                if len(s) < MIN_NVTX_STEPS and not (len(s) == 1 and STEP_WORD.search(name)):
                    continue
                span = int(e[-1] - s[0])
                if span <= 0 or (len(s) > 1 and (e - s).sum() < TILE_SHARE * span):
                    continue
                pos = np.searchsorted(s, tl, "right") - 1
                inside = (pos >= 0) & (tl < e[np.maximum(pos, 0)])
                share = float(inside.mean()) if len(tl) else 0.0
                if share < ENCLOSE_SHARE:
                    continue
                cand = NvtxSteps(name, int(pid), s, e,
                                 f"{len(s)} NVTX ranges named {name!r} on the launching thread enclose "
                                 f"{100 * share:.0f}% of its launches and cover "
                                 f"{100 * (e - s).sum() / span:.0f}% of the time from the first to the last")
                # Outermost: the longest total time wins (an enclosing range holds its insides).
                key = (float((e - s).sum()), -len(s))
                if best is None or key > best[:2]:
                    best = (key[0], key[1], cand)
        if best is not None:
            out.append(best[2])
    return out


def layers_of(data: TraceData, kernel_step: np.ndarray, n: int) -> dict[str, int] | None:
    """{"units", "per_step"} of the unit that repeats back to back inside the steps of the
    process with the most stepped kernels (nested()), or None."""
    k = data.kernels()
    stepped = kernel_step >= 0
    if n < 1 or not stepped.any():
        return None
    pids, counts = np.unique(k.pid[stepped], return_counts=True)
    pid = int(pids[np.argmax(counts)])
    u = units(data, pid)
    step_of = kernel_step[u.first_kernel]
    keep = step_of >= 0
    tokens, step_of = u.token[keep], step_of[keep]
    if len(tokens) == 0:
        return None
    change = np.flatnonzero(np.r_[True, step_of[1:] != step_of[:-1]])
    bounds = np.r_[change, len(tokens)]
    found = nested(tokens, bounds)
    return None if found is None else {"units": found[0], "per_step": found[1]}


@frozen
class OwnWindows:
    """Per step: the GPU window of the kernels it launched (module docstring); -1 and 0
    for a step that launched none."""

    gpu_start: np.ndarray
    gpu_end: np.ndarray
    kernels: np.ndarray
    kernel_ns: np.ndarray  # summed kernel time
    busy_ns: np.ndarray  # union of its kernels

    @property
    def gpu_ns(self) -> np.ndarray:
        return np.where(self.gpu_start >= 0, self.gpu_end - self.gpu_start, 0)


def own_windows(data: TraceData, kernel_step: np.ndarray, n: int) -> OwnWindows:
    k = data.kernels()
    mine = np.flatnonzero((kernel_step >= 0) & (kernel_step < n))
    step = kernel_step[mine]
    start = np.full(n, np.iinfo(np.int64).max, np.int64)
    end = np.full(n, -1, np.int64)
    np.minimum.at(start, step, k.start[mine])
    np.maximum.at(end, step, k.end[mine])
    count = np.bincount(step, minlength=n).astype(np.int64)
    ns = np.bincount(step, weights=k.dur[mine].astype(np.float64), minlength=n).astype(np.int64)
    busy = np.zeros(n, np.int64)
    order = np.argsort(step, kind="stable")
    cut = np.searchsorted(step[order], np.arange(n + 1))
    rows = mine[order]
    for i in np.flatnonzero(count).tolist():
        r = rows[cut[i]:cut[i + 1]]
        busy[i] = intervals.union_length(k.start[r], k.end[r])
    none = count == 0
    return OwnWindows(np.where(none, -1, start), np.where(none, -1, end), count, ns, busy)


MIN_STEPS = 3
REGULAR_SHARE = 0.8
SUPPORT_SHARE = 0.2
FEW_STEPS = 10  # with fewer steps, confidence is at most medium
OPERATOR_RUN = 2  # launches per sync-delimited run up to which the runs are operators
WALL_TO_WALL = 0.8  # repeats with no boundary covering this share of the units: no step
CONFIDENCE_RANK = {"low": 0, "medium": 1, "high": 2}


@frozen
class Detected:
    method: str
    confidence: str
    detail: str
    pid: int
    start: np.ndarray  # per step
    end: np.ndarray
    kernel_step: np.ndarray  # per kernel: step index or -1
    layers: dict | None = None  # {"units": sub-unit length, "per_step": repeats} when nested
    range_name: str | None = None  # nvtx_range: the range that marks the steps


def _confidence(share: float, steps: int, high: float, medium: float) -> str:
    level = 2 if share >= high else 1 if share >= medium else 0
    if steps < FEW_STEPS:
        level = min(level, 1)
    return ("low", "medium", "high")[level]


def _periods(tokens: np.ndarray, graph: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Periodic tokens: (token, period, occurrences) arrays."""
    n = len(tokens)
    order = np.lexsort((np.arange(n), tokens))
    stok = tokens[order]
    same = stok[1:] == stok[:-1]
    diff = np.diff(order)[same]
    dtok = stok[1:][same]
    if len(diff) == 0:
        return (np.empty(0, np.int64),) * 3
    codes, (ptok, pdiff) = group_codes(dtok, diff)
    pair_count = np.bincount(codes)
    o = np.lexsort((pdiff, -pair_count, ptok))
    first = np.r_[True, ptok[o][1:] != ptok[o][:-1]]
    best_tok, best_diff, best_count = ptok[o][first], pdiff[o][first], pair_count[o][first]
    uniq, occ = np.unique(tokens, return_counts=True)
    occurrences = occ[np.searchsorted(uniq, best_tok)]
    # A graph replay may repeat every unit; an eager kernel repeating every launch is a loop
    # inside a step, not one.
    min_period = np.where(best_tok < 0, 1, 2)
    regular = (
        (occurrences >= MIN_STEPS + 1)
        & (best_diff >= min_period)
        & (best_count >= REGULAR_SHARE * (occurrences - 1))
    )
    return best_tok[regular], best_diff[regular], occurrences[regular]


def _fallback_period(period: np.ndarray) -> tuple[int, int] | None:
    """(period, support) without boundary evidence: the period most tokens share (ties: the
    longest), so that a token recurring at a multiple of it does not win."""
    if len(period) == 0:
        return None
    values, support = np.unique(period, return_counts=True)
    best = int(np.lexsort((values, support))[-1])
    return int(values[best]), int(support[best])


def _bounds(tokens: np.ndarray, t: np.ndarray, ptok: np.ndarray, pdiff: np.ndarray, pocc: np.ndarray,
            period: int) -> np.ndarray | None:
    """Repeat starts for `period`: anchored on its most frequent token, shifted to the
    position with the longest median launch gap before it."""
    cand = pdiff == period
    anchor = int(ptok[cand][np.argmax(pocc[cand])])
    pos = np.flatnonzero(tokens == anchor)
    pos = pos[pos + period <= len(tokens)]
    gaps = np.r_[0, np.diff(t)]
    grid = pos[:, None] + np.arange(period)[None, :]
    offset = int(np.argmax(np.median(gaps[grid], axis=0))) if len(pos) else 0
    bounds = np.flatnonzero(tokens == anchor) + offset
    bounds = bounds[bounds < len(tokens)]
    return bounds if len(bounds) >= MIN_STEPS + 1 else None


def _blocking_ends(data: TraceData, pid: int) -> np.ndarray:
    rt = data.runtime()
    blocking = (rt.pid == pid) & (sync_kinds(data.runtime_api_names())[rt.api] == 1)
    return np.sort(rt.end[blocking])


def _detected(method: str, conf: str, detail: str, pid: int, u: Units, bounds: np.ndarray,
              n_kernels: int, layers: dict | None = None) -> Detected:
    step_of_unit = np.searchsorted(bounds, np.arange(len(u.token)), side="right") - 1
    valid = (step_of_unit >= 0) & (step_of_unit < len(bounds) - 1)
    kernel_step = np.full(n_kernels, -1, dtype=np.int64)
    per_kernel = step_of_unit[u.kernel_unit]
    ok = valid[u.kernel_unit]
    kernel_step[u.kernels[ok]] = per_kernel[ok]
    t = np.r_[u.time, u.time[-1]] if len(u.time) else u.time
    return Detected(method, conf, detail, pid, t[bounds[:-1]], t[bounds[1:]], kernel_step, layers)


def _layers(u: Units, bounds: np.ndarray) -> dict | None:
    found = nested(u.token, bounds)
    if found is None:
        return None
    sub, per_step = found
    return {"units": sub, "per_step": per_step}


def _one_pass(data: TraceData, pid: int, u: Units, bounds: np.ndarray, period: int) -> Detected | None:
    """One step over all the process's units, when the repeats are framed by tokens they
    never hold (module docstring); None otherwise."""
    inside = set(u.token[bounds[0]:bounds[-1]].tolist())
    before, after = u.token[: bounds[0]], u.token[bounds[-1] + period:]
    foreign_before = any(x not in inside for x in before.tolist())
    foreign_after = any(x not in inside for x in after.tolist())
    if not (foreign_before and foreign_after):
        return None
    k = data.kernels()
    whole = np.array([0, len(u.token)])
    found = nested(u.token, whole)
    layers = {"units": found[0], "per_step": found[1]} if found else {"units": period, "per_step": len(bounds) - 1}
    detail = (f"a unit of {layers['units']} kernels repeats {layers['per_step']} times back to back with no host "
              "pause, "
              "synchronize or graph replay between repeats, framed by kernels it never holds: the layers of "
              f"one pass, so 1 step; timed by {u.basis}")
    det = _detected("launch_sequence", "low", detail, pid, u, whole, len(k), layers)
    end = max(int(u.time[-1]), int(k.end[u.kernels].max())) if len(u.kernels) else int(u.time[-1])
    return Detected(det.method, det.confidence, det.detail, pid, det.start, np.array([end]), det.kernel_step, layers)


def by_sequence(data: TraceData, pid: int) -> Detected | None:
    k = data.kernels()
    u = units(data, pid)
    tokens = u.token
    ptok, pdiff, pocc = _periods(tokens, u.graph)
    if len(pdiff) == 0:
        return None
    sync_ends = _blocking_ends(data, pid)
    chosen: tuple[int, np.ndarray, str | None] | None = None
    for period in np.unique(pdiff).tolist():
        bounds = _bounds(tokens, u.time, ptok, pdiff, pocc, period)
        if bounds is None:
            continue
        mark = boundary(u, bounds, period, sync_ends)
        if mark is not None:
            chosen = (period, bounds, mark)
            break
    if chosen is None:
        fb = _fallback_period(pdiff)
        if fb is None:
            return None
        bounds = _bounds(tokens, u.time, ptok, pdiff, pocc, fb[0])
        if bounds is None:
            return None
        one = _one_pass(data, pid, u, bounds, fb[0])
        if one is not None:
            return one
        covered = (bounds[-1] - bounds[0]) / max(1, len(tokens))
        if covered >= WALL_TO_WALL:
            return None  # layers of a step the capture window cuts at both ends (layers_only())
        chosen = (fb[0], bounds, None)
    period, bounds, mark = chosen
    seg = np.diff(bounds)
    share = float((seg == period).mean())
    conf = _confidence(share, len(seg), 0.9, 0.6)
    if mark is None:
        conf = "low"
    support = int((pdiff == period).sum())
    if u.graph.any():
        what = (f"a sequence of {period} launches (a CUDA graph replay counts as one) repeats ({support} of them "
                f"recur every {period} launches)")
    else:
        what = f"a sequence of {period} kernels repeats ({support} kernel names recur every {period} launches)"
    detail = (f"{what}; {100 * share:.0f}% of steps are exactly that long; "
              + (f"{mark}; " if mark else "no host pause, synchronize or graph replay marks the repeats; ")
              + f"timed by {u.basis}")
    return _detected("launch_sequence", conf, detail, pid, u, bounds, len(k), _layers(u, bounds))


def layers_only(data: TraceData, pid: int) -> str | None:
    """Why a process has no step though its work repeats: the repeats show no boundary and
    fill the capture (module docstring); None when that is not the case."""
    u = units(data, pid)
    ptok, pdiff, pocc = _periods(u.token, u.graph)
    fb = _fallback_period(pdiff)
    if fb is None:
        return None
    bounds = _bounds(u.token, u.time, ptok, pdiff, pocc, fb[0])
    if bounds is None or boundary(u, bounds, fb[0], _blocking_ends(data, pid)) is not None:
        return None
    if (bounds[-1] - bounds[0]) / max(1, len(u.token)) < WALL_TO_WALL:
        return None
    return (f"pid {pid}: a unit of {fb[0]} kernels repeats {len(bounds) - 1} times back to back with no host "
            "pause, synchronize or graph replay between repeats, from one edge of the capture to the other: the "
            "layers of a step the capture window cuts, not steps")


def by_sync(data: TraceData, pid: int) -> Detected | None:
    rt = data.runtime()
    k = data.kernels()
    ends = _blocking_ends(data, pid)
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
    run_of = np.searchsorted(bounds, t, side="left")  # run i: (bounds[i-1], bounds[i]]
    order = np.lexsort((t, run_of))
    signature: list[tuple[int, ...]] = [()] * len(bounds)
    names = k.name_id[kidx][order]
    runs = run_of[order]
    cut = np.searchsorted(runs, np.arange(len(bounds) + 1))
    for i in range(len(bounds)):
        signature[i] = tuple(names[cut[i]:cut[i + 1]].tolist())
    # A synchronize after every operator (runs of one or two launches): runs are operators, and
    # their repeating pattern, if any, is the step. Longer runs are steps themselves.
    per_op = float(np.median(counts[closing])) <= OPERATOR_RUN
    q = periodic_groups(signature[1:]) if per_op else 1
    kernel_step = np.full(len(k), -1, dtype=np.int64)
    if q is None:
        # One pass with a synchronize between operators: one step.
        kernel_step[kidx] = 0
        first = int(rt.start[call].min())
        detail = (f"{len(bounds)} blocking synchronize calls between launches whose kernel sequences never "
                  "repeat: one pass with a synchronize between operators, so 1 step")
        return Detected("blocking_sync", "low", detail, pid, np.array([first]), np.array([int(bounds[-1])]),
                        kernel_step)
    step_bounds = bounds[::q]
    step_of = np.searchsorted(step_bounds, t, side="left") - 1  # step i: (b[i], b[i + 1]]
    valid = (step_of >= 0) & (step_of < len(step_bounds) - 1)
    kernel_step[kidx[valid]] = step_of[valid]
    if len(step_bounds) < 2:
        return None
    per_step = np.bincount(step_of[valid], minlength=len(step_bounds) - 1)
    _, c = np.unique(per_step, return_counts=True)
    share = float(c.max() / len(per_step))
    conf = _confidence(share, len(per_step), 0.8, 0.5)
    runs_text = f"; {q} runs of launches per step (their kernel sequences repeat every {q} runs)" if q > 1 else ""
    detail = (
        f"{len(step_bounds) - 1} blocking synchronize calls each close a step{runs_text}; "
        f"{100 * share:.0f}% of steps have the most common launch count"
    )
    return Detected("blocking_sync", conf, detail, pid, step_bounds[:-1], step_bounds[1:], kernel_step)


def by_nvtx(data: TraceData, pid: int, found: list[NvtxSteps]) -> Detected | None:
    mine = [f for f in found if f.pid == pid]
    if not mine:
        return None
    f = mine[0]
    k = data.kernels()
    call = kernel_launch_index(data)
    rt = data.runtime()
    kernel_step = np.full(len(k), -1, dtype=np.int64)
    sel = np.flatnonzero((k.pid == pid) & (call >= 0))
    t = rt.start[call[sel]]
    pos = np.searchsorted(f.start, t, "right") - 1
    inside = (pos >= 0) & (t < f.end[np.maximum(pos, 0)])
    kernel_step[sel[inside]] = pos[inside]
    conf = "high" if len(f.start) >= FEW_STEPS else "medium"
    return Detected("nvtx_range", conf, f.detail, pid, f.start, f.end, kernel_step, range_name=f.name)


def detect_pid(data: TraceData, pid: int, nvtx: list[NvtxSteps] | None = None) -> Detected | None:
    """Steps of one process (module docstring: NVTX, then sequence, then sync)."""
    nv = by_nvtx(data, pid, nvtx or [])
    if nv is not None:
        return nv
    seq = by_sequence(data, pid)
    if seq is not None and CONFIDENCE_RANK[seq.confidence] >= 1:
        return seq
    sync = by_sync(data, pid)
    if sync is not None and (seq is None or CONFIDENCE_RANK[sync.confidence] >= CONFIDENCE_RANK[seq.confidence]):
        return sync
    return seq if seq is not None else sync


def detect_all(data: TraceData) -> list[Detected]:
    """Steps of every process that has them, the process with the most kernels first (then by
    kernel count, ties by pid); see the module docstring for which results are kept."""
    k = data.kernels()
    pids, counts = np.unique(k.pid, return_counts=True)
    order = np.lexsort((pids, -counts))
    try:
        names = [normalize(n) for n in data.nvtx_names()] if len(data.nvtx()) else []
    except Unavailable:
        names = []
    nvtx = nvtx_steps(data, names) if names else []
    found = []
    for i, pid in enumerate(pids[order].tolist()):
        det = detect_pid(data, int(pid), nvtx)
        if det is not None and (i == 0 or CONFIDENCE_RANK[det.confidence] >= 1):
            found.append(det)
    return found


def _longest_gap(ctx: Context, pid: int, t0: int, t1: int) -> tuple[int, str | None]:
    """(ns inside [t0, t1], cause) of the longest idle gap on a device the process uses."""
    best, cause = 0, None
    for gc in gap_causes(ctx.data).values():
        if pid not in gc.owners:
            continue
        i = gap_at(gc, t0, t1)
        if i < 0:
            continue
        ns = int(min(gc.gap_end[i], t1) - max(gc.gap_start[i], t0))
        if ns > best:
            best, cause = ns, CAUSES[int(gc.cause[i])]
    return best, cause


def _longest_call(ctx: Context, pid: int, t0: int, t1: int) -> tuple[int, str | None]:
    """(ns inside [t0, t1], API name) of the process's longest CUDA API call starting in it."""
    rt = ctx.data.runtime()
    mine = np.flatnonzero((rt.pid == pid) & (rt.start >= t0) & (rt.start < t1))
    if len(mine) == 0:
        return 0, None
    inside = np.minimum(rt.end[mine], t1) - rt.start[mine]
    j = int(np.argmax(inside))
    return int(inside[j]), ctx.data.runtime_api_names()[int(rt.api[mine[j]])]


class Outlier(TypedDict):
    """A step much slower than its phase's median, with the likeliest reason (the fields of
    results/run.py StepOutlier)."""

    step: int
    phase: str
    pid: int
    start_ns: int
    latency_ns: int
    ratio_to_median: float
    gap_ns: int
    gap_cause: str | None
    kernel_name: str | None
    kernel_ns: int | None
    kernel_median_ns: int | None
    host_call: str | None
    host_call_ns: int
    reason: str | None  # idle_gap, slow_kernel, host_call


def explain_outliers(
    ctx: Context, top: pd.DataFrame, kernel_step: np.ndarray
) -> list[Outlier]:
    if top.empty:
        return []
    k = ctx.data.kernels()
    codes, (name_ids,) = group_codes(k.name_id)
    median = group_percentiles(k.dur, codes, len(name_ids), (50,))[50]
    excess = k.dur - median[codes]
    out = []
    steps = top["step"].to_numpy(np.int64)
    members = np.flatnonzero(np.isin(kernel_step, steps))
    lookup = ctx.data.kernel_names(k.name_id[members]) if len(members) else {}
    for row in top.to_dict("records"):
        mine = members[kernel_step[members] == row["step"]]
        gap_ns, gap_cause = _longest_gap(
            ctx, int(row["pid"]), int(row["start_ns"]), int(row["end_ns"])
        )
        item: Outlier = {
            "step": int(row["step"]),
            "phase": str(row["phase"]),
            "pid": int(row["pid"]),
            "start_ns": int(row["start_ns"]),
            "latency_ns": int(row["latency_ns"]),
            "ratio_to_median": round(float(row["ratio"]), 2),
            "gap_ns": gap_ns,
            "gap_cause": gap_cause,
            "kernel_name": None,
            "kernel_ns": None,
            "kernel_median_ns": None,
            "host_call": None,
            "host_call_ns": 0,
            "reason": None,
        }
        call_ns, call_api = _longest_call(
            ctx, int(row["pid"]), int(row["start_ns"]), int(row["end_ns"])
        )
        item["host_call"], item["host_call_ns"] = call_api, call_ns
        if len(mine):
            j = mine[np.argmax(excess[mine])]
            item["kernel_name"] = lookup[int(k.name_id[j])]
            item["kernel_ns"] = int(k.dur[j])
            item["kernel_median_ns"] = int(median[codes[j]])
        kernel_excess = (item["kernel_ns"] or 0) - (item["kernel_median_ns"] or 0)
        candidates = {"idle_gap": gap_ns, "slow_kernel": kernel_excess, "host_call": call_ns}
        reason, value = max(candidates.items(), key=lambda kv: kv[1])
        item["reason"] = reason if value > 0 else None
        out.append(item)
    return out
