"""Build, replay, follow the critical path, and replay each what-if: the whole analysis of
one trace, as plain results the critical_path and what_if metrics turn into report data.

A change's gain on a step is measured on the step's own window (steps.StepTimes.own: the
step less its wait for work queued before the capture) as the unmodified replay less the
changed one, so the replay's own error on a step does not count as a gain. Every change
is a speed-up: a step the changed replay makes longer (a replay artefact, such as a step
boundary that moves) gains nothing, and is counted. Predicted step times are the measured
ones less the gain. The whole captured window's prediction subtracts the gains of every
step inside the window (a step's gain on time before the capture's first call or after its
last is not the window's): the replayed steps' own, and for steps left out of a sample
their mean; processes run side by side, so the window shrinks by the largest process's
gain; and never below the busiest stream's work at the changed durations, nor the end of
work queued before the capture (kept as measured).

For each change the median step's critical path is followed again after the change: what
it is made of says what bounds the change's gain.

trace_analysis(ctx) builds all of it for one trace, once (the critical_path metric reports
it, what_if reads it after): the graph of the steps metric's steps (or of the whole capture
per process), the task labels (kernel categories, names, the slow rank's saving), the
--what-if changes and the automatic ones (the top category's and the top kernel's 2x,
fusion, slow_rank).

An Analysis as report data: the critical path's composition and top items, the replay's
error, the what-if rows, the counts of what the graph could not recover, and the tables.

Composition shares are of the followed steps' critical paths added up (so a long step
weighs more than a short one); per-step figures are means over those steps. The median
step's composition is given on its own: it is what one typical step is made of."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis import nvtx
from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.analysis.groups import group_codes, group_sum
from nsys_llm_explainer.analysis.join import kernel_attribution, kernel_categories
from nsys_llm_explainer.analysis.nvtx import normalize
from nsys_llm_explainer.analysis.stats import percentiles
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.graph import changes as ch
from nsys_llm_explainer.graph import path as C
from nsys_llm_explainer.graph.build import Graph, build
from nsys_llm_explainer.graph.changes import BUILTIN
from nsys_llm_explainer.graph.path import CALL, HOST_WORK, RETURN, Path, critical_paths
from nsys_llm_explainer.graph.path import TASK as P_TASK
from nsys_llm_explainer.graph.peers import ByRow, peer_waits, slow_rank
from nsys_llm_explainer.graph.replay import Params, Times, replay
from nsys_llm_explainer.graph.steps import SPAN, Anchors, Plan, StepTimes, anchors, plan, step_times
from nsys_llm_explainer.graph.tasks import KERNEL
from nsys_llm_explainer.kernels.categories import load_table
from nsys_llm_explainer.kernels.demangled import parse as parse_name
from nsys_llm_explainer.model import Skipped
from nsys_llm_explainer.results.run import (
    CategoryShare,
    CriticalPath,
    MedianStep,
    PathBound,
    PathGraph,
    PathItem,
    PathShare,
    PathTrust,
    ReplayError,
    Steps,
    StepShare,
    WhatIf,
    WhatIfRow,
)
from nsys_llm_explainer.trace.data import TraceData, Unavailable


@frozen
class WindowGain:
    """How a change's window gain was reached."""

    steps: int  # the steps' gains added up (sampled steps at the mean; the largest process)
    in_window: int  # the same, less each step's gain on time outside the window
    floor: int  # the least the window can take: the busiest stream's work, or carried work's end
    floor_kind: str  # "stream" or "carried"
    floor_lane: str  # the busiest stream ("GPU d stream s"), "" for carried work
    gain: int  # min(in_window, window - floor)


@frozen
class ChangeResult:
    change: str
    touched: int  # nodes the change modified
    predicted: np.ndarray  # per replayed step
    gain: np.ndarray  # per replayed step, >= 0
    window_gain: int
    longer: int = 0  # steps the changed replay made longer (gaining nothing)
    window: WindowGain | None = None
    path_ns: np.ndarray = field(default_factory=lambda: np.zeros(len(C.KINDS), np.int64))  # median step, by kind


@dataclass
class Analysis:
    plan: Plan
    graph: Graph
    params: Params
    times: Times
    anchors: Anchors
    measured: np.ndarray  # per replayed step
    replayed: np.ndarray
    base: StepTimes  # the unmodified replay's step times
    observed: StepTimes  # the same measured
    path: Path
    followed: np.ndarray  # the blocks whose critical path was followed
    measured_window: int
    changes: list[ChangeResult] = field(default_factory=list)

    @property
    def error_pct(self) -> np.ndarray:
        return 100.0 * np.abs(self.replayed - self.measured) / np.maximum(self.measured, 1)


def analyze(
    data: Any,
    steps: pd.DataFrame | None,
    labels: ch.TaskLabels | Callable[[Graph], ch.TaskLabels],
    what_ifs: Sequence[ch.Change] = (),
    capture: list[tuple[int, int, int]] | None = None,
    nodes_per_step: float = 1.0,
    window: int | None = None,
    window_span: tuple[int, int] | None = None,
) -> Analysis:
    """window_span: the captured window's absolute (first, last) time; window: its length."""
    pl = plan(steps, nodes_per_step, capture or [])
    g = build(data, pl.blocks)
    p = Params.of(g)
    t = replay(g, p)
    an = anchors(g, pl)
    observed = step_times(g, pl, an, p, None)
    base = step_times(g, pl, an, p, t)
    measured = observed.step.astype(np.int64)
    replayed = base.step.astype(np.int64)
    followed = path_blocks(measured)
    path = critical_paths(g, p, t, an.chain, base.start, base.end, base.last_task, pl.anchor == SPAN, followed)
    win = window if window is not None else int(pl.blocks.end.max() - pl.blocks.start.min()) if len(pl.blocks) else 0
    result = Analysis(pl, g, p, t, an, measured, replayed, base, observed, path, followed, win)
    task_labels = labels(g) if callable(labels) else labels
    comm = ch.communication_tasks(g, task_labels) if g.n_device else np.zeros(0, bool)
    outside = _outside(pl, window_span)
    lanes = StreamLanes.of(g, pl)
    med = median_block(measured)
    base_kinds = _block_kinds(path, g, comm, med)
    on_path = _path_nodes(path, g, med)
    for change in [ch.Change(k) for k in ch.BUILTIN] + list(what_ifs):
        cp, tail, touched = ch.apply(change, g, p, task_labels)
        path_ns = base_kinds
        if touched == 0:
            raw = np.zeros(len(measured), np.int64)
        else:
            ct = replay(g, cp)
            st = step_times(g, pl, an, cp, ct, tail)
            raw = (base.own - st.own).astype(np.int64)
            if med >= 0 and not _path_kept(g, p, cp, on_path, base, st, med):
                path_ns = _path_kinds(g, cp, ct, an, st, pl, med, comm)
        gain = np.maximum(raw, 0)
        wg = _window_gain(pl, gain, outside, win, lanes, cp, g, comm)
        result.changes.append(ChangeResult(change.key, touched, np.maximum(measured - gain, 0), gain, wg.gain,
                                           int((raw < 0).sum()), wg, path_ns))
    return result


def _path_kinds(g: Graph, p: Params, t: Times, an: Anchors, st: StepTimes, pl: Plan, b: int,
                comm: np.ndarray) -> np.ndarray:
    """The critical path of block b under the change, by kind (ns per C.KINDS)."""
    path = critical_paths(g, p, t, an.chain, st.start, st.end, st.last_task, pl.anchor == SPAN, np.array([b]))
    out = np.zeros(len(C.KINDS), np.int64)
    if len(path.kind):
        np.add.at(out, C.kinds_of(path, g, comm), path.end - path.start)
    return out


def _path_nodes(path: Path, g: Graph, b: int) -> tuple[np.ndarray, np.ndarray]:
    """The host nodes and the tasks on block b's followed path."""
    mine = (path.block == b) & (path.node >= 0)
    host = mine & np.isin(path.kind, (CALL, RETURN, HOST_WORK))
    return np.unique(path.node[host]), np.unique(path.node[mine & ~host])


def _path_kept(g: Graph, p: Params, cp: Params, on_path: tuple[np.ndarray, np.ndarray], base: StepTimes,
               st: StepTimes, b: int) -> bool:
    """Whether block b's critical path is the same after the change, so need not be followed
    again: the change only shortened things (no duration or delay grew), touched no node on the
    path, and left the step's ends where they were. Every other path can only have got shorter,
    and this one kept its length."""
    if st.start[b] != base.start[b] or st.end[b] != base.end[b]:
        return False
    h_changed = (cp.h_gap != p.h_gap) | (cp.h_own != p.h_own)
    d_changed = (cp.d_dur != p.d_dur) | (cp.d_queue != p.d_queue) | (cp.d_pin != p.d_pin) | (cp.d_lat != p.d_lat)
    if (cp.h_gap > p.h_gap).any() or (cp.h_own > p.h_own).any() or (cp.d_dur > p.d_dur).any() \
            or (cp.d_queue > p.d_queue).any() or (cp.d_pin > p.d_pin).any() or (cp.d_lat > p.d_lat).any() \
            or (cp.w_active & ~p.w_active).any():
        return False
    hosts, tasks = on_path
    h_changed[g.w_dst[cp.w_active != p.w_active]] = True
    return not (h_changed[hosts].any() or d_changed[tasks].any())


def _block_kinds(path: Path, g: Graph, comm: np.ndarray, b: int) -> np.ndarray:
    """The followed path of block b by kind (ns per C.KINDS)."""
    out = np.zeros(len(C.KINDS), np.int64)
    mine = path.block == b
    if mine.any():
        sub = Path(path.block[mine], path.kind[mine], path.node[mine], path.start[mine], path.end[mine])
        np.add.at(out, C.kinds_of(sub, g, comm), sub.end - sub.start)
    return out


def _outside(pl: Plan, span: tuple[int, int] | None) -> np.ndarray:
    """Per block: how much of its measured step lies outside the captured window (before the
    window's first call or kernel, or after its last)."""
    if span is None or len(pl.blocks) == 0:
        return np.zeros(len(pl.blocks), np.int64)
    lo, hi = span
    return (np.maximum(lo - pl.start, 0) + np.maximum(pl.end - hi, 0)).astype(np.int64)


@frozen
class StreamLanes:
    """Each task of the graph once (a task carried into a step is also in the step before it),
    with the stream it runs on (process, device, stream), built once for every change."""

    task: np.ndarray  # index into the graph's tasks
    lane: np.ndarray  # lane code per kept task
    lanes: int
    names: list[str]  # "GPU d stream s" per lane
    carried_end: int  # the end of work queued before the capture, from the window's start (0: none)

    @staticmethod
    def of(g: Graph, pl: Plan) -> StreamLanes:
        pid = np.asarray(pl.blocks.pid)[g.d_block]
        frame = pd.DataFrame({"pid": pid, "kind": g.d_kind, "row": g.d_row, "device": g.d_device,
                              "stream": g.d_stream})
        task = np.flatnonzero(~frame.duplicated(["pid", "kind", "row"]).to_numpy())
        lane, uniques = pd.MultiIndex.from_frame(frame.iloc[task][["pid", "device", "stream"]]).factorize()
        names = [f"GPU {d} stream {s}" for _, d, s in uniques]
        carried = 0
        if g.d_before.any() and len(pl.blocks):
            ends = g.d_end[g.d_before] + g.origin[g.d_block[g.d_before]]
            carried = max(int(ends.max()) - int(pl.blocks.start.min()), 0)
        return StreamLanes(task, lane.astype(np.int64), len(uniques), names, carried)

    def floor(self, p: Params) -> tuple[int, str]:
        """The least the window can take after a change, and the busiest stream: a stream runs
        its work one task at a time, so no window is shorter than the busiest stream's work at
        the durations the change leaves. Steps end where their own work ends, so a step may be
        shorter than the work queued into it; the window, which holds that work, may not."""
        if not self.lanes:
            return 0, ""
        work = np.zeros(self.lanes, np.int64)
        np.add.at(work, self.lane, p.d_dur[self.task].astype(np.int64))
        top = int(np.argmax(work))
        return int(work[top]), self.names[top]


MAX_PATH_STEPS = 48


def median_block(measured: np.ndarray) -> int:
    """The block of the median step (the lower middle one for an even count)."""
    return int(np.argsort(measured, kind="stable")[(len(measured) - 1) // 2]) if len(measured) else -1


def path_blocks(measured: np.ndarray) -> np.ndarray:
    """The steps whose critical path is followed: all of them up to MAX_PATH_STEPS, else
    that many evenly spaced ones and the median step."""
    n = len(measured)
    if n <= MAX_PATH_STEPS:
        return np.arange(n)
    picked = np.linspace(0, n - 1, MAX_PATH_STEPS).round().astype(np.int64)
    return np.unique(np.r_[picked, median_block(measured)])


def _window_gain(pl: Plan, gain: np.ndarray, outside: np.ndarray, window: int, lanes: StreamLanes,
                 p: Params, g: Graph, comm: np.ndarray) -> WindowGain:
    """The gain over the whole capture (see the module docstring)."""
    steps = _process_sum(pl, gain)
    inside = _process_sum(pl, np.maximum(gain - outside, 0))
    stream, lane = lanes.floor(p)
    floor, kind = (stream, "stream") if stream >= lanes.carried_end else (lanes.carried_end, "carried")
    return WindowGain(steps, inside, floor, kind, lane if kind == "stream" else "",
                      min(inside, max(window - floor, 0)))


def _process_sum(pl: Plan, gain: np.ndarray) -> int:
    """Processes run side by side, so the window shrinks by the largest of their gains; a
    process's gain is the sum over its steps, the steps a sample left out counted at the mean
    of its replayed ones."""
    if len(gain) == 0:
        return 0
    best = 0.0
    for pid in np.unique(pl.blocks.pid).tolist():
        mine = gain[pl.blocks.pid == pid]
        total = float(mine.mean()) * pl.pid_steps.get(int(pid), len(mine))
        best = max(best, total)
    return int(round(best))


# -- the analysis of one trace, from its data and the steps metric (cached) --------------------
ANALYSIS_KEY = "graph_analysis"


AUTO_FACTOR = 2.0
NOT_AUTO = ("other", "communication")  # categories no kernel change is proposed for


def what_if_changes(ctx: Context) -> list[ch.Change]:
    """The --what-if changes, then one for the category and one for the kernel with the most
    kernel time (each 2x faster), which the findings about that kernel or category use."""
    given = [ch.parse(t) for t in ctx.options.what_if]
    return given + [c for c in auto_changes(ctx) if c.key not in {g.key for g in given}]


def auto_changes(ctx: Context) -> list[ch.Change]:
    """The top category's and the top kernel's 2x; fusion where short memory-bound kernels
    ran; slow_rank where one capture's ranks pair their collectives and one is late."""
    k = ctx.data.kernels()
    if len(k) == 0:
        return []
    kc = kernel_categories(ctx.data, load_table(ctx.options.kernel_categories))
    out = _kernel_changes(k, kc)
    fusable = [kc.categories.index(c) for c in ch.FUSABLE if c in kc.categories]
    if (np.isin(kc.code, fusable) & (k.dur <= ch.FUSE_MAX_NS)).sum() >= 2:
        out.append(ch.Change("fusion"))
    if _slow_rank(ctx.data, kc)[0] >= 0:
        out.append(ch.Change("slow_rank"))
    return out


def _slow_rank(data: TraceData, kc: Any) -> tuple[int, ByRow]:
    comm = kc.categories.index("communication") if "communication" in kc.categories else -2
    return slow_rank(data, kc.code == comm)


def _kernel_changes(k: Any, kc: Any) -> list[ch.Change]:
    out = []
    per_cat = np.bincount(kc.code, weights=k.dur, minlength=len(kc.categories))
    for c in np.argsort(-per_cat, kind="stable").tolist():
        if kc.categories[c] not in NOT_AUTO and per_cat[c] > 0:
            out.append(ch.Change(f"kernel:{kc.categories[c]}={AUTO_FACTOR:g}x", kc.categories[c], AUTO_FACTOR))
            break
    per_name = np.bincount(kc.name_code, weights=k.dur, minlength=len(kc.names))
    top = int(np.argmax(per_name))
    if kc.categories[int(kc.name_category[top])] not in NOT_AUTO:
        base = parse_name(kc.names[top]).base_name or kc.names[top]
        out.append(ch.Change(f"kernel:{base}={AUTO_FACTOR:g}x", base, AUTO_FACTOR))
    return out


def _steps(ctx: Context) -> tuple[pd.DataFrame | None, dict[str, str]]:
    res, found = ctx.result("steps"), ctx.typed(Steps)
    table = next((t for t in res.tables if t.name == "steps"), None) if res is not None else None
    if table is None or table.frame is None or len(table.frame) == 0:
        skipped = ctx.results.get("steps")
        reason = skipped.reason if isinstance(skipped, Skipped) else "no steps were found"
        return None, {"step_source": "whole_capture",
                      "step_detail": f"The whole capture is replayed, one block per process ({reason})"}
    assert found is not None
    method = found.method.replace("_", " ")
    return table.frame, {"step_source": "steps", "step_detail": f"Steps as the steps metric found them ({method})"}


def _capture(data: TraceData) -> list[tuple[int, int, int]]:
    """Per process that ran kernels: its first and last CUDA call or kernel time."""
    k, rt = data.kernels(), data.runtime()
    out = []
    for pid in np.unique(k.pid).tolist():
        ks, ke = k.start[k.pid == pid], k.end[k.pid == pid]
        mine = rt.pid == pid
        first = min(int(ks.min()), int(rt.start[mine].min()) if mine.any() else int(ks.min()))
        last = max(int(ke.max()), int(rt.end[mine].max()) if mine.any() else int(ke.max()))
        out.append((int(pid), first, last))
    return out


def task_labels(data: TraceData, categories_file: str | None) -> Any:
    table = load_table(categories_file)
    kc = kernel_categories(data, table)
    order = np.argsort(kc.name_ids, kind="stable")
    sorted_ids = kc.name_ids[order]

    def labels(g: Graph) -> ch.TaskLabels:
        code = np.full(g.n_device, -1, np.int64)
        isk = np.flatnonzero(g.d_kind == KERNEL)
        if len(isk) and len(sorted_ids):
            pos = np.minimum(np.searchsorted(sorted_ids, g.d_name[isk]), len(sorted_ids) - 1)
            hit = sorted_ids[pos] == g.d_name[isk]
            code[isk[hit]] = kc.name_category[order[pos[hit]]]

        def names(ids: np.ndarray) -> list[str]:
            found = data.kernel_names(ids)
            return [found.get(int(i), "") for i in ids.tolist()]

        slow, saving = _slow_rank(data, kc)
        per_task = np.where(g.d_kind == KERNEL, saving.at(np.where(g.d_kind == KERNEL, g.d_row, 0)), 0)
        return ch.TaskLabels(list(kc.categories), code, names, per_task, slow)

    return labels


def _host_ranges(data: TraceData) -> Any:
    try:
        index = kernel_attribution(data).index
        nv = data.nvtx()
        names = data.nvtx_names()
    except Unavailable:
        index = None

    def lookup(tkey: np.ndarray, t: np.ndarray) -> list[str]:
        if index is None or len(t) == 0:
            return [C.NO_RANGE] * len(t)
        hit = nvtx.innermost(index, tkey, t, t)
        inside = hit >= 0
        codes = np.zeros(len(hit), np.int64)
        codes[inside] = nv.name[index.order[hit[inside]]]
        text = {code: normalize(names[code]) for code in np.unique(codes[inside]).tolist()}
        return [text[c] if i else C.NO_RANGE for c, i in zip(codes.tolist(), inside.tolist(), strict=True)]

    return lookup


def _peer_waits(ctx: Context, g: Graph) -> np.ndarray:
    """Per task of the graph: its collective's wait on the other ranks, -1 when unknown."""
    kc = kernel_categories(ctx.data, load_table(ctx.options.kernel_categories))
    comm = kc.categories.index("communication") if "communication" in kc.categories else -2
    per_row = peer_waits(ctx.data, kc.code == comm)
    return np.where(g.d_kind == KERNEL, per_row.at(np.where(g.d_kind == KERNEL, g.d_row, 0)), -1)


def trace_analysis(ctx: Context) -> tuple[Analysis, C.Pieces, np.ndarray, dict[str, str]]:
    """The analysis of this trace, built once: the critical_path metric reports it, the
    what_if metric reads it after (Metric.reads keeps it until then)."""
    return ctx.data.cached(ANALYSIS_KEY, lambda: build_analysis(ctx))


def build_analysis(ctx: Context) -> tuple[Analysis, C.Pieces, np.ndarray, dict[str, str]]:
    """The step graph, its replays and critical paths, and their pieces by kind."""
    data = ctx.data
    frame, info = _steps(ctx)
    labels = task_labels(data, ctx.options.kernel_categories)
    nodes = 1.0
    if frame is not None:
        cols = [c for c in ("kernels", "launches") if c in frame]
        nodes = float(frame[cols].sum(axis=1).mean()) * 1.25 if cols else \
            (len(data.kernels()) + len(data.runtime())) / max(len(frame), 1)
    spans = [s for s in (data.span("kernels"), data.span("runtime")) if s is not None]
    span = (min(s for s, _ in spans), max(e for _, e in spans)) if spans else None
    window = span[1] - span[0] if span else 0
    res = analyze(data, frame, labels, what_if_changes(ctx), _capture(data) if frame is None else None,
                    nodes, window, span)
    task = labels(res.graph)
    waits = _peer_waits(ctx, res.graph)
    pieces = C.classify(res.path, res.graph, task, data.runtime_api_names(), _host_ranges(data),
                        waits, res.times.d_start)
    cats = C.kernel_categories_of(pieces, task)
    return res, pieces, cats, info


P_HOST_PIECES = (CALL, RETURN, HOST_WORK)

TOP_ITEMS = 10
STEP_COLUMNS = ("step", "pid", "measured_ns", "replayed_ns", "error_pct", "host_period_ns",
                "device_period_ns", "bound", "followed", *(f"{k}_ns" for k in C.KINDS))
ITEM_COLUMNS = ("kind", "item", "category", "total_ns", "ns_per_step", "pct_of_path")
TIMELINE_COLUMNS = ("lane", "start_ns", "end_ns", "kind", "item", "path")
MAX_TIMELINE_ROWS = 4000
WHAT_IF_COLUMNS = ("change", "measured_step_ns", "predicted_step_ns", "measured_window_ns",
                   "predicted_window_ns", "gain_step_ns", "gain_window_ns", "predicted_step_p10_ns",
                   "predicted_step_p90_ns", "changed_nodes", "source", "note")


def _pct(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 2) if whole > 0 else 0.0


def _median(values: np.ndarray) -> int:
    return int(percentiles(values.astype(np.int64), (50,))[50]) if len(values) else 0


@frozen
class Summary:
    result: CriticalPath
    steps: pd.DataFrame
    items: pd.DataFrame
    notes: tuple[str, ...]


def critical_path(a: Analysis, pieces: C.Pieces, categories: np.ndarray, step_info: dict[str, str]) -> Summary:
    """report.json metrics.critical_path and its tables (pieces: classified path pieces;
    categories: per piece its kernel category, '' for other pieces)."""
    nb = len(a.measured)
    pk = C.per_kind(pieces, nb)
    followed = np.zeros(nb, bool)
    followed[a.followed] = True
    path_total = int(pk[followed].sum())
    kinds = tuple(
        PathShare(k, C.KIND_TITLES[k], int(round(pk[followed, i].sum() / max(followed.sum(), 1))),
                  _pct(int(pk[followed, i].sum()), path_total))
        for i, k in enumerate(C.KINDS) if pk[followed, i].sum() > 0
    )
    items = _items(pieces, categories, int(followed.sum()), path_total)
    med = median_block(a.measured)
    median_step = None
    if med >= 0:
        mine = pieces.block == med
        total = int(pk[med].sum())
        median_step = MedianStep(
            step=int(a.plan.step[med]),
            pid=int(a.plan.blocks.pid[med]),
            measured_ns=int(a.measured[med]),
            replayed_ns=int(a.replayed[med]),
            bound=_bound(a, med),
            host_period_ns=int(a.observed.host[med]),
            device_period_ns=int(a.observed.device[med]),
            composition=tuple(StepShare(k, C.KIND_TITLES[k], int(pk[med, i]), _pct(int(pk[med, i]), total))
                              for i, k in enumerate(C.KINDS) if pk[med, i] > 0),
            top_items=_top_items(_items(pieces.take(mine), categories[mine], 1, total)),
        )
    cats = _category_split(pieces, categories, int(followed.sum()), path_total)
    err = a.error_pct
    result = CriticalPath(
        step_source=step_info["step_source"],
        step_detail=step_info["step_detail"],
        steps_replayed=int(nb),
        steps_total=int(a.plan.total_steps),
        sampled=bool(a.plan.sampled),
        steps_followed=int(followed.sum()),
        measured_step_ns=_median(a.measured),
        replayed_step_ns=_median(a.replayed),
        replay_error_pct=ReplayError(round(float(np.median(err)), 3) if nb else None,
                                     round(float(err.max()), 3) if nb else None),
        device_bound_steps=int((a.observed.device > a.observed.host).sum()) if a.plan.anchor != SPAN else None,
        composition=kinds,
        kernel_categories=cats,
        top_items=_top_items(items),
        median_step=median_step,
        trust=trust(a, pieces, pk, followed),
        graph=PathGraph(a.graph.n_host, a.graph.n_device, int(len(a.graph.w_src)), int(len(a.graph.x_src)),
                        int(a.times.rounds), dict(a.graph.counts)),
        latencies=a.graph.latencies,
    )
    steps = pd.DataFrame({
        "step": a.plan.step, "pid": a.plan.blocks.pid, "measured_ns": a.measured, "replayed_ns": a.replayed,
        "error_pct": np.round(err, 3), "host_period_ns": a.observed.host, "device_period_ns": a.observed.device,
        "bound": np.where(a.observed.device > a.observed.host, "device", "host"), "followed": followed,
        **{f"{k}_ns": pk[:, i] for i, k in enumerate(C.KINDS)},
    })
    return Summary(result, steps, items, limitations(a))


TRUST_MAX_KEPT_PCT = 50.0  # from half of the path kept as measured on, a replay cannot tell what a change buys


def kept_ns(pieces: C.Pieces, pk: np.ndarray) -> np.ndarray:
    """Per block: its path's time in waits the replay keeps as measured: delays no recorded
    dependency explains, and collectives' waits for the other ranks."""
    out = pk[:, C.KINDS.index("unexplained")].copy()
    peer = pieces.label == C.PEER_WAIT
    if peer.any():
        np.add.at(out, pieces.block[peer], pieces.ns[peer])
    return out


def trust(a: Analysis, pieces: C.Pieces, pk: np.ndarray, followed: np.ndarray) -> PathTrust:
    """How much of the followed paths the replay keeps as measured, and the step and stream it
    trusts most: the followed step whose path holds the least such waits (then the smallest
    replay error, then the one nearest the median), and the stream with the most device time
    on that step's path."""
    kept = kept_ns(pieces, pk)
    total = pk.sum(axis=1)
    kept_pct = _pct(int(kept[followed].sum()), int(total[followed].sum()))
    trusted = bool(kept_pct < TRUST_MAX_KEPT_PCT)
    blocks = np.flatnonzero(followed & (total > 0))
    if len(blocks) == 0:
        return PathTrust(kept_pct, trusted, None, None, None, None)
    share = kept[blocks] / total[blocks]
    middle = np.abs(a.measured[blocks] - np.median(a.measured))
    b = int(blocks[np.lexsort((middle, a.error_pct[blocks], share))[0]])
    stream = None
    sel = (pieces.block == b) & (pieces.piece == P_TASK) & (pieces.node >= 0)
    if sel.any():
        g = a.graph
        nodes = pieces.node[sel]
        dev, on = _busiest_lane(pieces.ns[sel], g.d_device[nodes], g.d_stream[nodes])
        stream = f"GPU {int(dev)} stream {int(on)}"
    return PathTrust(kept_pct, trusted, int(a.plan.step[b]), int(a.plan.blocks.pid[b]), stream,
                     _pct(int(kept[b]), int(total[b])))


def _bound(a: Analysis, b: int) -> str:
    if a.plan.anchor == SPAN:
        return "capture"
    return "device" if a.base.device[b] > a.base.host[b] else "host"


def _busiest_lane(ns: np.ndarray, device: np.ndarray, stream: np.ndarray) -> tuple[int, int]:
    """The (device, stream) with the most ns; among equals the first in (device, stream) order."""
    codes, (dev, on) = group_codes(device, stream)
    total = group_sum(ns, codes, len(dev))
    top = np.flatnonzero(total == total.max())
    best = top[np.lexsort((on[top], dev[top]))[0]]
    return int(dev[best]), int(on[best])


def _items(pieces: C.Pieces, categories: np.ndarray, steps: int, total: int) -> pd.DataFrame:
    if len(pieces.ns) == 0:
        return pd.DataFrame(columns=list(ITEM_COLUMNS))
    f = pd.DataFrame({"kind": [C.KINDS[k] for k in pieces.kind.tolist()], "item": pieces.label,
                      "category": categories, "ns": pieces.ns})
    g = f.groupby(["kind", "item", "category"], sort=False, as_index=False)["ns"].sum()
    g = g.sort_values(["ns", "kind", "item"], ascending=[False, True, True], kind="stable")
    return pd.DataFrame({
        "kind": g["kind"], "item": g["item"], "category": g["category"], "total_ns": g["ns"].astype(np.int64),
        "ns_per_step": np.rint(g["ns"] / max(steps, 1)).astype(np.int64),
        "pct_of_path": [_pct(int(v), total) for v in g["ns"].tolist()],
    }).reset_index(drop=True)


def _top_items(items: pd.DataFrame) -> tuple[PathItem, ...]:
    return tuple(PathItem(**r) for r in items.head(TOP_ITEMS).to_dict("records"))


def _category_split(pieces: C.Pieces, categories: np.ndarray, steps: int, total: int) -> tuple[CategoryShare, ...]:
    sel = categories != ""
    if not sel.any():
        return ()
    s = pd.Series(pieces.ns[sel]).groupby(categories[sel]).sum().sort_values(ascending=False, kind="stable")
    return tuple(CategoryShare(str(c), int(round(v / max(steps, 1))), _pct(int(v), total)) for c, v in s.items())


def what_if(a: Analysis, given: frozenset[str] = frozenset()) -> tuple[WhatIf, pd.DataFrame]:
    """given: the changes asked for with --what-if (the other kernel changes are automatic:
    the top category and the top kernel, 2x faster)."""
    rows = []
    measured_step = _median(a.measured)
    processes = len(np.unique(a.plan.blocks.pid))
    steps = max(a.plan.pid_steps.values(), default=0)
    for c in a.changes:
        p = percentiles(c.predicted, (10, 50, 90)) if len(c.predicted) else {10: 0, 50: 0, 90: 0}
        row = WhatIfRow(
            change=c.change,
            measured_step_ns=measured_step,
            predicted_step_ns=int(p[50]),
            measured_window_ns=int(a.measured_window),
            predicted_window_ns=int(max(a.measured_window - c.window_gain, 0)),
            gain_step_ns=int(measured_step - p[50]),
            gain_window_ns=int(c.window_gain),
            predicted_step_p10_ns=int(p[10]),
            predicted_step_p90_ns=int(p[90]),
            changed_nodes=int(c.touched),
            source="built-in" if c.change in BUILTIN else "--what-if" if c.change in given else "automatic",
            bound=_path_bound(c.path_ns),
            note=None,
        )
        rows.append(dataclasses.replace(row, note=_note(c, row, steps, processes)))
    result = WhatIf(tuple(rows), int(len(a.measured)), int(a.plan.total_steps), bool(a.plan.sampled))
    frame = pd.DataFrame([[getattr(r, k) for k in WHAT_IF_COLUMNS] for r in rows], columns=list(WHAT_IF_COLUMNS))
    return result, frame


def _path_bound(path_ns: np.ndarray) -> PathBound | None:
    """The largest kind on the median step's critical path after the change."""
    total = int(path_ns.sum())
    if total <= 0:
        return None
    i = int(np.argmax(path_ns))
    return PathBound(C.KINDS[i], C.KIND_TITLES[C.KINDS[i]], _pct(int(path_ns[i]), total))


AGREE_PCT = 10.0  # per-step gain x steps and the window's gain agree within this
AGREE_WINDOW_PCT = 0.5  # ... or when they differ by less than this share of the window


def _note(c: Any, row: WhatIfRow, steps: int, processes: int) -> str | None:
    """One line: why a change gains nothing, what bounds its gain, or why the window's gain
    is not the per-step gain times the steps."""
    bound = row.bound
    if c.touched == 0:
        return "nothing to change: the capture holds none of what this change removes"
    on_path = (f"after the change the median step's critical path is {bound.pct:g}% {bound.title}"
               if bound else "")
    if row.gain_window_ns <= 0 and row.gain_step_ns <= 0:
        line = f"no gain: {on_path}, which this change does not shorten" if bound else "no gain"
        if c.longer:
            line += (f"; {c.longer} replayed step{'s' if c.longer != 1 else ''} came out longer, which a speed-up "
                    "cannot make a step: counted as no gain")
        return line
    parts = [f"bounded by {bound.title} ({on_path})"] if bound else []
    w = c.window
    expected = row.gain_step_ns * steps
    gap = abs(expected - row.gain_window_ns)
    if w is not None and gap > AGREE_PCT / 100 * max(expected, row.gain_window_ns) and \
            gap > AGREE_WINDOW_PCT / 100 * row.measured_window_ns:
        why: list[str] = []
        if w.gain < w.in_window:
            why.append(f"the window holds all of {w.floor_lane}'s work ({w.floor / 1e6:,.3f} ms at the changed "
                       "durations)" if w.floor_kind == "stream" else
                       f"the window holds work queued before the capture, kept as measured, to "
                       f"{w.floor / 1e6:,.3f} ms into it")
        if w.in_window < w.steps:
            why.append(f"{(w.steps - w.in_window) / 1e6:,.3f} ms of the steps' gain lies outside the captured window")
        if processes > 1:
            why.append("the processes run side by side, so the window gains what the process that gains most does")
        mean = float(c.gain.mean()) if len(c.gain) else 0.0
        if abs(mean - row.gain_step_ns) > AGREE_PCT / 100 * max(mean, row.gain_step_ns, 1):
            why.append(f"steps gain unevenly (median {row.gain_step_ns / 1e6:,.3f} ms, mean {mean / 1e6:,.3f} ms)")
        if why:
            parts.append(f"the window gains {row.gain_window_ns / 1e6:,.3f} ms, not the per-step gain times "
                         f"{steps:,} steps ({expected / 1e6:,.3f} ms): " + "; ".join(why))
    if c.longer:
        parts.append(f"{c.longer} replayed step{'s' if c.longer != 1 else ''} came out longer, counted as no gain")
    return "; ".join(parts) if parts else None


def limitations(a: Analysis) -> tuple[str, ...]:
    """What the graph could not recover, counted (for the report's limitations)."""
    c = a.graph.counts
    out = []
    if a.plan.sampled:
        out.append(f"the critical path and the what-ifs replay {len(a.measured):,} evenly spaced steps of "
                   f"{a.plan.total_steps:,} (each with the step before it); the window's prediction "
                   "counts the other steps at the mean gain of the replayed ones")
    if c.get("stream_wait_events_unrecovered"):
        out.append(f"{c['stream_wait_events_unrecovered']:,} stream waits on events name no recording stream "
                   "in this trace (Nsight Systems records it with --cuda-event-trace=true): the delays they "
                   "cause are kept as measured, as unexplained waits")
    if c.get("stream_wait_calls_without_record"):
        out.append(f"{c['stream_wait_calls_without_record']:,} stream waits on events have no synchronization "
                   "record (the PyTorch profiler writes them with its CUDA sync events enabled): which streams "
                   "they join is unknown, and the delays they cause are kept as measured, as unexplained waits")
    if c.get("unexplained_waits"):
        out.append(f"{c['unexplained_waits']:,} tasks started later than every recovered dependency allows "
                   f"({c['unexplained_wait_ns'] / 1e6:,.3f} ms in all): kept as measured (unexplained waits)")
    if c.get("syncs_without_stream"):
        out.append(f"{c['syncs_without_stream']:,} stream synchronizes have no synchronization record naming "
                   "their stream: " + ("those not found by their timing (above) keep their measured duration"
                                       if c.get("waits_found_by_timing") else "they keep their measured duration"))
    if c.get("event_syncs_without_record"):
        out.append(f"{c['event_syncs_without_record']:,} event synchronizes do not name the event's stream: "
                   "they keep their measured duration")
    if c.get("tasks_without_launch_call"):
        out.append(f"{c['tasks_without_launch_call']:,} tasks have no launch call in the capture: they keep "
                   "their measured start")
    if c.get("waits_not_confirmed_by_timing"):
        out.append(f"{c['waits_not_confirmed_by_timing']:,} calls that should block returned before the work "
                   "they would wait for ended: they are replayed as not waiting")
    if c.get("host_waits_longer_than_explained"):
        out.append(f"{c['host_waits_longer_than_explained']:,} blocking calls waited longer than the work they "
                   "wait for explains: the excess is kept as measured")
    if c.get("queue_waits"):
        out.append(f"{c['queue_waits']:,} launch, copy or memset calls waited for room in a full launch queue "
                   f"(about {c['queue_depth']:,} operations pending; {c['queue_wait_ns'] / 1e6:,.3f} ms in all): "
                   "each is replayed as waiting for the operation whose end made room, so a faster device shortens it")
    if c.get("waits_found_by_timing"):
        out.append(f"{c['waits_found_by_timing']:,} synchronizes whose stream or event no record names returned right "
                   "after an operation of their process ended: they are replayed as waiting for it")
    if c.get("slow_launch_calls"):
        out.append(f"{c['slow_launch_calls']:,} launch calls took over 10 times their process's usual launch time "
                   f"({c['slow_launch_call_ns'] / 1e6:,.3f} ms in all; a driver lock or module loading, no full "
                   "launch queue): their time is kept as measured, and shows as launch overhead")
    if c.get("tasks_overlapping_stream_predecessor"):
        out.append(f"{c['tasks_overlapping_stream_predecessor']:,} tasks overlap the task before them on their "
                   "stream (stream order not applied to them)")
    return tuple(out)


def timeline(a: Analysis, pieces: C.Pieces, labels: Any, api_names: list[str]) -> pd.DataFrame:
    """The median step as drawable rows: every call and task of its block that overlaps the
    step (lane, times relative to the step's replayed start, kind, item), then the critical
    path's pieces (path True) on the lane they belong to. At most MAX_TIMELINE_ROWS node rows
    (the longest ones) are kept."""
    b = median_block(a.measured)
    if b < 0:
        return pd.DataFrame(columns=list(TIMELINE_COLUMNS))
    g, t = a.graph, a.times
    lo, hi = int(a.base.start[b]), int(a.base.end[b])
    hs = np.flatnonzero((g.h_block == b) & (t.h_end > lo) & (t.h_start < hi))
    ds = np.flatnonzero((g.d_block == b) & (t.d_end > lo) & (t.d_start < hi))
    thread_lane = _thread_lanes(g, hs, a.anchors.chain[b])
    rows: list[tuple[str, int, int, str, str, bool]] = list(zip(
        [thread_lane[c] for c in g.h_chain[hs].tolist()],
        (t.h_start[hs] - lo).tolist(), (t.h_end[hs] - lo).tolist(),
        [C.CALL_KIND_NAMES[k] for k in g.h_kind[hs].tolist()],
        [api_names[n] for n in g.h_api[hs].tolist()],
        [False] * len(hs), strict=True))
    rows.extend(zip(
        _stream_lanes(g, ds),
        (t.d_start[ds] - lo).tolist(), (t.d_end[ds] - lo).tolist(),
        [C.TASK_KIND_NAMES[k] for k in g.d_kind[ds].tolist()],
        _task_items(g, ds, labels),
        [False] * len(ds), strict=True))
    if len(rows) > MAX_TIMELINE_ROWS:
        rows.sort(key=lambda r: r[1] - r[2])
        rows = rows[:MAX_TIMELINE_ROWS]
    mine = np.flatnonzero(pieces.block == b)
    nodes, kinds = pieces.node[mine], pieces.piece[mine]
    host = np.isin(kinds, list(P_HOST_PIECES))
    lanes = [""] * len(mine)
    for j, lane in zip(np.flatnonzero(~host).tolist(), _stream_lanes(g, nodes[~host]), strict=True):
        lanes[j] = lane
    other: dict[int, str] = {}  # one name per thread outside the step's chains
    for j in np.flatnonzero(host).tolist():
        node = int(nodes[j])
        chain, key = int(g.h_chain[node]), int(g.h_tkey[node])
        if chain in thread_lane:
            lanes[j] = thread_lane[chain]
        else:
            lanes[j] = other[key] if key in other else other.setdefault(key, _thread_name(g, node))
    starts = pieces.start[mine]
    rows.extend(zip(
        lanes, (starts - lo).tolist(), (starts + pieces.ns[mine] - lo).tolist(),
        [C.KINDS[k] for k in pieces.kind[mine].tolist()],
        [str(x) for x in pieces.label[mine].tolist()],
        [True] * len(mine), strict=True))
    frame = pd.DataFrame(rows, columns=list(TIMELINE_COLUMNS))
    return frame.sort_values(["path", "start_ns"], kind="stable").reset_index(drop=True)


def _stream_lanes(g: Any, tasks: np.ndarray) -> list[str]:
    """Each task's lane name ("GPU d stream s"): one string per lane, shared by its tasks."""
    codes, (dev, stream) = group_codes(g.d_device[tasks], g.d_stream[tasks])
    names = [f"GPU {d} stream {st}" for d, st in zip(dev.tolist(), stream.tolist(), strict=True)]
    return [names[c] for c in codes.tolist()]


def _thread_name(g: Any, node: int) -> str:
    return f"thread {int(g.h_tkey[node]) & 0xFFFFFF}"


def _thread_lanes(g: Any, hs: np.ndarray, anchor_chain: int) -> dict[int, str]:
    lanes: dict[int, str] = {}
    for i, chain in zip(hs.tolist(), g.h_chain[hs].tolist(), strict=True):
        if chain not in lanes:
            lanes[chain] = _thread_name(g, i) + (" (step)" if chain == anchor_chain else "")
    return lanes


def _task_items(g: Any, ds: np.ndarray, labels: Any) -> list[str]:
    kernel = g.d_kind[ds] == 0
    ids = np.unique(g.d_name[ds][kernel])
    names = dict(zip(ids.tolist(), labels.kernel_name(ids), strict=True)) if len(ids) else {}
    out = []
    for i in ds.tolist():
        if g.d_kind[i] == 0:
            out.append(names.get(int(g.d_name[i]), ""))
        elif g.d_kind[i] == 1:
            out.append(C.COPY_NAMES.get(int(g.d_copy_kind[i]), "copy"))
        else:
            out.append(C.TASK_KIND_NAMES[int(g.d_kind[i])])
    return out
