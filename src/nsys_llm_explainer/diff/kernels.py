"""Per-kernel deltas: match kernels across the two reports, by name, then by operation.

Matching runs in three passes so identical names never merge with their neighbours:
exact names present on both sides match first (`matched_by: name`); the remaining names on
each side are grouped by their normalized form (names.normalize) and a group found on both
sides is a "renamed" match (`normalized_name`: a template instance or numeric suffix
changed); the names still left are grouped by the operation they implement
(operations.py: the operator, its shapes and the category, or the same library kernel at
another tile) and a group found on both sides is "renamed" too (`operator` or `tile`). What
is left is "new" or "vanished". Kernels are summed over devices.

When both reports have the work inside their complete steps (metrics.step_work), every
figure is per complete step from that work (`source: in_step`): calls and time per step,
time per call, and the Hodges-Lehmann changes of time per step and per call with their
intervals (in_step.py); the per-call figures shown beside the change are the medians it is
about (`per_call_stat: median`), the mean (time / calls) only where report.json keeps no
series for the name. Otherwise (`source: totals`) each kernel is compared per call, on its
median duration (metrics.top_kernels p50_ns; over several devices or names, the
calls-weighted median of theirs), and its calls and time as measured over the whole
capture, never divided by the captured window. Rows are sorted by the absolute change of
compared time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nsys_llm_explainer.diff import in_step, operations, peaks
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
    "matched_by",
    "operation",
    "per_call_stat",
    "base_peak_pct",
    "base_peak_of",
    "new_peak_pct",
    "new_peak_of",
)
BASE_COLUMNS = COLUMNS[:8] + ("matched_by", "operation")
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


def _pairs(key: pd.Index, gb: pd.DataFrame, gn: pd.DataFrame, how: str) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "key": key,
            "match": "renamed",
            "base_name": gb.loc[key, "name"].to_numpy(),
            "new_name": gn.loc[key, "name"].to_numpy(),
            "base_calls": gb.loc[key, "calls"].to_numpy(),
            "new_calls": gn.loc[key, "calls"].to_numpy(),
            "base_total_ns": gb.loc[key, "total_ns"].to_numpy(),
            "new_total_ns": gn.loc[key, "total_ns"].to_numpy(),
            "matched_by": how,
        }
    )


def match(fb: pd.DataFrame, fn: pd.DataFrame, sides: tuple[Side, Side] | None = None) -> pd.DataFrame:
    """One row per matched kernel (or group), new kernel or vanished kernel; raw figures.
    `sides`: the two reports, for matching what names leave by operation (operations.py)."""
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
            "matched_by": "name",
        }
    )
    lb = fb[~fb["name"].isin(fn["name"])].assign(key=lambda d: d["name"].map(normalize))
    ln = fn[~fn["name"].isin(fb["name"])].assign(key=lambda d: d["name"].map(normalize))
    gb, gn = _groups(lb), _groups(ln)
    both = gb.index.intersection(gn.index)
    frames = [same, _pairs(both, gb, gn, "normalized_name")]
    lb, ln = lb[~lb["key"].isin(both)], ln[~ln["key"].isin(both)]
    operation: dict[str, str] = {}
    if sides is not None and len(lb) and len(ln):
        sb, sn, _ = operations.signatures(*sides, lb["name"].tolist(), ln["name"].tolist())
        shared = set(sb.values()) & set(sn.values())
        if shared:
            text = {sig: f"\x00{operations.describe(sig)}" for sig in shared}
            how = {t: operations.how_matched(sig) for sig, t in text.items()}
            ob = lb.assign(key=lb["name"].map(lambda n: text.get(sb.get(n), "")))  # type: ignore[arg-type]
            on = ln.assign(key=ln["name"].map(lambda n: text.get(sn.get(n), "")))  # type: ignore[arg-type]
            ob, on = ob[ob["key"] != ""], on[on["key"] != ""]
            gb_op, gn_op = _groups(ob), _groups(on)
            by_op = gb_op.index.intersection(gn_op.index)
            pairs = _pairs(by_op, gb_op, gn_op, "operator")
            frames.append(pairs.assign(matched_by=pairs["key"].map(how)))
            operation = {k: k[1:] for k in by_op}
            lb = lb[~lb["name"].isin(ob["name"])]
            ln = ln[~ln["name"].isin(on["name"])]
    vanished = _side_frame(lb, "base").assign(match="vanished", matched_by=None)
    added = _side_frame(ln, "new").assign(match="new", matched_by=None)
    frames += [vanished, added]
    frames = [f for f in frames if len(f)]
    out = (
        pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(BASE_COLUMNS))
    )
    out["operation"] = out["key"].map(operation) if operation else None
    if operation:  # the group's key: its operation, readable
        out["key"] = out["key"].map(lambda k: operation.get(k, k))
    for col in ("base_calls", "new_calls", "base_total_ns", "new_total_ns"):
        out[col] = pd.to_numeric(out[col]).fillna(0).astype(np.int64)
    return out.loc[:, list(BASE_COLUMNS)]


def _frame(w: in_step.Work) -> pd.DataFrame:
    rows = [(n, r["calls"], r["ns"]) for n, r in w.names.items()]
    return _per_name({"kernels": [{"name": n, "calls": c, "total_ns": t} for n, c, t in rows]})


CHANGE_COLUMNS = COLUMNS[12:23]  # base_per_call_ns .. category
NO_CHANGE = {"change_pct": None, "low_pct": None, "high_pct": None, "delta_ns": None, "beyond_noise": False,
             "base_median": None, "new_median": None}


def _with_changes(rows: pd.DataFrame, wb: in_step.Work, wn: in_step.Work) -> pd.DataFrame:
    """Per-call and per-step-time changes (Hodges-Lehmann, with intervals) of matched rows;
    the per-call figures beside them are the medians the change is about."""
    cols: dict[str, list[Any]] = {c: [] for c in (*CHANGE_COLUMNS, "per_call_stat")}
    for r in rows.itertuples(index=False):
        bc, nc = int(r.base_calls), int(r.new_calls)
        if r.match in ("same", "renamed"):
            ch = in_step.kernel_changes(wb, wn, r.base_name, r.new_name, NAME_SEP)
            pc, tm = ch["per_call"], ch["time"]
        else:
            pc = tm = NO_CHANGE
        if pc["base_median"] is not None:
            cols["base_per_call_ns"].append(round(pc["base_median"], 1))
            cols["new_per_call_ns"].append(round(pc["new_median"], 1))
            cols["per_call_stat"].append("median")
        else:
            cols["base_per_call_ns"].append(round(r.base_total_ns / bc, 1) if bc else None)
            cols["new_per_call_ns"].append(round(r.new_total_ns / nc, 1) if nc else None)
            cols["per_call_stat"].append("mean")
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


def weighted_median(pairs: list[tuple[float, float]]) -> float | None:
    """The median of values given as (value, weight) pairs: the smallest value at or past half
    the total weight (the lower median, as numpy's on an even count of equal weights averages)."""
    pairs = sorted(p for p in pairs if p[1] > 0)
    total = sum(w for _, w in pairs)
    if not total:
        return None
    run = 0.0
    for i, (v, w) in enumerate(pairs):
        run += w
        if run > total / 2:
            return v
        if run == total / 2:
            return (v + pairs[i + 1][0]) / 2 if i + 1 < len(pairs) else v
    return pairs[-1][0]


def _p50s(m: dict[str, Any]) -> dict[str, list[tuple[float, float]]]:
    """name -> [(median duration, calls)] per device (metrics.top_kernels)."""
    out: dict[str, list[tuple[float, float]]] = {}
    for k in m.get("kernels", []):
        if isinstance(k, dict) and isinstance(k.get("p50_ns"), int | float) and k.get("calls"):
            out.setdefault(str(k["name"]), []).append((float(k["p50_ns"]), float(k["calls"])))
    return out


def _per_call(rows: pd.DataFrame, mb: dict[str, Any], mn: dict[str, Any]) -> pd.DataFrame:
    """Without steps: each row's median duration per call on both sides and its change."""
    pb, pn = _p50s(mb), _p50s(mn)

    def median(table: dict[str, list[tuple[float, float]]], names: Any) -> float | None:
        if not isinstance(names, str) or not names:
            return None
        return weighted_median([p for n in names.split(NAME_SEP) for p in table.get(n, [])])

    cols: dict[str, list[Any]] = {c: [] for c in (*CHANGE_COLUMNS, "per_call_stat")}
    for r in rows.itertuples(index=False):
        b, n = median(pb, r.base_name), median(pn, r.new_name)
        cols["base_per_call_ns"].append(None if b is None else round(b, 1))
        cols["new_per_call_ns"].append(None if n is None else round(n, 1))
        cols["per_call_stat"].append("median")
        pct = round(100.0 * (n - b) / b, 4) if b and n is not None and r.match in ("same", "renamed") else None
        cols["per_call_pct"].append(pct)
        for c in ("per_call_low_pct", "per_call_high_pct", "time_pct", "time_low_pct", "time_high_pct",
                  "time_delta_ns"):
            cols[c].append(None)
        cols["beyond_noise"].append(False)
        cols["category"].append(None)
    return rows.assign(**cols)


def _peaks(rows: pd.DataFrame, base: Side, new: Side) -> pd.DataFrame:
    tb, tn = peaks.of_side(base), peaks.of_side(new)
    b = [peaks.of_names(tb, x, NAME_SEP) for x in rows["base_name"].tolist()]
    n = [peaks.of_names(tn, x, NAME_SEP) for x in rows["new_name"].tolist()]
    return rows.assign(base_peak_pct=[x["pct"] for x in b], base_peak_of=[x["of"] for x in b],
                       new_peak_pct=[x["pct"] for x in n], new_peak_of=[x["of"] for x in n])


def compare(base: Side, new: Side, wb: in_step.Work | str | None = None,
            wn: in_step.Work | str | None = None) -> dict[str, Any]:
    """diff.json `kernels`, plus the rows as a frame for tables/diff_kernels.csv."""
    mb, mn = base.metric("top_kernels"), new.metric("top_kernels")
    if mb is None or mn is None:
        reason = base.why_missing("top_kernels") if mb is None else new.why_missing("top_kernels")
        return {"status": "not_compared", "reason": reason, "rows": [], "counts": {}, "frame": None}
    steps = isinstance(wb, in_step.Work) and isinstance(wn, in_step.Work)
    if steps:
        assert isinstance(wb, in_step.Work) and isinstance(wn, in_step.Work)
        rows = match(_frame(wb), _frame(wn), (base, new))
        db, dn = float(wb.steps), float(wn.steps)
    else:
        rows = match(_per_name(mb), _per_name(mn), (base, new))
        db = dn = 1.0
    rows["base_compared_ns"] = (rows["base_total_ns"] / db).round(3)
    rows["new_compared_ns"] = (rows["new_total_ns"] / dn).round(3)
    bc, nc = rows["base_total_ns"] / db, rows["new_total_ns"] / dn
    rows["delta_ns"] = (nc - bc).round(3)
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = np.where(bc > 0, 100.0 * (nc - bc) / bc, np.nan)
    rows["delta_pct"] = np.round(pct, 4)
    rows = _with_changes(rows, wb, wn) if steps else _per_call(rows, mb, mn)  # type: ignore[arg-type]
    rows = _peaks(rows, base, new)
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
        "by_operation": int((rows["matched_by"].isin(("operator", "tile"))).sum()),
        "rows": records,
        "frame": rows,
    }
