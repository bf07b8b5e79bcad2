"""Critical-path composition compared, from report.json `metrics.critical_path`: per kind
(host work, launch overhead, kernels, copies, synchronization, communication, ...) the time
on the median step's path and its share, on both sides, with the change.

The median step is the one each report describes in full, so both sides compare one
typical step; shares are of that step's path. The kernel categories on the path (per step
over the followed steps) are compared the same way.
"""

from __future__ import annotations

from typing import Any

from nsys_llm_explainer.diff.basis import json_pct, rel_pct
from nsys_llm_explainer.diff.load import Side


def _kinds(side: Side) -> tuple[dict[str, tuple[float, float, str]], dict[str, Any]] | str:
    m = side.metric("critical_path")
    if m is None:
        return side.why_missing("critical_path")
    step = m.get("median_step")
    if not isinstance(step, dict):
        return f"{side.role}: metrics.critical_path describes no median step"
    rows = {str(c["kind"]): (float(c["ns"]), float(c["pct"]), str(c.get("title", c["kind"])))
            for c in step.get("composition", []) if isinstance(c, dict)}
    return rows, m


def _categories(m: dict[str, Any]) -> dict[str, float]:
    return {str(c["category"]): float(c["ns_per_step"]) for c in m.get("kernel_categories", []) or []
            if isinstance(c, dict)}


def compare(base: Side, new: Side) -> dict[str, Any]:
    kb, kn = _kinds(base), _kinds(new)
    if isinstance(kb, str) or isinstance(kn, str):
        return {"status": "not_compared", "reason": kb if isinstance(kb, str) else kn, "rows": [],
                "categories": []}
    (rb, mb), (rn, mn) = kb, kn
    rows: list[dict[str, Any]] = []
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
    cats: list[dict[str, Any]] = [{"category": c, "base_ns_per_step": cb.get(c, 0.0), "new_ns_per_step": cn.get(c, 0.0),
             "delta_ns": cn.get(c, 0.0) - cb.get(c, 0.0)} for c in sorted(set(cb) | set(cn))]
    cats.sort(key=lambda r: (-abs(r["delta_ns"]), r["category"]))
    steps = {side: {"step": m["median_step"].get("step"), "measured_ns": m["median_step"].get("measured_ns"),
                    "bound": m["median_step"].get("bound"), "replay_error_pct": m.get("replay_error_pct")}
             for side, m in (("base", mb), ("new", mn))}
    return {"status": "ok", "reason": None, "median_step": steps, "rows": rows, "categories": cats}
