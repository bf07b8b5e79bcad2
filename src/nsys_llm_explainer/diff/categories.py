"""Per-category kernel time of each whole capture as measured, from report.json
`metrics.categories` (never divided by the captured window: basis.py), with the kernel counts
where the report has them. Per-step category changes come from in_step.py.

The global breakdown is read from the first of TABLE_KEYS holding either a list of
{category, total_ns[, kernel_count]} rows or an object {category: ns | {total_ns: ...}}; a few
key spellings are accepted so reports from nearby versions still compare.
"""

from __future__ import annotations

from typing import Any

from nsys_llm_explainer.diff.basis import json_pct, rel_pct
from nsys_llm_explainer.diff.load import Side

TABLE_KEYS = ("global", "categories", "by_category", "totals")
NAME_KEYS = ("category", "name")
NS_KEYS = ("total_ns", "kernel_ns", "time_ns", "ns")
COUNT_KEYS = ("kernel_count", "calls", "count")


def _ns(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, dict):
        return next(
            (float(value[k]) for k in NS_KEYS if isinstance(value.get(k), int | float)), None
        )
    return None


def _table(obj: Any, depth: int = 0) -> dict[str, float] | None:
    if isinstance(obj, list):
        out: dict[str, float] = {}
        for row in obj:
            name = next(
                (
                    row[k]
                    for k in NAME_KEYS
                    if isinstance(row, dict) and isinstance(row.get(k), str)
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
    rows: list[Any] = next((m[k] for k in TABLE_KEYS if isinstance(m.get(k), list)), [])
    out: dict[str, int] = {}
    for row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("category"), str):
            continue
        n = next((row[k] for k in COUNT_KEYS if isinstance(row.get(k), int) and not isinstance(row.get(k), bool)),
                 None)
        if n is not None:
            out[row["category"]] = out.get(row["category"], 0) + n
    return out


def compare(base: Side, new: Side) -> dict[str, Any]:
    tb, tn = read(base), read(new)
    if isinstance(tb, str) or isinstance(tn, str):
        return {"status": "not_compared", "reason": tb if isinstance(tb, str) else tn, "rows": []}
    cb, cn = counts(base), counts(new)
    rows: list[dict[str, Any]] = []
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
