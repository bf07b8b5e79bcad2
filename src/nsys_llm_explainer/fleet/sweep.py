"""Sweeps: one row per run (label), in label order (numerically when every label is a number).

Per run: ranks, step time p50 (median over its ranks of their step p50), steps per second
(median over its ranks of steps / the span from their first step start to last step end),
GPU busy (mean over ranks), compute per step (median over ranks), the wait caused by the rank
that causes the most (whether or not it stands out from chance: blame.py), and the most
common verdict.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pandas as pd

from nsys_llm_explainer.fleet.inputs import natural_key

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


def table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(COLUMNS))
