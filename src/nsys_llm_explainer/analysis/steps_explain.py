"""What made a slow step slow. Three candidates, the largest wins: the longest GPU idle gap
inside the step (with idle_causes' cause), the slowest kernel (largest excess over that kernel
name's median duration), and the longest CUDA API call the process made in the step (a
blocking sync, or a launch that blocked on a full launch queue)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.analysis.groups import group_codes
from nsys_llm_explainer.analysis.idle_sweep import CAUSES, gap_at, gap_causes
from nsys_llm_explainer.analysis.stats import group_percentiles


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


def explain_outliers(
    ctx: Context, top: pd.DataFrame, kernel_step: np.ndarray
) -> list[dict[str, Any]]:
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
        item: dict[str, Any] = {
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
        item.update(host_call=call_api, host_call_ns=call_ns)
        if len(mine):
            j = mine[np.argmax(excess[mine])]
            item.update(
                kernel_name=lookup[int(k.name_id[j])],
                kernel_ns=int(k.dur[j]),
                kernel_median_ns=int(median[codes[j]]),
            )
        kernel_excess = (item["kernel_ns"] or 0) - (item["kernel_median_ns"] or 0)
        candidates = {"idle_gap": gap_ns, "slow_kernel": kernel_excess, "host_call": call_ns}
        reason, value = max(candidates.items(), key=lambda kv: kv[1])
        item["reason"] = reason if value > 0 else None
        out.append(item)
    return out
