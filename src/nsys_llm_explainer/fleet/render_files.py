"""All fleet outputs as files (relative path -> text), written atomically by render/output.py.

fleet.json, fleet.md, fleet.html, tables/*.csv and plots/sweep.svg depend only on the
inputs and options; fleet_timing.json holds what depends on the machine (seconds per
trace, workers, cache hits), so two runs can be compared by everything else.

Fleet plots as hand-written SVG: the rank x time view and the sweep panels.

Rank x time: one row per rank on the run's common (aligned) clock; each bin's upper part is
shaded by the fraction of it the rank's compute kernels covered, the lower part by its
communication kernels; idle is the background. Consecutive bins of the same shade are one
rectangle, so the size grows with the changes, not with the bins. A straggler's row is
outlined and its label marked."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from html import escape
from typing import Any, Literal

import numpy as np
import pandas as pd

from nsys_llm_explainer import fmt
from nsys_llm_explainer.about import TOOL_NAME
from nsys_llm_explainer.fleet import FleetResult
from nsys_llm_explainer.fleet.render_text import input_notes, markdown, overlap_text, verdict
from nsys_llm_explainer.fleet.runs import RankTimeline, RunDoc, SweepRow
from nsys_llm_explainer.fleet.same_run import utc
from nsys_llm_explainer.render.csv_writer import defuse
from nsys_llm_explainer.render.escape import shorten
from nsys_llm_explainer.render.html import CSP
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


def timeline(run: RunDoc, tl: RankTimeline) -> str:
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


def sweep(rows: list[SweepRow], numeric: bool) -> str:
    """Three small panels: step time p50, steps per second, GPU busy, against the run label."""
    panels: tuple[tuple[Literal["step_p50_ns", "steps_per_s", "gpu_busy_pct"], str, Callable[[float], str]], ...] = (
        ("step_p50_ns", "step time p50", fmt.dur), ("steps_per_s", "steps per second", fmt.num),
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


JSON_NAME = "fleet.json"
MD_NAME = "fleet.md"
HTML_NAME = "fleet.html"
TIMING_NAME = "fleet_timing.json"
SWEEP_SVG = "plots/sweep.svg"
CSS = (
    "body{font:14px system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;max-width:1100px;color:#1f2328}"
    "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:right}"
    ".scroll{overflow-x:auto}td{white-space:nowrap}td.l,th.l{text-align:left}tr.strag td{background:#fee2e2}"
    ".tablebox{max-height:70vh;overflow:auto;border:1px solid #d0d7de;margin:8px 0}.tablebox table{margin:0}"
    ".tablebox thead th{position:sticky;top:0;background:#f6f8fa}"
    ".plot{overflow-x:auto}.plot svg{display:block;max-width:none}"
    ".warn{padding:8px 10px;border-left:4px solid #d97706;background:#fffbeb}"
    ".verdict{font-size:15px;padding:10px;"
    "border-left:4px solid #dc2626;background:#f6f8fa}details{margin:8px 0}summary{cursor:pointer;font-weight:600}"
    "@media (prefers-color-scheme: dark){body{background:#0d1117;color:#e6edf3}.verdict{background:#161b22}"
    "td,th{border-color:#3d444d}tr.strag td{background:#4c1d1d}.tablebox thead th{background:#161b22}"
    ".warn{background:#2b2111}}"
)


def plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        f = float(value)
        return None if math.isnan(f) or math.isinf(f) else f
    return value


def dumps(doc: Any) -> str:
    return json.dumps(plain(doc), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def csv_text(frame: pd.DataFrame) -> str:
    out = frame.copy()
    for c in out.columns:
        if not pd.api.types.is_numeric_dtype(out[c]):
            out[c] = out[c].map(defuse)
    text: str = out.to_csv(index=False, lineterminator="\n")
    return text


def _cells(values: list[str], left: set[int]) -> str:
    return "".join(f'<td class="l">{v}</td>' if i in left else f"<td>{v}</td>" for i, v in enumerate(values))


def _html_run(run: RunDoc, tl: RankTimeline | None, multi: bool) -> list[str]:
    out = []
    if multi:
        out.append(f"<h2>Run {escape(run['label'])}</h2>")
    comp = run.get("comparability") or {}
    if comp.get("refused") or comp.get("forced"):
        what = "Not aligned, not compared" if comp.get("refused") else "Forced alignment (--force-align), low trust"
        out.append(f'<p class="warn"><b>{what}</b>: {escape("; ".join(comp["reasons"]))}.</p>')
    overlap = overlap_text(run)
    out.append("<div class=tablebox><table><thead><tr><th>rank</th><th class=l>name</th><th>step p50</th>"
               "<th>compute</th><th>compute/step</th><th>GPU busy</th>"
               "<th>exposed comm</th><th>arrived last</th><th>wait caused</th><th class=l>top kernel</th>"
               "<th class=l>verdict</th></tr></thead><tbody>")
    for r in run["ranks"]:
        vals = [str(r["rank"]), escape(r["name"]), fmt.dur(r["step_p50_ns"]), fmt.dur(r["compute_ns"]),
                fmt.dur(r["compute_per_step_ns"]), fmt.pct(r["gpu_busy_pct"]),
                fmt.dur(r["exposed_comm_ns"]), fmt.num(r["arrived_last"]), fmt.dur(r["wait_caused_ns"]),
                escape(shorten(r["top_kernel"] or "n/a", 48)), escape(r["verdict"])]
        cls = ' class="strag"' if r["straggler"] else ""
        out.append(f"<tr{cls}>{_cells(vals, {1, 9, 10})}</tr>")
    out.append("</tbody></table></div>")
    if tl is not None and tl["rows"]:
        out.append("<h3>Ranks over time</h3>")
        if overlap:
            out.append(f"<p>{escape(overlap)}</p>")
        out.append(f'<div class="plot">{timeline(run, tl)}</div>')
    elif comp.get("refused"):
        out.append("<p>No common time axis: the captures were not aligned.</p>")
    c = run["collectives"]
    out.append("<details open><summary>Collective alignment and wait</summary>")
    if c["status"] == "ok":
        out.append(f"<p>{c['matched']:,} matched collectives; total wait {escape(fmt.dur(c['total_wait_ns']))}.</p>")
        out.append("<table><tr><th class=l>kind</th><th>stream</th><th>matched</th><th>skew p50</th><th>skew p99</th>"
                   "<th>wait</th><th>slow</th></tr>")
        for k in c["kinds"]:
            vals = [escape(k["kind"]), str(k["stream_ordinal"]), f"{k['matched']:,}", fmt.dur(k["skew_p50_ns"]),
                    fmt.dur(k["skew_p99_ns"]), fmt.dur(k["wait_ns"]), str(k["slow"])]
            out.append(f"<tr>{_cells(vals, {0})}</tr>")
        out.append("</table>")
    elif c["status"] == "error":
        out.append(f"<p>Not a result: {escape(c['reason'])}.</p>")
    else:
        out.append(f"<p>Not measured, because {escape(c['reason'])}.</p>")
    out.append("</details>")
    s = run["stragglers"]
    out.append("<details><summary>Stragglers</summary>")
    if s["status"] == "ok":
        for st in s["stragglers"]:
            why = "; ".join(f"{w['title']} +{fmt.pct(w['excess_pct'])}" for w in st["why"])
            kern = ", ".join(f"{k['name'][:60]} (+{fmt.dur(k['extra_ns'])})" for k in st["kernels"])
            out.append(f"<p><b>rank {st['rank']}</b> {escape(st['name'])}: {escape(why)}. More time in: "
                       f"{escape(kern or 'no kernel')}.</p>")
        if not s["stragglers"]:
            out.append("<p>No rank lies beyond the robust band.</p>")
    else:
        out.append(f"<p>Not measured, because {escape(s['reason'])}.</p>")
    out.append("</details>")
    clock = run["clock"]
    out.append(f"<details><summary>Clock alignment and captures</summary><p>{escape(clock['method'])}: "
               f"{escape(clock['trust'])}.</p>")
    caps = comp.get("captures") or []
    if caps:
        out.append("<div class=scroll><table><tr><th class=l>trace</th><th>ranks</th>"
                   "<th class=l>starts (wall clock)</th><th class=l>ends</th><th class=l>rank in job</th>"
                   "<th class=l>GPUs</th></tr>")
        for cap in caps:
            job = ("not recorded" if cap["world_size"] is None else
                   f"{cap['rank']} of {cap['world_size']}" if cap["rank"] is not None else f"of {cap['world_size']}")
            vals = [escape(cap["path"]), str(cap["ranks"]),
                    utc(cap["wall_start_ns"]) if cap["wall_start_ns"] is not None else "unknown",
                    utc(cap["wall_end_ns"]) if cap["wall_end_ns"] is not None else "unknown",
                    escape(job), escape(", ".join(cap["gpus"]) or "unknown")]
            out.append(f"<tr>{_cells(vals, {0, 2, 3, 4, 5})}</tr>")
        out.append("</table></div>")
    for line in comp.get("cautions") or []:
        out.append(f"<p>Caution: {escape(line)}.</p>")
    out.append("</details>")
    return out


def html_page(result: FleetResult) -> str:
    doc = result.doc
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           '<meta name="color-scheme" content="light dark">',
           f"<title>{escape(TOOL_NAME)} fleet</title><style>{CSS}</style></head><body>",
           f"<h1>{escape(TOOL_NAME)} fleet</h1>",
           f'<p class="verdict">{escape(verdict(doc, plain=True))}</p>']
    out += [f"<p>{escape(line)}</p>" for line in input_notes(doc, plain=True)]
    if doc["sweep"] is not None:
        out.append("<h2>Sweep</h2>")
        out.append(sweep(doc["sweep"]["rows"], doc["sweep"]["numeric_labels"]))
    for run, built in zip(doc["runs"], result.runs, strict=True):
        out += _html_run(run, built.timeline, len(doc["runs"]) > 1)
    failed = [t for t in doc["traces"] if not t["ok"]]
    if failed:
        out.append("<h2>Traces that could not be analyzed</h2><ul>")
        out += [f"<li>{escape(t['path'])}: {escape(t['error'] or '')}</li>" for t in failed]
        out.append("</ul>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def files(result: FleetResult) -> dict[str, str]:
    doc = result.doc
    out: dict[str, str] = {}
    plots = []
    if doc["sweep"] is not None:
        out[SWEEP_SVG] = sweep(doc["sweep"]["rows"], doc["sweep"]["numeric_labels"]) + "\n"
        plots.append(("step time, steps/s and GPU busy per run", SWEEP_SVG))
    for name, frame in sorted(result.tables.items()):
        out[f"tables/{name}.csv"] = csv_text(frame)
    out[MD_NAME] = markdown(doc, plots)
    out[HTML_NAME] = html_page(result)
    out[TIMING_NAME] = dumps(result.timing)
    out[JSON_NAME] = dumps(doc)  # last: a directory with a new fleet.json holds the rest too
    return out
