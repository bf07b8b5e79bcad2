"""boundness: queue time and GPU busy share per process and per NVTX phase, the evidence
under the diagnosis verdict (docs/diagnosis.md): the report has one verdict, and this metric
gives none of its own.

Queue time (kernel start - launch call end, clamped at 0, per launch call from
analysis/join.py): when kernels start almost as soon as they are launched (within
HOST_QUEUE_NS, `immediate_start_pct`), the GPU waits for the host; a host far ahead shows long
queue times. GPU busy %: the union of the process's kernels and memcpy/memset intervals over
its GPU window (first to last of them); for a phase, that union inside the phase's NVTX ranges
over the ranges' union.
"""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis import intervals
from nsys_llm_explainer.analysis.busy import copy_union
from nsys_llm_explainer.analysis.context import NO_KERNELS, Context
from nsys_llm_explainer.analysis.groups import distinct_few
from nsys_llm_explainer.analysis.join import launch_pairs
from nsys_llm_explainer.analysis.phase_scope import instance_bounds, phase_scope
from nsys_llm_explainer.analysis.stats import percentiles
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome, Table
from nsys_llm_explainer.results.host import Boundness, BoundnessThresholds, QueueBusy

HOST_QUEUE_NS = 20_000  # a kernel starting within this of its launch call found the GPU waiting
COLUMNS = (
    "scope",
    "pid",
    "phase",
    "launch_calls",
    "queue_p50_ns",
    "queue_p90_ns",
    "immediate_start_pct",
    "kernel_busy_pct",
    "gpu_busy_pct",
)
Merged = tuple[np.ndarray, np.ndarray]  # merged intervals: (starts, ends)


def _gpu_union(ctx: Context, pid: int) -> tuple[Merged, Merged]:
    """(kernel union, kernel+copy union) of one process."""
    k = ctx.data.kernels()
    mine = k.pid == pid
    ks, ke = intervals.merge(k.start[mine], k.end[mine])
    cs, ce = copy_union(ctx.data, "pid", pid)
    return (ks, ke), intervals.merge(np.concatenate([ks, cs]), np.concatenate([ke, ce]))


def _busy_pct(union: Merged, ws: np.ndarray, we: np.ndarray) -> tuple[int, int]:
    """(busy ns inside the windows ws/we (disjoint, sorted), window ns)."""
    us, ue = union
    return int(intervals.overlap_with_union(us, ue, ws, we).sum()), int((we - ws).sum())


def _row(
    scope: str,
    pid: int | None,
    phase: str | None,
    queue: np.ndarray,
    kbusy: tuple[int, int],
    gbusy: tuple[int, int],
) -> QueueBusy:
    p = percentiles(queue, (50, 90))
    immediate = (
        round(100.0 * float((queue < HOST_QUEUE_NS).sum()) / len(queue), 2) if len(queue) else 0.0
    )
    kpct = round(100.0 * kbusy[0] / kbusy[1], 2) if kbusy[1] else 0.0
    gpct = round(100.0 * gbusy[0] / gbusy[1], 2) if gbusy[1] else 0.0
    return QueueBusy(scope, pid, phase, int(len(queue)), p[50], p[90], immediate, kpct, gpct)


def run(ctx: Context) -> Outcome:
    k = ctx.data.kernels()
    if len(k) == 0:
        return METRIC.skipped(NO_KERNELS)
    if len(ctx.data.runtime()) == 0:
        return METRIC.skipped("the CUDA API table is empty, so queue times cannot be measured")
    pairs = launch_pairs(ctx.data)
    queue = pairs.queue
    pair_pid = k.pid[pairs.kernel]
    unions = {int(pid): _gpu_union(ctx, int(pid)) for pid in distinct_few(k.pid)}
    rows = []
    for pid, (ku, gu) in unions.items():
        w = (np.array([gu[0][0]]), np.array([gu[1][-1]]))
        # pid -1: the export has no usable globalPid; None (null) means unknown
        row = _row("process", pid if pid >= 0 else None, None, queue[pair_pid == pid],
                   _busy_pct(ku, *w), _busy_pct(gu, *w))
        rows.append((-row.launch_calls, pid, row))
    rows.sort(key=lambda t: t[:2])
    processes = [row for _, _, row in rows]
    phases, phase_source = _phase_rows(ctx, queue, pair_pid, unions)
    result = Boundness(BoundnessThresholds(HOST_QUEUE_NS), tuple(processes), phase_source, tuple(phases))
    frame = pd.DataFrame([asdict(r) for r in processes + phases], columns=list(COLUMNS))
    return MetricResult(METRIC.id, result.to_json(), (Table("boundness", COLUMNS, frame),), typed=result)


def _phase_rows(
    ctx: Context, queue: np.ndarray, pair_pid: np.ndarray, unions: dict[int, tuple[Merged, Merged]]
) -> tuple[list[QueueBusy], str | None]:
    scope = phase_scope(ctx)
    if scope is None or len(scope.instances) == 0:
        return [], None
    pairs = launch_pairs(ctx.data)
    kphase = scope.kernel_phase()[pairs.kernel]
    start, end, pid = instance_bounds(ctx, scope)
    rows = []
    for code, name in enumerate(scope.phases):
        sel = scope.instance_phase == code
        if not sel.any():
            continue
        kb, gb = [0, 0], [0, 0]
        for p in distinct_few(pid[sel]).tolist():
            if p not in unions:
                continue
            ws, we = intervals.merge(start[sel & (pid == p)], end[sel & (pid == p)])
            for acc, union in ((kb, unions[p][0]), (gb, unions[p][1])):
                busy, total = _busy_pct(union, ws, we)
                acc[0] += busy
                acc[1] += total
        rows.append(
            _row("phase", None, name, queue[kphase == code], (kb[0], kb[1]), (gb[0], gb[1]))
        )
    return rows, scope.source


METRIC = Metric(
    id="boundness",
    order=90,
    title="Queue time and GPU busy share",
    run=run,
    tables={"boundness": COLUMNS},
    description="Per process and phase: queue time (kernel start after its launch) and GPU busy share, "
    "evidence under the one verdict of the diagnosis.",
    reads=("runtime", "launch_pairs", "kernel_launch_index", "kernel_attribution"),
)
