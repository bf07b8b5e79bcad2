"""critical_path: the dependency graph of each step, its critical path, and the replay check.

The graph (nsys_llm_explainer/graph/) links each launching thread's CUDA calls in order,
each task to its launch call, each stream's work in order, blocking calls to the work they
wait for, and streams to each other where the trace records event waits. Replaying it with
the measured durations gives every step's time back (the error says how well); following
each step's binding edges back from its end gives its critical path, reported by kind (host
work by named range or operator, launch overhead, kernels by category, copies,
synchronization, communication, GPU queue gaps, unexplained waits) and by item.

Steps are the steps metric's (a trace without steps is replayed whole, one block per
process). On large traces an evenly spaced sample of steps is replayed (graph/steps.py).
The analysis is kept for the what_if metric, which replays the same graph with changes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis import nvtx
from nsys_llm_explainer.analysis.nvtx import normalize
from nsys_llm_explainer.errors import UsageError
from nsys_llm_explainer.graph import analyze as A
from nsys_llm_explainer.graph import changes as ch
from nsys_llm_explainer.graph import path as C
from nsys_llm_explainer.graph.build import Graph
from nsys_llm_explainer.graph.peers import peer_waits, slow_rank
from nsys_llm_explainer.graph.tasks import KERNEL
from nsys_llm_explainer.kernels.categories import load_table
from nsys_llm_explainer.kernels.demangled import parse as parse_name
from nsys_llm_explainer.metrics.base import Context, Metric
from nsys_llm_explainer.metrics.categories import kernel_categories
from nsys_llm_explainer.metrics.nvtx_attribution import kernel_attribution
from nsys_llm_explainer.metrics.top_kernels import NO_KERNELS
from nsys_llm_explainer.model import MetricResult, Outcome, Skipped, Table
from nsys_llm_explainer.trace.data import TraceData, Unavailable

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
    res = ctx.result("steps")
    table = next((t for t in res.tables if t.name == "steps"), None) if res is not None else None
    if table is None or table.frame is None or len(table.frame) == 0:
        skipped = ctx.results.get("steps")
        reason = skipped.reason if isinstance(skipped, Skipped) else "no steps were found"
        return None, {"step_source": "whole_capture",
                      "step_detail": f"The whole capture is replayed, one block per process ({reason})"}
    assert res is not None
    method = str(res.data.get("method", "")).replace("_", " ")
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
    return np.where(g.d_kind == KERNEL, per_row[np.where(g.d_kind == KERNEL, g.d_row, 0)], -1)


def analysis(ctx: Context) -> tuple[A.Analysis, C.Pieces, np.ndarray, dict[str, Any]]:
    """The analysis of this trace, built once (the what_if metric reads it too)."""
    return ctx.data.cached(ANALYSIS_KEY, lambda: build_analysis(ctx))


def build_analysis(ctx: Context) -> tuple[A.Analysis, C.Pieces, np.ndarray, dict[str, Any]]:
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
    res = A.analyze(data, frame, labels, what_if_changes(ctx), _capture(data) if frame is None else None,
                    nodes, window, span)
    task = labels(res.graph)
    waits = _peer_waits(ctx, res.graph)
    pieces = C.classify(res.path, res.graph, task, data.runtime_api_names(), _host_ranges(data),
                        waits, res.times.d_start)
    cats = C.kernel_categories_of(pieces, task)
    return res, pieces, cats, info


def run(ctx: Context) -> Outcome:
    k = ctx.data.kernels()
    if len(k) == 0:
        return METRIC.skipped(NO_KERNELS)
    if len(ctx.data.runtime()) == 0:
        return METRIC.skipped("the CUDA API table is empty, so no task can be linked to its launch call")
    try:
        res, pieces, cats, info = analysis(ctx)
    except UsageError as exc:
        return METRIC.skipped(f"the kernel category file cannot be used ({exc.message})")
    if len(res.measured) == 0:
        return METRIC.skipped("no step could be replayed")
    summary = A.critical_path(res, pieces, cats, info)
    notes = summary.notes
    comm = pieces.kind == C.KINDS.index("communication")
    if comm.any() and not (pieces.label[comm] == C.PEER_WAIT).any():
        notes = (*notes, "communication on the critical path includes the wait for the other ranks, which this "
                 "capture cannot separate from the transfer (the fleet view measures it across rank captures)")
    labels = task_labels(ctx.data, ctx.options.kernel_categories)(res.graph)
    lines = A.timeline(res, pieces, labels, ctx.data.runtime_api_names())
    tables = (Table("critical_path_steps", A.STEP_COLUMNS, summary.steps),
              Table("critical_path_items", A.ITEM_COLUMNS, summary.items),
              Table("critical_path_timeline", A.TIMELINE_COLUMNS, lines))
    return MetricResult(METRIC.id, summary.data, tables, notes)


METRIC = Metric(
    id="critical_path",
    title="Critical path",
    run=run,
    tables={"critical_path_steps": A.STEP_COLUMNS, "critical_path_items": A.ITEM_COLUMNS,
            "critical_path_timeline": A.TIMELINE_COLUMNS},
    description="Per-step dependency graph, replay check, and the critical path by kind and item.",
    after=("steps",),
)
