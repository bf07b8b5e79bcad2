"""launch_storm: how many kernels per second, and how many of them are tiny."""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis.context import NO_KERNELS, Context
from nsys_llm_explainer.analysis.groups import group_codes, group_sum, rows_by_value
from nsys_llm_explainer.analysis.stats import group_percentiles, percentiles
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome, Table
from nsys_llm_explainer.results.launches import LaunchRate, LaunchStorm, ProcessLaunchRate, StormThresholds, TinyKernel

# A launch storm: very many kernels per second, and most of them short.
STORM_RATE_PER_S = 50_000
STORM_P50_NS = 10_000
SEVERE_STORM_RATE_PER_S = 100_000
SEVERE_STORM_P50_NS = 20_000
TINY_THRESHOLDS_NS = (5_000, 10_000, 20_000)
TINY_KERNEL_NS = 10_000  # the tiny-kernel table lists kernels whose median is below this
TINY_TABLE_ROWS = 20

TINY_COLUMNS = ("name", "calls", "total_ns", "p50_ns", "pct_of_launches")
BY_PID_COLUMNS = ("pid", "kernels", "window_ns", "launches_per_s", "p50_ns", "p90_ns",
                  "pct_under_5us", "pct_under_10us", "pct_under_20us", "storm")


def is_storm(rate: float, p50: int) -> bool:
    return (rate >= STORM_RATE_PER_S and p50 <= STORM_P50_NS) or (
        rate >= SEVERE_STORM_RATE_PER_S and p50 <= SEVERE_STORM_P50_NS
    )


def _pct_under(dur: np.ndarray, t: int) -> float:
    return round(100.0 * float((dur < t).sum()) / len(dur), 2) if len(dur) else 0.0


def scope_stats(start: np.ndarray, end: np.ndarray, dur: np.ndarray) -> LaunchRate:
    """The launch rate of one scope: all kernels, or one process's."""
    window = int(end.max() - start.min()) if len(start) else 0
    rate = len(start) / (window / 1e9) if window > 0 else 0.0
    p = percentiles(dur, (50, 90, 99))
    u5, u10, u20 = (_pct_under(dur, t) for t in TINY_THRESHOLDS_NS)
    return LaunchRate(int(len(start)), window, round(rate, 1), p[50], p[90], p[99], u5, u10, u20, is_storm(rate, p[50]))


def run(ctx: Context) -> Outcome:
    k = ctx.data.kernels()
    if len(k) == 0:
        return METRIC.skipped(NO_KERNELS)
    glob = scope_stats(k.start, k.end, k.dur)
    per_pid: list[ProcessLaunchRate] = []
    for pid, idx in rows_by_value(k.pid):
        per_pid.append(ProcessLaunchRate(**asdict(scope_stats(k.start[idx], k.end[idx], k.dur[idx])), pid=pid))
    per_pid.sort(key=lambda r: -r.kernels)
    codes, (name_ids,) = group_codes(k.name_id)
    g = len(name_ids)
    calls = np.bincount(codes, minlength=g)
    p50 = group_percentiles(k.dur, codes, g, (50,))[50]
    total = group_sum(k.dur, codes, g)
    tiny = np.flatnonzero(p50 < TINY_KERNEL_NS)
    lookup = ctx.data.kernel_names(name_ids[tiny])
    # Ties broken by name, so the table does not depend on the row order of the export.
    tiny = np.array(sorted(tiny.tolist(), key=lambda i: (-calls[i], -total[i], lookup[int(name_ids[i])])),
                    dtype=np.int64)[:TINY_TABLE_ROWS]
    frame = pd.DataFrame(
        {
            "name": [lookup[int(name_ids[i])] for i in tiny],
            "calls": calls[tiny].astype(np.int64),
            "total_ns": total[tiny],
            "p50_ns": p50[tiny],
            "pct_of_launches": np.round(100.0 * calls[tiny] / len(k), 2),
        }
    )
    result = LaunchStorm(
        thresholds=StormThresholds(STORM_RATE_PER_S, STORM_P50_NS, SEVERE_STORM_RATE_PER_S, SEVERE_STORM_P50_NS),
        global_=glob,
        processes=tuple(per_pid),
        tiny_kernels=tuple(TinyKernel(**r) for r in frame.to_dict("records")),
    )
    tables = (
        Table("tiny_kernels", TINY_COLUMNS, frame),
        Table("launch_storm_by_pid", BY_PID_COLUMNS,
              pd.DataFrame([p.to_json() for p in per_pid], columns=list(BY_PID_COLUMNS))),
    )
    return MetricResult(METRIC.id, result.to_json(), tables, typed=result)


METRIC = Metric(
    id="launch_storm",
    order=20,
    title="Launch rate and tiny kernels",
    run=run,
    tables={"tiny_kernels": TINY_COLUMNS, "launch_storm_by_pid": BY_PID_COLUMNS},
    description="Kernels per second over the active kernel window, duration percentiles, tiny-kernel shares.",
)
