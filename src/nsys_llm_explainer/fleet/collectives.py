"""Collective alignment: who arrives last, how long the others wait, which collectives are slow.

Matched collectives (align.keyed/best_shift: same kind, same stream ordinal, i-th
occurrence) are compared on the fleet clock. A rank's arrival is the start of its
communication kernel (the kernel cannot start before the rank has issued it and its stream
has reached it). Per matched collective:

- skew = last arrival - first arrival;
- wait = sum over ranks of (last arrival - their arrival): GPU time the others spent inside
  the collective waiting for the last rank; it is charged to the last rank;
- transfer = median end - last arrival: how long the collective took once everyone was in.

Arrivals closer than TIE_NS count as a tie (no rank is charged): the clock alignment is not
better than that. A collective is slow when its transfer lies beyond the robust band
(robust.py) of its kind and is at least SLOW_RATIO x the kind's median.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nsys_llm_explainer.fleet import robust
from nsys_llm_explainer.fleet.align import TIE_NS, best_shift, keyed, pairs

SLOW_RATIO = 1.5
MAX_SLOW_LISTED = 20
COLUMNS = ("kind", "stream_ordinal", "index", "ranks", "first_arrival_ns", "last_arrival_ns",
           "last_rank", "skew_ns", "wait_ns", "transfer_ns", "slow")


def _matrix(ranks: list[dict[str, Any]], offsets: list[int], key: tuple[str, int],
            members: list[int], idx: dict[int, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Arrival and end matrices (collectives x members), NaN where a rank lacks one."""
    ref = members[0]
    ref_end = ranks[ref]["collectives"]["end"][idx[ref]] + offsets[ref]
    n = len(ref_end)
    arr = np.full((n, len(members)), np.nan)
    end = np.full((n, len(members)), np.nan)
    for col, r in enumerate(members):
        c = ranks[r]["collectives"]
        s = c["start"][idx[r]] + offsets[r]
        e = c["end"][idx[r]] + offsets[r]
        j, k = pairs(ref_end, e, best_shift(ref_end, e))
        arr[j, col] = s[k]
        end[j, col] = e[k]
    return arr, end


def analyze(ranks: list[dict[str, Any]], offsets: list[int],
            k: float = robust.K) -> tuple[dict[str, Any], pd.DataFrame]:
    keys: dict[tuple[str, int], dict[int, np.ndarray]] = {}
    for r, rank in enumerate(ranks):
        for key, found in keyed(rank["collectives"]).items():
            keys.setdefault(key, {})[r] = found
    frames = []
    nr = len(ranks)
    last_count = np.zeros(nr, dtype=np.int64)
    caused = np.zeros(nr, dtype=np.int64)
    suffered = np.zeros(nr, dtype=np.int64)
    charged_in = np.zeros(nr, dtype=np.int64)  # charged collectives each rank took part in
    chance_sum = np.zeros(nr, dtype=np.float64)  # sum over them of 1 / ranks present
    kinds: list[dict[str, Any]] = []
    for key in sorted(keys):
        idx = keys[key]
        members = sorted(idx)
        if len(members) < 2:
            continue
        arr, end = _matrix(ranks, offsets, key, members, idx)
        present = ~np.isnan(arr)
        ok = present.sum(axis=1) >= 2
        arr, end, present = arr[ok], end[ok], present[ok]
        if len(arr) == 0:
            continue
        hi = np.nanmax(arr, axis=1)
        lo = np.nanmin(arr, axis=1)
        last_col = np.nanargmax(arr, axis=1)
        waits = np.where(present, hi[:, None] - arr, 0.0)
        wait = waits.sum(axis=1)
        transfer = np.maximum(np.nanmedian(end, axis=1) - hi, 0.0)
        skew = hi - lo
        charged = skew >= TIE_NS
        m = np.asarray(members)
        last_rank = m[last_col]
        np.add.at(last_count, last_rank[charged], 1)
        np.add.at(caused, last_rank[charged], np.rint(wait[charged]).astype(np.int64))
        np.add.at(suffered, m, np.rint(waits.sum(axis=0)).astype(np.int64))
        took_part = present[charged]
        charged_in[m] += took_part.sum(axis=0)
        chance_sum[m] += (took_part / took_part.sum(axis=1, keepdims=True)).sum(axis=0)
        med, _, upper = robust.band(transfer)
        slow = (transfer > upper) & (transfer >= SLOW_RATIO * med)
        frames.append(pd.DataFrame({
            "kind": key[0], "stream_ordinal": key[1], "index": np.flatnonzero(ok),
            "ranks": present.sum(axis=1), "first_arrival_ns": np.rint(lo).astype(np.int64),
            "last_arrival_ns": np.rint(hi).astype(np.int64),
            "last_rank": np.where(charged, last_rank, -1),
            "skew_ns": np.rint(skew).astype(np.int64), "wait_ns": np.rint(wait).astype(np.int64),
            "transfer_ns": np.rint(transfer).astype(np.int64), "slow": slow,
        }))
        sk = np.rint(skew).astype(np.int64)
        kinds.append({
            "kind": key[0], "stream_ordinal": key[1], "matched": int(len(arr)),
            "ranks": len(members),
            "skew_p50_ns": int(np.percentile(sk, 50, method="closest_observation")),
            "skew_p99_ns": int(np.percentile(sk, 99, method="closest_observation")),
            "skew_max_ns": int(sk.max()),
            "wait_ns": int(np.rint(wait.sum())),
            "transfer_p50_ns": int(np.rint(med)),
            "slow": int(slow.sum()),
        })
    table = (pd.concat(frames, ignore_index=True) if frames
             else pd.DataFrame({c: pd.Series(dtype="int64") for c in COLUMNS}))
    table = table.loc[:, list(COLUMNS)]
    total_wait = int(np.rint(table["wait_ns"].sum())) if len(table) else 0
    matched = int(len(table))
    charged_n = int((table["last_rank"] >= 0).sum()) if matched else 0
    per_rank = [
        {"rank": r, "arrived_last": int(last_count[r]),
         "arrived_last_pct": round(100.0 * last_count[r] / charged_n, 2) if charged_n else None,
         "wait_caused_ns": int(caused[r]), "wait_suffered_ns": int(suffered[r])}
        for r in range(nr)
    ]
    verdict = robust.judge(last_count, charged_in, chance_sum, caused, k) if caused.sum() > 0 else None
    culprit = None
    if verdict is not None and verdict["stands_out"]:
        r = verdict["rank"]
        culprit = {**per_rank[r], "share_of_wait_pct": round(100.0 * caused[r] / total_wait, 2)}
    slow_rows = table[table["slow"]] if matched else table
    slow_rows = slow_rows.assign(excess=slow_rows["transfer_ns"]).sort_values(
        ["excess", "kind", "stream_ordinal", "index"], ascending=[False, True, True, True], kind="stable")
    median_of = {(k["kind"], k["stream_ordinal"]): max(int(k["transfer_p50_ns"]), 1) for k in kinds}
    doc = {
        "status": "ok",
        "tie_ns": TIE_NS,
        "matched": matched,
        "charged": charged_n,
        "total_wait_ns": total_wait,
        "kinds": kinds,
        "ranks": per_rank,
        "culprit": culprit,
        "blame": verdict,
        "slow_count": int(table["slow"].sum()) if matched else 0,
        "slow": [
            {"kind": str(x.kind), "stream_ordinal": int(x.stream_ordinal), "index": int(x.index),
             "transfer_ns": int(x.transfer_ns),
             "ratio_to_median": round(float(x.transfer_ns) / median_of[(str(x.kind), int(x.stream_ordinal))], 2),
             "last_arrival_ns": int(x.last_arrival_ns)}
            for x in slow_rows.head(MAX_SLOW_LISTED).itertuples()
        ],
    }
    return doc, table
