"""Findings that appeared, disappeared or persisted between the two reports, by rule id."""

from __future__ import annotations

from typing import Any

from nsys_llm_explainer.diff.load import Side

SEVERITY_RANK = {"high": 0, "medium": 1, "low": 2}


def by_rule(side: Side) -> dict[str, dict[str, Any]]:
    """rule id -> worst severity, finding count and titles."""
    out: dict[str, dict[str, Any]] = {}
    findings = side.doc.get("findings")
    for f in findings if isinstance(findings, list) else []:
        if not isinstance(f, dict) or not isinstance(f.get("rule_id"), str):
            continue
        sev = str(f.get("severity")) if f.get("severity") in SEVERITY_RANK else "low"
        entry = out.setdefault(
            f["rule_id"], {"rule_id": f["rule_id"], "severity": sev, "count": 0, "titles": []}
        )
        entry["count"] += 1
        entry["titles"].append(str(f.get("title", "")))
        if SEVERITY_RANK[sev] < SEVERITY_RANK[entry["severity"]]:
            entry["severity"] = sev
    return out


def compare(base: Side, new: Side) -> dict[str, Any]:
    fb, fn = by_rule(base), by_rule(new)
    persisting = [
        {
            "rule_id": r,
            "base_severity": fb[r]["severity"],
            "new_severity": fn[r]["severity"],
            "base_count": fb[r]["count"],
            "new_count": fn[r]["count"],
            "titles": fn[r]["titles"],
        }
        for r in sorted(set(fb) & set(fn))
    ]
    return {
        "appeared": [fn[r] for r in sorted(set(fn) - set(fb))],
        "disappeared": [fb[r] for r in sorted(set(fb) - set(fn))],
        "persisting": persisting,
        # a rule that reached high severity on NEW only, whether new or escalated
        "new_high": sorted(
            r
            for r in fn
            if fn[r]["severity"] == "high" and (r not in fb or fb[r]["severity"] != "high")
        ),
    }
