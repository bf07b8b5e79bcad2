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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis import nvtx_tree
from nsys_llm_explainer.analysis.attribution import kernel_attribution, kernel_categories
from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.analysis.nvtx_names import normalize
from nsys_llm_explainer.graph import changes as ch
from nsys_llm_explainer.graph import composition as C
from nsys_llm_explainer.graph.build import Graph, build
from nsys_llm_explainer.graph.path import CALL, HOST_WORK, RETURN, Path, critical_paths
from nsys_llm_explainer.graph.peers import peer_waits, slow_rank
from nsys_llm_explainer.graph.replay import Params, Times, replay
from nsys_llm_explainer.graph.steps import SPAN, Anchors, Plan, StepTimes, anchors, plan, step_times
from nsys_llm_explainer.graph.tasks import KERNEL
from nsys_llm_explainer.kernels.categories import load_table
from nsys_llm_explainer.kernels.demangled import parse as parse_name
from nsys_llm_explainer.model import Skipped
from nsys_llm_explainer.results.run import Steps
from nsys_llm_explainer.trace.data import TraceData, Unavailable


@dataclass(frozen=True)
class WindowGain:
    """How a change's window gain was reached."""

    steps: int  # the steps' gains added up (sampled steps at the mean; the largest process)
    in_window: int  # the same, less each step's gain on time outside the window
    floor: int  # the least the window can take: the busiest stream's work, or carried work's end
    floor_kind: str  # "stream" or "carried"
    floor_lane: str  # the busiest stream ("GPU d stream s"), "" for carried work
    gain: int  # min(in_window, window - floor)


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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


def _slow_rank(data: TraceData, kc: Any) -> tuple[int, np.ndarray]:
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


def _steps(ctx: Context) -> tuple[pd.DataFrame | None, dict[str, Any]]:
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
        per_task = np.where(g.d_kind == KERNEL, saving[np.where(g.d_kind == KERNEL, g.d_row, 0)], 0) \
            if len(saving) else np.zeros(g.n_device, np.int64)
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
        hit = nvtx_tree.innermost(index, tkey, t, t)
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
    return np.where(g.d_kind == KERNEL, per_row[np.where(g.d_kind == KERNEL, g.d_row, 0)], -1)


def trace_analysis(ctx: Context) -> tuple[Analysis, C.Pieces, np.ndarray, dict[str, Any]]:
    """The analysis of this trace, built once: the critical_path metric reports it, the
    what_if metric reads it after (Metric.reads keeps it until then)."""
    return ctx.data.cached(ANALYSIS_KEY, lambda: build_analysis(ctx))


def build_analysis(ctx: Context) -> tuple[Analysis, C.Pieces, np.ndarray, dict[str, Any]]:
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
