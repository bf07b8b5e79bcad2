"""Findings that appeared, were resolved, or persisted between the two reports, by rule id,
judged by the GPU time at stake, not by severity bands.

A rule's impact on a side is the sum of its findings' impact_pct (GPU time at stake as a share
of the affected devices' windows: already normalized for captures of different length).
It counts as appeared when NEW's impact exceeds BASE's (0 when absent) by more than the noise
band, as resolved when BASE's exceeds NEW's by more than the band, else as persisting, even
when a severity band boundary was crossed. The band is the larger of NOISE_PP percentage
points and NOISE_REL of the larger impact. Notes without time at stake (severity info) appear
or disappear by presence.
"""

from __future__ import annotations

from typing import Any

from nsys_llm_explainer.diff.load import Side

SEVERITY_RANK = {"high": 0, "medium": 1, "low": 2, "info": 3}
NOISE_PP = 1.0
NOISE_REL = 0.25


def by_rule(side: Side) -> dict[str, dict[str, Any]]:
    """rule id -> worst severity, finding count, titles and summed impact_pct (None: notes)."""
    out: dict[str, dict[str, Any]] = {}
    findings = side.doc.get("findings")
    for f in findings if isinstance(findings, list) else []:
        if not isinstance(f, dict) or not isinstance(f.get("rule_id"), str):
            continue
        sev = str(f.get("severity")) if f.get("severity") in SEVERITY_RANK else "low"
        entry = out.setdefault(
            f["rule_id"],
            {"rule_id": f["rule_id"], "severity": sev, "count": 0, "titles": [], "impact_pct": None},
        )
        entry["count"] += 1
        entry["titles"].append(str(f.get("title", "")))
        if SEVERITY_RANK[sev] < SEVERITY_RANK[entry["severity"]]:
            entry["severity"] = sev
        pct = f.get("impact_pct")
        if isinstance(pct, int | float) and not isinstance(pct, bool):
            entry["impact_pct"] = round((entry["impact_pct"] or 0.0) + float(pct), 4)
    return out


def noise_band(a: float, b: float) -> float:
    return max(NOISE_PP, NOISE_REL * max(a, b))


def _change(b: dict[str, Any] | None, n: dict[str, Any] | None) -> str:
    """'appeared', 'resolved' or 'persisting'."""
    bi = (b or {}).get("impact_pct")
    ni = (n or {}).get("impact_pct")
    if bi is None and ni is None:  # notes: by presence
        return "appeared" if b is None else "resolved" if n is None else "persisting"
    bi, ni = bi or 0.0, ni or 0.0
    if ni - bi > noise_band(bi, ni):
        return "appeared"
    if bi - ni > noise_band(bi, ni):
        return "resolved"
    return "persisting"


def compare(base: Side, new: Side) -> dict[str, Any]:
    fb, fn = by_rule(base), by_rule(new)
    appeared, resolved, persisting = [], [], []
    for r in sorted(set(fb) | set(fn)):
        b, n = fb.get(r), fn.get(r)
        kind = _change(b, n)
        impacts = {"base_impact_pct": (b or {}).get("impact_pct"), "new_impact_pct": (n or {}).get("impact_pct")}
        if kind == "appeared":
            appeared.append({**(n or b or {}), **impacts})
        elif kind == "resolved":
            resolved.append({**(b or n or {}), **impacts})
        elif b is not None and n is not None:
            persisting.append({
                "rule_id": r,
                "base_severity": b["severity"],
                "new_severity": n["severity"],
                "base_count": b["count"],
                "new_count": n["count"],
                "base_impact_pct": b["impact_pct"],
                "new_impact_pct": n["impact_pct"],
                "titles": n["titles"],
            })
    return {
        "noise": {"pp": NOISE_PP, "relative": NOISE_REL},
        "appeared": appeared,
        "disappeared": resolved,
        "persisting": persisting,
        # high on NEW and its time at stake grew beyond the noise (new, or worse)
        "new_high": sorted(f["rule_id"] for f in appeared if fn.get(f["rule_id"], {}).get("severity") == "high"),
    }
