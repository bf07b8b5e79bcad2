"""nvtx_attribution: NVTX -> runtime -> kernel.

Each kernel joins its launch call on (process, correlationId) and is credited to the
innermost NVTX range on the launching thread that encloses the launch call (latest start;
ties: earliest end). Inclusive time of a range name counts kernels in that range or any
range nested in it (lying within it on the same thread, also across crossing start/end
ranges), once per kernel even when the name nests in itself.

report.json lists range names normalized (analysis/nvtx: `aten::mm, op_id = 7` counts
as `aten::mm`, and a kernel counts once per normalized name); the CSV keeps one row per raw
name, with its normalized name beside it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis import nvtx
from nsys_llm_explainer.analysis.context import NO_KERNELS, Context
from nsys_llm_explainer.analysis.groups import distinct, group_sum
from nsys_llm_explainer.analysis.join import NO_PHASE, instance_phases, kernel_attribution
from nsys_llm_explainer.analysis.nvtx import group_phases, normalized_names
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome, Table
from nsys_llm_explainer.results.ranges import NvtxAttribution, PhaseShare, RangeRow, TopLevelRange

COLUMNS = ("name", "normalized_name", "phase", "kernel_count", "kernel_ns", "inclusive_kernel_ns",
           "pct_of_kernel_time")
JSON_COLUMNS = ("name", "phase", "kernel_count", "kernel_ns", "inclusive_kernel_ns", "pct_of_kernel_time")
TOP_LEVEL_MAX = 50


def inclusive_by_name(
    index: nvtx.RangeIndex, own_ns: np.ndarray, range_name: np.ndarray, n_names: int,
    among: np.ndarray | None = None,
) -> np.ndarray:
    """Per name: kernel time of the ranges lying within a range of that name (or `among`
    those), each range counted once per name even when the name nests in itself."""
    pairs = nvtx.containers(index, np.flatnonzero(own_ns > 0))
    return _inclusive(pairs, own_ns, range_name, n_names, among)


def _inclusive(
    pairs: tuple[np.ndarray, np.ndarray], own_ns: np.ndarray, range_name: np.ndarray, n_names: int,
    among: np.ndarray | None = None,
) -> np.ndarray:
    """inclusive_by_name from precomputed (range, container) pairs."""
    rr, cc = pairs
    if among is not None:
        rr, cc = rr[among[cc]], cc[among[cc]]
    width = max(n_names, 1)
    key = distinct(rr * width + range_name[cc])
    return group_sum(own_ns[key // width], key % width, n_names)


def _frame(
    names: list[str], own_ns: np.ndarray, own_count: np.ndarray, range_name: np.ndarray,
    pairs: tuple[np.ndarray, np.ndarray], total: int, phases: list[str | None],
) -> pd.DataFrame:
    """One row per name present in `range_name` (codes into `names`, kept in column
    `code`), sorted."""
    n = len(names)
    present = np.flatnonzero(np.bincount(range_name, minlength=n) > 0)
    incl = _inclusive(pairs, own_ns, range_name, n)[present]
    frame = pd.DataFrame({
        "code": present,
        "name": [names[i] for i in present],
        "phase": pd.Series([phases[i] for i in present], dtype=object),
        "kernel_count": group_sum(own_count, range_name, n)[present],
        "kernel_ns": group_sum(own_ns, range_name, n)[present],
        "inclusive_kernel_ns": incl,
        "pct_of_kernel_time": np.round(100.0 * incl / total, 2) if total else 0.0,
    }).sort_values(["inclusive_kernel_ns", "kernel_ns", "name"], ascending=[False, False, True], kind="stable")
    return frame.reset_index(drop=True)


def run(ctx: Context) -> Outcome:
    if not ctx.options.nvtx_kernel_map:
        return METRIC.skipped("disabled by --no-nvtx-kernel-map")
    k = ctx.data.kernels()
    if len(k) == 0:
        return METRIC.skipped(NO_KERNELS)
    nv = ctx.data.nvtx()
    if len(nv) == 0:
        return METRIC.skipped("the NVTX table has no ranges, so kernels cannot be attributed to ranges")
    ctx.data.runtime()
    att = kernel_attribution(ctx.data)
    names = ctx.data.nvtx_names()
    n_ranges = len(att.index.order)
    hit = att.range_pos >= 0
    own_ns = group_sum(k.dur[hit], att.range_pos[hit], n_ranges)
    own_count = np.bincount(att.range_pos[hit], minlength=n_ranges).astype(np.int64)
    range_name = nv.name[att.index.order]
    total = int(k.dur.sum())
    attributed = int(k.dur[hit].sum())
    pm = ctx.options.phase_map
    pairs = nvtx.containers(att.index, np.flatnonzero(own_ns > 0))
    raw_phases: list[str | None] = [pm.phase_of(n) for n in names] if pm else [None] * len(names)
    frame = _frame(names, own_ns, own_count, range_name, pairs, total, raw_phases)
    norm_names, norm_of = normalized_names(ctx.data)
    frame.insert(2, "normalized_name", [norm_names[c] for c in norm_of[frame["code"].to_numpy()]])
    norm_range = norm_of[range_name] if len(range_name) else range_name
    present = np.unique(range_name)
    norm_phases: list[str | None] = [None] * len(norm_names)
    if pm:
        norm_phases = group_phases([names[i] for i in present], norm_of[present], len(norm_names), pm.phase_of,
                                   pm.phases())
    ops = _frame(norm_names, own_ns, own_count, norm_range, pairs, total, norm_phases)
    phase_rows: list[PhaseShare] = []
    if pm:
        inst_phase, phase_list = instance_phases(ctx, att, names)
        kphase = np.where(hit, inst_phase[np.maximum(att.range_pos, 0)], NO_PHASE)
        for i, ph in enumerate(phase_list):
            sel = kphase == i
            phase_rows.append(PhaseShare(ph, int(sel.sum()), int(k.dur[sel].sum()),
                                         round(100.0 * int(k.dur[sel].sum()) / total, 2) if total else 0.0))
    top_level = _inclusive(pairs, own_ns, norm_range, len(norm_names), att.index.parent == -1)
    top_idx = np.flatnonzero(top_level > 0)
    top_idx = top_idx[np.argsort(-top_level[top_idx], kind="stable")]
    result = NvtxAttribution(
        total_kernel_ns=total,
        attributed_ns=attributed,
        coverage=round(attributed / total, 4) if total else 0.0,
        kernels_without_launch=int((att.launch < 0).sum()),
        kernels_without_launch_ns=int(k.dur[att.launch < 0].sum()),
        kernels_outside_ranges=int(((att.launch >= 0) & ~hit).sum()),
        coverage_warn_threshold=ctx.options.nvtx_coverage_warn_threshold,
        ranges=tuple(RangeRow(**r) for r in ops[list(JSON_COLUMNS)].to_dict("records")),
        phases=tuple(phase_rows),
        top_level=tuple(TopLevelRange(norm_names[i], int(top_level[i])) for i in top_idx[:TOP_LEVEL_MAX]),
    )
    return MetricResult(METRIC.id, result.to_json(), (Table("nvtx_attribution", COLUMNS, frame),), typed=result)


METRIC = Metric(
    id="nvtx_attribution",
    order=60,
    title="NVTX -> kernel attribution",
    run=run,
    tables={"nvtx_attribution": COLUMNS},
    description="Kernel time credited to the innermost NVTX range around each launch call.",
    reads=("runtime", "kernel_launch_index", "kernel_attribution", "nvtx_normalized"),
)
