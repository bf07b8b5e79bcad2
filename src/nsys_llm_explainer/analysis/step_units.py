"""What a step is: the outermost repeating unit of work, and the GPU window of its own work.

A step is a ProfilerStep, a serving iteration, a training iteration: not the layers inside
it. The helpers here are shared by automatic step detection (steps_detect.py) and by every
per-step figure:

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
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from nsys_llm_explainer.analysis import intervals
from nsys_llm_explainer.analysis.groups import distinct, distinct_few, group_codes
from nsys_llm_explainer.analysis.join import kernel_launch_index
from nsys_llm_explainer.fmt import dur
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


@dataclass(frozen=True)
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
    from nsys_llm_explainer.analysis.launch_pairs import GRAPH_API, launch_api_mask

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


@dataclass(frozen=True)
class NvtxSteps:
    name: str
    pid: int
    start: np.ndarray
    end: np.ndarray
    detail: str


def nvtx_steps(data: TraceData, names: list[str]) -> list[NvtxSteps]:
    """Per process, the outermost repeating NVTX range that tiles and encloses (module
    docstring); `names`: normalized range names (nvtx_names order)."""
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


@dataclass(frozen=True)
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
