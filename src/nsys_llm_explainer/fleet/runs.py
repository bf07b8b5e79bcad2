"""One run (one multi-rank job): its ranks, their table rows and the cross-rank analyses."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from nsys_llm_explainer.fleet import align, collectives, imbalance, same_run, stragglers

TIMELINE_BINS = 240
RANK_COLUMNS = (
    "rank", "name", "trace", "pid", "devices", "kernel_ns", "compute_ns", "gpu_busy_pct",
    "idle_ns", "idle_top_cause", "steps", "step_p50_ns", "step_p99_ns", "compute_per_step_ns",
    "comm_ns", "exposed_comm_ns", "exposed_comm_pct", "copy_ns", "top_kernel", "top_kernel_pct",
    "verdict", "primary_kind", "primary_impact_pct", "straggler", "arrived_last", "wait_caused_ns",
    "wait_suffered_ns",
)


@dataclass
class Run:
    label: str
    labels: tuple[tuple[str, str], ...]
    doc: dict[str, Any]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    timeline: dict[str, Any] | None = None


def _name(path: str, pid: int, multi_trace: bool, multi_pid: bool, common: str) -> str:
    if not multi_trace:
        return f"pid {pid}"
    rel = os.path.relpath(path, common) if common and common != "." else path
    return f"{rel} pid {pid}" if multi_pid else rel


def _row(i: int, name: str, path: str, s: dict[str, Any]) -> dict[str, Any]:
    steps = s["steps"]
    ok = steps["status"] == "ok"
    top = next(iter(s["names"]["kernels"]), None)
    idle = s.get("idle_causes")
    diag = s.get("diagnosis") or {}
    window = s["window_ns"]
    return {
        "rank": i, "name": name, "trace": path, "pid": s["pid"],
        "devices": " ".join(str(d) for d in s["devices"]),
        "kernel_ns": s["kernel_ns"], "compute_ns": s["compute_ns"],
        "gpu_busy_pct": round(100.0 * s["busy_ns"] / window, 2) if window else None,
        "idle_ns": int(sum(idle.values())) if idle is not None else None,
        "idle_top_cause": max(sorted(idle), key=idle.__getitem__) if idle else None,
        "steps": steps["count"] if ok else 0,
        "step_p50_ns": steps["p50_ns"] if ok else None,
        "step_p99_ns": steps["p99_ns"] if ok else None,
        "compute_per_step_ns": int(np.median(steps["compute_ns"])) if ok else None,
        "comm_ns": s["comm_ns"], "exposed_comm_ns": s["exposed_comm_ns"],
        "exposed_comm_pct": round(100.0 * s["exposed_comm_ns"] / window, 2) if window else None,
        "copy_ns": s["copies"]["ns"] if s["copies"] else None,
        "top_kernel": top["name"] if top else None,
        "top_kernel_pct": round(100.0 * top["ns"] / s["kernel_ns"], 2) if top and s["kernel_ns"] else None,
        "verdict": diag.get("verdict", "n/a"),
        "primary_kind": diag.get("primary_kind"),
        "primary_impact_pct": diag.get("primary_impact_pct"),
        "straggler": False, "arrived_last": None, "wait_caused_ns": None, "wait_suffered_ns": None,
    }


def _timeline(ranks: list[dict[str, Any]], offsets: list[int]) -> dict[str, Any]:
    """Compute and communication busy fraction per rank on one axis of TIMELINE_BINS bins."""
    lo = min(r["timeline"]["start_ns"] + o for r, o in zip(ranks, offsets, strict=True))
    hi = max(r["timeline"]["end_ns"] + o for r, o in zip(ranks, offsets, strict=True))
    edges = np.linspace(lo, hi, TIMELINE_BINS + 1)
    width = max((hi - lo) / TIMELINE_BINS, 1.0)
    rows = []
    for r, o in zip(ranks, offsets, strict=True):
        t = r["timeline"]
        own = np.linspace(t["start_ns"] + o, t["end_ns"] + o, len(t["compute_cum"]))
        fr = {}
        for part in ("compute", "comm"):
            cum = t[f"{part}_cum"].astype(np.float64)
            at = np.interp(edges, own, cum, left=0.0, right=float(cum[-1]))
            fr[part] = np.clip(np.diff(at) / width, 0.0, 1.0)
        rows.append(fr)
    return {"start_ns": int(lo), "end_ns": int(hi), "rows": rows}


def _refused(comp: dict[str, Any]) -> dict[str, Any]:
    first = comp["reasons"][0].split(":", 1)[0]
    return {"status": "skipped",
            "reason": f"the run was not aligned ({first}; --force-align compares it anyway)"}


def build(label: str, labels: tuple[tuple[str, str], ...], members: list[tuple[int, str, dict[str, Any]]],
          k: float, force_align: bool = False) -> Run:
    """members: (trace index, trace path, per-process summary) in rank order. A run whose
    captures are not one job at one time (same_run.py) is listed but not aligned or compared,
    unless force_align."""
    paths = sorted({p for _, p, _ in members})
    try:
        common = os.path.commonpath([os.path.dirname(p) or "." for p in paths]) if len(paths) > 1 else ""
    except ValueError:  # absolute and relative paths mixed: show them as given
        common = ""
    pids_per_trace: dict[str, int] = {}
    for _, p, _ in members:
        pids_per_trace[p] = pids_per_trace.get(p, 0) + 1
    ranks = []
    rows = []
    for i, (ti, path, s) in enumerate(members):
        name = _name(path, s["pid"], len(paths) > 1, pids_per_trace[path] > 1, common)
        ranks.append({**s, "trace_index": ti})
        rows.append(_row(i, name, path, s))
    comp = same_run.check(ranks, {ti: p for ti, p, _ in members}, force_align, [r["name"] for r in rows])
    tables: dict[str, pd.DataFrame] = {}
    if comp["refused"]:
        doc: dict[str, Any] = {"label": label, "labels": dict(labels), "comparability": comp,
                               "clock": same_run.refused_clock(comp, ranks)}
        skipped = _refused(comp)
        doc.update(ranks=rows, collectives=skipped, stragglers=skipped, imbalance=skipped)
        doc["headline"] = headline(doc)
        return Run(label, labels, doc, tables, None)
    clock = align.align(ranks)
    if comp["forced"]:
        clock.doc["trust"] = (same_run.FORCED_TRUST + "; ".join(comp["reasons"])
                              + "; the clocks on their own: " + clock.doc["trust"])
        clock.doc["trust_level"] = "low"
    doc = {"label": label, "labels": dict(labels), "comparability": comp, "clock": clock.doc}
    low = clock.doc["trust_level"] == "low"
    coll: dict[str, Any]
    strag: dict[str, Any]
    if low:  # no rank is named on clocks that are not known to agree
        why = {"status": "skipped", "reason": f"no rank is named at low clock trust ({clock.doc['trust']})"}
        coll, strag = why, why
    elif any(len(r["collectives"]["start"]) for r in ranks) and len(ranks) > 1:
        coll, table = collectives.analyze(ranks, clock.offsets, k)
        impossible = same_run.implausible_waits(coll, ranks)
        if impossible:
            coll = {"status": "error", "reason": "the aligned waits cannot be true (" + "; ".join(impossible[:3])
                    + "): the captures are not aligned in time, so no rank is blamed"}
        else:
            for pr in coll["ranks"]:
                row = rows[pr["rank"]]
                row.update(arrived_last=pr["arrived_last"], wait_caused_ns=pr["wait_caused_ns"],
                           wait_suffered_ns=pr["wait_suffered_ns"])
            tables["collectives"] = table
    else:
        why_not = "a single rank" if len(ranks) < 2 else "no rank ran communication kernels"
        coll = {"status": "skipped", "reason": why_not}
    if not low:
        strag = stragglers.find(rows, ranks, k)
    for found in strag.get("stragglers", []):
        rows[found["rank"]]["straggler"] = True
    imb, mix = imbalance.analyze(rows, ranks)
    tables["kernel_mix"] = mix
    doc.update(ranks=rows, collectives=coll, stragglers=strag, imbalance=imb)
    doc["headline"] = headline(doc)
    return Run(label, labels, doc, tables, _timeline(ranks, clock.offsets))


def headline(doc: dict[str, Any]) -> dict[str, Any]:
    """Which rank makes the others wait, and what it costs (or why that is unknown)."""
    rows = doc["ranks"]
    coll = doc["collectives"]
    strag = doc["stragglers"]
    straggler_ranks = [s["rank"] for s in strag.get("stragglers", [])]
    culprit = coll.get("culprit") if coll.get("status") == "ok" else None
    out: dict[str, Any] = {"rank": None, "name": None, "arrived_last_pct": None, "wait_caused_ns": None,
                           "share_of_wait_pct": None, "wait_pct_of_others_gpu_time": None,
                           "stragglers": straggler_ranks, "trust": doc["clock"].get("trust_level")}
    if culprit is not None:
        r = culprit["rank"]
        others = sum(x["kernel_ns"] for x in rows if x["rank"] != r)
        out.update(rank=r, name=rows[r]["name"], arrived_last_pct=culprit["arrived_last_pct"],
                   wait_caused_ns=culprit["wait_caused_ns"], share_of_wait_pct=culprit["share_of_wait_pct"],
                   wait_pct_of_others_gpu_time=round(100.0 * culprit["wait_caused_ns"] / others, 2)
                   if others else None)
    elif straggler_ranks:
        r = straggler_ranks[0]
        out.update(rank=r, name=rows[r]["name"])
    return out
