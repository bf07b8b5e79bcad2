"""Horizontal bars with a label column and the value written after each bar."""

from __future__ import annotations

from dataclasses import dataclass

from nsys_llm_explainer.render.svg.axis import value_ticks
from nsys_llm_explainer.render.svg.base import fit, line, rect, text

ROW_H = 22
BAR_H = 14


@dataclass(frozen=True)
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
