"""top_kernels: time per (kernel name, device), with percentiles and duration modes (a
kernel whose calls take two or more clearly different times, analysis/stats.py) from one
sort."""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis.context import NO_KERNELS, Context
from nsys_llm_explainer.analysis.groups import distinct_few, group_codes, group_max, group_min, group_sum
from nsys_llm_explainer.analysis.stats import group_modes, modes_text, sort_within_groups
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome, Table

COLUMNS = (
    "name", "device_id", "calls", "total_ns", "avg_ns", "min_ns", "max_ns",
    "p50_ns", "p90_ns", "p99_ns", "pct_of_kernel_time", "multimodal", "modes",
)


def kernel_table(names: list[str], devices: np.ndarray, dur: np.ndarray, codes: np.ndarray) -> pd.DataFrame:
    """Per-group statistics for kernels grouped by `codes` (shared with per_process)."""
    g = len(names)
    calls = np.bincount(codes, minlength=g).astype(np.int64)
    total = group_sum(dur, codes, g)
    ordered = sort_within_groups(dur, codes, g)
    pct = ordered.percentiles((50, 90, 99))
    modes = group_modes(ordered)
    all_ns = int(total.sum())
    frame = pd.DataFrame(
        {
            "name": names,
            "device_id": devices.astype(np.int64),
            "calls": calls,
            "total_ns": total,
            "avg_ns": np.rint(total / np.maximum(calls, 1)).astype(np.int64),
            "min_ns": group_min(dur, codes, g),
            "max_ns": group_max(dur, codes, g),
            "p50_ns": pct[50],
            "p90_ns": pct[90],
            "p99_ns": pct[99],
            "pct_of_kernel_time": np.round(100.0 * total / all_ns, 4) if all_ns else 0.0,
            "multimodal": np.array([len(m) > 1 for m in modes], dtype=bool),
            "modes": modes,
        }
    )
    frame = frame.sort_values(["total_ns", "name", "device_id"], ascending=[False, True, True], kind="stable")
    return frame.reset_index(drop=True)


def run(ctx: Context) -> Outcome:
    k = ctx.data.kernels()
    if len(k) == 0:
        return METRIC.skipped(NO_KERNELS)
    codes, (name_ids, devices) = group_codes(k.name_id, k.device)
    lookup = ctx.data.kernel_names(name_ids)
    names = [lookup.get(int(i), f"(unnamed kernel #{int(i)})") for i in name_ids]
    frame = kernel_table(names, devices, k.dur, codes)
    total_ns = int(frame["total_ns"].sum())
    data = {
        "name_mode": ctx.data.kernel_name_mode,
        "total_kernel_ns": total_ns,
        "kernel_count": int(len(k)),
        "distinct_kernels": int(frame["name"].nunique()),
        "devices": sorted(int(d) for d in distinct_few(k.device)),
        "kernels": frame.to_dict("records"),
    }
    return MetricResult(METRIC.id, data, (Table("kernels", COLUMNS, csv_frame(frame)),))


def csv_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The kernel rows with `modes` as text (see modes_text) for the CSV."""
    return frame.assign(modes=frame["modes"].map(modes_text))


METRIC = Metric(
    id="top_kernels",
    title="Top kernels",
    run=run,
    tables={"kernels": COLUMNS},
    description="Kernel time per (kernel name, device): calls, total, average, min, max, percentiles.",
)
