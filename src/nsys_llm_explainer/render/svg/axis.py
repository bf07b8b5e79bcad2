"""Axes: tick positions and labels for time (ns) and plain numbers."""

from __future__ import annotations

from nsys_llm_explainer.render.svg.base import line, text, ticks

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
