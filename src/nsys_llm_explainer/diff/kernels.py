"""Per-kernel deltas: match kernels across the two reports, by name, then by operation.

Matching runs in three passes so identical names never merge with their neighbours:
exact names present on both sides match first (`matched_by: name`); the remaining names on
each side are grouped by their normalized form (names.normalize) and a group found on both
sides is a "renamed" match (`normalized_name`: a template instance or numeric suffix
changed); the names still left are grouped by the operation they implement
(diff/kernels.py: the operator, its shapes and the category, or the same library kernel at
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

Kernel name normalization, so one kernel matches across builds.

Builds of the same model often differ only in template arguments (tile sizes, launch
bounds, functor instance numbers) or in compiler-assigned numeric suffixes
(`triton_poi_fused_add_3` vs `_7`). The normalized form:

1. removes every template argument list `<...>`, nested ones included (`operator<` and
   `operator->` are left alone);
2. replaces each standalone number (digits not touching a letter or digit, such as the
   `3` in `_3` or `(instance 2)`) with `#`;
3. drops whitespace except between two identifier characters.

Example: `void gemm<128, 64, (int)2>(float *, int)` -> `void gemm(float*,int)`.

What operation a kernel implements, so a kernel that changed its name matches its old self.

A library picks another kernel for the same operation when a build, a setting or the input
changes: cuBLAS's `nvjet_hsh_256x128_...` becomes `nvjet_hsh_128x256_...` for the same
`aten::mm`. Such a kernel is one row ("renamed"), not a new kernel and a vanished one. After
exact and normalized names (kernels.py), the names left on each side are matched by their
operation's signature:

- the operator that launched it (report.json `metrics.operators.operator_kernels`: the
  operator holding most of the name's kernel time; PyTorch profiler traces), its category
  (the report's step_work names, else the built-in category table) and, where both reports
  count them (`metrics.compute_efficiency.kernels`), its FLOPs and bytes per call rounded to
  SIGNIFICANT digits: the operation's shapes;
- without an operator (the report records none, or none launched the kernel): the category
  and the name up to its first tile shape
  (digit groups joined by `x`: `nvjet_hsh_` in `nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NNT`):
  the same library kernel family, its type and precision, at another tile (the tile, the
  cluster shape and the raster order that come with it change together).

Names with no category ("other") or no operator and no tile shape in their name are not
matched this way: a category alone does not say two kernels do the same work. Several names
of one signature on a side make one row (their calls and time summed), as normalized names do.

Each kernel's achieved rate as a share of its own GPU's peak, for pairs run on different GPUs.

A kernel 30% slower on another GPU says little by itself; beside it, how close each side came
to its own GPU's peak says whether the kernel used both GPUs alike. Read from each report's
`metrics.compute_efficiency` (its `kernels` and its `devices`' peaks, docs/metrics/
compute_efficiency.md): for a kernel bound by compute (its FLOPs per byte at or beyond its GPU's
ridge point) its achieved FLOP/s over the peak FLOP/s of the precision it computes in; else its
achieved bytes/s over the peak memory bandwidth. Summed over devices and names by kernel time.
A kernel the report has no FLOPs or bytes for has none ("not computed")."""

from __future__ import annotations

import math
import re
from typing import Literal, NotRequired, TypedDict

import numpy as np
import pandas as pd

from nsys_llm_explainer.diff import in_step
from nsys_llm_explainer.diff.load import (
    ComputeEfficiencyDoc,
    EfficiencyDeviceDoc,
    EfficiencyKernelDoc,
    Side,
    TopKernelDoc,
    TopKernelsDoc,
)
from nsys_llm_explainer.kernels.categories import BUILTIN_TABLE, OTHER


def _device_peaks(m: ComputeEfficiencyDoc) -> dict[int | None, EfficiencyDeviceDoc]:
    return {d.get("device_id"): d for d in m.get("devices") or [] if isinstance(d, dict)}


def _one(row: EfficiencyKernelDoc, dev: EfficiencyDeviceDoc | None) -> tuple[float, str] | None:
    if dev is None:
        return None
    if row.get("bound") == "compute" and (tflops := row.get("tflops")):
        dtype = row.get("math_dtype") or row.get("compute_dtype")
        peak = (dev.get("peak_tflops") or {}).get(dtype) if dtype is not None else None
        return (100.0 * float(tflops) / float(peak), "FLOP/s") if peak else None
    if (gbps := row.get("gbps")) and (hbm := dev.get("hbm_gbps")):
        return 100.0 * float(gbps) / float(hbm), "bytes/s"
    return None


def of_side(side: Side) -> dict[str, tuple[float, float, str]]:
    """kernel name -> (weight: kernel ns, % of peak, "FLOP/s" or "bytes/s")."""
    m = side.metric("compute_efficiency")
    if m is None:
        return {}
    devices = _device_peaks(m)
    acc: dict[str, tuple[float, float, str]] = {}  # name -> (weight, weighted % of peak, of what)
    for row in m.get("kernels") or []:
        if not isinstance(row, dict) or row.get("implausible"):
            continue
        got = _one(row, devices.get(row.get("device_id")))
        if got is None:
            continue
        w = float(row.get("kernel_ns") or 0)
        name = str(row.get("name"))
        weight, weighted, what = acc.get(name, (0.0, 0.0, got[1]))
        acc[name] = (weight + w, weighted + w * got[0], what)
    return {n: (w, s / w, what) for n, (w, s, what) in acc.items() if w > 0}


class PeakShare(TypedDict):
    pct: float | None  # % of its GPU's peak
    of: str | None  # "FLOP/s", "bytes/s" or "mixed"


def of_names(table: dict[str, tuple[float, float, str]], names: object, sep: str) -> PeakShare:
    """The % of peak of one row's names (weighted by kernel time), or None."""
    if not isinstance(names, str) or not names:
        return {"pct": None, "of": None}
    found = [table[n] for n in names.split(sep) if n in table]
    weight = sum(f[0] for f in found)
    if not weight:
        return {"pct": None, "of": None}
    kinds = {f[2] for f in found}
    return {"pct": round(sum(f[0] * f[1] for f in found) / weight, 2),
            "of": kinds.pop() if len(kinds) == 1 else "mixed"}


SIGNIFICANT = 3
NO_OPERATOR = "(no operator)"
_TILE = re.compile(r"\d+(?:x\d+)+")

Signature = tuple[str, ...]


def _operators(side: Side) -> dict[str, str]:
    """kernel name -> the operator holding most of its kernel time."""
    m = side.metric("operators") or {}
    best: dict[str, tuple[float, str]] = {}
    for row in m.get("operator_kernels") or []:
        if not isinstance(row, dict) or row.get("operator") in (None, NO_OPERATOR):
            continue
        name, ns = str(row.get("kernel")), float(row.get("kernel_ns") or 0)
        if name not in best or ns > best[name][0]:
            best[name] = (ns, str(row["operator"]))
    return {k: v[1] for k, v in best.items()}


def _rounded(x: float) -> str:
    if x <= 0:
        return "0"
    digits = SIGNIFICANT - 1 - math.floor(math.log10(x))
    return f"{round(x, digits):.6g}"


def _work_per_call(side: Side) -> dict[str, str]:
    """kernel name -> FLOPs and bytes per call, rounded (the operation's shapes)."""
    m = side.metric("compute_efficiency") or {}
    acc: dict[str, list[float]] = {}
    for row in m.get("kernels") or []:
        if not isinstance(row, dict) or not isinstance(row.get("calls"), int) or not row["calls"]:
            continue
        a = acc.setdefault(str(row.get("name")), [0.0, 0.0, 0.0])
        a[0] += float(row.get("flops") or 0)
        a[1] += float(row.get("bytes") or 0)
        a[2] += row["calls"]
    return {n: f"{_rounded(f / c)} FLOP, {_rounded(b / c)} B" for n, (f, b, c) in acc.items()}


def _categories(side: Side, names: list[str]) -> dict[str, str]:
    sw = side.metric("step_work") or {}
    known = {str(r.get("name")): str(r.get("category")) for r in sw.get("names") or []
             if isinstance(r, dict) and r.get("category")}
    rest = [n for n in names if n not in known]
    if rest:
        cats, _ = BUILTIN_TABLE.classify(rest)
        known.update(zip(rest, cats, strict=True))
    return {n: known[n] for n in names}


def signatures(base: Side, new: Side, names_b: list[str], names_n: list[str]) -> tuple[
        dict[str, Signature], dict[str, Signature], str]:
    """Each name's signature on each side (names without one are left out), and how they
    were built ("operator" or "tile")."""
    ob, on = _operators(base), _operators(new)
    by_operator = bool(ob) and bool(on)
    wb, wn = _work_per_call(base), _work_per_call(new)
    shapes = bool(wb) and bool(wn)

    def one(side: Side, names: list[str], ops: dict[str, str], work: dict[str, str]) -> dict[str, Signature]:
        cats = _categories(side, names)
        out: dict[str, Signature] = {}
        for n in names:
            cat = cats[n]
            if cat == OTHER:
                continue
            if by_operator and n in ops:
                out[n] = (ops[n], cat, work.get(n, "?") if shapes else "")
            elif (m := _TILE.search(n)) is not None and m.start() > 0:  # no operator launched it
                out[n] = (cat, n[: m.start()])
        return out

    return one(base, names_b, ob, wb), one(new, names_n, on, wn), "operator" if by_operator else "tile"


def how_matched(sig: Signature) -> str:
    """"operator" (operator, category, shapes) or "tile" (category, library family)."""
    return "operator" if len(sig) == 3 else "tile"


def describe(sig: Signature, how: str = "") -> str:
    if len(sig) == 3:
        shapes = f", {sig[2]} per call" if sig[2] and sig[2] != "?" else ""
        return f"{sig[0]} ({sig[1]}{shapes})"
    return f"{sig[0]} kernels {sig[1]}* at another tile"


_OPERATORS = re.compile(r"operator\s*(<<=|>>=|<<|>>|<=|>=|->\*?|<|>)")
_NUMBER = re.compile(r"(?<![A-Za-z0-9])\d+(?![A-Za-z0-9])")
_SPACE_AROUND_PUNCT = re.compile(r"\s*([^\w\s])\s*")
_SPACES = re.compile(r"\s+")


def strip_templates(name: str) -> str:
    """Remove `<...>` lists; return the input unchanged if its brackets do not balance."""
    protected = _OPERATORS.sub(lambda m: "operator" + "\x00" * len(m.group(1)), name)
    out: list[str] = []
    depth = 0
    for i, ch in enumerate(protected):
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(name[i] if ch == "\x00" else ch)
    return name if depth else "".join(out)


def normalize(name: str) -> str:
    s = _SPACES.sub(" ", name).strip()
    s = strip_templates(s)
    s = _NUMBER.sub("#", s)
    return _SPACE_AROUND_PUNCT.sub(r"\1", s).strip()


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


def _per_name(kernels: list[TopKernelDoc]) -> pd.DataFrame:
    rows = pd.DataFrame(kernels, columns=["name", "calls", "total_ns"])
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
    `sides`: the two reports, for matching what names leave by operation (py)."""
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
        sb, sn, _ = signatures(*sides, lb["name"].tolist(), ln["name"].tolist())
        shared = set(sb.values()) & set(sn.values())
        if shared:
            text = {sig: f"\x00{describe(sig)}" for sig in shared}
            how = {t: how_matched(sig) for sig, t in text.items()}
            ob = lb.assign(key=lb["name"].map(lambda n: text.get(sb[n], "") if n in sb else ""))
            on = ln.assign(key=ln["name"].map(lambda n: text.get(sn[n], "") if n in sn else ""))
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
    return _per_name([{"name": n, "calls": c, "total_ns": t} for n, c, t in rows])


class ChangeFigures(TypedDict):
    """What a kernel row takes from a change row (in_step.ChangeRow)."""

    change_pct: float | None
    low_pct: float | None
    high_pct: float | None
    delta_ns: float | None
    beyond_noise: bool
    base_median: float | None
    new_median: float | None


CHANGE_COLUMNS = COLUMNS[12:23]  # base_per_call_ns .. category
NO_CHANGE: ChangeFigures = {"change_pct": None, "low_pct": None, "high_pct": None, "delta_ns": None,
                            "beyond_noise": False, "base_median": None, "new_median": None}


def _with_changes(rows: pd.DataFrame, wb: in_step.Work, wn: in_step.Work) -> pd.DataFrame:
    """Per-call and per-step-time changes (Hodges-Lehmann, with intervals) of matched rows;
    the per-call figures beside them are the medians the change is about."""
    cols: dict[str, list[object]] = {c: [] for c in (*CHANGE_COLUMNS, "per_call_stat")}
    for r in rows.itertuples(index=False):
        bc, nc = int(r.base_calls), int(r.new_calls)
        pc: ChangeFigures
        tm: ChangeFigures
        if r.match in ("same", "renamed"):
            ch = in_step.kernel_changes(wb, wn, r.base_name, r.new_name, NAME_SEP)
            pc, tm = ch["per_call"], ch["time"]
        else:
            pc = tm = NO_CHANGE
        if (bm := pc["base_median"]) is not None and (nm := pc["new_median"]) is not None:  # both or neither
            cols["base_per_call_ns"].append(round(bm, 1))
            cols["new_per_call_ns"].append(round(nm, 1))
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


def _p50s(m: TopKernelsDoc) -> dict[str, list[tuple[float, float]]]:
    """name -> [(median duration, calls)] per device (metrics.top_kernels)."""
    out: dict[str, list[tuple[float, float]]] = {}
    for k in m.get("kernels", []):
        if isinstance(k, dict) and isinstance(p50 := k.get("p50_ns"), int | float) and (calls := k.get("calls")):
            out.setdefault(str(k["name"]), []).append((float(p50), float(calls)))
    return out


def _per_call(rows: pd.DataFrame, mb: TopKernelsDoc, mn: TopKernelsDoc) -> pd.DataFrame:
    """Without steps: each row's median duration per call on both sides and its change."""
    pb, pn = _p50s(mb), _p50s(mn)

    def median(table: dict[str, list[tuple[float, float]]], names: object) -> float | None:
        if not isinstance(names, str) or not names:
            return None
        return weighted_median([p for n in names.split(NAME_SEP) for p in table.get(n, [])])

    cols: dict[str, list[object]] = {c: [] for c in (*CHANGE_COLUMNS, "per_call_stat")}
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
    tb, tn = of_side(base), of_side(new)
    b = [of_names(tb, x, NAME_SEP) for x in rows["base_name"].tolist()]
    n = [of_names(tn, x, NAME_SEP) for x in rows["new_name"].tolist()]
    return rows.assign(base_peak_pct=[x["pct"] for x in b], base_peak_of=[x["of"] for x in b],
                       new_peak_pct=[x["pct"] for x in n], new_peak_of=[x["of"] for x in n])


class KernelRow(TypedDict):
    """diff.json `kernels.rows` (COLUMNS; tables/diff_kernels.csv): a kernel, or a group of
    renamed ones, on both sides. Built from a frame: numbers are numpy scalars until plain()."""

    key: str
    match: Literal["same", "renamed", "new", "vanished"]
    base_name: str | None
    new_name: str | None
    base_calls: int
    new_calls: int
    base_total_ns: int
    new_total_ns: int
    base_compared_ns: float
    new_compared_ns: float
    delta_ns: float
    delta_pct: float | None
    base_per_call_ns: float | None
    new_per_call_ns: float | None
    per_call_pct: float | None
    per_call_low_pct: float | None
    per_call_high_pct: float | None
    time_pct: float | None
    time_low_pct: float | None
    time_high_pct: float | None
    time_delta_ns: float | None
    beyond_noise: bool
    category: str | None
    matched_by: str | None
    operation: str | None
    per_call_stat: Literal["median", "mean"]
    base_peak_pct: float | None
    base_peak_of: str | None
    new_peak_pct: float | None
    new_peak_of: str | None


class KernelsSection(TypedDict):
    """diff.json `kernels`."""

    status: Literal["ok", "not_compared"]
    reason: str | None
    source: NotRequired[Literal["in_step", "totals"]]
    name_modes: NotRequired[list[str | None]]
    rows: list[KernelRow]
    counts: dict[str, int]  # match -> rows
    by_operation: NotRequired[int]


def not_compared(reason: str) -> KernelsSection:
    return {"status": "not_compared", "reason": reason, "rows": [], "counts": {}}


def compare(base: Side, new: Side, wb: in_step.Work | str | None = None,
            wn: in_step.Work | str | None = None) -> tuple[KernelsSection, pd.DataFrame | None]:
    """diff.json `kernels`, and its rows as a frame for tables/diff_kernels.csv."""
    mb, mn = base.metric("top_kernels"), new.metric("top_kernels")
    if mb is None or mn is None:
        reason = base.why_missing("top_kernels") if mb is None else new.why_missing("top_kernels")
        return not_compared(reason), None
    steps = isinstance(wb, in_step.Work) and isinstance(wn, in_step.Work)
    if steps:
        assert isinstance(wb, in_step.Work) and isinstance(wn, in_step.Work)
        rows = match(_frame(wb), _frame(wn), (base, new))
        db, dn = float(wb.steps), float(wn.steps)
    else:
        rows = match(_per_name(mb.get("kernels", [])), _per_name(mn.get("kernels", [])), (base, new))
        db = dn = 1.0
    rows["base_compared_ns"] = (rows["base_total_ns"] / db).round(3)
    rows["new_compared_ns"] = (rows["new_total_ns"] / dn).round(3)
    bc, nc = rows["base_total_ns"] / db, rows["new_total_ns"] / dn
    rows["delta_ns"] = (nc - bc).round(3)
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = np.where(bc > 0, 100.0 * (nc - bc) / bc, np.nan)
    rows["delta_pct"] = np.round(pct, 4)
    if isinstance(wb, in_step.Work) and isinstance(wn, in_step.Work):  # steps
        rows = _with_changes(rows, wb, wn)
    else:
        rows = _per_call(rows, mb, mn)
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
    records: list[KernelRow] = rows.astype(object).where(rows.notna(), None).to_dict("records")
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
    }, rows
