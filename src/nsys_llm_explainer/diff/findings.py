"""Findings that appeared, were resolved, or persisted between the two reports, by rule id,
judged by the GPU time at stake, not by severity bands.

A rule's impact on a side is the sum of its findings' impact_pct (GPU time at stake as a share
of the affected devices' windows: already normalized for captures of different length).
It counts as appeared when NEW's impact exceeds BASE's (0 when absent) by more than the noise
band, as resolved when BASE's exceeds NEW's by more than the band, else as persisting, even
when a severity band boundary was crossed. The band is the larger of NOISE_PP percentage
points and NOISE_REL of the larger impact. Notes without time at stake (severity info) appear
or disappear by presence.

A rule that fired on one side only is not a change when the other side could not measure it:
a metric the rule reads (its findings' metric_ids) ran on the side where it fired and was
skipped (or is absent) on the other. Such rules are listed as `not_measured_new` (fired on
BASE, not measured on NEW) or `not_measured_base`, never as resolved or appeared. When the GPU
model changed (comparability), every appeared, resolved or persisting rule carries
`hardware_changed: true`: it may have moved with the hardware, not with the program.
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


def metrics_of(side: Side) -> dict[str, list[str]]:
    """rule id -> the metric ids its findings read."""
    out: dict[str, list[str]] = {}
    findings = side.doc.get("findings")
    for f in findings if isinstance(findings, list) else []:
        if isinstance(f, dict) and isinstance(f.get("rule_id"), str):
            ids = out.setdefault(f["rule_id"], [])
            ids += [m for m in f.get("metric_ids") or [] if isinstance(m, str) and m not in ids]
    return out


def _unmeasured(rule_metrics: list[str], fired: Side, other: Side) -> list[str]:
    """The metrics the rule read that ran where it fired and did not run on the other side."""
    return [m for m in rule_metrics if fired.metric(m) is not None and other.metric(m) is None]


def compare(base: Side, new: Side, hardware: str | None = None) -> dict[str, Any]:
    """`hardware`: how the GPUs changed (comparability), when they did."""
    fb, fn = by_rule(base), by_rule(new)
    mb, mn = metrics_of(base), metrics_of(new)
    appeared, resolved, persisting, gone_new, gone_base = [], [], [], [], []
    for r in sorted(set(fb) | set(fn)):
        b, n = fb.get(r), fn.get(r)
        kind = _change(b, n)
        impacts = {"base_impact_pct": (b or {}).get("impact_pct"), "new_impact_pct": (n or {}).get("impact_pct")}
        if b is not None and n is None and (why := _unmeasured(mb.get(r, []), base, new)):
            gone_new.append({**b, **impacts, "unmeasured": why,
                             "reason": "; ".join(new.why_missing(m) for m in why)})
            continue
        if n is not None and b is None and (why := _unmeasured(mn.get(r, []), new, base)):
            gone_base.append({**n, **impacts, "unmeasured": why,
                              "reason": "; ".join(base.why_missing(m) for m in why)})
            continue
        mark = {"hardware_changed": hardware is not None}
        if kind == "appeared":
            appeared.append({**(n or b or {}), **impacts, **mark})
        elif kind == "resolved":
            resolved.append({**(b or n or {}), **impacts, **mark})
        elif b is not None and n is not None:
            persisting.append({
                **mark,
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
        "hardware": hardware,
        "appeared": appeared,
        "disappeared": resolved,
        "persisting": persisting,
        "not_measured_new": gone_new,
        "not_measured_base": gone_base,
        # high on NEW and its time at stake grew beyond the noise (new, or worse)
        "new_high": sorted(f["rule_id"] for f in appeared if fn.get(f["rule_id"], {}).get("severity") == "high"),
    }
