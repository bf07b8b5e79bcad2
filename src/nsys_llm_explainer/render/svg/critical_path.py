"""One step's timeline with its critical path: a lane per host thread and per stream, each
call and task as a bar coloured by kind, and the critical path drawn over them as a line
that follows the step from lane to lane.

Reads metrics.critical_path (the median step) and its critical_path_timeline table (rows
of calls and tasks, then the path's pieces)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from nsys_llm_explainer.fmt import dur
from nsys_llm_explainer.render.svg.base import Plot, PlotInput, fit, legend, n, path, rect, text, time_axis

TITLE = "Critical path of the median step"  # as registered in render/svg/__init__.py PLOTS
LEFT, WIDTH, RIGHT, TOP = 190, 700, 20, 10
LANE_H, BAR_H = 28, 14
PATH_Y = 4  # the path runs along the top of each lane, above its bars
MAX_LANES = 12
KIND_CLASS = {"kernel": "k1", "communication": "k4", "copy": "k0", "memset": "k6", "CUDA graph": "k1",
              "launch": "k3", "sync": "k5", "runtime": "k7", "event": "k7", "memory": "k6"}
LEGEND = (("k1", "kernel"), ("k4", "communication"), ("k0", "copy"), ("k3", "launch call"),
          ("k5", "synchronize call"), ("k7", "other call"), ("med", "critical path"))


def build(inp: PlotInput) -> Plot | None:
    cp = inp.metric("critical_path")
    rows = inp.frame("critical_path", "critical_path_timeline")
    if cp is None or rows is None or rows.empty or not cp.get("median_step"):
        return None
    med = cp["median_step"]
    rows = rows.assign(start_ns=pd.to_numeric(rows["start_ns"]), end_ns=pd.to_numeric(rows["end_ns"]),
                       path=rows["path"].astype(str).str.lower().isin(("true", "1")))
    span = float(med["replayed_ns"]) or float(rows["end_ns"].max())
    if span <= 0:
        return None
    lanes = _lanes(rows)
    y_of = {lane: TOP + i * LANE_H for i, lane in enumerate(lanes)}
    scale = WIDTH / span
    body: list[str] = []
    for lane, y in y_of.items():
        body.append(text(LEFT - 8, y + LANE_H / 2 + 4, fit(lane, LEFT - 16), cls="muted", anchor="end", tip=lane))
    nodes = rows[~rows["path"] & rows["lane"].isin(y_of)]
    for r in _culled(nodes, scale).itertuples(index=False):
        x0 = LEFT + max(float(r.start_ns), 0.0) * scale
        x1 = LEFT + min(float(r.end_ns), span) * scale
        cls = KIND_CLASS.get(str(r.kind), "k7")
        body.append(rect(x0, y_of[r.lane] + (LANE_H - BAR_H) / 2, max(x1 - x0, 0.6), BAR_H, cls,
                         tip=f"{r.item}: {dur(r.end_ns - r.start_ns)}"))
    pieces = rows[rows["path"] & rows["lane"].isin(y_of)].sort_values("start_ns", kind="stable")
    body.append(path(_path_d(pieces, y_of, scale, span), "dot med",
                     tip=f"critical path of step {med['step']}: {dur(med['replayed_ns'])}"))
    axis_y = TOP + len(lanes) * LANE_H + 6
    axis, axis_h = time_axis(LEFT, WIDTH, axis_y, span, caption=f"time since step {med['step']} began")
    body.append(axis)
    leg, leg_h = legend(LEFT, axis_y + axis_h + 6, list(LEGEND), WIDTH)
    body.append(leg)
    height = int(axis_y + axis_h + leg_h + 14)
    top = sorted(med.get("composition", []), key=lambda c: -c["ns"])[:3]
    summary = (f"Step {med['step']} (the median step, {dur(med['measured_ns'])} measured): "
               + ", ".join(f"{c['title']} {c['pct']:.1f}%" for c in top) + " of its critical path")
    table_rows = tuple((str(c["title"]), dur(c["ns"]), f"{c['pct']:.1f}%") for c in med.get("composition", []))
    return Plot("critical_path", TITLE, summary, LEFT + WIDTH + RIGHT, height,
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
        x0 = LEFT + max(float(start), 0.0) * scale
        x1 = LEFT + min(float(end), span) * scale
        if last_y is None:
            d.append(f"M{n(x0)} {n(y)}")
        elif y != last_y:
            d.append(f"L{n(x0)} {n(last_y)}L{n(x0)} {n(y)}")
        d.append(f"L{n(x1)} {n(y)}")
        last_y = y
    return "".join(d)
