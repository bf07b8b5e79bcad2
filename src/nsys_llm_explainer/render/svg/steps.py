"""The step plots: step latency (build_steps) and the median step's critical path
(build_critical_path, below).

Step latency: over time (left, one mark column per pixel, not per step) and its
distribution per phase (right: p25-p75 box, median, p90 and min-max whiskers).

Reads metrics.steps: per-step rows (`steps` in report.json, else its `steps` CSV table)
with a phase, a start and a duration."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis.stats import rank_of
from nsys_llm_explainer.fmt import dur, num
from nsys_llm_explainer.render.json_writer import ok
from nsys_llm_explainer.render.svg.base import (
    COLOURS,
    Plot,
    PlotInput,
    fit,
    legend,
    line,
    n,
    path,
    rect,
    text,
    ticks,
    time_axis,
    time_label,
)

LEFT, SCATTER_W, GAP, DIST_W, RIGHT = 70, 560, 150, 300, 20
TOP, PLOT_H = 10, 200
MAX_PHASES = COLOURS
MAX_MARKS = 3000  # per phase
START_KEYS = ("start_ns", "start")
DURATION_KEYS = ("duration_ns", "dur_ns", "latency_ns")


def _col(frame: pd.DataFrame, keys: tuple[str, ...]) -> pd.Series | None:
    return next((frame[k] for k in keys if k in frame.columns), None)


def step_frame(inp: PlotInput) -> pd.DataFrame | None:
    """phase, start_ns, duration_ns per step, or None when the report has no per-step rows."""
    st = ok(inp.metrics.get("steps"))
    if st is None:
        return None
    rows = st.get("steps")
    frame = pd.DataFrame(rows) if isinstance(rows, list) and rows else inp.frame("steps", "steps")
    if frame is None or frame.empty:
        return None
    start, length = _col(frame, START_KEYS), _col(frame, DURATION_KEYS)
    if start is None or length is None:
        return None
    phase = (
        frame["phase"].fillna("step").astype(str)
        if "phase" in frame.columns
        else pd.Series("step", frame.index)
    )
    out = pd.DataFrame(
        {
            "phase": phase,
            "start_ns": pd.to_numeric(start, errors="coerce"),
            "duration_ns": pd.to_numeric(length, errors="coerce"),
        }
    ).dropna()
    return out if not out.empty else None


def marks(x: np.ndarray, y: np.ndarray) -> list[tuple[float, float]]:
    """Distinct grid cells hit by the points: a cell of `cell` px holds one mark, so the
    count is bounded by the plot area, not the steps; the grid coarsens past MAX_MARKS."""
    cell = 2.0
    while True:
        cells = np.unique(np.stack([np.floor(x / cell), np.floor(y / cell)], axis=1), axis=0)
        if len(cells) <= MAX_MARKS:
            return [((cx + 0.5) * cell, (cy + 0.5) * cell) for cx, cy in cells.tolist()]
        cell *= 2


def _scatter(frame: pd.DataFrame, phases: list[str], hi: float) -> str:
    t0, t1 = float(frame["start_ns"].min()), float(frame["start_ns"].max())
    span = max(t1 - t0, 1.0)
    out = []
    for i, ph in enumerate(phases):
        sub = frame[frame["phase"] == ph]
        x = LEFT + SCATTER_W * (sub["start_ns"].to_numpy(float) - t0) / span
        y = TOP + PLOT_H - PLOT_H * sub["duration_ns"].to_numpy(float) / hi
        d = "".join(f"M{n(cx - 1.5)},{n(cy - 1.5)}h3v3h-3z" for cx, cy in marks(x, y))
        out.append(path(d, f"k{i}", tip=f"{ph}: {num(len(sub))} steps"))
    axis, _ = time_axis(
        LEFT, SCATTER_W, TOP + PLOT_H, span, caption="step start, since the first step"
    )
    return "".join(out) + axis


class PhaseStats(TypedDict):
    """One phase's step latencies (ns, nearest rank): the distribution's box and bars."""

    phase: str
    count: int
    min: float
    p25: float
    p50: float
    p75: float
    p90: float
    max: float


def _distribution(stats: list[PhaseStats], hi: float) -> str:
    x0 = LEFT + SCATTER_W + GAP
    row = min(36.0, PLOT_H / max(len(stats), 1))
    out = [line(x0, TOP + PLOT_H, x0 + DIST_W, TOP + PLOT_H)]
    for i, s in enumerate(stats):
        y = TOP + i * row + row / 2

        def sx(v: float) -> float:
            return x0 + DIST_W * v / hi

        tip = (
            f"{s['phase']}: {num(s['count'])} steps, median {dur(s['p50'])}, p90 {dur(s['p90'])}, "
            f"min {dur(s['min'])}, max {dur(s['max'])}"
        )
        out.append(text(x0 - 8, y + 4, fit(s["phase"], GAP - 70), anchor="end", tip=tip))
        out.append(line(sx(s["min"]), y, sx(s["max"]), y, f"dot s{i}"))
        out.append(
            rect(sx(s["p25"]), y - 7, max(sx(s["p75"]) - sx(s["p25"]), 3), 14, f"k{i}", tip=tip)
        )
        out.append(line(sx(s["p50"]), y - 9, sx(s["p50"]), y + 9, "med"))
        out.append(line(sx(s["p90"]), y - 5, sx(s["p90"]), y + 5, f"dot s{i}"))
    for t in ticks(0.0, hi, 4):
        out.append(
            text(
                x0 + DIST_W * t / hi,
                TOP + PLOT_H + 17,
                time_label(t, hi / 4),
                cls="muted",
                anchor="middle",
            )
        )
    out.append(
        text(
            x0 + DIST_W / 2,
            TOP + PLOT_H + 33,
            "step latency (box: p25-p75, bar: median)",
            cls="muted",
            anchor="middle",
        )
    )
    return "".join(out)


def build_steps(inp: PlotInput) -> Plot | None:
    frame = step_frame(inp)
    if frame is None:
        return None
    totals = frame.groupby("phase")["duration_ns"].sum().sort_values(ascending=False, kind="stable")
    phases = [str(p) for p in totals.index[:MAX_PHASES]]
    frame = frame[frame["phase"].isin(phases)]
    hi = float(frame["duration_ns"].max()) * 1.05 or 1.0
    stats: list[PhaseStats] = []
    for ph in phases:
        d = np.sort(frame.loc[frame["phase"] == ph, "duration_ns"].to_numpy(float))
        # Nearest rank, as the steps metric's table: the box shows durations that occurred.
        q = [float(d[rank_of(p, np.array([len(d)]))[0] - 1]) for p in (0, 25, 50, 75, 90, 100)]
        stats.append(
            {"phase": ph, "count": len(d), "min": q[0], "p25": q[1], "p50": q[2], "p75": q[3], "p90": q[4], "max": q[5]}
        )
    body = [line(LEFT, TOP, LEFT, TOP + PLOT_H)]
    for t in ticks(0.0, hi, 4):
        y = TOP + PLOT_H - PLOT_H * t / hi
        body += [
            line(LEFT, y, LEFT + SCATTER_W, y),
            text(LEFT - 6, y + 4, time_label(t, hi / 4), cls="muted", anchor="end"),
        ]
    body += [_scatter(frame, phases, hi), _distribution(stats, hi)]
    width = LEFT + SCATTER_W + GAP + DIST_W + RIGHT
    leg, leg_h = legend(
        LEFT, TOP + PLOT_H + 44, [(f"k{i}", p) for i, p in enumerate(phases)], width - LEFT
    )
    body.append(leg)
    summary = (
        "Step latency over time and per phase: "
        + "; ".join(
            f"{s['phase']}: {num(s['count'])} steps, median {dur(s['p50'])}, "
            f"p90 {dur(s['p90'])}, max {dur(s['max'])}"
            for s in stats
        )
        + "."
    )
    table = tuple(
        (s["phase"], num(s["count"]), dur(s["min"]), dur(s["p50"]), dur(s["p90"]), dur(s["max"]))
        for s in stats
    )
    return Plot(
        "steps",
        "Step latency",
        summary,
        width,
        int(TOP + PLOT_H + 44 + leg_h + 6),
        "".join(body),
        ("Phase", "Steps", "Min", "Median", "p90", "Max"),
        table,
    )


# One step's timeline with its critical path: a lane per host thread and per stream, each
# call and task as a bar coloured by kind, and the critical path drawn over them as a line
# that follows the step from lane to lane.
#
# Reads metrics.critical_path (the median step) and its critical_path_timeline table (rows
# of calls and tasks, then the path's pieces).
CRITICAL_PATH_TITLE = "Critical path of the median step"  # as registered in render/svg/__init__.py PLOTS
PATH_LEFT, PATH_WIDTH, PATH_RIGHT, PATH_TOP = 190, 700, 20, 10
LANE_H, BAR_H = 28, 14
PATH_Y = 4  # the path runs along the top of each lane, above its bars
MAX_LANES = 12
KIND_CLASS = {"kernel": "k1", "communication": "k4", "copy": "k0", "memset": "k6", "CUDA graph": "k1",
              "launch": "k3", "sync": "k5", "runtime": "k7", "event": "k7", "memory": "k6"}
LEGEND = (("k1", "kernel"), ("k4", "communication"), ("k0", "copy"), ("k3", "launch call"),
          ("k5", "synchronize call"), ("k7", "other call"), ("med", "critical path"))


def build_critical_path(inp: PlotInput) -> Plot | None:
    cp = ok(inp.metrics.get("critical_path"))
    rows = inp.frame("critical_path", "critical_path_timeline")
    med = cp.get("median_step") if cp is not None else None
    if not med or rows is None or rows.empty:
        return None
    rows = rows.assign(start_ns=pd.to_numeric(rows["start_ns"]), end_ns=pd.to_numeric(rows["end_ns"]),
                       path=rows["path"].astype(str).str.lower().isin(("true", "1")))
    span = float(med["replayed_ns"]) or float(rows["end_ns"].max())
    if span <= 0:
        return None
    lanes = _lanes(rows)
    y_of = {lane: PATH_TOP + i * LANE_H for i, lane in enumerate(lanes)}
    scale = PATH_WIDTH / span
    body: list[str] = []
    for lane, y in y_of.items():
        body.append(text(PATH_LEFT - 8, y + LANE_H / 2 + 4, fit(lane, PATH_LEFT - 16), cls="muted", anchor="end",
                         tip=lane))
    nodes = rows[~rows["path"] & rows["lane"].isin(y_of)]
    for r in _culled(nodes, scale).itertuples(index=False):
        x0 = PATH_LEFT + max(float(r.start_ns), 0.0) * scale
        x1 = PATH_LEFT + min(float(r.end_ns), span) * scale
        cls = KIND_CLASS.get(str(r.kind), "k7")
        body.append(rect(x0, y_of[r.lane] + (LANE_H - BAR_H) / 2, max(x1 - x0, 0.6), BAR_H, cls,
                         tip=f"{r.item}: {dur(r.end_ns - r.start_ns)}"))
    pieces = rows[rows["path"] & rows["lane"].isin(y_of)].sort_values("start_ns", kind="stable")
    body.append(path(_path_d(pieces, y_of, scale, span), "dot med",
                     tip=f"critical path of step {med['step']}: {dur(med['replayed_ns'])}"))
    axis_y = PATH_TOP + len(lanes) * LANE_H + 6
    axis, axis_h = time_axis(PATH_LEFT, PATH_WIDTH, axis_y, span, caption=f"time since step {med['step']} began")
    body.append(axis)
    leg, leg_h = legend(PATH_LEFT, axis_y + axis_h + 6, list(LEGEND), PATH_WIDTH)
    body.append(leg)
    height = int(axis_y + axis_h + leg_h + 14)
    top = sorted(med.get("composition", []), key=lambda c: -c["ns"])[:3]
    summary = (f"Step {med['step']} (the median step, {dur(med['measured_ns'])} measured): "
               + ", ".join(f"{c['title']} {c['pct']:.1f}%" for c in top) + " of its critical path")
    table_rows = tuple((str(c["title"]), dur(c["ns"]), f"{c['pct']:.1f}%") for c in med.get("composition", []))
    return Plot("critical_path", CRITICAL_PATH_TITLE, summary, PATH_LEFT + PATH_WIDTH + PATH_RIGHT, height,
                "".join(body), ("kind", "time on the path", "share"), table_rows)


def _lanes(rows: pd.DataFrame) -> list[str]:
    """Lanes with path pieces first (in order of first appearance on the path), then the
    busiest others, host threads before streams; at most MAX_LANES."""
    on_path = list(dict.fromkeys(rows.loc[rows["path"], "lane"].tolist()))
    busy = (rows[~rows["path"]].assign(d=rows["end_ns"] - rows["start_ns"]).groupby("lane")["d"].sum()
            .sort_values(ascending=False, kind="stable"))
    others = [lane for lane in busy.index.tolist() if lane not in on_path]
    chosen = (on_path + others)[:MAX_LANES]
    return sorted(chosen, key=lambda lane: (not lane.startswith("thread"), chosen.index(lane)))


def _culled(nodes: pd.DataFrame, scale: float) -> pd.DataFrame:
    """At most one bar per lane and pixel column (the longest), so a step of 10,000 kernels
    draws at most a few thousand rectangles."""
    if nodes.empty:
        return nodes
    px = np.floor(nodes["start_ns"].to_numpy(float) * scale).astype(np.int64)
    d = (nodes["end_ns"] - nodes["start_ns"]).to_numpy()
    keyed = nodes.assign(_px=px, _d=d).sort_values("_d", ascending=False, kind="stable")
    return keyed.drop_duplicates(["lane", "_px"]).drop(columns=["_px", "_d"])


def _path_d(pieces: pd.DataFrame, y_of: Mapping[str, float], scale: float, span: float) -> str:
    """One polyline along the path's lanes, stepping between lanes where the path does."""
    d: list[str] = []
    last_y: float | None = None
    for lane, start, end in zip(pieces["lane"].tolist(), pieces["start_ns"].tolist(), pieces["end_ns"].tolist(),
                                strict=True):
        y = y_of[lane] + PATH_Y
        x0 = PATH_LEFT + max(float(start), 0.0) * scale
        x1 = PATH_LEFT + min(float(end), span) * scale
        if last_y is None:
            d.append(f"M{n(x0)} {n(y)}")
        elif y != last_y:
            d.append(f"L{n(x0)} {n(last_y)}L{n(x0)} {n(y)}")
        d.append(f"L{n(x1)} {n(y)}")
        last_y = y
    return "".join(d)
