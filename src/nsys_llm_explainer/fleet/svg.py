"""Fleet plots as hand-written SVG: the rank x time view and the sweep panels.

Rank x time: one row per rank on the run's common (aligned) clock; each bin's upper part is
shaded by the fraction of it the rank's compute kernels covered, the lower part by its
communication kernels; idle is the background. Consecutive bins of the same shade are one
rectangle, so the size grows with the changes, not with the bins. A straggler's row is
outlined and its label marked.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nsys_llm_explainer import fmt
from nsys_llm_explainer.render.svg.base import esc, n

LEVELS = 5  # shades per fraction: 0, 1/4 ... 1
ROW_H = 26  # tall enough to read both bands of a rank
LABEL_W = 230
PLOT_W = 720
COMPUTE = "#2563eb"
COMM = "#d97706"
IDLE = "#e5e7eb"
MARK = "#dc2626"
FONT = "font:12px system-ui,-apple-system,'Segoe UI',sans-serif"
COMPUTE_H = 12  # upper band; the lower band takes the rest of the row but 2 px


def _runs(frac: np.ndarray) -> list[tuple[int, int, int]]:
    """(first bin, bins, level) of each stretch of equal quantized level > 0."""
    q = np.rint(frac * (LEVELS - 1)).astype(int)
    out = []
    i = 0
    while i < len(q):
        j = i
        while j + 1 < len(q) and q[j + 1] == q[i]:
            j += 1
        if q[i] > 0:
            out.append((i, j - i + 1, int(q[i])))
        i = j + 1
    return out


def timeline(run: dict[str, Any], tl: dict[str, Any]) -> str:
    rows = run["ranks"]
    bins = len(tl["rows"][0]["compute"]) if tl["rows"] else 1
    bw = PLOT_W / bins
    height = 24 + ROW_H * len(rows) + 28
    width = LABEL_W + PLOT_W + 40  # room for the last tick label
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="fleet" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" aria-label="ranks over time">',
           f'<text x="{LABEL_W}" y="14" style="{FONT}">compute (upper, blue) and communication (lower, '
           f'orange) busy fraction per rank; idle is grey; aligned clock</text>']
    for i, (row, fr) in enumerate(zip(rows, tl["rows"], strict=True)):
        y = 22 + i * ROW_H
        strag = row["straggler"]
        label = f"{row['rank']} {row['name']}"
        label = label if len(label) <= 34 else label[:33] + "\u2026"
        style = f"{FONT};fill:{MARK};font-weight:bold" if strag else FONT
        out.append(f'<text x="2" y="{n(y + ROW_H / 2 + 3)}" style="{style}"><title>{esc(row["name"])}</title>'
                   f'{esc(label)}{" !" if strag else ""}</text>')
        out.append(f'<rect x="{LABEL_W}" y="{y}" width="{PLOT_W}" height="{ROW_H - 2}" fill="{IDLE}"/>')
        lanes = (("compute", COMPUTE, 0, COMPUTE_H), ("comm", COMM, COMPUTE_H, ROW_H - 2 - COMPUTE_H))
        for part, colour, dy, h in lanes:
            for start, count, level in _runs(fr[part]):
                out.append(f'<rect x="{n(LABEL_W + start * bw)}" y="{y + dy}" width="{n(count * bw)}" '
                           f'height="{h}" fill="{colour}" fill-opacity="{level / (LEVELS - 1):.2f}"/>')
        if strag:
            out.append(f'<rect x="{LABEL_W}" y="{y}" width="{PLOT_W}" height="{ROW_H - 2}" fill="none" '
                       f'stroke="{MARK}" stroke-width="2"><title>straggler</title></rect>')
    span = tl["end_ns"] - tl["start_ns"]
    ybase = 22 + ROW_H * len(rows) + 14
    for t in range(5):
        x = LABEL_W + PLOT_W * t / 4
        out.append(f'<text x="{n(x)}" y="{ybase}" text-anchor="middle" style="{FONT}">'
                   f'{esc(fmt.dur(span * t / 4))}</text>')
    out.append("</svg>")
    return "\n".join(out)


def sweep(rows: list[dict[str, Any]], numeric: bool) -> str:
    """Three small panels: step time p50, steps per second, GPU busy, against the run label."""
    panels = (("step_p50_ns", "step time p50", fmt.dur), ("steps_per_s", "steps per second", fmt.num),
              ("gpu_busy_pct", "GPU busy", fmt.pct))
    pw, ph, pad = 260, 170, 44
    width = pw * len(panels) + 20
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {ph + 40}" width="{width}" '
           f'height="{ph + 40}" role="img" aria-label="sweep">']
    labels = [r["label"] for r in rows]
    xs_raw = [float(x) for x in labels] if numeric else list(range(len(labels)))
    lo, hi = min(xs_raw), max(xs_raw)
    for p, (key, title, form) in enumerate(panels):
        ox = 10 + p * pw
        out.append(f'<text x="{ox + pad}" y="14" style="{FONT};font-weight:bold">{esc(title)}</text>')
        vals = [r[key] for r in rows]
        pts = [(x, v) for x, v in zip(xs_raw, vals, strict=True) if v is not None]
        x0, x1, y0, y1 = ox + pad, ox + pw - 12, 24, ph
        out.append(f'<line x1="{x0}" y1="{y1}" x2="{x1}" y2="{y1}" stroke="#8c959f"/>')
        out.append(f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="#8c959f"/>')
        if not pts:
            out.append(f'<text x="{x0 + 10}" y="{(y0 + y1) / 2}" style="{FONT}">not measured</text>')
            continue
        vmax = max(v for _, v in pts) or 1.0

        def px(x: float, x0: float = x0, x1: float = x1) -> float:
            return x0 + (x1 - x0) * ((x - lo) / (hi - lo) if hi > lo else 0.5)

        def py(v: float, y0: float = y0, y1: float = y1, vmax: float = vmax) -> float:
            return y1 - (y1 - y0) * (v / vmax)

        out.append(f'<text x="{x0 - 4}" y="{y0 + 4}" text-anchor="end" style="{FONT}">{esc(form(vmax))}</text>')
        out.append(f'<text x="{x0 - 4}" y="{y1}" text-anchor="end" style="{FONT}">0</text>')
        path = " ".join(f"{n(px(x))},{n(py(v))}" for x, v in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{COMPUTE}" stroke-width="2"/>')
        for x, v in pts:
            out.append(f'<circle cx="{n(px(x))}" cy="{n(py(v))}" r="3" fill="{COMPUTE}">'
                       f'<title>{esc(form(v))}</title></circle>')
        for x, label in zip(xs_raw, labels, strict=True):
            out.append(f'<text x="{n(px(x))}" y="{y1 + 14}" text-anchor="middle" style="{FONT}">'
                       f'{esc(label[:10])}</text>')
    out.append("</svg>")
    return "\n".join(out)
