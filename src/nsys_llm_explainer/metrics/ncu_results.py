"""ncu: Nsight Compute results (--ncu) joined to the trace's kernels.

Runs only when --ncu names results (Options.extra["ncu"]); absent from the report otherwise.
Reads them with ncu/ (each launch's figures, class and roofline point) and matches each
launch to a kernel of the trace: by name (kernels/demangled.py: mangled, demangled, short), then
by launch shape, the grid and block the trace ran that kernel with (TraceData.kernel_dims:
the export's Grid Size and Block Size, else its launch__grid_size and launch__block_size
against their products), then by duration: ncu's within DURATION_FACTOR either way of the
trace's median call of that name and shape. A launch that fails a test is listed as
unmatched with the reason, never attached: a name alone can land one program's results on
another's trace. Where the trace or the export does not record the grid and block, the
match says so (`match_detail`). Per matched kernel the trace's time is put beside ncu's
measurement:

- class, distance from the roof (`pct_of_roof`: the busier of SM and memory throughput,
  duration-weighted over the kernel's matched launches) and limiter (of its longest launch);
- `stake_ns` = the kernel's trace time x (1 - pct_of_roof / 100): what it would give back if
  it ran at its roof, an upper bound (no kernel reaches its roof);
- `duration_ratio` = ncu's median launch duration / the trace's median call: ncu replays a
  kernel alone, with caches flushed and clocks locked to base, so the ratio is rarely 1;
  `ratio_far` when it is outside [1/RATIO_FAR, RATIO_FAR].

Peaks for the roofline point: the export's roofline section, else the peak table (with
--gpu-peaks) for the GPU the export names, else for the trace's GPU when the trace has one
model and the export's compute capability agrees with its architecture.
"""

from __future__ import annotations

import math
import re
import statistics
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.errors import ExplainError
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.kernels.demangled import Matcher
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome, Table
from nsys_llm_explainer.ncu import LAUNCH_COLUMNS
from nsys_llm_explainer.results.efficiency import (
    NcuDevice,
    NcuKernel,
    NcuLaunch,
    NcuMatch,
    NcuResults,
    NcuUnmatched,
)
from nsys_llm_explainer.trace.columns import factorize
from nsys_llm_explainer.trace.data import Unavailable

if TYPE_CHECKING:
    from nsys_llm_explainer.compute.peaks import GpuSpec
    from nsys_llm_explainer.ncu.results import LaunchDoc

OPTION = "ncu"  # Options.extra key: the --ncu paths
RATIO_FAR = 2.0  # ncu / trace duration beyond 2x either way is far from 1
DURATION_FACTOR = 2.0  # a launch matches only calls whose median is within 2x of its duration
SHOWN_SHAPES = 3
KERNEL_COLUMNS = (
    "name", "calls", "total_ns", "p50_ns", "pct_of_kernel_time", "matched_by", "ncu_kernel", "ncu_launches",
    "class", "pct_of_roof", "stake_ns", "limiter", "ncu_p50_ns", "duration_ratio", "ratio_far",
)
def _trace_gpu(ctx: Context) -> tuple[str, str] | None:
    names = {g.name for g in ctx.data.gpus() if g.name}
    return (next(iter(names)), "the trace's GPU") if len(names) == 1 else None


def _table(ctx: Context) -> dict[str, GpuSpec] | None:
    if ctx.options.gpu_peaks is None:
        return None
    from nsys_llm_explainer.compute.peaks import load_gpu_peaks

    return load_gpu_peaks(ctx.options.gpu_peaks).by_name


def _weighted(values: list[tuple[float, float]]) -> float | None:
    total = sum(w for _, w in values)
    return sum(v * w for v, w in values) / total if total else None


def _kernel_row(
    name: str, stats: TraceStats, members: list[LaunchDoc], how: str, total_kernel_ns: int
) -> NcuKernel:
    durations = [float(m["duration_ns"]) for m in members if m["duration_ns"]]
    classified = [(c, m) for m in members if (c := m["class"])]
    # a classified launch has its pct_of_roof (ncu/classify.py)
    pct = _weighted([(float(m["pct_of_roof"] or 0.0), float(m["duration_ns"] or 1.0)) for _, m in classified])
    by_class: dict[str, float] = {}
    for c, m in classified:
        by_class[c] = by_class.get(c, 0.0) + float(m["duration_ns"] or 1.0)
    longest = max((m for _, m in classified), key=lambda m: m["duration_ns"] or 0.0) if classified else None
    ncu_p50 = statistics.median(durations) if durations else None
    ratio = ncu_p50 / stats.p50_ns if ncu_p50 and stats.p50_ns else None
    stake = {d: int(ns * (1.0 - pct / 100.0)) for d, ns in stats.by_device.items()} if pct is not None else {}
    return NcuKernel(
        name=name,
        devices=tuple(NcuDevice(d, ns, stake.get(d)) for d, ns in stats.by_device.items()),
        calls=stats.calls,
        total_ns=stats.total_ns,
        p50_ns=stats.p50_ns,
        pct_of_kernel_time=round(100.0 * stats.total_ns / total_kernel_ns, 4) if total_kernel_ns else 0.0,
        matched_by=how,
        ncu_kernel=members[0]["kernel"],
        ncu_launches=tuple(m["index"] for m in members),
        class_=max(by_class, key=lambda c: by_class[c]) if by_class else None,
        pct_of_roof=round(pct, 2) if pct is not None else None,
        stake_ns=sum(stake.values()) if pct is not None else None,
        limiter=longest["limiter"] if longest else None,
        causes=tuple(longest["causes"]) if longest else (),
        sm_pct=longest["sm_pct"] if longest else None,
        memory_pct=longest["memory_pct"] if longest else None,
        longest_launch=longest["index"] if longest else None,
        roofline_pct_of_roof=point["pct_of_roof"] if longest and (point := longest["roofline"]) else None,
        ncu_p50_ns=round(ncu_p50, 1) if ncu_p50 else None,
        duration_ratio=round(ratio, 3) if ratio else None,
        ratio_far=bool(ratio and not 1.0 / RATIO_FAR <= ratio <= RATIO_FAR),
    )


@frozen
class TraceStats:
    """A kernel name's calls in the trace."""

    calls: int
    total_ns: int
    p50_ns: float
    by_device: dict[int, int]  # kernel time per device


def _trace_kernels(ctx: Context) -> tuple[list[tuple[int, str, str | None]], dict[int, TraceStats], int]:
    """(key, name, mangled) per kernel name of the trace, its statistics, the kernel time."""
    try:
        k = ctx.data.kernels()
    except Unavailable:
        return [], {}, 0
    if len(k) == 0:
        return [], {}, 0
    codes, uniq = factorize(k.name_id)
    ids = np.asarray(uniq, dtype=np.int64)
    names = ctx.data.kernel_names(ids)
    mangled = ctx.data.kernel_mangled_names(ids)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(uniq) + 1))
    stats: dict[int, TraceStats] = {}
    for j, name_id in enumerate(ids.tolist()):
        rows = order[bounds[j]:bounds[j + 1]]
        dur, dev = k.dur[rows], k.device[rows]
        by_device = {int(d): int(dur[dev == d].sum()) for d in np.unique(dev).tolist()}
        stats[name_id] = TraceStats(int(len(rows)), int(dur.sum()), float(np.median(dur)), by_device)
    kernels = [(i, names.get(i, f"(unnamed kernel #{i})"), mangled.get(i)) for i in ids.tolist()]
    return kernels, stats, int(k.dur.sum())


Dims = tuple[int, int, int]


def _dims(text: Any) -> Dims | None:
    """`(256, 1, 1)` -> (256, 1, 1)."""
    nums = [int(x) for x in re.findall(r"\d+", str(text or ""))]
    return (nums[0], nums[1], nums[2]) if len(nums) == 3 else None


def _shape_text(grid: Dims, block: Dims) -> str:
    return f"grid ({grid[0]}, {grid[1]}, {grid[2]}) and block ({block[0]}, {block[1]}, {block[2]})"


class Shapes:
    """The grid and block each kernel of the trace ran with, and its durations per shape."""

    def __init__(self, ctx: Context) -> None:
        try:
            self.cols: Any = ctx.data.kernel_dims()
            self.reason: str | None = None
        except Unavailable as exc:
            self.cols, self.reason = None, exc.reason
        self._by: dict[int, dict[tuple[Dims, Dims], np.ndarray]] = {}

    def of(self, key: int) -> dict[tuple[Dims, Dims], np.ndarray]:
        if key not in self._by:
            c = self.cols
            rows = np.flatnonzero(c.name_id == key)
            g = np.stack([c.grid_x[rows], c.grid_y[rows], c.grid_z[rows]], axis=1)
            b = np.stack([c.block_x[rows], c.block_y[rows], c.block_z[rows]], axis=1)
            ok = (g >= 0).all(axis=1) & (b >= 0).all(axis=1)
            out: dict[tuple[Dims, Dims], list[int]] = {}
            for gi, bi, d in zip(g[ok].tolist(), b[ok].tolist(), c.dur[rows][ok].tolist(), strict=True):
                out.setdefault((tuple(gi), tuple(bi)), []).append(int(d))  # type: ignore[arg-type]
            self._by[key] = {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}
        return self._by[key]


def _check(d: LaunchDoc, key: int, stats: TraceStats, shapes: Shapes) -> tuple[str | None, str]:
    """(why the launch does not match the trace's kernel `key`, or None; what was compared)."""
    compared = ["name"]
    durations: np.ndarray | None = None
    grid, block = _dims(d.get("grid")), _dims(d.get("block"))
    if shapes.cols is None:
        compared.append(f"not grid and block ({shapes.reason})")
    elif grid is None and (d.get("grid_size") is None or d.get("block_size") is None):
        compared.append("not grid and block (the export records neither)")
    else:
        groups = shapes.of(key)
        if grid is not None and block is not None:
            hits = [v for (g, b), v in groups.items() if g == grid and b == block]
            want = _shape_text(grid, block)
        else:
            gs, bs = int(d["grid_size"] or 0), int(d["block_size"] or 0)
            hits = [v for (g, b), v in groups.items() if math.prod(g) == gs and math.prod(b) == bs]
            want = f"{gs:,} blocks of {bs:,} threads"
        if not hits:
            ran = "; ".join(_shape_text(g, b) for g, b in sorted(groups)[:SHOWN_SHAPES]) or "none recorded"
            more = f" and {len(groups) - SHOWN_SHAPES} more" if len(groups) > SHOWN_SHAPES else ""
            return f"the trace ran this kernel with other launch shapes, not {want} (it ran {ran}{more})", ""
        durations = np.concatenate(hits)
        compared.append("grid and block")
    ncu_ns = d.get("duration_ns")
    ref = float(np.median(durations)) if durations is not None else float(stats.p50_ns)
    if not ncu_ns or not ref:
        compared.append("not duration (not measured)")
        return None, ", ".join(compared)
    ratio = float(ncu_ns) / ref
    if not 1.0 / DURATION_FACTOR <= ratio <= DURATION_FACTOR:
        shape = " with this grid and block" if durations is not None else ""
        return (f"its duration, {float(ncu_ns) / 1000:,.1f} us, is {ratio:.2f}x the trace's median call{shape} "
                f"({ref / 1000:,.1f} us): not the same work"), ""
    compared.append(f"duration ({ratio:.2f}x the trace's median call)")
    return None, ", ".join(compared)


def run(ctx: Context) -> Outcome:
    from nsys_llm_explainer.about import TOOL_NAME, __version__
    from nsys_llm_explainer.ncu.results import assess, document, launch_rows, load  # only with --ncu

    paths = ctx.options.extra.get(OPTION)
    if not paths:
        return METRIC.skipped("no Nsight Compute results were given (--ncu)")
    try:
        results = assess(load(list(paths)), _trace_gpu(ctx), _table(ctx))
    except ExplainError as exc:
        return METRIC.skipped(exc.message)
    doc = document(results, {"name": TOOL_NAME, "version": __version__})
    launches = doc["launches"]
    kernels, stats, total_kernel_ns = _trace_kernels(ctx)
    matcher = Matcher(kernels)
    names: dict[Any, str] = {key: name for key, name, _ in kernels}
    groups: dict[int, list[LaunchDoc]] = {}
    how: dict[int, str] = {}
    unmatched: list[NcuUnmatched] = []
    by = {"mangled": 0, "demangled": 0, "short": 0}
    shapes = Shapes(ctx)
    for d in launches:
        m = matcher.match(d["kernel"])
        why, detail = (m.reason, "") if m.key is None else _check(d, int(m.key), stats[int(m.key)], shapes)  # type: ignore[call-overload]
        d["matched_kernel"], d["matched_by"] = (names[m.key], m.how) if why is None else (None, None)
        d["match_detail"] = detail or None
        if why is not None:
            unmatched.append(NcuUnmatched(d["index"], d["kernel"], why))
            continue
        by[str(m.how)] += 1
        groups.setdefault(int(m.key), []).append(d)  # type: ignore[call-overload]
        how.setdefault(int(m.key), str(m.how))  # type: ignore[call-overload]
    rows = [_kernel_row(names[key], stats[key], members, how[key], total_kernel_ns) for key, members in groups.items()]
    rows.sort(key=lambda r: (-(r.stake_ns or -1), -r.total_ns, r.name))
    result = NcuResults(
        launch_count=doc["launch_count"],
        kernel_count=doc["kernel_count"],
        classified=doc["classified"],
        classes=doc["classes"],
        thresholds=doc["thresholds"],
        files=tuple(doc["files"]),
        ratio_far=RATIO_FAR,
        match=NcuMatch(
            launches=len(launches), matched=len(launches) - len(unmatched), by=by, kernels=len(rows),
            unmatched=tuple(unmatched), duration_factor=DURATION_FACTOR,
            shapes="compared" if shapes.cols is not None else f"not compared: {shapes.reason}",
        ),
        total_kernel_ns=total_kernel_ns,
        kernels=tuple(rows),
        launches=tuple(NcuLaunch.of(d) for d in launches),
    )
    kernel_rows = [{**r.to_json(), "ncu_launches": " ".join(map(str, r.ncu_launches))} for r in rows]
    tables = (
        Table("ncu_kernels", KERNEL_COLUMNS, pd.DataFrame(kernel_rows, columns=list(KERNEL_COLUMNS))),
        Table("ncu_launches", LAUNCH_COLUMNS, pd.DataFrame(launch_rows(launches), columns=list(LAUNCH_COLUMNS))),
    )
    return MetricResult(METRIC.id, result.to_json(), tables, notes=tuple(results.notes), typed=result)


METRIC = Metric(
    id="ncu",
    # only with --ncu
    order=310,
    title="Nsight Compute results",
    run=run,
    tables={"ncu_kernels": KERNEL_COLUMNS, "ncu_launches": LAUNCH_COLUMNS},
    description=(
        "Nsight Compute launches (--ncu) matched to the trace's kernels: class, distance from the roof, "
        "limiter, time at stake (an upper bound), ncu/trace duration ratio."
    ),
    option=OPTION,
)
