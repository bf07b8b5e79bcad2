"""Imbalance: how unevenly the compute is spread over the ranks of a run.

- per step: for each step index present on every rank, max / mean of the ranks' compute
  kernel time in that step (1.0 = perfectly balanced); p50, p90 and max over the steps,
  and the rank most often holding the maximum.
- overall: max / mean of the ranks' total compute kernel time.
- kernel mix: per compute kernel name, its share of each rank's compute kernel time; the
  names whose share differs most between ranks (spread = max share - min share, percentage
  points). Communication kernels are left out: their time is mostly waiting (see collectives).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

MIN_SPREAD_PP = 1.0
MIX_LISTED = 10
MIX_COLUMNS = ("name", "min_ns", "median_ns", "max_ns", "min_rank", "max_rank",
               "min_share_pct", "max_share_pct", "spread_pp")


def _per_step(ranks: list[dict[str, Any]]) -> dict[str, Any]:
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


def kernel_mix(rows: list[dict[str, Any]], ranks: list[dict[str, Any]]) -> pd.DataFrame:
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


def analyze(rows: list[dict[str, Any]], ranks: list[dict[str, Any]]) -> tuple[dict[str, Any], pd.DataFrame]:
    if len(ranks) < 2:
        return {"status": "skipped", "reason": "a single rank"}, pd.DataFrame(columns=list(MIX_COLUMNS))
    compute = np.array([r["compute_ns"] for r in ranks], dtype=np.float64)
    mix = kernel_mix(rows, ranks)
    listed = mix[mix["spread_pp"] >= MIN_SPREAD_PP].head(MIX_LISTED)
    doc = {
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
