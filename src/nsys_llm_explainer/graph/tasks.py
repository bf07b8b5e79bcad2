"""Device work as one table: kernels, copies, memsets and whole CUDA-graph executions, each
with the runtime call that launched it, selected per replay block.

A block is a time window of one process (a step and the step before it). A task belongs
to a block when its launch call starts inside the window; a task launched before the
window that is still queued or running when it opens is kept as "carried in": its times
are taken as measured, since what delayed it lies outside the block.
"""

from __future__ import annotations

import numpy as np

from nsys_llm_explainer.analysis.join import kernel_launch_index, match_calls
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.graph.host import CALL_FOR_TASK, api_tables
from nsys_llm_explainer.graph.scan import Blocks, carried_in, rows_in_windows
from nsys_llm_explainer.trace.columns import Columns
from nsys_llm_explainer.trace.data import TraceData, Unavailable
from nsys_llm_explainer.trace.nsys.probe import GRAPH_TRACE_TABLE, MEMCPY_TABLE, MEMSET_TABLE

KERNEL, COPY, MEMSET, GRAPH = 0, 1, 2, 3
KIND_NAMES = ("kernel", "copy", "memset", "graph")
SOURCES = ((KERNEL, "kernels"), (COPY, "memcpy"), (MEMSET, "memset"), (GRAPH, "graph_execs"))
NSYS_TABLES = {"memcpy": MEMCPY_TABLE, "memset": MEMSET_TABLE, "graph_execs": GRAPH_TRACE_TABLE}


@frozen
class Selected:
    """Rows of one table chosen for the blocks (a row may serve two overlapping blocks)."""

    kind: int
    rows: np.ndarray  # row in the source table
    block: np.ndarray
    call: np.ndarray  # runtime row of the launch call, -1: none in the trace
    carried: np.ndarray  # launched before the block opened
    issued: np.ndarray  # when it was issued (absolute; BEFORE_CAPTURE: before the first call)


def table(data: TraceData, name: str) -> Columns | None:
    """The loaded table, or None when the trace has none (an export without the table is
    not asked: a failed load is tried again by every caller)."""
    source = NSYS_TABLES.get(name)
    if data.schema.tables and source is not None and source not in data.schema.tables:
        return None
    try:
        cols = getattr(data, name)()
    except Unavailable:
        return None
    return cols if len(cols) else None


def launch_calls(data: TraceData, name: str, cols: Columns) -> np.ndarray:
    """Per row: the runtime row of its launch call (pid, correlation id), -1 when none.
    Copies, memsets and graph executions are joined only to calls of their own kind (a
    small subset of the runtime rows)."""
    if name == "kernels":
        return kernel_launch_index(data)

    def build() -> np.ndarray:
        rt = data.runtime()
        kind, _ = api_tables(data.runtime_api_names())
        mask = kind[rt.api] == CALL_FOR_TASK[name] if len(rt) else None
        return match_calls(cols.pid, cols.corr, rt, mask)

    return data.cached(f"graph_calls:{name}", build)


BEFORE_CAPTURE = -(1 << 62)


def issued_by_order(data: TraceData, pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
    """When work without a launch call in the trace was issued, from its correlation id:
    CUPTI numbers a process's CUDA calls in issue order, so the work came after the call with
    the next lower id (the time of that call's start is used) and, when no recorded call has a
    lower id, before the capture's first call (BEFORE_CAPTURE)."""

    def build() -> tuple[np.ndarray, np.ndarray]:
        rt = data.runtime()
        ok = np.flatnonzero((rt.corr > 0) & (rt.pid >= 0))
        key = (rt.pid[ok].astype(np.int64) << 40) | rt.corr[ok]
        order = np.argsort(key, kind="stable")
        return key[order], rt.start[ok][order]

    keys, starts = data.cached("graph_calls_by_correlation", build)
    if len(keys) == 0:  # no call with a correlation id: all came before the first recorded call
        return np.full(len(corr), BEFORE_CAPTURE, np.int64)
    q = (pid.astype(np.int64) << 40) | corr
    pos = np.searchsorted(keys, q, "left") - 1
    same = (pos >= 0) & ((keys[np.maximum(pos, 0)] >> 40) == pid)
    return np.where(same, starts[np.maximum(pos, 0)], BEFORE_CAPTURE)


def select(data: TraceData, blocks: Blocks) -> tuple[dict[int, Columns], list[Selected]]:
    """The source tables that exist, and the rows of each chosen for the blocks."""
    rt = data.runtime()
    tables: dict[int, Columns] = {}
    chosen: list[Selected] = []
    for kind, name in SOURCES:
        cols = table(data, name)
        if cols is None:
            continue
        tables[kind] = cols
        call = launch_calls(data, name, cols)
        launched = np.where(call >= 0, rt.start[np.maximum(call, 0)], cols.start) if len(rt) else cols.start
        missing = np.flatnonzero((call < 0) & (cols.corr > 0))
        if len(missing) and len(rt):
            launched = launched.copy()
            launched[missing] = issued_by_order(data, cols.pid[missing], cols.corr[missing])
        rows, block = rows_in_windows(cols.pid, launched, blocks)
        crow, cblock = carried_in(cols.pid, launched, cols.end, blocks)
        allrows = np.concatenate([rows, crow])
        chosen.append(Selected(
            kind, allrows, np.concatenate([block, cblock]), call[allrows],
            np.r_[np.zeros(len(rows), bool), np.ones(len(crow), bool)], launched[allrows],
        ))
    return tables, chosen
