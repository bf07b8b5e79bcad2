"""Whole-capture totals from report.json, as measured: never divided by the captured window nor
by a step count (basis.py says why); diff.md states each side's window beside them. Per-step
figures never come from here: they come from the work inside complete steps (in_step.py),
since whole-capture totals hold the partial steps at the capture edges and the work between
steps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nsys_llm_explainer.diff.basis import json_pct, rel_pct
from nsys_llm_explainer.diff.load import Side

Getter = Callable[[dict[str, Any]], float]

# (id, label, metric, getter, unit); a "fraction" changes in percentage points.
HEADLINE: tuple[tuple[str, str, str, Getter, str], ...] = (
    ("kernel_time", "Total kernel time", "top_kernels", lambda m: m["total_kernel_ns"], "ns"),
    ("launches", "Kernels launched", "top_kernels", lambda m: m["kernel_count"], "count"),
    # one CUDA-graph launch runs many kernels: this is the row that shows graph mode
    ("launch_calls", "Launch API calls", "launch_overhead", lambda m: m["launch_calls"], "count"),
    (
        "gpu_busy",
        "GPU busy (all devices)",
        "gpu_idle",
        lambda m: sum(d["busy_ns"] for d in m["devices"]),
        "ns",
    ),
    (
        "gpu_idle",
        "GPU idle (all devices)",
        "gpu_idle",
        lambda m: sum(d["idle_ns"] for d in m["devices"]),
        "ns",
    ),
    ("sync_time", "Blocking sync time", "sync", lambda m: m["blocking_ns"], "ns"),
    (
        "nvtx_coverage",
        "NVTX coverage of kernel time",
        "nvtx_attribution",
        lambda m: m["coverage"],
        "fraction",
    ),
)


def _value(side: Side, metric_id: str, getter: Getter) -> float | str:
    m = side.metric(metric_id)
    if m is None:
        return side.why_missing(metric_id)
    try:
        v = getter(m)
    except (KeyError, TypeError):
        v = None
    if isinstance(v, bool) or not isinstance(v, int | float):
        return f"{side.role}: {metric_id} lacks the fields this figure needs"
    return v  # ints stay ints so raw totals in diff.json are exact


def delta_row(key: str, label: str, unit: str, b: float, n: float) -> dict[str, Any]:
    """Both values as measured and their change."""
    return {
        "id": key,
        "label": label,
        "unit": unit,
        "status": "ok",
        "reason": None,
        "base": b,
        "new": n,
        "delta": round(n - b, 6),
        "delta_pct": json_pct(rel_pct(b, n)),
    }


def missing_row(key: str, label: str, unit: str, reason: str) -> dict[str, Any]:
    return {
        "id": key,
        "label": label,
        "unit": unit,
        "status": "not_compared",
        "reason": reason,
        "base": None,
        "new": None,
        "delta": None,
        "delta_pct": None,
    }


def totals(base: Side, new: Side) -> tuple[list[dict[str, Any]], dict[str, float | str]]:
    """Rows for diff.json `totals`, and relative change (or the reason) by row id for gates."""
    rows: list[dict[str, Any]] = []
    changes: dict[str, float | str] = {}
    for key, label, metric_id, getter, unit in HEADLINE:
        b, n = _value(base, metric_id, getter), _value(new, metric_id, getter)
        if isinstance(b, str) or isinstance(n, str):
            reason = b if isinstance(b, str) else str(n)
            rows.append(missing_row(key, label, unit, reason))
            changes[key] = reason
            continue
        rows.append(delta_row(key, label, unit, b, n))
        changes[key] = 100.0 * (n - b) if unit == "fraction" else rel_pct(b, n)
    return rows, changes


def devices(base: Side, new: Side) -> dict[str, Any]:
    """diff.json `devices`: busy and idle per GPU as measured; idle % changes in percentage points."""
    mb, mn = base.metric("gpu_idle"), new.metric("gpu_idle")
    if mb is None or mn is None:
        return {
            "status": "not_compared",
            "reason": base.why_missing("gpu_idle") if mb is None else new.why_missing("gpu_idle"),
            "rows": [],
        }
    db = {d["device_id"]: d for d in mb.get("devices", [])}
    dn = {d["device_id"]: d for d in mn.get("devices", [])}
    rows = []
    for dev in sorted(set(db) | set(dn)):
        b, n = db.get(dev), dn.get(dev)
        row: dict[str, Any] = {
            "device_id": dev,
            "present": "both" if b and n else ("base" if b else "new"),
        }
        for side, d in (("base", b), ("new", n)):
            row[f"{side}_busy_ns"] = d["busy_ns"] if d else None
            row[f"{side}_idle_ns"] = d["idle_ns"] if d else None
            row[f"{side}_idle_pct"] = d["idle_pct"] if d else None
        if b and n:
            row["busy_delta_pct"] = json_pct(rel_pct(b["busy_ns"], n["busy_ns"]))
            row["idle_pct_delta_pp"] = round(n["idle_pct"] - b["idle_pct"], 4)
        else:
            row["busy_delta_pct"] = row["idle_pct_delta_pp"] = None
        rows.append(row)
    return {"status": "ok", "reason": None, "rows": rows}
