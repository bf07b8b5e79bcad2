"""Whole-capture totals from report.json, as measured: never divided by the captured window nor
by a step count (load.py says why); diff.md states each side's window beside them. Per-step
figures never come from here: they come from the work inside complete steps (in_step.py),
since whole-capture totals hold the partial steps at the capture edges and the work between
steps.

Per-category kernel time of each whole capture as measured, from report.json
`metrics.categories` (never divided by the captured window: load.py), with the kernel counts
where the report has them. Per-step category changes come from in_step.py.

The global breakdown is read from the first of TABLE_KEYS holding either a list of
{category, total_ns[, kernel_count]} rows or an object {category: ns | {total_ns: ...}}; a few
key spellings are accepted so reports from nearby versions still compare.

Critical-path composition compared, from report.json `metrics.critical_path`: per kind
(host work, launch overhead, kernels, copies, synchronization, communication, ...) the time
on the median step's path and its share, on both sides, with the change.

The median step is the one each report describes in full, so both sides compare one
typical step; shares are of that step's path. The kernel categories on the path (per step
over the followed steps) are compared the same way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, NotRequired, TypedDict

from nsys_llm_explainer.diff.load import (
    CriticalPathDoc,
    MedianStepDoc,
    MetricId,
    MetricsDoc,
    ReplayErrorDoc,
    Side,
    json_pct,
    rel_pct,
)
from nsys_llm_explainer.model import JsonValue

Getter = Callable[[MetricsDoc], object]  # reads the figure from report.json `metrics` (the metric ran)

# (id, label, metric, getter, unit); a "fraction" changes in percentage points.
HEADLINE: tuple[tuple[str, str, MetricId, Getter, str], ...] = (
    ("kernel_time", "Total kernel time", "top_kernels", lambda m: m["top_kernels"]["total_kernel_ns"], "ns"),
    ("launches", "Kernels launched", "top_kernels", lambda m: m["top_kernels"]["kernel_count"], "count"),
    # one CUDA-graph launch runs many kernels: this is the row that shows graph mode
    ("launch_calls", "Launch API calls", "launch_overhead", lambda m: m["launch_overhead"]["launch_calls"], "count"),
    (
        "gpu_busy",
        "GPU busy (all devices)",
        "gpu_idle",
        lambda m: sum(d["busy_ns"] for d in m["gpu_idle"]["devices"]),
        "ns",
    ),
    (
        "gpu_idle",
        "GPU idle (all devices)",
        "gpu_idle",
        lambda m: sum(d["idle_ns"] for d in m["gpu_idle"]["devices"]),
        "ns",
    ),
    ("sync_time", "Blocking sync time", "sync", lambda m: m["sync"]["blocking_ns"], "ns"),
    (
        "nvtx_coverage",
        "NVTX coverage of kernel time",
        "nvtx_attribution",
        lambda m: m["nvtx_attribution"]["coverage"],
        "fraction",
    ),
)


def _value(side: Side, metric_id: MetricId, getter: Getter) -> float | str:
    if side.metric(metric_id) is None:
        return side.why_missing(metric_id)
    try:
        v = getter(side.doc["metrics"])
    except (KeyError, TypeError):
        v = None
    if isinstance(v, bool) or not isinstance(v, int | float):
        return f"{side.role}: {metric_id} lacks the fields this figure needs"
    return v  # ints stay ints so raw totals in diff.json are exact


class TotalRow(TypedDict):
    """diff.json `totals`: a whole-capture figure on both sides, as measured."""

    id: str
    label: str
    unit: str
    status: Literal["ok", "not_compared"]
    reason: str | None
    base: float | None
    new: float | None
    delta: float | None
    delta_pct: float | None


def delta_row(key: str, label: str, unit: str, b: float, n: float) -> TotalRow:
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


def missing_row(key: str, label: str, unit: str, reason: str) -> TotalRow:
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


def totals(base: Side, new: Side) -> tuple[list[TotalRow], dict[str, float | str]]:
    """Rows for diff.json `totals`, and relative change (or the reason) by row id for gates."""
    rows: list[TotalRow] = []
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


class DeviceRow(TypedDict):
    """diff.json `devices.rows`: one GPU's busy and idle time on both sides."""

    device_id: int
    present: Literal["both", "base", "new"]
    base_busy_ns: int | None
    base_idle_ns: int | None
    base_idle_pct: float | None
    new_busy_ns: int | None
    new_idle_ns: int | None
    new_idle_pct: float | None
    busy_delta_pct: float | None
    idle_pct_delta_pp: float | None


class DevicesSection(TypedDict):
    status: Literal["ok", "not_compared"]
    reason: str | None
    rows: list[DeviceRow]


def devices_not_compared(reason: str) -> DevicesSection:
    return {"status": "not_compared", "reason": reason, "rows": []}


def devices(base: Side, new: Side) -> DevicesSection:
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
    rows: list[DeviceRow] = []
    for dev in sorted(set(db) | set(dn)):
        b, n = db.get(dev), dn.get(dev)
        rows.append({
            "device_id": dev,
            "present": "both" if b and n else ("base" if b else "new"),
            "base_busy_ns": b["busy_ns"] if b else None,
            "base_idle_ns": b["idle_ns"] if b else None,
            "base_idle_pct": b["idle_pct"] if b else None,
            "new_busy_ns": n["busy_ns"] if n else None,
            "new_idle_ns": n["idle_ns"] if n else None,
            "new_idle_pct": n["idle_pct"] if n else None,
            "busy_delta_pct": json_pct(rel_pct(b["busy_ns"], n["busy_ns"])) if b and n else None,
            "idle_pct_delta_pp": round(n["idle_pct"] - b["idle_pct"], 4) if b and n else None,
        })
    return {"status": "ok", "reason": None, "rows": rows}


TABLE_KEYS = ("global", "categories", "by_category", "totals")
NAME_KEYS = ("category", "name")
NS_KEYS = ("total_ns", "kernel_ns", "time_ns", "ns")
COUNT_KEYS = ("kernel_count", "calls", "count")


def _ns(value: JsonValue) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, dict):
        return next(
            (float(v) for k in NS_KEYS if isinstance(v := value.get(k), int | float)), None
        )
    return None


def _table(obj: JsonValue, depth: int = 0) -> dict[str, float] | None:
    if isinstance(obj, list):
        out: dict[str, float] = {}
        for row in obj:
            name = next(
                (
                    v
                    for k in NAME_KEYS
                    if isinstance(row, dict) and isinstance(v := row.get(k), str)
                ),
                None,
            )
            ns = _ns(row)
            if name is None or ns is None:
                return None
            out[name] = out.get(name, 0.0) + ns
        return out
    if isinstance(obj, dict) and depth == 0:
        for key in TABLE_KEYS:
            if key in obj and (found := _table(obj[key], 1)) is not None:
                return found
        values = {str(k): _ns(v) for k, v in obj.items()}
        if values and all(v is not None for v in values.values()):
            return {k: v for k, v in values.items() if v is not None}
    return None


def read(side: Side) -> dict[str, float] | str:
    m = side.metric("categories")
    if m is None:
        return side.why_missing("categories")
    for key in TABLE_KEYS:
        if key in m and (found := _table(m[key])) is not None:
            return found
    return f"{side.role}: metrics.categories has no global table of kernel time per category"


def counts(side: Side) -> dict[str, int]:
    """category -> kernel count, where the global table has them."""
    m = side.metric("categories") or {}
    rows: list[JsonValue] = next((v for k in TABLE_KEYS if isinstance(v := m.get(k), list)), [])
    out: dict[str, int] = {}
    for row in rows:
        if not isinstance(row, dict) or not isinstance(cat := row.get("category"), str):
            continue
        n = next((v for k in COUNT_KEYS if isinstance(v := row.get(k), int) and not isinstance(v, bool)), None)
        if n is not None:
            out[cat] = out.get(cat, 0) + n
    return out


class CategoryRow(TypedDict):
    """diff.json `categories.rows`: one kernel category's time on both sides, as measured."""

    category: str
    base_ns: float
    new_ns: float
    delta_ns: float
    delta_pct: float | None
    base_kernels: int | None
    new_kernels: int | None


class CategoriesSection(TypedDict):
    status: Literal["ok", "not_compared"]
    reason: str | None
    rows: list[CategoryRow]


def categories_not_compared(reason: str) -> CategoriesSection:
    return {"status": "not_compared", "reason": reason, "rows": []}


def compare(base: Side, new: Side) -> CategoriesSection:
    tb, tn = read(base), read(new)
    if isinstance(tb, str) or isinstance(tn, str):
        return {"status": "not_compared", "reason": tb if isinstance(tb, str) else str(tn), "rows": []}
    cb, cn = counts(base), counts(new)
    rows: list[CategoryRow] = []
    for cat in sorted(set(tb) | set(tn)):
        b, n = tb.get(cat, 0.0), tn.get(cat, 0.0)
        rows.append(
            {
                "category": cat,
                "base_ns": b,
                "new_ns": n,
                "delta_ns": round(n - b, 3),
                "delta_pct": json_pct(rel_pct(b, n)),
                "base_kernels": cb.get(cat, 0) if cb else None,
                "new_kernels": cn.get(cat, 0) if cn else None,
            }
        )
    rows.sort(key=lambda r: (-abs(r["delta_ns"]), r["category"]))
    return {"status": "ok", "reason": None, "rows": rows}


def _kinds(side: Side) -> tuple[dict[str, tuple[float, float, str]], CriticalPathDoc, MedianStepDoc] | str:
    m = side.metric("critical_path")
    if m is None:
        return side.why_missing("critical_path")
    step = m.get("median_step")
    if not isinstance(step, dict):
        return f"{side.role}: metrics.critical_path describes no median step"
    rows = {str(c["kind"]): (float(c["ns"]), float(c["pct"]), str(c.get("title", c["kind"])))
            for c in step.get("composition", []) if isinstance(c, dict)}
    return rows, m, step


def _categories(m: CriticalPathDoc) -> dict[str, float]:
    return {str(c["category"]): float(c["ns_per_step"]) for c in m.get("kernel_categories", []) or []
            if isinstance(c, dict)}


class PathRow(TypedDict):
    """diff.json `critical_path.rows`: one kind of work on the median step's critical path."""

    kind: str
    title: str
    base_ns: float
    new_ns: float
    delta_ns: float
    delta_pct: float | None
    base_share_pct: float
    new_share_pct: float
    share_delta_pp: float


class PathCategoryRow(TypedDict):
    """diff.json `critical_path.categories`: a kernel category's time on the path per step."""

    category: str
    base_ns_per_step: float
    new_ns_per_step: float
    delta_ns: float


class PathStep(TypedDict):
    """diff.json `critical_path.median_step.base` / `.new`: the step each side describes."""

    step: int | None
    measured_ns: int | None
    bound: str | None
    replay_error_pct: ReplayErrorDoc | None


class CriticalPathSection(TypedDict):
    status: Literal["ok", "not_compared"]
    reason: str | None
    median_step: NotRequired[dict[str, PathStep]]  # "base", "new"
    rows: list[PathRow]
    categories: list[PathCategoryRow]


def path_not_compared(reason: str) -> CriticalPathSection:
    return {"status": "not_compared", "reason": reason, "rows": [], "categories": []}


def compare_critical_path(base: Side, new: Side) -> CriticalPathSection:
    kb, kn = _kinds(base), _kinds(new)
    if isinstance(kb, str) or isinstance(kn, str):
        return {"status": "not_compared", "reason": kb if isinstance(kb, str) else str(kn), "rows": [],
                "categories": []}
    (rb, mb, sb), (rn, mn, sn) = kb, kn
    rows: list[PathRow] = []
    for kind in list(dict.fromkeys([*rb, *rn])):
        b_ns, b_pct, title = rb.get(kind, (0.0, 0.0, kind))
        n_ns, n_pct, title_n = rn.get(kind, (0.0, 0.0, title))
        rows.append({
            "kind": kind, "title": title if kind in rb else title_n,
            "base_ns": b_ns, "new_ns": n_ns, "delta_ns": n_ns - b_ns, "delta_pct": json_pct(rel_pct(b_ns, n_ns)),
            "base_share_pct": b_pct, "new_share_pct": n_pct, "share_delta_pp": round(n_pct - b_pct, 2),
        })
    rows.sort(key=lambda r: (-abs(r["delta_ns"]), r["kind"]))
    cb, cn = _categories(mb), _categories(mn)
    cats: list[PathCategoryRow] = [
        {"category": c, "base_ns_per_step": cb.get(c, 0.0), "new_ns_per_step": cn.get(c, 0.0),
         "delta_ns": cn.get(c, 0.0) - cb.get(c, 0.0)} for c in sorted(set(cb) | set(cn))]
    cats.sort(key=lambda r: (-abs(r["delta_ns"]), r["category"]))
    steps: dict[str, PathStep] = {side: {"step": st.get("step"), "measured_ns": st.get("measured_ns"),
                                         "bound": st.get("bound"), "replay_error_pct": m.get("replay_error_pct")}
                                  for side, m, st in (("base", mb, sb), ("new", mn, sn))}
    return {"status": "ok", "reason": None, "median_step": steps, "rows": rows, "categories": cats}
