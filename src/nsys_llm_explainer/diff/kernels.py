"""Per-kernel deltas: match kernels by name across the two reports.

Matching runs in two passes so identical names never merge with their neighbours:
exact names present on both sides match first; the remaining names on each side are
grouped by their normalized form (names.normalize) and a group found on both sides is a
"renamed" match (a template instance or numeric suffix changed). What is left is "new"
or "vanished". Kernels are summed over devices.

When both reports have the work inside their complete steps (metrics.step_work), every
figure is per complete step from that work (`source: in_step`): calls and time per step,
time per call, and the Hodges-Lehmann changes of time per step and per call with their
intervals (in_step.py). Otherwise whole-capture totals are compared on the diff's basis
(`source: totals`). Rows are sorted by the absolute change of compared time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nsys_llm_explainer.diff import in_step
from nsys_llm_explainer.diff.basis import Basis
from nsys_llm_explainer.diff.load import Side
from nsys_llm_explainer.diff.names import normalize

COLUMNS = (
    "key",
    "match",
    "base_name",
    "new_name",
    "base_calls",
    "new_calls",
    "base_total_ns",
    "new_total_ns",
    "base_compared_ns",
    "new_compared_ns",
    "delta_ns",
    "delta_pct",
    "base_per_call_ns",
    "new_per_call_ns",
    "per_call_pct",
    "per_call_low_pct",
    "per_call_high_pct",
    "time_pct",
    "time_low_pct",
    "time_high_pct",
    "time_delta_ns",
    "beyond_noise",
    "category",
)
NAME_SEP = " | "  # joins several names of one renamed group in the CSV


def _per_name(m: dict[str, Any]) -> pd.DataFrame:
    rows = pd.DataFrame(m.get("kernels", []), columns=["name", "calls", "total_ns"])
    return rows.groupby("name", as_index=False, sort=True)[["calls", "total_ns"]].sum()


def _side_frame(df: pd.DataFrame, prefix: str) -> pd.DataFrame:
    return df.rename(
        columns={
            "name": f"{prefix}_name",
            "calls": f"{prefix}_calls",
            "total_ns": f"{prefix}_total_ns",
        }
    )


def _groups(df: pd.DataFrame) -> pd.DataFrame:
    return df.groupby("key", sort=True).agg(
        name=("name", lambda s: NAME_SEP.join(sorted(s))),
        calls=("calls", "sum"),
        total_ns=("total_ns", "sum"),
    )


def match(fb: pd.DataFrame, fn: pd.DataFrame) -> pd.DataFrame:
    """One row per matched kernel (or group), new kernel or vanished kernel; raw figures."""
    same = fb.merge(fn, on="name", suffixes=("_b", "_n"))
    same = pd.DataFrame(
        {
            "key": same["name"].map(normalize),
            "match": "same",
            "base_name": same["name"],
            "new_name": same["name"],
            "base_calls": same["calls_b"],
            "new_calls": same["calls_n"],
            "base_total_ns": same["total_ns_b"],
            "new_total_ns": same["total_ns_n"],
        }
    )
    lb = fb[~fb["name"].isin(fn["name"])].assign(key=lambda d: d["name"].map(normalize))
    ln = fn[~fn["name"].isin(fb["name"])].assign(key=lambda d: d["name"].map(normalize))
    gb, gn = _groups(lb), _groups(ln)
    both = gb.index.intersection(gn.index)
    renamed = pd.DataFrame(
        {
            "key": both,
            "match": "renamed",
            "base_name": gb.loc[both, "name"].to_numpy(),
            "new_name": gn.loc[both, "name"].to_numpy(),
            "base_calls": gb.loc[both, "calls"].to_numpy(),
            "new_calls": gn.loc[both, "calls"].to_numpy(),
            "base_total_ns": gb.loc[both, "total_ns"].to_numpy(),
            "new_total_ns": gn.loc[both, "total_ns"].to_numpy(),
        }
    )
    vanished = _side_frame(lb[~lb["key"].isin(both)], "base").assign(match="vanished")
    added = _side_frame(ln[~ln["key"].isin(both)], "new").assign(match="new")
    frames = [f for f in (same, renamed, vanished, added) if len(f)]
    out = (
        pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(COLUMNS[:8]))
    )
    for col in ("base_calls", "new_calls", "base_total_ns", "new_total_ns"):
        out[col] = pd.to_numeric(out[col]).fillna(0).astype(np.int64)
    return out


def _frame(w: in_step.Work) -> pd.DataFrame:
    rows = [(n, r["calls"], r["ns"]) for n, r in w.names.items()]
    return _per_name({"kernels": [{"name": n, "calls": c, "total_ns": t} for n, c, t in rows]})


def _with_changes(rows: pd.DataFrame, wb: in_step.Work, wn: in_step.Work) -> pd.DataFrame:
    """Per-call and per-step-time changes (Hodges-Lehmann, with intervals) of matched rows."""
    cols: dict[str, list[Any]] = {c: [] for c in COLUMNS[12:]}
    for r in rows.itertuples(index=False):
        bc, nc = int(r.base_calls), int(r.new_calls)
        cols["base_per_call_ns"].append(round(r.base_total_ns / bc, 1) if bc else None)
        cols["new_per_call_ns"].append(round(r.new_total_ns / nc, 1) if nc else None)
        if r.match in ("same", "renamed"):
            ch = in_step.kernel_changes(wb, wn, r.base_name, r.new_name, NAME_SEP)
            pc, tm = ch["per_call"], ch["time"]
        else:
            pc = tm = {"change_pct": None, "low_pct": None, "high_pct": None, "delta_ns": None,
                       "beyond_noise": False}
        cols["per_call_pct"].append(pc["change_pct"])
        cols["per_call_low_pct"].append(pc["low_pct"])
        cols["per_call_high_pct"].append(pc["high_pct"])
        cols["time_pct"].append(tm["change_pct"])
        cols["time_low_pct"].append(tm["low_pct"])
        cols["time_high_pct"].append(tm["high_pct"])
        cols["time_delta_ns"].append(tm["delta_ns"])
        cols["beyond_noise"].append(bool(pc["beyond_noise"] or tm["beyond_noise"]))
        first = str(r.new_name or r.base_name).split(NAME_SEP)[0]
        cols["category"].append((wn.names.get(first) or wb.names.get(first) or {}).get("category"))
    return rows.assign(**cols)


def compare(base: Side, new: Side, basis: Basis, wb: in_step.Work | str | None = None,
            wn: in_step.Work | str | None = None) -> dict[str, Any]:
    """diff.json `kernels`, plus the rows as a frame for tables/diff_kernels.csv."""
    mb, mn = base.metric("top_kernels"), new.metric("top_kernels")
    if mb is None or mn is None:
        reason = base.why_missing("top_kernels") if mb is None else new.why_missing("top_kernels")
        return {"status": "not_compared", "reason": reason, "rows": [], "counts": {}, "frame": None}
    steps = isinstance(wb, in_step.Work) and isinstance(wn, in_step.Work)
    if steps:
        assert isinstance(wb, in_step.Work) and isinstance(wn, in_step.Work)
        rows = match(_frame(wb), _frame(wn))
        db, dn = float(wb.steps), float(wn.steps)
    else:
        rows = match(_per_name(mb), _per_name(mn))
        db, dn = basis.base_divisor, basis.new_divisor
    rows["base_compared_ns"] = (rows["base_total_ns"] / db).round(3)
    rows["new_compared_ns"] = (rows["new_total_ns"] / dn).round(3)
    bc, nc = rows["base_total_ns"] / db, rows["new_total_ns"] / dn
    rows["delta_ns"] = (nc - bc).round(3)
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = np.where(bc > 0, 100.0 * (nc - bc) / bc, np.nan)
    rows["delta_pct"] = np.round(pct, 4)
    if steps:
        rows = _with_changes(rows, wb, wn)  # type: ignore[arg-type]
    else:
        rows = rows.assign(**{c: None for c in COLUMNS[12:]}).assign(beyond_noise=False)
    rows = (
        rows.assign(_abs=rows["delta_ns"].abs())
        .sort_values(
            ["_abs", "key", "base_name", "new_name"],
            ascending=[False, True, True, True],
            kind="stable",
            na_position="last",
        )
        .drop(columns="_abs")
        .reset_index(drop=True)
    )
    rows = rows.loc[:, list(COLUMNS)]
    records = rows.astype(object).where(rows.notna(), None).to_dict("records")
    counts = {k: int((rows["match"] == k).sum()) for k in ("same", "renamed", "new", "vanished")}
    modes = (mb.get("name_mode"), mn.get("name_mode"))
    return {
        "status": "ok",
        "reason": None,
        "source": "in_step" if steps else "totals",
        "name_modes": list(modes),
        "counts": counts,
        "rows": records,
        "frame": rows,
    }
