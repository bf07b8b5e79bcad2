"""What every plot shares: the Plot record, escaping, number formatting, the stylesheet, and
the pieces plots are drawn with (shapes, ticks, a legend, the time axis, horizontal bars).

Plots are hand-written SVG strings: no plotting library (matplotlib and its dependencies are
tens of MB installed and write one element per data point); the output is small, stable
and readable in a diff. Every string from the trace goes through `esc`; coordinates go
through `n` so they are short and never NaN.
"""

from __future__ import annotations

import math
import re
from dataclasses import field
from html import escape as _html_escape
from typing import TYPE_CHECKING

import pandas as pd

from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.model import MetricResult, Report

if TYPE_CHECKING:
    from nsys_llm_explainer.kernels.labels import Labels
    from nsys_llm_explainer.render.report_types import MetricsDoc, ReportDoc

SVG_NS = "http://www.w3.org/2000/svg"
FONT_PX = 12
CHAR_PX = 7.0  # average glyph width of the 12 px sans-serif font, to fit labels
# Characters XML 1.0 forbids (a trace name holding one would make the file unparseable).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffe\uffff]")

# Light values first, then dark; categorical colours keep >= 3:1 contrast on each background.
PALETTE_LIGHT = (
    "#d97706",
    "#0891b2",
    "#059669",
    "#c026d3",
    "#dc2626",
    "#7c3aed",
    "#65a30d",
    "#6b7280",
)
PALETTE_DARK = (
    "#fbbf24",
    "#22d3ee",
    "#34d399",
    "#e879f9",
    "#f87171",
    "#a78bfa",
    "#a3e635",
    "#9ca3af",
)
COLOURS = len(PALETTE_LIGHT)


def _vars(
    fg: str,
    muted: str,
    grid: str,
    busy: str,
    idle: str,
    out: str,
    band: str,
    palette: tuple[str, ...],
) -> str:
    ks = "".join(f"--k{i}:{c};" for i, c in enumerate(palette))
    named = f"--fg:{fg};--muted:{muted};--grid:{grid};--busy:{busy};--idle:{idle};--out:{out};"
    return f"{named}--band:{band};{ks}"


STYLE = (
    "svg.nle{"
    + _vars(
        "#1f2328", "#57606a", "#d0d7de", "#2563eb", "#e5e7eb", "#f6f8fa", "#8c959f", PALETTE_LIGHT
    )
    + "}"
    "@media (prefers-color-scheme: dark){svg.nle{"
    + _vars(
        "#e6edf3", "#9da7b3", "#3d444d", "#60a5fa", "#3a4250", "#161b22", "#6e7681", PALETTE_DARK
    )
    + "}}"
    "svg.nle text{fill:var(--fg);font:12px system-ui,-apple-system,'Segoe UI',sans-serif}"
    "svg.nle .muted{fill:var(--muted)}svg.nle .grid{stroke:var(--grid);stroke-width:1}"
    "svg.nle .busy{fill:var(--busy)}svg.nle .idle{fill:var(--idle)}svg.nle .out{fill:var(--out)}"
    "svg.nle .band{fill:var(--band)}svg.nle .dot{fill:none;stroke-width:1.5}"
    "svg.nle .med{stroke:var(--fg);stroke-width:2}"
    "svg.nle .sw{stroke:var(--muted);stroke-width:.5}"
    + "".join(
        f"svg.nle .k{i}{{fill:var(--k{i})}}svg.nle .s{i}{{stroke:var(--k{i})}}"
        for i in range(COLOURS)
    )
)


def esc(text: object) -> str:
    """Text or attribute content: markup characters escaped, XML-illegal characters dropped."""
    return _html_escape(_NOT_XML.sub("", str(text)), quote=True)


def n(value: float) -> str:
    """A coordinate: one decimal, no trailing ".0", 0 for NaN or infinity."""
    if not math.isfinite(value):
        return "0"
    s = f"{value:.1f}"
    return s[:-2] if s.endswith(".0") else s


def fit_chars(width_px: float) -> int:
    """How many characters of the plot font fit `width_px` (at least 8)."""
    return max(8, int(width_px / CHAR_PX))


def fit(text: object, width_px: float) -> str:
    """Shorten (head … tail) so the label fits `width_px` at the plot font."""
    from nsys_llm_explainer.render.escape import shorten

    return shorten(text, fit_chars(width_px))


def nice_step(span: float, max_ticks: int) -> float:
    """A 1-2-5 step giving at most `max_ticks` intervals over `span`."""
    if span <= 0:
        return 1.0
    raw = span / max(1, max_ticks)
    mag: float = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)


def ticks(lo: float, hi: float, max_ticks: int = 8) -> list[float]:
    step = nice_step(hi - lo, max_ticks)
    first = math.ceil(lo / step) * step
    count = int(math.floor((hi - first) / step + 1e-9)) + 1
    return [first + i * step for i in range(max(0, count))]


def text(
    x: float, y: float, content: object, cls: str = "", anchor: str = "start", tip: str = ""
) -> str:
    """A <text> element; `tip` (plain text) becomes a native hover tooltip."""
    c = f' class="{cls}"' if cls else ""
    a = f' text-anchor="{anchor}"' if anchor != "start" else ""
    title = f"<title>{esc(tip)}</title>" if tip else ""
    return f'<text x="{n(x)}" y="{n(y)}"{c}{a}>{title}{esc(content)}</text>'


def rect(x: float, y: float, w: float, h: float, cls: str, tip: str = "") -> str:
    if tip:
        return (
            f'<rect x="{n(x)}" y="{n(y)}" width="{n(max(w, 0))}" height="{n(max(h, 0))}" '
            f'class="{cls}"><title>{esc(tip)}</title></rect>'
        )
    size = f'width="{n(max(w, 0))}" height="{n(max(h, 0))}"'
    return f'<rect x="{n(x)}" y="{n(y)}" {size} class="{cls}"/>'


def line(x1: float, y1: float, x2: float, y2: float, cls: str = "grid") -> str:
    return f'<line x1="{n(x1)}" y1="{n(y1)}" x2="{n(x2)}" y2="{n(y2)}" class="{cls}"/>'


def path(d: str, cls: str, tip: str = "") -> str:
    if not d:
        return ""
    title = f"<title>{esc(tip)}</title>" if tip else ""
    return f'<path d="{d}" class="{cls}">{title}</path>'


def legend(x: float, y: float, items: list[tuple[str, str]], width: float) -> tuple[str, float]:
    """Swatch + label pairs (class, label) flowing into rows; returns markup and its height."""
    out, cx, cy = [], x, y
    for cls, label in items:
        w = 18 + len(label) * CHAR_PX + 16
        if cx + w > x + width and cx > x:
            cx, cy = x, cy + 18
        out.append(rect(cx, cy, 12, 12, f"{cls} sw") + text(cx + 16, cy + 10, label))
        cx += w
    return "".join(out), cy - y + 18


# -- axes: tick positions and labels for time (ns) and plain numbers --------------------

UNITS = ((1e9, "s"), (1e6, "ms"), (1e3, "us"), (1.0, "ns"))


def time_label(value_ns: float, step_ns: float) -> str:
    """A tick label in the unit of the step, with just enough decimals to tell ticks apart."""
    scale, unit = next((s, u) for s, u in UNITS if step_ns >= s or s == 1.0)
    step = step_ns / scale
    decimals = 0 if step >= 1 else (1 if step >= 0.1 else 2)
    return f"{value_ns / scale:,.{decimals}f} {unit}"


def time_axis(
    left: float,
    width: float,
    y: float,
    span_ns: float,
    caption: str = "time since the first kernel",
) -> tuple[str, float]:
    """A horizontal axis from 0 to span_ns; returns markup and the height it uses."""
    out = [line(left, y, left + width, y)]
    marks = ticks(0.0, float(span_ns), 8) if span_ns > 0 else [0.0]
    step = marks[1] - marks[0] if len(marks) > 1 else max(float(span_ns), 1.0)
    for t in marks:
        x = left + (width * t / span_ns if span_ns > 0 else 0.0)
        out.append(line(x, y, x, y + 4))
        anchor = "start" if t == 0 else ("end" if x > left + width - 30 else "middle")
        out.append(text(x, y + 17, time_label(t, step), cls="muted", anchor=anchor))
    out.append(text(left + width / 2, y + 33, caption, cls="muted", anchor="middle"))
    return "".join(out), 40.0


def value_ticks(hi: float, max_ticks: int = 5) -> list[float]:
    return ticks(0.0, hi, max_ticks) if hi > 0 else [0.0]


# -- horizontal bars with a label column and the value written after each bar ----------

ROW_H = 22
BAR_H = 14


@frozen
class Bar:
    label: str  # plain text; shortened to fit, shown in full as a tooltip
    value: float
    value_text: str
    cls: str = "busy"
    tip: str = ""
    full: str = ""  # the label's tooltip when it names something longer (a kernel's full name)


def hbars(bars: list[Bar], top: float, label_w: float, bar_w: float) -> tuple[str, float]:
    """One row per bar, scaled to the largest value; returns markup and height used."""
    hi = max((b.value for b in bars), default=0.0)
    out = []
    for t in value_ticks(hi)[1:]:
        x = label_w + bar_w * t / hi
        out.append(line(x, top, x, top + ROW_H * len(bars)))
    for i, b in enumerate(bars):
        y = top + i * ROW_H
        w = bar_w * b.value / hi if hi > 0 else 0.0
        tip = b.tip or f"{b.label}: {b.value_text}"
        out.append(text(label_w - 8, y + 15, fit(b.label, label_w - 12), anchor="end", tip=b.full or b.label))
        out.append(rect(label_w, y + (ROW_H - BAR_H) / 2, max(w, 1.0), BAR_H, b.cls, tip=tip))
        out.append(text(label_w + w + 6, y + 15, b.value_text, cls="muted"))
    return "".join(out), ROW_H * len(bars)


@frozen
class Plot:
    """One figure: the SVG body plus its text alternatives (summary and a data table)."""

    id: str  # file stem under plots/ and the element id prefix in report.html
    title: str
    summary: str  # plain text: what the plot shows, with its key numbers
    width: int
    height: int
    body: str  # SVG markup, already escaped
    headers: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = field(default=())  # plain text cells
    row_titles: tuple[str, ...] = ()  # per row, a tooltip for its first cell (a kernel's full name)

    def svg(self, standalone: bool = True) -> str:
        """The full <svg>; standalone adds the namespace and stylesheet for plots/*.svg."""
        size = f' width="{self.width}" height="{self.height}"'
        ns = f' xmlns="{SVG_NS}"' if standalone else ""
        style = f"<style>{STYLE}</style>" if standalone else ""
        return (
            f'<svg{ns} class="nle" viewBox="0 0 {self.width} {self.height}"{size} role="img" '
            f'aria-labelledby="{self.id}-t {self.id}-d" data-plot="{esc(self.id)}">'
            f'<title id="{self.id}-t">{esc(self.title)}</title>'
            f'<desc id="{self.id}-d">{esc(self.summary)}</desc>'
            f"{style}{self.body}</svg>"
        )


@frozen
class PlotInput:
    """What builders read: report.json's dict, and the Report for metrics' CSV tables."""

    doc: ReportDoc
    report: Report
    labels: Labels

    @property
    def metrics(self) -> MetricsDoc:
        """report.json's metric sections (json_writer.ok(section): the section when it ran)."""
        return self.doc["metrics"]

    def frame(self, metric_id: str, table: str) -> pd.DataFrame | None:
        outcome = self.report.metrics.get(metric_id)
        if not isinstance(outcome, MetricResult):
            return None
        return next((t.rows() for t in outcome.tables if t.name == table), None)
