"""timeline: the captured window cut into at most BINS equal time bins, for plots.

Per device and bin: the share of the bin covered by the union of kernel intervals
(metrics/gpu_idle.py device_busy), and, when the idle_causes metric ran, the cause that
explains most of the bin's idle time. Above the devices: bands of bins touched by NVTX
ranges of each phase (--phase-map), or else of the most time-consuming outermost range
names (numbered repeats such as ProfilerStep#N counted as one name). Everything is a
fixed-size summary, so a 60 s capture costs what a 1 s one does.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypedDict

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis import intervals
from nsys_llm_explainer.analysis.busy import device_busy
from nsys_llm_explainer.analysis.context import NO_KERNELS, Context
from nsys_llm_explainer.analysis.nvtx import normalize
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome
from nsys_llm_explainer.results.devices import IdleCauses
from nsys_llm_explainer.trace.data import TraceData, Unavailable

BINS = 1000  # pixel columns of the plotted strip; the schema caps it at 1200
MAX_BANDS = 6
NO_CAUSE = -1


def bin_edges(start: int, end: int, bins: int = BINS) -> np.ndarray:
    """`n + 1` integer edges, n = min(bins, window length in ns), exact integer division."""
    n = max(1, min(bins, end - start))
    return start + (np.arange(n + 1, dtype=np.int64) * (end - start)) // n


class DeviceSeries(TypedDict):
    """One device's row of report.json `metrics.timeline.devices`: per bin, its busy share
    (None outside its window) and the idle cause that holds the most of its idle time."""

    device_id: int
    busy_pct: list[float | None]
    idle_cause: list[int] | None  # index into `causes`, NO_CAUSE where no idle time


class Band(TypedDict):
    """An NVTX band: the time its ranges cover, and the [first, end) bin runs they cover."""

    name: str
    covered_ns: int
    runs: list[list[int]]


def covered(edges: np.ndarray, us: np.ndarray, ue: np.ndarray) -> np.ndarray:
    """Per bin, ns covered by the disjoint sorted intervals us/ue."""
    return intervals.overlap_with_union(edges[:-1], edges[1:], us, ue)


def runs(mask: np.ndarray) -> list[list[int]]:
    """[first, end) bin runs where mask is true."""
    d = np.diff(np.r_[0, mask.astype(np.int8), 0])
    starts, ends = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
    return [[int(a), int(b)] for a, b in zip(starts, ends, strict=True)]


def cause_names(ctx: Context) -> list[str]:
    """The idle causes in idle_causes' order (gap cause codes index it); [] without it."""
    ic = ctx.typed(IdleCauses)
    return [str(c) for c in ic.causes] if ic is not None else []


def cause_ns(ctx: Context, dev: int, edges: np.ndarray, n_causes: int) -> np.ndarray:
    """(causes, bins) idle ns per cause, from the device's idle split (idle_sweep)."""
    from nsys_llm_explainer.analysis import idle_sweep

    gaps = idle_sweep.gap_causes(ctx.data).get(dev)
    out = np.zeros((n_causes, len(edges) - 1), dtype=np.int64)
    if gaps is not None:
        for c, (s, e) in enumerate(gaps.segments[:n_causes]):
            out[c] = covered(edges, s, e)
    return out


def _device_series(ctx: Context, edges: np.ndarray, causes: list[str]) -> list[DeviceSeries]:
    width = np.diff(edges)
    out = []
    for dev, busy in device_busy(ctx.data).items():
        w0, w1 = busy.window
        busy_ns = covered(edges, busy.busy_start, busy.busy_end)
        inside = covered(edges, np.array([w0]), np.array([w1]))
        with np.errstate(divide="ignore", invalid="ignore"):  # empty bins: no share, shown as None below
            pct = np.round(100.0 * busy_ns / width, 1).tolist()
        row: DeviceSeries = {
            "device_id": dev,
            "busy_pct": [None if i == 0 else p for p, i in zip(pct, inside.tolist(), strict=True)],
            "idle_cause": None,
        }
        if causes:
            idle = cause_ns(ctx, dev, edges, len(causes))
            best = np.argmax(idle, axis=0)
            row["idle_cause"] = np.where(idle.max(axis=0) > 0, best, NO_CAUSE).astype(int).tolist()
        out.append(row)
    return out


def top_level_rows(data: TraceData) -> np.ndarray:
    """Rows of nvtx() that no other ended range of the same thread encloses."""
    nv = data.nvtx()
    rows = np.flatnonzero((nv.end >= 0) & (nv.tkey >= 0))
    order = rows[np.lexsort((-nv.end[rows], nv.start[rows], nv.tkey[rows]))]
    frame = pd.DataFrame({"t": nv.tkey[order], "e": nv.end[order]})
    before = frame.groupby("t", sort=False)["e"].cummax().groupby(frame["t"], sort=False).shift(1)
    return order[~(before.to_numpy(dtype=float, na_value=-1.0) >= frame["e"].to_numpy())]


_COUNTER = re.compile(r"#\d+$")


def band_name(name: str) -> str:
    """A band is named like report.json's range lists: the normalized range name
    (PyTorch's ", op_id = 7" annotations and pyprof dict markers reduced to the operation),
    with a trailing `#N` counter written `#N`, so that numbered repeats (the PyTorch
    profiler's `ProfilerStep#551`, `ProfilerStep#552` ...) share one band in time order."""
    return _COUNTER.sub("#N", normalize(name))


def _labels(codes: np.ndarray, label: Callable[[int], str | None]) -> np.ndarray:
    """label(name code) per row, computed once per distinct code ("" = no band)."""
    uniq, inverse = np.unique(codes, return_inverse=True)
    return np.array([label(int(c)) or "" for c in uniq.tolist()], dtype=object)[inverse]


def _bands(ctx: Context, edges: np.ndarray) -> tuple[str | None, list[Band], str | None]:
    try:
        nv = ctx.data.nvtx()
    except Unavailable as exc:
        return None, [], exc.reason
    names = ctx.data.nvtx_names()
    pm = ctx.options.phase_map
    if pm:
        source = "phase_map"
        rows = np.flatnonzero(nv.end >= 0)
        keys = _labels(nv.name[rows], lambda c: pm.phase_of(names[c]))
        chosen = pm.phases()
    else:
        source = "top_level_nvtx"
        rows = top_level_rows(ctx.data)
        keys = _labels(nv.name[rows], lambda c: band_name(names[c]))
        # Rank names by summed duration; only the few shown need an exact union.
        sums = pd.Series(nv.end[rows] - nv.start[rows]).groupby(keys).sum()
        sums = sums[sums.index != ""].sort_values(ascending=False, kind="stable")
        chosen = [str(n) for n in sums.index[:MAX_BANDS]]
    bands: list[Band] = []
    for key in chosen:
        sel = rows[keys == key]
        per_bin = covered(edges, *intervals.merge(nv.start[sel], nv.end[sel]))
        if per_bin.any():
            bands.append({"name": key, "covered_ns": int(per_bin.sum()), "runs": runs(per_bin > 0)})
    reason = None if bands else "no ended NVTX range maps to a band (phase map or outermost ranges)"
    return source, bands[:MAX_BANDS], reason


def run(ctx: Context) -> Outcome:
    k = ctx.data.kernels()
    if len(k) == 0:
        return METRIC.skipped(NO_KERNELS)
    busy = device_busy(ctx.data)
    w0 = min(b.window[0] for b in busy.values())
    w1 = max(b.window[1] for b in busy.values())
    edges = bin_edges(w0, w1)
    causes = cause_names(ctx)
    source, bands, reason = _bands(ctx, edges)
    data = {
        "bins": int(len(edges) - 1),
        "window_start_ns": int(w0),
        "window_end_ns": int(w1),
        "bin_ns": round((w1 - w0) / (len(edges) - 1), 1),
        "causes": causes,
        "devices": _device_series(ctx, edges, causes),
        "bands_source": source,
        "bands": bands,
        "bands_reason": reason,
    }
    notes = ("NVTX bands are host-side ranges; their kernels may run later",) if bands else ()
    return MetricResult(METRIC.id, data, (), notes)


METRIC = Metric(
    id="timeline",
    # keep last: it summarizes the metrics above for plots
    order=320,
    run_after="idle_causes",  # with host_patterns, the last reader of the idle split besides it
    title="GPU timeline",
    run=run,
    after=("idle_causes",),
    description="The kernel window in at most 1,000 bins: busy share per device and bin, "
    "idle causes, NVTX bands.",
    reads=("gap_causes", "device_busy"),
)
