"""Finding steps automatically: the outermost repeating unit of each process's work.

Detection runs on each process that ran kernels, on its units in launch order (step_units:
one per eager kernel, one per CUDA graph replay with everything inside it), so every rank of
a multi-process capture gets its own steps:

1. "nvtx_range": the outermost NVTX range on the launching thread that repeats, tiles the
   thread's time and encloses most launches (step_units.nvtx_steps). Each instance is a step.
2. "launch_sequence": for every unit token seen at least MIN_STEPS + 1 times, the distance
   (in units) between its consecutive occurrences; a token is periodic when one distance
   (its period) covers >= REGULAR_SHARE of them (a graph replay may repeat every unit, a
   kernel at least every second one). Each candidate period is cut into repeats, starting at
   the position with the longest median launch gap before it, and checked for a step
   boundary (step_units.boundary: a host pause, a synchronize or a graph replay at each
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
   of q runs (step_units.periodic_groups) make steps of q runs; runs that never repeat are
   one pass (a forward pass with a synchronize after every operator), one step. Longer runs
   are steps. Confidence: share
   of steps with the most common launch count (>= 0.8 high, >= 0.5 medium); low for one pass.
   With fewer than FEW_STEPS steps, confidence is at most medium.

The step inside which a unit repeats at least step_units.MIN_LAYERS times in most steps is
reported with its layers (Detected.layers). Per process, the NVTX result is used when found,
then the sequence result when its confidence is at least medium, else the sync result, else
a low-confidence sequence result. The process with the most kernels keeps its result
whatever the confidence (as a single-process trace does); every other process keeps its
result only at medium confidence or more, so a helper process with a handful of irregular
kernels does not add noise steps. No result for any process means steps cannot be found.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsys_llm_explainer.analysis import step_units
from nsys_llm_explainer.analysis.groups import group_codes
from nsys_llm_explainer.analysis.join import kernel_launch_index
from nsys_llm_explainer.analysis.nvtx_names import normalize
from nsys_llm_explainer.analysis.sync_calls import sync_kinds
from nsys_llm_explainer.trace.data import TraceData, Unavailable

MIN_STEPS = 3
REGULAR_SHARE = 0.8
SUPPORT_SHARE = 0.2
FEW_STEPS = 10  # with fewer steps, confidence is at most medium
OPERATOR_RUN = 2  # launches per sync-delimited run up to which the runs are operators
WALL_TO_WALL = 0.8  # repeats with no boundary covering this share of the units: no step
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


def _detected(method: str, conf: str, detail: str, pid: int, u: step_units.Units, bounds: np.ndarray,
              n_kernels: int, layers: dict | None = None) -> Detected:
    step_of_unit = np.searchsorted(bounds, np.arange(len(u.token)), side="right") - 1
    valid = (step_of_unit >= 0) & (step_of_unit < len(bounds) - 1)
    kernel_step = np.full(n_kernels, -1, dtype=np.int64)
    per_kernel = step_of_unit[u.kernel_unit]
    ok = valid[u.kernel_unit]
    kernel_step[u.kernels[ok]] = per_kernel[ok]
    t = np.r_[u.time, u.time[-1]] if len(u.time) else u.time
    return Detected(method, conf, detail, pid, t[bounds[:-1]], t[bounds[1:]], kernel_step, layers)


def _layers(u: step_units.Units, bounds: np.ndarray) -> dict | None:
    found = step_units.nested(u.token, bounds)
    if found is None:
        return None
    sub, per_step = found
    return {"units": sub, "per_step": per_step}


def _one_pass(data: TraceData, pid: int, u: step_units.Units, bounds: np.ndarray, period: int) -> Detected | None:
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
    found = step_units.nested(u.token, whole)
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
    u = step_units.units(data, pid)
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
        mark = step_units.boundary(u, bounds, period, sync_ends)
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
    u = step_units.units(data, pid)
    ptok, pdiff, pocc = _periods(u.token, u.graph)
    fb = _fallback_period(pdiff)
    if fb is None:
        return None
    bounds = _bounds(u.token, u.time, ptok, pdiff, pocc, fb[0])
    if bounds is None or step_units.boundary(u, bounds, fb[0], _blocking_ends(data, pid)) is not None:
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
    q = step_units.periodic_groups(signature[1:]) if per_op else 1
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


def by_nvtx(data: TraceData, pid: int, found: list[step_units.NvtxSteps]) -> Detected | None:
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


def detect_pid(data: TraceData, pid: int, nvtx: list[step_units.NvtxSteps] | None = None) -> Detected | None:
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
    nvtx = step_units.nvtx_steps(data, names) if names else []
    found = []
    for i, pid in enumerate(pids[order].tolist()):
        det = detect_pid(data, int(pid), nvtx)
        if det is not None and (i == 0 or CONFIDENCE_RANK[det.confidence] >= 1):
            found.append(det)
    return found
