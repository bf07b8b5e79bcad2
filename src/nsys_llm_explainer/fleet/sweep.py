"""Sweeps: one row per run (label), in label order (numerically when every label is a number).

Per run: ranks, step time p50 (median over its ranks of their step p50), steps per second
(median over its ranks of steps / the span from their first step start to last step end),
GPU busy (mean over ranks), compute per step (median over ranks), the wait caused by the rank
that causes the most (whether or not it stands out from chance: fleet/robust.py), and the most
common verdict.

Runs of a sweep (other batch sizes or settings of one model) are compared as runs, never
aligned as ranks of one job; what makes them comparable is the same model on the same GPU,
and `check` states it: the GPU models each run used, and, since captures do not record the
model, the kernel names each run shares with the first (the share of its kernel time in
names the other ran too; under same_run.MIN_NAME_SHARE either way: not the same program).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from typing import Any

import numpy as np
import pandas as pd

from nsys_llm_explainer import fmt
from nsys_llm_explainer.fleet.inputs import natural_key
from nsys_llm_explainer.fleet.same_run import MIN_NAME_SHARE
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.results.serving import LatencyFit

PHASES = ("prefill", "decode", "mixed")  # fleet/worker.PHASE_CODES order

COLUMNS = ("label", "ranks", "step_p50_ns", "steps_per_s", "gpu_busy_pct", "compute_per_step_ns",
           "exposed_comm_pct", "wait_caused_ns", "stragglers", "verdict")


def numeric(labels: list[str]) -> list[float] | None:
    try:
        return [float(x) for x in labels]
    except ValueError:
        return None


def order(labels: list[str]) -> list[int]:
    nums = numeric(labels)
    if nums is not None:
        return sorted(range(len(labels)), key=lambda i: (nums[i], labels[i]))
    return sorted(range(len(labels)), key=lambda i: natural_key(labels[i]))


def _median(values: list[Any]) -> float | None:
    v = [x for x in values if x is not None]
    return float(np.median(v)) if v else None


def _rate(steps: dict[str, Any]) -> float | None:
    if steps["status"] != "ok" or steps["count"] < 1:
        return None
    span = int(steps["end"].max() - steps["start"].min())
    return steps["count"] / (span / 1e9) if span > 0 else None


def row(doc: dict[str, Any], rank_summaries: list[dict[str, Any]]) -> dict[str, Any]:
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


def fits(members: list[tuple[str, list[dict[str, Any]]]]) -> list[dict[str, Any]]:
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
    out = []
    for phase in PHASES:
        if phase in pooled:
            fit = LatencyFit.of(phase, pooled[phase])
            out.append({**asdict(fit), "runs": len(runs[phase])})
    return out


def table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _names(summaries: list[dict[str, Any]]) -> tuple[dict[str, int], int]:
    by: dict[str, int] = {}
    other = 0
    for r in summaries:
        for k in r["names"]["kernels"]:
            by[k["name"]] = by.get(k["name"], 0) + int(k["ns"])
        other += int(r["names"].get("other_ns") or 0)
    return by, sum(by.values()) + other


def check(runs: list[tuple[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    """fleet.json sweep `check`: the same GPU models and the same program (kernel names) in
    every run, stated (runs: label and the rank summaries of each)."""
    gpus = {label: sorted({g for r in ranks for g in r.get("gpus") or []}) for label, ranks in runs}
    known = [g for g in gpus.values() if g and "unknown model" not in g]
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
