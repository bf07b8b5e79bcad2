"""nvtx_ranges: NVTX ranges by name (push/pop and start/end), with phases from --phase-map.

report.json lists the ranges by normalized name (analysis/nvtx: `aten::mm, seq = 3,
op_id = 7` counts as `aten::mm`); the CSV tables keep one row per raw name, with its
normalized name beside it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.analysis.groups import group_codes, group_max, group_sum
from nsys_llm_explainer.analysis.nvtx import group_phases, normalized_names
from nsys_llm_explainer.analysis.stats import group_percentiles
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome, Table

COLUMNS = ("name", "normalized_name", "phase", "count", "total_ns", "avg_ns", "p50_ns", "p90_ns", "max_ns")
BY_PID_COLUMNS = ("pid", "name", "normalized_name", "count", "total_ns")
JSON_COLUMNS = ("name", "phase", "count", "total_ns", "avg_ns", "p50_ns", "p90_ns", "max_ns")
EVENT_KINDS = {59: "push_pop", 60: "start_end"}


def phase_names(ctx: Context, names: list[str]) -> list[str | None]:
    pm = ctx.options.phase_map
    return [pm.phase_of(n) for n in names] if pm else [None] * len(names)


def _stats(names: list[str], name_codes: np.ndarray, dur: np.ndarray, *keys: np.ndarray) -> pd.DataFrame:
    codes, cols = group_codes(*keys, name_codes)
    g = len(cols[-1])
    count = np.bincount(codes, minlength=g).astype(np.int64)
    total = group_sum(dur, codes, g)
    pct = group_percentiles(dur, codes, g, (50, 90))
    frame = pd.DataFrame({
        "name": [names[int(c)] for c in cols[-1]],
        "count": count, "total_ns": total,
        "avg_ns": np.rint(total / np.maximum(count, 1)).astype(np.int64),
        "p50_ns": pct[50], "p90_ns": pct[90], "max_ns": group_max(dur, codes, g),
    })
    if keys:
        frame.insert(0, "pid", cols[0].astype(np.int64))
    return frame


def _by_normalized(
    ctx: Context, names: list[str], norm_names: list[str], norm_of: np.ndarray, name: np.ndarray, dur: np.ndarray
) -> pd.DataFrame:
    """The statistics per normalized name (`norm_of`: raw name code -> normalized code),
    rows sorted like the raw table."""
    frame = _stats(norm_names, norm_of[name], dur)
    pm = ctx.options.phase_map
    if pm:
        present = np.unique(name)
        phases = group_phases([names[i] for i in present], norm_of[present], len(norm_names), pm.phase_of,
                              pm.phases())
        by_name = dict(zip(norm_names, phases, strict=True))
        frame.insert(1, "phase", pd.Series([by_name[n] for n in frame["name"]], dtype=object))
    else:
        frame.insert(1, "phase", pd.Series([None] * len(frame), dtype=object))
    return frame.sort_values(["total_ns", "name"], ascending=[False, True], kind="stable").reset_index(drop=True)


def run(ctx: Context) -> Outcome:
    nv = ctx.data.nvtx()
    if len(nv) == 0:
        return METRIC.skipped("the NVTX table has no ranges: the application emitted no NVTX ranges")
    names = ctx.data.nvtx_names()
    ended = nv.end >= 0
    e = nv.take(ended)
    dur = e.end - e.start
    frame = _stats(names, e.name, dur)
    phases = phase_names(ctx, list(frame["name"]))
    # dtype=object keeps "no phase" as None: pandas 3 would store it in a str column as NaN.
    frame.insert(1, "phase", pd.Series(phases, dtype=object))
    frame = frame.sort_values(["total_ns", "name"], ascending=[False, True], kind="stable").reset_index(drop=True)
    norm_names, norm_of = normalized_names(ctx.data)
    normalized = dict(zip(names, (norm_names[c] for c in norm_of.tolist()), strict=True))
    frame.insert(1, "normalized_name", frame["name"].map(normalized))
    by_pid = _stats(names, e.name, dur, e.pid)
    by_pid.insert(2, "normalized_name", by_pid["name"].map(normalized))
    by_pid = by_pid[list(BY_PID_COLUMNS)].sort_values(["pid", "total_ns"], ascending=[True, False], kind="stable")
    phase_rows = []
    if ctx.options.phase_map:
        for ph in ctx.options.phase_map.phases():
            sel = frame["phase"] == ph
            phase_rows.append({"phase": ph, "ranges": int(frame.loc[sel, "count"].sum()),
                               "total_ns": int(frame.loc[sel, "total_ns"].sum())})
    ops = _by_normalized(ctx, names, norm_names, norm_of, e.name, dur)
    data = {
        "range_count": int(len(nv)),
        "unended_count": int((~ended).sum()),
        "by_kind": {EVENT_KINDS[t]: int((nv.event_type == t).sum()) for t in EVENT_KINDS},
        "distinct_names": int(len(frame)),
        "distinct_normalized_names": int(len(ops)),
        "ranges": ops[list(JSON_COLUMNS)].to_dict("records"),
        "phases": phase_rows,
    }
    notes: tuple[str, ...] = ()
    if data["unended_count"]:
        notes = (f"{data['unended_count']} ranges have no end (NULL end) and are excluded",)
    return MetricResult(METRIC.id, data, (Table("nvtx_ranges", COLUMNS, frame),
                                          Table("nvtx_by_pid", BY_PID_COLUMNS, by_pid)), notes)


METRIC = Metric(
    id="nvtx_ranges",
    order=50,
    title="NVTX ranges",
    run=run,
    tables={"nvtx_ranges": COLUMNS, "nvtx_by_pid": BY_PID_COLUMNS},
    description="NVTX push/pop and start/end ranges by name: count, total, average, p50, p90.",
    reads=("nvtx_normalized",),
)
