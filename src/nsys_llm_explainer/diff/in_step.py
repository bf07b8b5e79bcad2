"""Per-step changes from the work inside complete steps (report.json `metrics.step_work`).

Both sides are read the same way: every figure is per complete step, from the steps the
steps metric found; kernels outside every step (capture edges, between steps) never enter.
Each change is a Hodges-Lehmann shift with its interval (shift.py) over the per-step series:

- step time, kernel time, GPU busy (union of the step's kernels), host time outside CUDA
  calls, kernels per step: one value per step;
- per kernel category: its time per step;
- per kernel name (matched as in kernels.py, a renamed group summed): its time per step and
  its time per call (the step's time of it / its calls in that step, over the steps where it
  ran).

`delta_ns` is the change per step in nanoseconds at the base median (what the change costs or
saves per step); the headline ranks changes by it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nsys_llm_explainer.diff.load import Side
from nsys_llm_explainer.diff.shift import LEVEL, Shift, shift

STEP_FIGURES = (
    ("step_time", "Step time", "latency_ns", "ns"),
    ("kernel_time", "Kernel time in steps", "kernel_ns", "ns"),
    ("gpu_busy", "GPU busy in steps", "busy_ns", "ns"),
    ("host_time", "Host time outside CUDA calls", "host_ns", "ns"),
    ("kernels", "Kernels per step", "kernels", "count"),
)


@dataclass(frozen=True)
class Work:
    """One side's step_work, as arrays."""

    steps: int
    series_steps: int
    phases: list[str]
    per_step: dict[str, np.ndarray | None]
    names: dict[str, dict[str, Any]]  # name -> row (with series as arrays when kept)
    categories: dict[str, np.ndarray]  # category -> time per step (series)
    kernel_ns: int
    outside_ns: int
    outside_kernels: int
    method: str | None


def read(side: Side) -> Work | str:
    m = side.metric("step_work")
    if m is None:
        return side.why_missing("step_work")
    per = m.get("per_step") or {}
    arrays: dict[str, np.ndarray | None] = {}
    for key in ("phase", "pid", "latency_ns", "kernel_ns", "kernels", "busy_ns", "host_ns"):
        v = per.get(key)
        arrays[key] = None if v is None else np.asarray(v, dtype=np.float64)
    if arrays["host_ns"] is not None:
        h = arrays["host_ns"]
        arrays["host_ns"] = np.where(h >= 0, h, np.nan)
    k = int(m.get("series_steps", 0))
    names: dict[str, dict[str, Any]] = {}
    for r in m.get("names", []):
        row = dict(r)
        if "series_ns" in r:
            row["series_ns"] = np.asarray(r["series_ns"], dtype=np.float64)
            calls = r.get("series_calls", 0)
            row["series_calls"] = (np.full(k, float(calls)) if isinstance(calls, int | float)
                                   else np.asarray(calls, dtype=np.float64))
        names[str(r["name"])] = row
    cats = {str(c["category"]): np.asarray(c["series_ns"], dtype=np.float64) for c in m.get("categories", [])}
    return Work(int(m["steps"]), k, list(m.get("phases", [])), arrays, names, cats, int(m["kernel_ns"]),
                int(m.get("outside_ns", 0)), int(m.get("outside_kernels", 0)), m.get("steps_method"))


def row(row_id: str, kind: str, label: str, unit: str, s: Shift | None, reason: str | None = None,
        **extra: Any) -> dict[str, Any]:
    """One change row of diff.json (status not_compared with the reason when s is None)."""
    if s is None:
        return {"id": row_id, "kind": kind, "label": label, "unit": unit, "status": "not_compared",
                "reason": reason or "fewer than 2 steps on a side", "n_base": None, "n_new": None,
                "base_median": None, "new_median": None, "scale": None, "change_pct": None,
                "low_pct": None, "high_pct": None, "beyond_noise": False, "delta_ns": None, **extra}
    return {
        "id": row_id, "kind": kind, "label": label, "unit": unit, "status": "ok", "reason": None,
        "n_base": s.n_base, "n_new": s.n_new,
        "base_median": round(s.base_median, 3), "new_median": round(s.new_median, 3),
        "scale": s.scale, "change_pct": _r(s.change_pct), "low_pct": _r(s.low_pct),
        "high_pct": _r(s.high_pct), "beyond_noise": s.beyond_noise,
        "delta_ns": round(s.delta, 1) if unit == "ns" else None, **extra,
    }


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 4)


def step_rows(wb: Work, wn: Work) -> list[dict[str, Any]]:
    out = []
    for rid, label, key, unit in STEP_FIGURES:
        b, n = wb.per_step.get(key), wn.per_step.get(key)
        if b is None or n is None:
            out.append(row(rid, "step", label, unit, None, "not measured on "
                           + ("BASE" if b is None else "NEW") + " (no CUDA API calls joined to the steps)"))
            continue
        out.append(row(rid, "step", label, unit, shift(b, n)))
    return out


def phase_latency(w: Work) -> dict[str, np.ndarray]:
    lat = w.per_step["latency_ns"]
    ph = w.per_step["phase"]
    if lat is None or ph is None:
        return {}
    return {name: lat[ph == i] for i, name in enumerate(w.phases)}


def category_rows(wb: Work, wn: Work) -> list[dict[str, Any]]:
    out = []
    for cat in sorted(set(wb.categories) | set(wn.categories)):
        b = wb.categories.get(cat, np.zeros(wb.series_steps))
        n = wn.categories.get(cat, np.zeros(wn.series_steps))
        out.append(row(f"category:{cat}", "category", cat, "ns", shift(b, n), category=cat,
                       base_per_step_ns=round(float(b.mean()), 1) if len(b) else None,
                       new_per_step_ns=round(float(n.mean()), 1) if len(n) else None))
    return out


def group_series(w: Work, names: str | None, sep: str) -> tuple[np.ndarray, np.ndarray] | None:
    """Summed per-step (time, calls) series of the names of one kernel row; None when a name
    of it has no series in report.json (not among the names with the most time)."""
    if not names:
        return np.zeros(w.series_steps), np.zeros(w.series_steps)
    ns = np.zeros(w.series_steps)
    calls = np.zeros(w.series_steps)
    for name in names.split(sep):
        r = w.names.get(name)
        if r is None or "series_ns" not in r:
            return None
        ns += r["series_ns"]
        calls += r["series_calls"]
    return ns, calls


def per_call(ns: np.ndarray, calls: np.ndarray) -> np.ndarray:
    ran = calls > 0
    return ns[ran] / calls[ran]


def kernel_changes(wb: Work, wn: Work, base_names: str | None, new_names: str | None,
                   sep: str) -> dict[str, Any]:
    """Per-step time and per-call time changes of one matched kernel row."""
    gb, gn = group_series(wb, base_names, sep), group_series(wn, new_names, sep)
    if gb is None or gn is None:
        why = "its per-step series is not in report.json (not among the kernels with the most time in steps)"
        return {"time": row("time", "kernel", "time per step", "ns", None, why),
                "per_call": row("per_call", "kernel", "time per call", "ns", None, why)}
    return {"time": row("time", "kernel", "time per step", "ns", shift(gb[0], gn[0])),
            "per_call": row("per_call", "kernel", "time per call", "ns",
                            shift(per_call(*gb), per_call(*gn)),
                            "it ran in fewer than 2 steps on a side")}


def summary(wb: Work, wn: Work) -> dict[str, Any]:
    return {
        "level": LEVEL,
        "method": "Hodges-Lehmann shift with its distribution-free interval (log scale: ratio new/base)",
        "base_steps": wb.steps, "new_steps": wn.steps,
        "base_series_steps": wb.series_steps, "new_series_steps": wn.series_steps,
        "base_outside_ns": wb.outside_ns, "new_outside_ns": wn.outside_ns,
        "base_outside_kernels": wb.outside_kernels, "new_outside_kernels": wn.outside_kernels,
    }
