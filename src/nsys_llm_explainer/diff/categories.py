"""Per-category kernel time deltas, from report.json `metrics.categories`.

The global breakdown is read from the first of TABLE_KEYS holding either a list of
{category, total_ns} rows or an object {category: ns | {total_ns: ...}}; a few key
spellings are accepted so reports from nearby versions still compare.
"""

from __future__ import annotations

from typing import Any

from nsys_llm_explainer.diff.basis import Basis, json_pct, rel_pct
from nsys_llm_explainer.diff.load import Side

TABLE_KEYS = ("global", "categories", "by_category", "totals")
NAME_KEYS = ("category", "name")
NS_KEYS = ("total_ns", "kernel_ns", "time_ns", "ns")


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


def compare(base: Side, new: Side, basis: Basis) -> dict[str, Any]:
    tb, tn = read(base), read(new)
    if isinstance(tb, str) or isinstance(tn, str):
        return {"status": "not_compared", "reason": tb if isinstance(tb, str) else tn, "rows": []}
    rows: list[dict[str, Any]] = []
    for cat in sorted(set(tb) | set(tn)):
        b, n = tb.get(cat, 0.0), tn.get(cat, 0.0)
        bc, nc = basis.base(b), basis.new(n)
        rows.append(
            {
                "category": cat,
                "base_ns": b,
                "new_ns": n,
                "base_compared_ns": round(bc, 3),
                "new_compared_ns": round(nc, 3),
                "delta_ns": round(nc - bc, 3),
                "delta_pct": json_pct(rel_pct(bc, nc)),
            }
        )
    rows.sort(key=lambda r: (-abs(r["delta_ns"]), r["category"]))
    return {"status": "ok", "reason": None, "rows": rows}
