"""One run (one multi-rank job): its ranks, their table rows and the cross-rank analyses:
stragglers() and imbalance().

Stragglers: ranks whose compute time per step or step time lies beyond the robust band
(robust.py: median + 3 x 1.4826 x MAD, and at least 2% above the median) of the run's ranks.

Compute time per step (the median over the rank's steps of its non-communication kernel
time) is the primary signal: in a lock-step job every rank's step takes as long as the
slowest one's, so step time equalizes and only the work each rank does differs. Without
steps, the rank's total compute kernel time is compared instead. Fewer than MIN_RANKS
ranks leave the band undefined (with two ranks, both sit exactly one MAD from the median).

For each straggler, what differs from the median rank: the kernels with the most extra
time, host-side idle (launch_bound + host_other idle causes) and copy time.

Imbalance: how unevenly the compute is spread over the ranks of a run.

- per step: for each step index present on every rank, max / mean of the ranks' compute
  kernel time in that step (1.0 = perfectly balanced); p50, p90 and max over the steps,
  and the rank most often holding the maximum.
- overall: max / mean of the ranks' total compute kernel time.
- kernel mix: per compute kernel name, its share of each rank's compute kernel time; the
  names whose share differs most between ranks (spread = max share - min share, percentage
  points). Communication kernels are left out: their time is mostly waiting (see collectives).

The sweep: one row per run (label), in label order (numerically when every label is a
number).

Per run: ranks, step time p50 (median over its ranks of their step p50), steps per second
(median over its ranks of steps / the span from their first step start to last step end),
GPU busy (mean over ranks), compute per step (median over ranks), the wait caused by the rank
that causes the most (whether or not it stands out from chance: fleet/robust.py), and the most
common verdict.

Runs of a sweep (other batch sizes or settings of one model) are compared as runs, never
aligned as ranks of one job; what makes them comparable is the same model on the same GPU,
and `sweep_check` states it: the GPU models each run used, and, since captures do not record the
model, the kernel names each run shares with the first (the share of its kernel time in
names the other ran too; under same_run.MIN_NAME_SHARE either way: not the same program)."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal, NotRequired, TypedDict

import numpy as np
import pandas as pd

from nsys_llm_explainer import fmt
from nsys_llm_explainer.fleet import align, robust, same_run
from nsys_llm_explainer.fleet.align import ClockDoc, CollectivesDoc
from nsys_llm_explainer.fleet.inputs import natural_key
from nsys_llm_explainer.fleet.same_run import MIN_NAME_SHARE, Comparability
from nsys_llm_explainer.fleet.worker import Rank, RankSummary, StepsSummary
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.model import JsonObject
from nsys_llm_explainer.results.serving import LatencyFit

MIN_SPREAD_PP = 1.0
MIX_LISTED = 10
MIX_COLUMNS = ("name", "min_ns", "median_ns", "max_ns", "min_rank", "max_rank",
               "min_share_pct", "max_share_pct", "spread_pp")

# The fleet.json documents: a run (RunDoc) and its parts, the sweep, and the whole (FleetDoc).


class Status(TypedDict):
    """A part that was measured (status "ok") or not ("skipped", "error": the reason)."""
    status: str
    reason: NotRequired[str]


class RankRow(TypedDict):
    """One rank of a run (fleet.json run `ranks`, tables/ranks.csv: RANK_COLUMNS)."""
    rank: int
    name: str
    trace: str
    pid: int
    devices: str
    kernel_ns: int
    compute_ns: int
    gpu_busy_pct: float | None
    idle_ns: int | None
    idle_top_cause: str | None
    steps: int
    step_p50_ns: int | None
    step_p99_ns: int | None
    compute_per_step_ns: int | None
    comm_ns: int
    exposed_comm_ns: int
    exposed_comm_pct: float | None
    copy_ns: int | None
    top_kernel: str | None
    top_kernel_pct: float | None
    verdict: str
    primary_kind: str | None
    primary_impact_pct: float | None
    straggler: bool
    arrived_last: int | None
    wait_caused_ns: int | None
    wait_suffered_ns: int | None


class PerStep(Status):
    steps: NotRequired[int]
    max_over_mean_p50: NotRequired[float]
    max_over_mean_p90: NotRequired[float]
    max_over_mean_max: NotRequired[float]
    most_often_max_rank: NotRequired[int]
    most_often_max_pct: NotRequired[float]


class MixRow(TypedDict):
    name: str
    min_rank: int
    max_rank: int
    min_share_pct: float
    max_share_pct: float
    spread_pp: float


class Imbalance(Status):
    """fleet.json run `imbalance`."""
    compute_max_over_mean: NotRequired[float | None]
    compute_max_rank: NotRequired[int]
    per_step: NotRequired[PerStep]
    kernel_mix: NotRequired[list[MixRow]]


class Signal(TypedDict):
    signal: str
    title: str
    median: float
    mad: float
    upper: float


class Why(TypedDict):
    signal: str
    title: str
    value: int
    median: int
    excess_pct: float | None


class KernelExcess(TypedDict):
    name: str
    ns: int
    median_ns: int
    extra_ns: int


class Straggler(TypedDict):
    rank: int
    name: str
    why: list[Why]
    kernels: list[KernelExcess]
    host_idle_ns: int | None
    host_idle_median_ns: int | None
    copy_ns: int | None
    copy_median_ns: int | None


class Stragglers(Status):
    """fleet.json run `stragglers`."""
    k: NotRequired[float]
    mad_scale: NotRequired[float]
    min_excess_pct: NotRequired[float]
    signals: NotRequired[list[Signal]]
    stragglers: NotRequired[list[Straggler]]


class Headline(TypedDict):
    """fleet.json run `headline`: which rank makes the others wait, and what it costs."""
    rank: int | None
    name: str | None
    arrived_last_pct: float | None
    wait_caused_ns: int | None
    share_of_wait_pct: float | None
    wait_pct_of_others_gpu_time: float | None
    stragglers: list[int]
    trust: str | None


class RunDoc(TypedDict):
    """fleet.json `runs[]`."""
    label: str
    labels: dict[str, str]
    comparability: Comparability
    clock: ClockDoc
    ranks: list[RankRow]
    collectives: CollectivesDoc
    stragglers: Stragglers
    imbalance: Imbalance
    headline: NotRequired[Headline]


class RankTimeline(TypedDict):
    """Busy fraction per rank and bin ("compute", "comm") on the run's aligned clock."""
    start_ns: int
    end_ns: int
    rows: list[dict[str, np.ndarray]]


class SweepRow(TypedDict):
    """One run of the sweep (fleet.json sweep `rows`, tables/sweep.csv: SWEEP_COLUMNS)."""
    label: str
    ranks: int
    step_p50_ns: int | None
    steps_per_s: float | None
    gpu_busy_pct: float | None
    compute_per_step_ns: int | None
    exposed_comm_pct: float | None
    wait_caused_ns: int | None
    stragglers: int
    verdict: str


class SweepFit(TypedDict):
    """A serving latency fit across the runs (LatencyFit's fields and the runs pooled)."""
    phase: str
    target: str
    terms: dict[str, float] | None
    iterations: int
    configurations: int
    rmse_ns: float | None
    max_error_pct: float | None
    reason: str | None
    runs: int


class CheckPart(TypedDict):
    verdict: str  # same, differs or unknown
    detail: str


class SweepCheck(TypedDict):
    """fleet.json sweep `check`."""
    comparable: bool
    gpu: CheckPart
    model: CheckPart
    text: str


class Sweep(TypedDict):
    rows: list[SweepRow]
    numeric_labels: bool
    check: SweepCheck
    fits: list[SweepFit]


class TraceRow(TypedDict):
    """fleet.json `traces[]` (tables/traces.csv)."""
    path: str
    label: str
    format: str | None
    ok: bool
    error: str | None
    ranks: int
    warnings: int


class Tool(TypedDict):
    name: str
    version: str


class Inputs(TypedDict):
    traces: int
    ok: int
    failed: int
    ranks: int
    runs: int
    skipped: list[str]
    duplicates: list[dict[str, str]]


class FleetDoc(TypedDict):
    """fleet.json (fleet/__init__.py build())."""
    schema_version: str
    tool: Tool
    options: JsonObject
    inputs: Inputs
    traces: list[TraceRow]
    runs: list[RunDoc]
    sweep: Sweep | None
    verdict: NotRequired[str]


def _per_step(ranks: list[Rank]) -> PerStep:
    steps = [r["steps"] for r in ranks]
    if any(s["status"] != "ok" for s in steps):
        return {"status": "skipped", "reason": "steps were not found on every rank"}
    n = min(s["count"] for s in steps)
    c = np.stack([s["compute_ns"][:n] for s in steps]).astype(np.float64)
    mean = c.mean(axis=0)
    ok = mean > 0
    if not ok.any():
        return {"status": "skipped", "reason": "no compute kernel ran inside the steps"}
    ratio = c[:, ok].max(axis=0) / mean[ok]
    top = np.bincount(c[:, ok].argmax(axis=0), minlength=len(ranks))
    return {
        "status": "ok", "steps": int(ok.sum()),
        "max_over_mean_p50": round(float(np.percentile(ratio, 50)), 4),
        "max_over_mean_p90": round(float(np.percentile(ratio, 90)), 4),
        "max_over_mean_max": round(float(ratio.max()), 4),
        "most_often_max_rank": int(np.argmax(top)),
        "most_often_max_pct": round(100.0 * float(top.max()) / float(ok.sum()), 2),
    }


def kernel_mix(rows: list[RankRow], ranks: list[Rank]) -> pd.DataFrame:
    names = sorted({item["name"] for r in ranks for item in r["names"]["kernels"] if not item["comm"]})
    cols = {i: {item["name"]: item["ns"] for item in r["names"]["kernels"] if not item["comm"]}
            for i, r in enumerate(ranks)}
    ns = pd.DataFrame(cols, index=names, columns=range(len(ranks))).fillna(0).astype(np.int64)
    totals = np.array([max(r["compute_ns"], 1) for r in ranks], dtype=np.float64)
    share = 100.0 * ns.to_numpy(np.float64) / totals[None, :]
    v = ns.to_numpy(np.int64)
    out = pd.DataFrame({
        "name": ns.index,
        "min_ns": v.min(axis=1), "median_ns": np.rint(np.median(v, axis=1)).astype(np.int64),
        "max_ns": v.max(axis=1), "min_rank": v.argmin(axis=1), "max_rank": v.argmax(axis=1),
        "min_share_pct": share.min(axis=1).round(2), "max_share_pct": share.max(axis=1).round(2),
        "spread_pp": (share.max(axis=1) - share.min(axis=1)).round(2),
    })
    return out.sort_values(["spread_pp", "name"], ascending=[False, True], kind="stable").reset_index(drop=True)


def imbalance(rows: list[RankRow], ranks: list[Rank]) -> tuple[Imbalance, pd.DataFrame]:
    if len(ranks) < 2:
        return {"status": "skipped", "reason": "a single rank"}, pd.DataFrame(columns=list(MIX_COLUMNS))
    compute = np.array([r["compute_ns"] for r in ranks], dtype=np.float64)
    mix = kernel_mix(rows, ranks)
    listed = mix[mix["spread_pp"] >= MIN_SPREAD_PP].head(MIX_LISTED)
    doc: Imbalance = {
        "status": "ok",
        "compute_max_over_mean": round(float(compute.max() / compute.mean()), 4) if compute.mean() else None,
        "compute_max_rank": int(np.argmax(compute)),
        "per_step": _per_step(ranks),
        "kernel_mix": [
            {"name": str(x.name), "min_rank": int(x.min_rank), "max_rank": int(x.max_rank),
             "min_share_pct": float(x.min_share_pct), "max_share_pct": float(x.max_share_pct),
             "spread_pp": float(x.spread_pp)}
            for x in listed.itertuples()
        ],
    }
    return doc, mix


MIN_RANKS = robust.MIN_RANKS
TOP_DIFFS = 3
HOST_CAUSES = ("launch_bound", "host_other")
RankSignal = Literal["compute_per_step_ns", "step_p50_ns", "compute_ns"]  # the RankRow column compared
SIGNALS: tuple[tuple[RankSignal, str], ...] = (("compute_per_step_ns", "compute time per step"),
                                            ("step_p50_ns", "step time p50"))


def _median_of(values: list[float | None]) -> float | None:
    v = [x for x in values if x is not None]
    return float(np.median(v)) if v else None


def _kernel_excess(rows: list[RankRow], ranks: list[Rank], r: int) -> list[KernelExcess]:
    per_name: dict[str, list[int]] = {}
    for rank in ranks:
        for item in rank["names"]["kernels"]:
            if not item["comm"]:
                per_name.setdefault(item["name"], [])
    table = {n: [0] * len(ranks) for n in per_name}
    for i, rank in enumerate(ranks):
        for item in rank["names"]["kernels"]:
            if item["name"] in table:
                table[item["name"]][i] = item["ns"]
    out: list[KernelExcess] = []
    for name, ns in table.items():
        med = float(np.median(ns))
        extra = ns[r] - med
        if extra > 0:
            out.append({"name": name, "ns": ns[r], "median_ns": int(round(med)), "extra_ns": int(round(extra))})
    out.sort(key=lambda x: (-x["extra_ns"], x["name"]))
    return out[:TOP_DIFFS]


def _host_idle(rank: Rank) -> int | None:
    causes = rank.get("idle_causes")
    return None if causes is None else int(sum(causes.get(c, 0) for c in HOST_CAUSES))


def stragglers(rows: list[RankRow], ranks: list[Rank], k: float = robust.K) -> Stragglers:
    if len(rows) < MIN_RANKS:
        return {"status": "skipped",
                "reason": f"the robust band needs at least {MIN_RANKS} ranks; this run has {len(rows)}"}
    signals: list[Signal] = []
    flagged: dict[int, list[Why]] = {}
    for signal, title in SIGNALS:
        vals = [row[signal] for row in rows]
        if any(v is None for v in vals):
            if signal == "compute_per_step_ns":
                signal, title = "compute_ns", "compute time"
                vals = [row["compute_ns"] for row in rows]
            else:
                continue
        arr = np.asarray(vals, dtype=np.float64)
        med, mad, upper = robust.band(arr, k)
        signals.append({"signal": signal, "title": title, "median": round(med, 1), "mad": round(mad, 1),
                        "upper": round(upper, 1)})
        for r in np.flatnonzero(arr > upper).tolist():
            flagged.setdefault(r, []).append({
                "signal": signal, "title": title, "value": int(round(arr[r])),
                "median": int(round(med)), "excess_pct": round(100.0 * (arr[r] - med) / med, 2) if med else None,
            })
    host_med = _median_of([_host_idle(x) for x in ranks])
    copy_med = _median_of([x["copies"]["ns"] if x["copies"] else None for x in ranks])
    found: list[Straggler] = []
    for r in sorted(flagged):
        host = _host_idle(ranks[r])
        mine = ranks[r]["copies"]
        copies = mine["ns"] if mine else None
        found.append({
            "rank": r, "name": rows[r]["name"], "why": flagged[r],
            "kernels": _kernel_excess(rows, ranks, r),
            "host_idle_ns": host, "host_idle_median_ns": None if host_med is None else int(round(host_med)),
            "copy_ns": copies, "copy_median_ns": None if copy_med is None else int(round(copy_med)),
        })
    return {"status": "ok", "k": k, "mad_scale": robust.MAD_SCALE, "min_excess_pct": robust.MIN_EXCESS_PCT,
            "signals": signals, "stragglers": found}


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
    doc: RunDoc
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    timeline: RankTimeline | None = None


def _name(path: str, pid: int, multi_trace: bool, multi_pid: bool, common: str) -> str:
    if not multi_trace:
        return f"pid {pid}"
    rel = os.path.relpath(path, common) if common and common != "." else path
    return f"{rel} pid {pid}" if multi_pid else rel


def _row(i: int, name: str, path: str, s: RankSummary) -> RankRow:
    steps = s["steps"]
    ok = steps["status"] == "ok"
    top = next(iter(s["names"]["kernels"]), None)
    idle = s.get("idle_causes")
    diag = s.get("diagnosis")
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
        "verdict": diag["verdict"] if diag else "n/a",
        "primary_kind": diag["primary_kind"] if diag else None,
        "primary_impact_pct": diag["primary_impact_pct"] if diag else None,
        "straggler": False, "arrived_last": None, "wait_caused_ns": None, "wait_suffered_ns": None,
    }


def _timeline(ranks: list[Rank], offsets: list[int]) -> RankTimeline:
    """Compute and communication busy fraction per rank on one axis of TIMELINE_BINS bins."""
    lo = min(r["timeline"]["start_ns"] + o for r, o in zip(ranks, offsets, strict=True))
    hi = max(r["timeline"]["end_ns"] + o for r, o in zip(ranks, offsets, strict=True))
    edges = np.linspace(lo, hi, TIMELINE_BINS + 1)
    width = max((hi - lo) / TIMELINE_BINS, 1.0)
    rows = []
    for r, o in zip(ranks, offsets, strict=True):
        t = r["timeline"]
        own = np.linspace(t["start_ns"] + o, t["end_ns"] + o, len(t["compute_cum"]))
        fr: dict[str, np.ndarray] = {}
        for part, cums in (("compute", t["compute_cum"]), ("comm", t["comm_cum"])):
            cum = cums.astype(np.float64)
            at = np.interp(edges, own, cum, left=0.0, right=float(cum[-1]))
            fr[part] = np.clip(np.diff(at) / width, 0.0, 1.0)
        rows.append(fr)
    return {"start_ns": int(lo), "end_ns": int(hi), "rows": rows}


def _refused(comp: Comparability) -> str:
    first = comp["reasons"][0].split(":", 1)[0]
    return f"the run was not aligned ({first}; --force-align compares it anyway)"


def build(label: str, labels: tuple[tuple[str, str], ...], members: list[tuple[int, str, RankSummary]],
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
    ranks: list[Rank] = []
    rows: list[RankRow] = []
    for i, (ti, path, s) in enumerate(members):
        name = _name(path, s["pid"], len(paths) > 1, pids_per_trace[path] > 1, common)
        ranks.append({**s, "trace_index": ti})
        rows.append(_row(i, name, path, s))
    comp = same_run.check(ranks, {ti: p for ti, p, _ in members}, force_align, [r["name"] for r in rows])
    tables: dict[str, pd.DataFrame] = {}
    if comp["refused"]:
        why = _refused(comp)
        doc: RunDoc = {"label": label, "labels": dict(labels), "comparability": comp,
                       "clock": same_run.refused_clock(comp, ranks), "ranks": rows,
                       "collectives": {"status": "skipped", "reason": why},
                       "stragglers": {"status": "skipped", "reason": why},
                       "imbalance": {"status": "skipped", "reason": why}}
        doc["headline"] = headline(doc)
        return Run(label, labels, doc, tables, None)
    clock = align.align(ranks)
    if comp["forced"]:
        clock.doc["trust"] = (same_run.FORCED_TRUST + "; ".join(comp["reasons"])
                              + "; the clocks on their own: " + clock.doc["trust"])
        clock.doc["trust_level"] = "low"
    low = clock.doc["trust_level"] == "low"
    coll: CollectivesDoc
    strag: Stragglers
    if low:  # no rank is named on clocks that are not known to agree
        why = f"no rank is named at low clock trust ({clock.doc['trust']})"
        coll, strag = {"status": "skipped", "reason": why}, {"status": "skipped", "reason": why}
    elif any(len(r["collectives"]["start"]) for r in ranks) and len(ranks) > 1:
        coll, table = align.analyze(ranks, clock.offsets, k)
        impossible = same_run.implausible_waits(coll, ranks)
        if impossible:
            coll = {"status": "error", "reason": "the aligned waits cannot be true (" + "; ".join(impossible[:3])
                    + "): the captures are not aligned in time, so no rank is blamed"}
        else:
            for pr in coll["ranks"]:
                row = rows[pr["rank"]]
                row["arrived_last"] = pr["arrived_last"]
                row["wait_caused_ns"] = pr["wait_caused_ns"]
                row["wait_suffered_ns"] = pr["wait_suffered_ns"]
            tables["collectives"] = table
    else:
        why_not = "a single rank" if len(ranks) < 2 else "no rank ran communication kernels"
        coll = {"status": "skipped", "reason": why_not}
    if not low:
        strag = stragglers(rows, ranks, k)
    for found in strag.get("stragglers", []):
        rows[found["rank"]]["straggler"] = True
    imb, mix = imbalance(rows, ranks)
    tables["kernel_mix"] = mix
    doc = {"label": label, "labels": dict(labels), "comparability": comp, "clock": clock.doc, "ranks": rows,
           "collectives": coll, "stragglers": strag, "imbalance": imb}
    doc["headline"] = headline(doc)
    return Run(label, labels, doc, tables, _timeline(ranks, clock.offsets))


def headline(doc: RunDoc) -> Headline:
    """Which rank makes the others wait, and what it costs (or why that is unknown)."""
    rows = doc["ranks"]
    coll = doc["collectives"]
    strag = doc["stragglers"]
    straggler_ranks = [s["rank"] for s in strag.get("stragglers", [])]
    culprit = coll.get("culprit") if coll.get("status") == "ok" else None
    out: Headline = {"rank": None, "name": None, "arrived_last_pct": None, "wait_caused_ns": None,
                           "share_of_wait_pct": None, "wait_pct_of_others_gpu_time": None,
                           "stragglers": straggler_ranks, "trust": doc["clock"].get("trust_level")}
    if culprit is not None:
        r = culprit["rank"]
        others = sum(x["kernel_ns"] for x in rows if x["rank"] != r)
        out["rank"], out["name"] = r, rows[r]["name"]
        out["arrived_last_pct"] = culprit["arrived_last_pct"]
        out["wait_caused_ns"] = culprit["wait_caused_ns"]
        out["share_of_wait_pct"] = culprit["share_of_wait_pct"]
        out["wait_pct_of_others_gpu_time"] = round(100.0 * culprit["wait_caused_ns"] / others, 2) if others else None
    elif straggler_ranks:
        r = straggler_ranks[0]
        out["rank"], out["name"] = r, rows[r]["name"]
    return out


PHASES = ("prefill", "decode", "mixed")  # fleet/worker.PHASE_CODES order

SWEEP_COLUMNS = ("label", "ranks", "step_p50_ns", "steps_per_s", "gpu_busy_pct", "compute_per_step_ns",
           "exposed_comm_pct", "wait_caused_ns", "stragglers", "verdict")


def numeric_labels(labels: list[str]) -> list[float] | None:
    try:
        return [float(x) for x in labels]
    except ValueError:
        return None


def sweep_order(labels: list[str]) -> list[int]:
    nums = numeric_labels(labels)
    if nums is not None:
        return sorted(range(len(labels)), key=lambda i: (nums[i], labels[i]))
    return sorted(range(len(labels)), key=lambda i: natural_key(labels[i]))


def _median(values: list[int | float | None]) -> float | None:
    v = [x for x in values if x is not None]
    return float(np.median(v)) if v else None


def _rate(steps: StepsSummary) -> float | None:
    if steps["status"] != "ok" or steps["count"] < 1:
        return None
    span = int(steps["end"].max() - steps["start"].min())
    return steps["count"] / (span / 1e9) if span > 0 else None


def sweep_row(doc: RunDoc, rank_summaries: list[RankSummary]) -> SweepRow:
    rows = doc["ranks"]
    busy = [r["gpu_busy_pct"] for r in rows if r["gpu_busy_pct"] is not None]
    exposed = [r["exposed_comm_pct"] for r in rows if r["exposed_comm_pct"] is not None]
    p50 = _median([r["step_p50_ns"] for r in rows])
    cps = _median([r["compute_per_step_ns"] for r in rows])
    rate = _median([_rate(s["steps"]) for s in rank_summaries])
    verdicts = Counter(r["verdict"] for r in rows)
    coll = doc["collectives"]
    worst = coll.get("blame") if coll.get("status") == "ok" else None  # named or not
    return {
        "label": doc["label"], "ranks": len(rows),
        "step_p50_ns": None if p50 is None else int(round(p50)),
        "steps_per_s": None if rate is None else round(rate, 3),
        "gpu_busy_pct": round(float(np.mean(busy)), 2) if busy else None,
        "compute_per_step_ns": None if cps is None else int(round(cps)),
        "exposed_comm_pct": round(float(np.mean(exposed)), 2) if exposed else None,
        "wait_caused_ns": worst["wait_caused_ns"] if worst else None,
        "stragglers": len(doc["headline"]["stragglers"]),
        "verdict": sorted(verdicts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0] if verdicts else "n/a",
    }


@frozen
class _Point:
    sequences: int | None
    tokens: int | None
    kv_tokens: int | None
    gpu_span_ns: int


def sweep_fits(members: list[tuple[str, list[RankSummary]]]) -> list[SweepFit]:
    """The serving latency model across the sweep's runs: per phase, every run's iterations
    (each rank's) pooled into one fit (LatencyFit.of: prefill against tokens, decode against
    sequences and KV tokens); [] when no run has serving iterations."""
    pooled: dict[str, list[_Point]] = {}
    runs: dict[str, set[str]] = {}
    for label, ranks in members:
        for rank in ranks:
            cols = rank.get("serving")
            if not cols:
                continue
            for i, code in enumerate(cols["phase"].tolist()):
                phase = PHASES[code]
                seqs, tokens, kv = (int(cols[f][i]) for f in ("sequences", "tokens", "kv_tokens"))
                pooled.setdefault(phase, []).append(_Point(seqs if seqs >= 0 else None, tokens if tokens >= 0 else None,
                                                           kv if kv >= 0 else None, int(cols["gpu_span_ns"][i])))
                runs.setdefault(phase, set()).add(label)
    out: list[SweepFit] = []
    for phase in PHASES:
        if phase in pooled:
            fit = LatencyFit.of(phase, pooled[phase])
            out.append({"phase": fit.phase, "target": fit.target,
                        "terms": None if fit.terms is None else dict(fit.terms), "iterations": fit.iterations,
                        "configurations": fit.configurations, "rmse_ns": fit.rmse_ns,
                        "max_error_pct": fit.max_error_pct, "reason": fit.reason, "runs": len(runs[phase])})
    return out


def sweep_table(rows: list[SweepRow]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(SWEEP_COLUMNS))


def _names(summaries: list[RankSummary]) -> tuple[dict[str, int], int]:
    by: dict[str, int] = {}
    other = 0
    for r in summaries:
        for k in r["names"]["kernels"]:
            by[k["name"]] = by.get(k["name"], 0) + int(k["ns"])
        other += int(r["names"].get("other_ns") or 0)
    return by, sum(by.values()) + other


def sweep_check(runs: list[tuple[str, list[RankSummary]]]) -> SweepCheck:
    """fleet.json sweep `check`: the same GPU models and the same program (kernel names) in
    every run, stated (runs: label and the rank summaries of each)."""
    gpus = {label: sorted({g for r in ranks for g in r.get("gpus") or []}) for label, ranks in runs}
    known = [g for g in gpus.values() if g and "unknown model" not in g]
    gpu: CheckPart
    model: CheckPart
    if len(known) < len(gpus):
        gpu = {"verdict": "unknown", "detail": "not every run records its GPU model"}
    elif len({tuple(g) for g in known}) == 1:
        gpu = {"verdict": "same", "detail": f"every run ran on {', '.join(known[0])}"}
    else:
        gpu = {"verdict": "differs", "detail": "the runs ran on different GPUs (" + "; ".join(
            f"{label}: {', '.join(g) or 'unknown'}" for label, g in gpus.items()) + ")"}
    ref, ref_total = _names(runs[0][1])
    low: tuple[float, str] | None = None
    for label, ranks in runs[1:]:
        mine, total = _names(ranks)
        if not total or not ref_total:
            continue
        share = min(sum(ns for n, ns in mine.items() if n in ref) / total,
                    sum(ns for n, ns in ref.items() if n in mine) / ref_total)
        if low is None or share < low[0]:
            low = (share, label)
    if low is None:
        model = {"verdict": "unknown", "detail": "the model is not recorded and a run ran no kernel"}
    elif low[0] < MIN_NAME_SHARE:
        model = {"verdict": "differs", "detail": f"the model is not recorded, and run {low[1]} shares kernel names "
                 f"holding only {fmt.pct(100 * low[0])} of the kernel time with run {runs[0][0]}: not the same "
                 "program"}
    else:
        model = {"verdict": "same", "detail": f"the model is not recorded; the runs share kernel names holding at "
                 f"least {fmt.pct(100 * low[0])} of their kernel time (the same program)"}
    ok = gpu["verdict"] != "differs" and model["verdict"] != "differs"
    head = ("compared as runs of one model on one GPU" if ok and gpu["verdict"] == "same" else
            "compared as runs" if ok else "not runs of one model on one GPU: compare them with care")
    return {"comparable": ok, "gpu": gpu, "model": model, "text": f"{head} ({gpu['detail']}; {model['detail']})"}
