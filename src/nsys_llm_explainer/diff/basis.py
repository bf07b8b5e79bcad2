"""How two captures are compared: per step, per call, and whole-capture totals as measured.

Nothing is divided by the captured window. A capture's window holds whatever ran around the
work (a one-shot test is mostly idle, a window cut from a loop starts and ends mid-step), so
"per second of captured window" moves with the window, not with the program: on a one-shot
capture whose GEMMs got faster, the window shrinks and every unchanged count reads as a rise.
The rule:

- `per_step`: both reports have the work inside complete steps (metrics.step_work): every
  per-step figure, kernel and category comes from it (in_step.py);
- `per_call`: otherwise each kernel is compared per call (its median duration), and counts as
  counts;
- whole-capture totals (totals.py) are always shown as measured, each side's window beside
  them, and are never divided by a step count either (a capture's totals hold the partial
  steps its edges cut and the work between steps).

diff.md says which basis was used.
"""

from __future__ import annotations

import math

from nsys_llm_explainer import fmt
from nsys_llm_explainer.diff.load import Side
from nsys_llm_explainer.frozen import frozen


@frozen
class Basis:
    kind: str  # "per_step" or "per_call"
    base_window_ns: int | None
    new_window_ns: int | None
    reason: str

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "base_window_ns": self.base_window_ns,
                "new_window_ns": self.new_window_ns, "reason": self.reason}


def window_ns(side: Side) -> int | None:
    t = side.doc.get("trace", {})
    start, end = t.get("window_start_ns"), t.get("window_end_ns")
    if isinstance(start, int) and isinstance(end, int) and end > start:
        return end - start
    return None


def choose(base: Side, new: Side, steps: bool) -> Basis:
    """`steps`: both reports have the work inside their complete steps."""
    wb, wn = window_ns(base), window_ns(new)
    windows = f"captured windows {fmt.dur(wb) if wb else 'unknown'} vs {fmt.dur(wn) if wn else 'unknown'}"
    if steps:
        return Basis("per_step", wb, wn, f"both captures have complete steps: kernels and categories are "
                     f"compared per step; whole-capture totals as measured ({windows})")
    return Basis("per_call", wb, wn, f"a capture has no complete steps: kernels are compared per call and "
                 f"counts as counts; whole-capture totals as measured ({windows})")


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
