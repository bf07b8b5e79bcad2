"""What whole-capture totals are compared on: per second of captured window, or as they are.

Totals of two captures only compare when both cover the same work. When the captured
windows differ by more than WINDOW_TOLERANCE, totals are divided by the window length in
seconds; otherwise they are compared as they are. They are never divided by a step count:
a capture's totals hold the partial steps its edges cut and the work between steps, so
totals per step differ between two captures of the same steps. Per-step figures come from
the work inside complete steps (in_step.py). diff.md says which basis was used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from nsys_llm_explainer import fmt
from nsys_llm_explainer.diff.load import Side

WINDOW_TOLERANCE = 0.05  # windows within 5% of each other count as the same length


@dataclass(frozen=True)
class Basis:
    kind: str  # "per_second" or "total"
    base_divisor: float
    new_divisor: float
    reason: str

    @property
    def suffix(self) -> str:
        return {"per_second": " per second", "total": ""}[self.kind]

    def base(self, value: float) -> float:
        return value / self.base_divisor

    def new(self, value: float) -> float:
        return value / self.new_divisor

    def to_json(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "base_divisor": self.base_divisor,
            "new_divisor": self.new_divisor,
            "reason": self.reason,
        }


def window_ns(side: Side) -> int | None:
    t = side.doc.get("trace", {})
    start, end = t.get("window_start_ns"), t.get("window_end_ns")
    if isinstance(start, int) and isinstance(end, int) and end > start:
        return end - start
    return None


def choose(base: Side, new: Side) -> Basis:
    wb, wn = window_ns(base), window_ns(new)
    if wb is None or wn is None:
        return Basis("total", 1.0, 1.0, "a captured window is unknown: totals compared as they are")
    spread = abs(wn - wb) / wb
    windows = f"captured windows {fmt.dur(wb)} vs {fmt.dur(wn)}"
    if spread <= WINDOW_TOLERANCE:
        return Basis(
            "total",
            1.0,
            1.0,
            f"{windows} (within {WINDOW_TOLERANCE:.0%}): totals compared as they are",
        )
    return Basis(
        "per_second",
        wb / 1e9,
        wn / 1e9,
        f"{windows} differ by {spread:.0%}: totals are per second of captured window",
    )


def rel_pct(base: float, new: float) -> float:
    """Relative change in percent; +inf when something appears from zero."""
    if base == new:
        return 0.0
    if base == 0:
        return math.inf if new > 0 else -math.inf
    return 100.0 * (new - base) / abs(base)


def json_pct(value: float | None) -> float | None:
    """diff.json stores an infinite change as null (the row's base value is 0)."""
    if value is None or math.isinf(value):
        return None
    return round(value, 4)
