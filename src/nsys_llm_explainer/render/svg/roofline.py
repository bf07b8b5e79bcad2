"""Roofline plots, of the compute_efficiency placements and of Nsight Compute's measured
launches (build_ncu_roofline, below).

Roofline: achieved FLOP/s against arithmetic intensity on log-log axes, one roof per dtype
present (its slope is the memory bandwidth, its flat part the dtype's dense peak) with the
ridge point marked, one point per operation or kernel group whose area is proportional to
its time (point_radius; a minimum radius keeps short ones visible).

Takes plain data (compute.peaks.Roof and RooflinePoint), not a metric, so that whichever
metric computes placements can draw them. Points without FLOPs (bytes-only work) have no
place on a FLOP/s axis; the summary counts them instead of drawing them at zero."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from nsys_llm_explainer.compute.peaks import Roof
from nsys_llm_explainer.fmt import dur, pct
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.render.json_writer import ok
from nsys_llm_explainer.render.svg.base import COLOURS, Plot, PlotInput, esc, fit, legend, line, n, path, text

if TYPE_CHECKING:
    from nsys_llm_explainer.ncu.results import LaunchDoc, PointDoc

LEFT, TOP, PLOT_W, PLOT_H, RIGHT, LABEL_W = 80, 12, 560, 320, 20, 200
R_MIN, R_MAX = 3.0, 11.0
MAX_POINTS = 40


@frozen
class RooflinePoint:
    label: str  # plain text from the trace; escaped here
    dtype: str  # the roof it belongs to
    flops: float
    bytes: float
    time_ns: float


def _decades(lo: float, hi: float) -> list[float]:
    return [10.0**e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]


def _si(value: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:g} {prefix}{unit}"
    return f"{value:g} {unit}"


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def point_radius(time_ns: float, t_max: float) -> float:
    """R_MAX x sqrt(time / longest time), at least R_MIN: a point's area is proportional to
    its time, except that points below the minimum stay visible at R_MIN."""
    return max(R_MIN, R_MAX * math.sqrt(time_ns / t_max))


def circle(x: float, y: float, r: float, cls: str, tip: str) -> str:
    return f'<circle cx="{n(x)}" cy="{n(y)}" r="{n(r)}" class="{cls}"><title>{esc(tip)}</title></circle>'


def build_roofline(
    roofs: Sequence[Roof],
    points: Sequence[RooflinePoint],
    device: str = "",
    *,
    plot_id: str = "roofline",
    title: str = "Roofline",
    noun: tuple[str, str] = ("operation", "operations"),
) -> Plot | None:
    """The plot, or None when there is no roof or no point with FLOPs to draw. `noun`: what a
    point is, singular and plural (the summary and the table's first column)."""
    roofs = [r for r in roofs if r.peak_flops > 0 and r.peak_bandwidth > 0]
    valid = [p for p in points if p.flops > 0 and p.bytes > 0 and p.time_ns > 0]
    drawable = sorted(valid, key=lambda p: -p.time_ns)[:MAX_POINTS]
    if not roofs or not drawable:
        return None
    order = {r.dtype: i % COLOURS for i, r in enumerate(roofs)}
    ai = [p.flops / p.bytes for p in drawable]
    perf = [p.flops / (p.time_ns * 1e-9) for p in drawable]
    x_lo = min(min(ai), *(r.ridge for r in roofs)) / 4
    x_hi = max(max(ai), *(r.ridge for r in roofs)) * 4
    y_hi = max(max(perf), *(r.peak_flops for r in roofs)) * 2
    y_lo = max(min(min(perf), min(r.attainable(x_lo) for r in roofs)) / 2, y_hi / 1e9)
    lx0, lx1, ly0, ly1 = (math.log10(v) for v in (x_lo, x_hi, y_lo, y_hi))

    def px(v: float) -> float:
        return LEFT + PLOT_W * (math.log10(v) - lx0) / (lx1 - lx0)

    def py(v: float) -> float:
        return TOP + PLOT_H * (1 - (math.log10(max(v, y_lo)) - ly0) / (ly1 - ly0))

    body: list[str] = []
    for t in _decades(x_lo, x_hi):
        if x_lo <= t <= x_hi:
            body.append(line(px(t), TOP, px(t), TOP + PLOT_H))
            body.append(text(px(t), TOP + PLOT_H + 16, f"{t:g}", cls="muted", anchor="middle"))
    for t in _decades(y_lo, y_hi):
        if y_lo <= t <= y_hi:
            body.append(line(LEFT, py(t), LEFT + PLOT_W, py(t)))
            body.append(text(LEFT - 6, py(t) + 4, _si(t, "FLOP/s"), cls="muted", anchor="end"))
    body.append(
        text(
            LEFT + PLOT_W / 2,
            TOP + PLOT_H + 34,
            "arithmetic intensity (FLOP/byte)",
            cls="muted",
            anchor="middle",
        )
    )
    placed: list[tuple[float, float, float, float]] = []  # label boxes, for collisions
    for r in roofs:
        i = order[r.dtype]
        placed.append((px(x_hi) - 130, py(r.peak_flops) - 16, px(x_hi), py(r.peak_flops)))
        x_start = max(x_lo, y_lo / r.peak_bandwidth)
        corners = (
            (px(x_start), py(r.attainable(x_start))),
            (px(r.ridge), py(r.peak_flops)),
            (px(x_hi), py(r.peak_flops)),
        )
        d = "M" + "L".join(f"{n(x)},{n(y)}" for x, y in corners)
        tip = (
            f"{r.dtype.upper()} roof: {r.peak_flops / 1e12:,.1f} TFLOP/s, "
            f"{r.peak_bandwidth / 1e9:,.0f} GB/s, ridge {r.ridge:,.1f} FLOP/byte"
        )
        body.append(path(d, f"dot s{i}", tip))
        body.append(circle(px(r.ridge), py(r.peak_flops), 3.5, f"k{i}", tip))
        body.append(
            text(
                px(x_hi) - 4,
                py(r.peak_flops) - 5,
                f"{r.dtype.upper()} {r.peak_flops / 1e12:,.0f} TFLOP/s",
                cls="muted",
                anchor="end",
            )
        )
    t_max = max(p.time_ns for p in drawable)
    rows = []
    for p, a, f in zip(drawable, ai, perf, strict=True):
        roof = next((r for r in roofs if r.dtype == p.dtype), None)
        cls = f"k{order[p.dtype]}" if roof else f"k{COLOURS - 1}"
        radius = point_radius(p.time_ns, t_max)
        eff = f / roof.attainable(a) * 100 if roof else None
        tip = f"{p.label}: {a:,.1f} FLOP/byte, {f / 1e12:,.2f} TFLOP/s in {dur(p.time_ns)}" + (
            f", {pct(eff)} of the {p.dtype.upper()} roof" if eff is not None else ""
        )
        x, y = px(a), py(f)
        body.append(circle(x, y, radius, cls, tip))
        anchor = "end" if x > LEFT + PLOT_W - LABEL_W / 2 else "start"
        lx = x - radius - 3 if anchor == "end" else x + radius + 3
        x0 = lx if anchor == "start" else lx - LABEL_W / 2
        box = (x0, y - 8, x0 + LABEL_W / 2, y + 8)
        if not any(_overlap(box, b) for b in placed):  # a crowded label stays in the tooltip and table
            placed.append(box)
            body.append(text(lx, y + 4, fit(p.label, LABEL_W / 2), anchor=anchor, tip=p.label))
        bound = "n/a" if roof is None else ("compute" if a >= roof.ridge else "memory")
        rows.append(
            (
                p.label,
                p.dtype,
                f"{a:,.1f}",
                f"{f / 1e12:,.2f}",
                f"{roof.attainable(a) / 1e12:,.2f}" if roof else "n/a",
                pct(eff),
                bound,
                dur(p.time_ns),
            )
        )
    leg, leg_h = legend(
        LEFT,
        TOP + PLOT_H + 44,
        [(f"k{order[r.dtype]}", f"{r.dtype.upper()} roof") for r in roofs],
        PLOT_W,
    )
    body.append(leg)
    no_flops, beyond = len(points) - len(valid), len(valid) - len(drawable)
    summary = (
        f"{title}{' of ' + device if device else ''}: {len(drawable)} {noun[1]} against "
        f"{len(roofs)} roof{'' if len(roofs) == 1 else 's'} ({', '.join(r.dtype.upper() for r in roofs)}); "
        "the longest, "
        f"{drawable[0].label}, reaches {perf[0] / 1e12:,.2f} TFLOP/s at {ai[0]:,.1f} FLOP/byte."
        + (f" {no_flops} {noun[1]} without FLOPs are not drawn." if no_flops else "")
        + (f" {beyond} shorter ones are left out." if beyond else "")
    )
    headers = (
        noun[0].capitalize(),
        "Dtype",
        "FLOP/byte",
        "Achieved TFLOP/s",
        "Roof TFLOP/s",
        "Of roof",
        "Bound",
        "Time",
    )
    return Plot(
        plot_id,
        title,
        summary,
        LEFT + PLOT_W + RIGHT,
        int(TOP + PLOT_H + 44 + leg_h + 6),
        "".join(body),
        headers,
        tuple(rows),
    )


def build_compute_roofline(inp: PlotInput) -> Plot | None:
    """The roofline of compute_efficiency: its roofs, and its operations with FLOPs that ran
    on the roofline's device, sized by their kernel time."""
    m = ok(inp.metrics.get("compute_efficiency"))
    rl = m.get("roofline") if m is not None else None
    if m is None or not rl:
        return None
    roofs = [
        Roof(r["dtype"], float(r["peak_tflops"]) * 1e12, float(r["bandwidth_gbps"]) * 1e9)
        for r in rl["roofs"]
    ]
    points = [
        RooflinePoint(o["label"], o["compute_dtype"], float(o["flops"]), float(o["bytes"]), float(o["kernel_ns"]))
        for o in m["operations"]
        if o["device_id"] == rl["device_id"] and o["flops"] and o["bytes"] and o["kernel_ns"]
    ]
    device = f"{rl['model']}{' (assumed)' if rl['peaks_basis'] == 'assumed' else ''}" if rl["model"] else ""
    return build_roofline(roofs, points, device)


# The roofline of Nsight Compute's measured launches (ncu.json's or metrics.ncu's launch
# objects): one point per launch with a roofline point (FLOPs of its dominant precision,
# DRAM bytes, duration), under the roofs those launches were placed against (the roofline
# section's peaks or the peak table's).
#
# Launches of different GPUs do not share a plot: the GPU (by name, else compute
# capability) with the most measured time is drawn, and the summary counts the others.
PLOT_ID = "ncu_roofline"
NCU_TITLE = "Nsight Compute roofline"


def _gpu(launch: LaunchDoc) -> str:
    if launch.get("device_name"):
        return str(launch["device_name"])
    return f"compute capability {launch['cc']}" if launch.get("cc") else "an unnamed GPU"


def _dtype(point: PointDoc) -> str:
    return point["precision"] if point["tensor"] or point["precision"] != "fp16" else "fp16 (CUDA cores)"


def build_ncu(launches: Sequence[LaunchDoc], label: Callable[[str], str]) -> Plot | None:
    # (launch, its roofline point, duration, DRAM bytes) of the launches with all three
    placed = [(x, p, ns, dram) for x in launches
              if (p := x.get("roofline")) and (ns := x.get("duration_ns")) and (dram := x.get("dram_bytes"))]
    if not placed:
        return None
    time_by_gpu: dict[str, float] = {}
    for launch, _, ns, _ in placed:
        time_by_gpu[_gpu(launch)] = time_by_gpu.get(_gpu(launch), 0.0) + float(ns)
    gpu = max(time_by_gpu, key=lambda g: time_by_gpu[g])
    mine = [entry for entry in placed if _gpu(entry[0]) == gpu]
    roofs: dict[str, Roof] = {}
    for launch, p, _, _ in mine:
        own = launch.get("section_peaks")
        if (peak_tflops := p.get("peak_tflops")) and (bandwidth := p.get("bandwidth_gbps")):
            peak, bw = float(peak_tflops) * 1e12, float(bandwidth) * 1e9
            roofs.setdefault(_dtype(p), Roof(_dtype(p), peak, bw))
        for prec, tflops in ((own["tflops"] if own else None) or {}).items():
            if tflops and own and (dram_gbps := own.get("dram_gbps")):
                roofs.setdefault(prec if prec != "fp16" else "fp16 (CUDA cores)",
                                 Roof(prec if prec != "fp16" else "fp16 (CUDA cores)", float(tflops) * 1e12,
                                      float(dram_gbps) * 1e9))
    points = [
        RooflinePoint(f"#{launch['index']} {label(launch['kernel'])}", _dtype(p), float(p["flops"]), float(dram),
                      float(ns))
        for launch, p, ns, dram in mine
    ]
    no_roof = sorted({p.dtype for p in points} - set(roofs))
    others = len(time_by_gpu) - 1
    plot = build_roofline(list(roofs.values()), points, gpu, plot_id=PLOT_ID, title=NCU_TITLE,
                          noun=("launch", "launches"))
    if plot is None:
        return None
    extra = ""
    if no_roof:
        extra += f" No {', '.join(d.upper() for d in no_roof)} peak is known: those points (grey) have no roof."
    if others:
        extra += f" Launches on {others} other GPU{'s' if others > 1 else ''} are not drawn."
    return replace(plot, summary=plot.summary + extra) if extra else plot


def build_ncu_roofline(inp: PlotInput) -> Plot | None:
    """The report's plot of the ncu metric (--ncu): the launches matched to the trace's
    kernels, else all of them."""
    m = ok(inp.metrics.get("ncu"))
    if m is None:
        return None
    matched = [x for x in m["launches"] if x.get("matched_kernel")]  # the trace's GPU, most likely
    return build_ncu(matched or m["launches"], inp.labels)
