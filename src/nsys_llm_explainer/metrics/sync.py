"""sync: CPU<->GPU synchronization calls from the CUDA runtime/driver API rows.

Blocking calls (the host thread waits for the GPU) are counted as sync; waits and queries
that do not block the host are listed apart and not counted.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis import intervals
from nsys_llm_explainer.analysis.blocking import sync_kinds
from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.analysis.groups import distinct_few, group_codes, group_max, group_sum
from nsys_llm_explainer.analysis.stats import group_percentiles
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome, Table
from nsys_llm_explainer.results.host import Sync, SyncCall, SyncProcess

COLUMNS = ("api", "calls", "total_ns", "avg_ns", "p50_ns", "max_ns", "blocking")
BY_PID_COLUMNS = ("pid", *COLUMNS)


def _table(api_names: list[str], api: np.ndarray, dur: np.ndarray, kind: np.ndarray, *keys: np.ndarray) -> pd.DataFrame:
    codes, cols = group_codes(*keys, api)
    g = len(cols[-1])
    calls = np.bincount(codes, minlength=g).astype(np.int64)
    total = group_sum(dur, codes, g)
    frame = pd.DataFrame({
        "api": [api_names[int(a)] for a in cols[-1]],
        "calls": calls,
        "total_ns": total,
        "avg_ns": np.rint(total / np.maximum(calls, 1)).astype(np.int64),
        "p50_ns": group_percentiles(dur, codes, g, (50,))[50],
        "max_ns": group_max(dur, codes, g),
        "blocking": kind[cols[-1]] == 1,
    })
    if keys:
        frame.insert(0, "pid", cols[0].astype(np.int64))
    frame = frame.sort_values(["blocking", "total_ns", "api"], ascending=[False, False, True], kind="stable")
    return frame.reset_index(drop=True)


def run(ctx: Context) -> Outcome:
    rt = ctx.data.runtime()
    if len(rt) == 0:
        return METRIC.skipped("the CUDA API table is empty: no runtime or driver calls were captured")
    names = ctx.data.runtime_api_names()
    kind = sync_kinds(names)
    row_kind = kind[rt.api]
    sel = np.flatnonzero(row_kind > 0)
    s = rt.take(sel)
    dur = s.end - s.start
    frame = _table(names, s.api, dur, kind)
    by_pid = _table(names, s.api, dur, kind, s.pid)
    blocking = row_kind[sel] == 1
    window = int(rt.end.max() - rt.start.min())
    processes: list[SyncProcess] = []
    for pid in distinct_few(rt.pid).tolist():
        mine = rt.pid == pid
        w = int(rt.end[mine].max() - rt.start[mine].min())
        blk = blocking & (s.pid == pid)
        wall = intervals.union_length(s.start[blk], s.end[blk])
        processes.append(SyncProcess(
            pid=int(pid), blocking_calls=int(blk.sum()),
            blocking_ns=int(dur[blk].sum()), blocking_wall_ns=wall, api_window_ns=w,
            blocking_pct_of_window=round(100.0 * wall / w, 2) if w > 0 else 0.0,
        ))
    processes.sort(key=lambda r: -r.blocking_ns)
    blocking_ns = int(dur[blocking].sum())
    # Calls on different threads overlap in time: the share of the window uses their union.
    wall = intervals.union_length(s.start[blocking], s.end[blocking])
    result = Sync(
        blocking_calls=int(blocking.sum()),
        blocking_ns=blocking_ns,
        blocking_wall_ns=wall,
        api_window_ns=window,
        blocking_pct_of_window=round(100.0 * wall / window, 2) if window > 0 else 0.0,
        calls=tuple(SyncCall(**r) for r in frame.to_dict("records")),
        processes=tuple(processes),
    )
    tables = (Table("sync", COLUMNS, frame), Table("sync_by_pid", BY_PID_COLUMNS, by_pid))
    return MetricResult(METRIC.id, result.to_json(), tables, typed=result)


METRIC = Metric(
    id="sync",
    order=30,
    title="CPU-GPU synchronization",
    run=run,
    tables={"sync": COLUMNS, "sync_by_pid": BY_PID_COLUMNS},
    description="Blocking synchronize calls and synchronous copies; non-blocking waits listed apart.",
    reads=("runtime",),
)
