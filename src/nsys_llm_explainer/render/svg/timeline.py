"""Where the GPUs sat idle: the GPU timeline (build_timeline) and the idle-gap sizes
(build_gap_histogram, below).

GPU timeline: per device a busy/idle strip over the binned kernel window, idle bins
coloured by cause when known, NVTX bands above. Drawn from metrics.timeline only, with a
constant number of elements per device (paths, not one shape per bin or kernel)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from nsys_llm_explainer.fmt import dur, num, pct
from nsys_llm_explainer.render.escape import shorten_all
from nsys_llm_explainer.render.json_writer import ok
from nsys_llm_explainer.render.svg.base import (
    COLOURS,
    Plot,
    PlotInput,
    fit_chars,
    legend,
    line,
    n,
    path,
    rect,
    text,
    time_axis,
)

if TYPE_CHECKING:
    from nsys_llm_explainer.render.report_types import HistogramDoc, TimelineDeviceDoc, TimelineSection

LEFT, PLOT_W, RIGHT = 130, 1000, 20
WIDTH = LEFT + PLOT_W + RIGHT
BAND_H, BAND_GAP = 12, 4
ROW_H, ROW_GAP = 40, 14
MIN_BUSY_PX = 2.0
SEGMENTS = 20  # rows of the data table that stands in for the picture
# Fixed colours for the idle causes of analysis/idle_sweep.py, so a cause keeps its colour.
CAUSE_CLASS = {
    "transfer": "k2",
    "communication": "k5",
    "sync_wait": "k4",
    "launch_bound": "k0",
    "host_other": "k3",
    "capture_edge": "k7",
    "device_wait": "k6",
}
CAUSE_LABEL = {
    "transfer": "copying",
    "communication": "in a communication call",
    "sync_wait": "host waiting on a sync",
    "launch_bound": "launch-bound",
    "host_other": "host in no launch, copy or sync call",
    "capture_edge": "capture edge",
    "device_wait": "next work queued",
}


def runs(mask: np.ndarray) -> list[tuple[int, int]]:
    d = np.diff(np.r_[0, mask.astype(np.int8), 0])
    return list(zip(np.flatnonzero(d == 1).tolist(), np.flatnonzero(d == -1).tolist(), strict=True))


def run_rects(spans: list[tuple[int, int]], scale: float, y: float, h: float) -> str:
    """Path data for one rectangle per run of bins."""
    return "".join(
        f"M{n(LEFT + a * scale)},{n(y)}h{n((b - a) * scale)}v{n(h)}h{n(-(b - a) * scale)}z"
        for a, b in spans
    )


def busy_outline(busy: np.ndarray, scale: float, top: float) -> str:
    """A step outline of busy share (0..100) rising from the strip's bottom edge."""
    bottom = top + ROW_H
    # A bin with any kernel keeps at least MIN_BUSY_PX, so short bursts stay visible.
    h = ROW_H * np.nan_to_num(busy) / 100.0
    ys = bottom - np.where(busy > 0, np.maximum(h, MIN_BUSY_PX), 0.0)
    change = np.flatnonzero(np.r_[True, np.abs(np.diff(ys)) >= 0.05])
    ends = np.r_[change[1:], len(ys)]
    parts = [f"M{n(LEFT)},{n(bottom)}"]
    parts += [
        f"V{n(ys[a])}H{n(LEFT + b * scale)}"
        for a, b in zip(change.tolist(), ends.tolist(), strict=True)
    ]
    return "".join(parts) + f"V{n(bottom)}Z"


def cause_classes(causes: list[str]) -> list[str]:
    return [CAUSE_CLASS.get(c, f"k{i % COLOURS}") for i, c in enumerate(causes)]


def _device_row(
    dev: TimelineDeviceDoc, causes: list[str], top: float, scale: float, busy_label: str
) -> str:
    raw = dev["busy_pct"]
    inside = np.array([v is not None for v in raw])
    busy = np.array([0.0 if v is None else v for v in raw])
    out = [rect(LEFT, top, PLOT_W, ROW_H, "out", tip="outside this GPU's kernel window")]
    out.append(
        path(run_rects(runs(inside), scale, top, ROW_H), "idle", tip="idle (no kernel running)")
    )
    if dev.get("idle_cause") is not None:
        codes = np.array(dev["idle_cause"])
        for i, cls in enumerate(cause_classes(causes)):
            spans = runs(inside & (codes == i))
            label = CAUSE_LABEL.get(causes[i], causes[i])
            out.append(path(run_rects(spans, scale, top, ROW_H), cls, tip=f"idle, mostly {label}"))
    out.append(path(busy_outline(busy, scale, top), "busy", tip="busy share of each bin"))
    out.append(text(8, top + 16, f"GPU {dev['device_id']}"))
    out.append(text(8, top + 32, busy_label, cls="muted"))
    return "".join(out)


def segment_rows(tl: TimelineSection) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """Busy share per 1/SEGMENTS of the window and device: the plot as a table."""
    bins = tl["bins"]
    edges = np.linspace(0, bins, min(SEGMENTS, bins) + 1).round().astype(int)
    span = tl["window_end_ns"] - tl["window_start_ns"]
    headers = ("Time since first kernel", *(f"GPU {d['device_id']} busy" for d in tl["devices"]))
    rows = []
    for a, b in zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True):
        cells = [f"{dur(span * a / bins)} to {dur(span * b / bins)}"]
        for d in tl["devices"]:
            seg = [v or 0.0 for v in d["busy_pct"][a:b]]
            cells.append(pct(sum(seg) / len(seg)) if seg else "n/a")
        rows.append(tuple(cells))
    return headers, tuple(rows)


def build_timeline(inp: PlotInput) -> Plot | None:
    tl = ok(inp.metrics.get("timeline"))
    if tl is None or not tl["devices"]:
        return None
    gi = ok(inp.metrics.get("gpu_idle"))
    idle = {d["device_id"]: d for d in (gi.get("devices", []) if gi else [])}
    bins, span = tl["bins"], tl["window_end_ns"] - tl["window_start_ns"]
    scale = PLOT_W / bins
    body: list[str] = []
    y = 8.0
    names = shorten_all([b["name"] for b in tl["bands"]], fit_chars(LEFT - 14))
    for band in tl["bands"]:
        cls = "band"
        tip = f"NVTX {band['name']}: {dur(band['covered_ns'])}"
        body.append(
            path(run_rects([(a, b) for a, b in band["runs"]], scale, y, BAND_H), cls, tip=tip)
        )
        body.append(text(8, y + BAND_H - 2, names[band["name"]], tip=tip))
        y += BAND_H + BAND_GAP
    y += 6 if tl["bands"] else 0
    causes = tl["causes"]
    summary_parts = []
    for dev in tl["devices"]:
        info = idle.get(dev["device_id"])
        busy_pct = (
            (100.0 - info["idle_pct"])
            if info
            else float(np.mean([v or 0 for v in dev["busy_pct"]]))
        )
        body.append(_device_row(dev, causes, y, scale, f"busy {pct(busy_pct)}"))
        summary_parts.append(f"GPU {dev['device_id']} busy {pct(busy_pct)} of its kernel window")
        y += ROW_H + ROW_GAP
    axis, axis_h = time_axis(LEFT, PLOT_W, y - ROW_GAP + 4, span)
    body.append(axis)
    y += axis_h
    items = [
        ("busy", "kernel running"),
        ("idle", "idle"),
        ("out", "outside the GPU's kernel window"),
    ]
    seen = {c for d in tl["devices"] for c in (d.get("idle_cause") or [])}
    items += [
        (cls, f"idle: {CAUSE_LABEL.get(c, c)}")
        for i, (c, cls) in enumerate(zip(causes, cause_classes(causes), strict=True))
        if i in seen
    ]
    leg, leg_h = legend(LEFT, y, items, PLOT_W)
    body.append(leg)
    bands = ", ".join(b["name"] for b in tl["bands"])
    summary = (
        f"GPU activity over the {dur(span)} kernel window in {bins} bins of {dur(tl['bin_ns'])}: "
        + "; ".join(summary_parts)
        + "."
        + (f" NVTX bands above the strips: {bands}." if bands else "")
    )
    headers, rows = segment_rows(tl)
    return Plot(
        "timeline", "GPU timeline", summary, WIDTH, int(y + leg_h + 6), "".join(body), headers, rows
    )


# Idle-gap sizes per device: for each log-spaced bucket of metrics.gpu_idle.histograms, the
# share of gaps and the share of idle time. Shares keep tiny-but-many and few-but-long gaps
# on one scale, which raw counts would not.
PANEL_W, PANEL_H, PER_ROW = 380, 190, 3
PAD_L, PAD_T, PLOT_H = 40, 26, 120
BAR_W = 20


def _panel(h: HistogramDoc, x0: float, y0: float) -> str:
    buckets = h["buckets"]
    gaps = sum(b["count"] for b in buckets)
    idle = sum(b["total_ns"] for b in buckets)
    out = [text(x0 + PAD_L, y0 + 14, f"GPU {h['device_id']}: {num(gaps)} gaps, {dur(idle)} idle")]
    base = y0 + PAD_T + PLOT_H
    slot = (PANEL_W - PAD_L - 10) / len(buckets)
    for v in (0, 50, 100):
        y = base - PLOT_H * v / 100
        out.append(line(x0 + PAD_L, y, x0 + PANEL_W - 10, y))
        out.append(text(x0 + PAD_L - 4, y + 4, f"{v}%", cls="muted", anchor="end"))
    for i, b in enumerate(buckets):
        cx = x0 + PAD_L + slot * (i + 0.5)
        shares = (
            100.0 * b["count"] / gaps if gaps else 0.0,
            100.0 * b["total_ns"] / idle if idle else 0.0,
        )
        for j, (share, cls, what) in enumerate(
            zip(shares, ("busy", "k0"), ("of gaps", "of idle time"), strict=True)
        ):
            hgt = PLOT_H * share / 100
            tip = (
                f"GPU {h['device_id']}, gaps {b['label']}: {pct(share)} {what} "
                f"({num(b['count'])} gaps, {dur(b['total_ns'])})"
            )
            out.append(rect(cx - BAR_W + j * BAR_W, base - hgt, BAR_W - 2, hgt, cls, tip=tip))
        out.append(text(cx, base + 15, b["label"], cls="muted", anchor="middle"))
    return "".join(out)


def build_gap_histogram(inp: PlotInput) -> Plot | None:
    gi = ok(inp.metrics.get("gpu_idle"))
    if gi is None or not gi["histograms"]:
        return None
    hists = gi["histograms"]
    cols = min(PER_ROW, len(hists))
    rows = (len(hists) + PER_ROW - 1) // PER_ROW
    body = [
        _panel(h, (i % PER_ROW) * PANEL_W, (i // PER_ROW) * PANEL_H) for i, h in enumerate(hists)
    ]
    width = max(cols * PANEL_W, 420)
    leg, leg_h = legend(
        PAD_L, rows * PANEL_H, [("busy", "share of gaps"), ("k0", "share of idle time")], width
    )
    body.append(leg)
    parts = []
    table = []
    for h in hists:
        idle = sum(b["total_ns"] for b in h["buckets"])
        top = max(h["buckets"], key=lambda b: b["total_ns"])
        parts.append(
            f"GPU {h['device_id']}: most idle time is in gaps {top['label']} "
            f"({pct(100.0 * top['total_ns'] / idle if idle else 0.0)})"
        )
        table += [
            (f"GPU {h['device_id']}", b["label"], num(b["count"]), dur(b["total_ns"]))
            for b in h["buckets"]
        ]
    summary = "Idle gaps between kernels by size (log buckets). " + "; ".join(parts) + "."
    return Plot(
        "idle_gaps",
        "Idle-gap sizes",
        summary,
        width,
        int(rows * PANEL_H + leg_h + 6),
        "".join(body),
        ("Device", "Gap size", "Gaps", "Idle time"),
        tuple(table),
    )
