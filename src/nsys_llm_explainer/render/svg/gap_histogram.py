"""Idle-gap sizes per device: for each log-spaced bucket of metrics.gpu_idle.histograms, the
share of gaps and the share of idle time. Shares keep tiny-but-many and few-but-long gaps
on one scale, which raw counts would not."""

from __future__ import annotations

from typing import Any

from nsys_llm_explainer.fmt import dur, num, pct
from nsys_llm_explainer.render.svg.base import Plot, PlotInput, legend, line, rect, text

PANEL_W, PANEL_H, PER_ROW = 380, 190, 3
PAD_L, PAD_T, PLOT_H = 40, 26, 120
BAR_W = 20


def _panel(h: dict[str, Any], x0: float, y0: float) -> str:
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


def build(inp: PlotInput) -> Plot | None:
    gi = inp.metric("gpu_idle")
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
