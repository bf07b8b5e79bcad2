"""Step latency per phase, and whether a change exceeds the baseline's step-to-step spread.

Reads report.json `metrics.steps`: `phases` (a list of {phase, step_count, p50_ns, p90_ns,
optional p25_ns/p75_ns}, or an object keyed by phase) and, when present, `steps` (one
{phase, duration_ns} per step). A few key spellings are accepted so reports from nearby
versions still compare.

Noise: when both reports carry the work inside their complete steps (metrics.step_work),
each phase's step time change is a Hodges-Lehmann shift over the steps' latencies with its
interval (diff/in_step.py); beyond the noise means the interval excludes no change, and the medians
are the samples' own, with their sizes. Older reports: the median change (new p50 - base p50)
is compared with the baseline's interquartile range (p75 - p25, from the per-step durations
or the phase's p25/p75); a change within it is within the baseline spread.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nsys_llm_explainer.diff import in_step
from nsys_llm_explainer.diff.in_step import shift
from nsys_llm_explainer.diff.load import Side, json_pct, rel_pct
from nsys_llm_explainer.frozen import frozen

COUNT_KEYS = ("step_count", "steps", "count", "n_steps")
P50_KEYS = ("p50_ns", "latency_p50_ns", "step_p50_ns")
P90_KEYS = ("p90_ns", "latency_p90_ns", "step_p90_ns")
P25_KEYS = ("p25_ns", "latency_p25_ns")
P75_KEYS = ("p75_ns", "latency_p75_ns")
DURATION_KEYS = ("duration_ns", "dur_ns", "latency_ns")


@frozen
class PhaseSteps:
    phase: str
    count: int
    p50_ns: float
    p90_ns: float
    iqr_ns: float | None  # None: no per-step distribution in the report


def _first(row: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for k in keys:
        v = row.get(k)
        if isinstance(v, int | float) and not isinstance(v, bool):
            return v
    return None


def _phase_rows(m: dict[str, Any]) -> list[dict[str, Any]]:
    phases = m.get("phases")
    if isinstance(phases, dict):
        return [{"phase": str(k), **v} for k, v in phases.items() if isinstance(v, dict)]
    if isinstance(phases, list):
        return [r for r in phases if isinstance(r, dict)]
    return []


def _durations(m: dict[str, Any]) -> dict[str, np.ndarray]:
    steps = m.get("steps")
    if not isinstance(steps, list):
        return {}
    by_phase: dict[str, list[float]] = {}
    for s in steps:
        if isinstance(s, dict) and (d := _first(s, DURATION_KEYS)) is not None:
            by_phase.setdefault(str(s.get("phase") or "all"), []).append(float(d))
    return {p: np.asarray(v) for p, v in by_phase.items()}


def read(side: Side) -> dict[str, PhaseSteps] | str:
    """Phase -> step figures, or the reason there are none."""
    m = side.metric("steps")
    if m is None:
        return side.why_missing("steps")
    durations = _durations(m)
    out: dict[str, PhaseSteps] = {}
    for row in _phase_rows(m):
        phase = str(row.get("phase") or row.get("name") or "all")
        count, p50, p90 = _first(row, COUNT_KEYS), _first(row, P50_KEYS), _first(row, P90_KEYS)
        if not count or p50 is None or p90 is None:
            continue
        p25, p75 = _first(row, P25_KEYS), _first(row, P75_KEYS)
        iqr: float | None = None
        if phase in durations and len(durations[phase]) >= 2:
            q25, q75 = np.percentile(durations[phase], [25, 75])
            iqr = float(q75 - q25)
        elif p25 is not None and p75 is not None:
            iqr = float(p75 - p25)
        out[phase] = PhaseSteps(phase, int(count), float(p50), float(p90), iqr)
    return out or f"{side.role}: metrics.steps lists no phase with a step count and p50/p90 latency"


def total_steps(found: dict[str, PhaseSteps] | str) -> int | None:
    return sum(p.count for p in found.values()) if isinstance(found, dict) else None


def _noise(b: PhaseSteps, n: PhaseSteps) -> dict[str, Any]:
    change = n.p50_ns - b.p50_ns
    if b.iqr_ns is None:
        return {
            "status": "not_assessed",
            "base_iqr_ns": None,
            "median_change_ns": change,
            "verdict": "not assessed, because the baseline report has no per-step distribution",
        }
    if abs(change) <= b.iqr_ns:
        verdict = "within the baseline spread"
    else:
        verdict = ("slower" if change > 0 else "faster") + " beyond the baseline spread"
    return {
        "status": "ok",
        "base_iqr_ns": b.iqr_ns,
        "median_change_ns": change,
        "exceeds_spread": abs(change) > b.iqr_ns,
        "verdict": verdict,
    }


def _interval(lb: Any, ln: Any) -> dict[str, Any]:
    """The phase's Hodges-Lehmann change of step time, as the noise check."""
    s = shift(lb, ln)
    if s is None:
        return {"status": "not_assessed", "verdict": "not assessed, because a side has fewer than 2 steps"}
    r = in_step.row("step_time", "step", "step time", "ns", s)
    if r["low_pct"] is None:
        verdict = f"no 95% interval with {s.n_base} vs {s.n_new} steps"
    elif s.beyond_noise:
        verdict = ("slower" if s.estimate > 0 else "faster") + " beyond the noise"
    else:
        verdict = "within the noise"
    return {"status": "ok", "method": "hodges_lehmann", "verdict": verdict,
            **{k: r[k] for k in ("n_base", "n_new", "base_median", "new_median", "change_pct",
                                 "low_pct", "high_pct", "beyond_noise")}}


def compare(
    base: Side, new: Side, fb: dict[str, PhaseSteps] | str, fn: dict[str, PhaseSteps] | str,
    wb: in_step.Work | str | None = None, wn: in_step.Work | str | None = None,
) -> dict[str, Any]:
    """diff.json `steps`: per phase present in both, p50/p90 change and the noise check."""
    if isinstance(fb, str) or isinstance(fn, str):
        return {"status": "not_compared", "reason": fb if isinstance(fb, str) else fn, "phases": []}
    lat_b = in_step.phase_latency(wb) if isinstance(wb, in_step.Work) else {}
    lat_n = in_step.phase_latency(wn) if isinstance(wn, in_step.Work) else {}
    rows = []
    for phase in [p for p in fb if p in fn]:
        b, n = fb[phase], fn[phase]
        both = phase in lat_b and phase in lat_n
        rows.append(
            {
                "phase": phase,
                "base_count": b.count,
                "new_count": n.count,
                "base_p50_ns": b.p50_ns,
                "new_p50_ns": n.p50_ns,
                "p50_delta_pct": json_pct(rel_pct(b.p50_ns, n.p50_ns)),
                "base_p90_ns": b.p90_ns,
                "new_p90_ns": n.p90_ns,
                "p90_delta_pct": json_pct(rel_pct(b.p90_ns, n.p90_ns)),
                "noise": _interval(lat_b[phase], lat_n[phase]) if both else _noise(b, n),
            }
        )
    only = sorted(set(fb) ^ set(fn))
    if not rows:
        return {
            "status": "not_compared",
            "phases": [],
            "reason": "no phase has steps in both reports "
            f"(phases only on one side: {', '.join(only)})",
        }
    return {"status": "ok", "reason": None, "phases": rows, "unmatched_phases": only}
