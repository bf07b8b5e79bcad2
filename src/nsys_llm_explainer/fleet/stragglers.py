"""Stragglers: ranks whose compute time per step or step time lies beyond the robust band
(robust.py: median + 3 x 1.4826 x MAD, and at least 2% above the median) of the run's ranks.

Compute time per step (the median over the rank's steps of its non-communication kernel
time) is the primary signal: in a lock-step job every rank's step takes as long as the
slowest one's, so step time equalizes and only the work each rank does differs. Without
steps, the rank's total compute kernel time is compared instead. Fewer than MIN_RANKS
ranks leave the band undefined (with two ranks, both sit exactly one MAD from the median).

For each straggler, what differs from the median rank: the kernels with the most extra
time, host-side idle (launch_bound + host_other idle causes) and copy time.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nsys_llm_explainer.fleet import robust

MIN_RANKS = robust.MIN_RANKS
TOP_DIFFS = 3
HOST_CAUSES = ("launch_bound", "host_other")
SIGNALS = (("compute_per_step_ns", "compute time per step"), ("step_p50_ns", "step time p50"))


def _median_of(values: list[float | None]) -> float | None:
    v = [x for x in values if x is not None]
    return float(np.median(v)) if v else None


def _kernel_excess(rows: list[dict[str, Any]], ranks: list[dict[str, Any]], r: int) -> list[dict[str, Any]]:
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
    out: list[dict[str, Any]] = []
    for name, ns in table.items():
        med = float(np.median(ns))
        extra = ns[r] - med
        if extra > 0:
            out.append({"name": name, "ns": ns[r], "median_ns": int(round(med)), "extra_ns": int(round(extra))})
    out.sort(key=lambda x: (-x["extra_ns"], x["name"]))
    return out[:TOP_DIFFS]


def _host_idle(rank: dict[str, Any]) -> int | None:
    causes = rank.get("idle_causes")
    return None if causes is None else int(sum(causes.get(c, 0) for c in HOST_CAUSES))


def find(rows: list[dict[str, Any]], ranks: list[dict[str, Any]], k: float = robust.K) -> dict[str, Any]:
    if len(rows) < MIN_RANKS:
        return {"status": "skipped",
                "reason": f"the robust band needs at least {MIN_RANKS} ranks; this run has {len(rows)}"}
    signals = []
    flagged: dict[int, list[dict[str, Any]]] = {}
    for field, title in SIGNALS:
        vals = [row[field] for row in rows]
        if any(v is None for v in vals):
            if field == "compute_per_step_ns":
                field, title = "compute_ns", "compute time"
                vals = [row["compute_ns"] for row in rows]
            else:
                continue
        arr = np.asarray(vals, dtype=np.float64)
        med, mad, upper = robust.band(arr, k)
        signals.append({"signal": field, "title": title, "median": round(med, 1), "mad": round(mad, 1),
                        "upper": round(upper, 1)})
        for r in np.flatnonzero(arr > upper).tolist():
            flagged.setdefault(r, []).append({
                "signal": field, "title": title, "value": int(round(arr[r])),
                "median": int(round(med)), "excess_pct": round(100.0 * (arr[r] - med) / med, 2) if med else None,
            })
    host_med = _median_of([_host_idle(x) for x in ranks])
    copy_med = _median_of([x["copies"]["ns"] if x["copies"] else None for x in ranks])
    found = []
    for r in sorted(flagged):
        host = _host_idle(ranks[r])
        copies = ranks[r]["copies"]["ns"] if ranks[r]["copies"] else None
        found.append({
            "rank": r, "name": rows[r]["name"], "why": flagged[r],
            "kernels": _kernel_excess(rows, ranks, r),
            "host_idle_ns": host, "host_idle_median_ns": None if host_med is None else int(round(host_med)),
            "copy_ns": copies, "copy_median_ns": None if copy_med is None else int(round(copy_med)),
        })
    return {"status": "ok", "k": k, "mad_scale": robust.MAD_SCALE, "min_excess_pct": robust.MIN_EXCESS_PCT,
            "signals": signals, "stragglers": found}
