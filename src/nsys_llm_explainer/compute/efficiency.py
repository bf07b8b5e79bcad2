"""compute_efficiency's work (metrics/compute_efficiency.py holds the metric): the operations
and kernels of the counted calls, their roofline placement, the families, the kernel time
without a count, and the roofline the plot draws.

The tables: counted calls grouped per operation (operator, input sizes,
dtype, device) and per kernel, each placed under its GPU's roof for its dtype.

An operation's achieved FLOP/s is its FLOPs over the time of its kernels; a kernel's FLOPs
and bytes are its call's, split among the call's kernels in proportion to their time (a
GEMM with a split-K reduction kernel gives the reduction its time share). Everything is
grouped by codes; Python loops run once per group, never per call or kernel.

OPERATION_COLUMNS and KERNEL_COLUMNS are the columns of its two CSV tables."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis.context import NO_KERNELS, Context
from nsys_llm_explainer.analysis.groups import group_codes, group_sum
from nsys_llm_explainer.compute.cost import OpCost, short_name
from nsys_llm_explainer.compute.count import ComputeView, compute_view
from nsys_llm_explainer.compute.gemm import FP32_NOTE
from nsys_llm_explainer.compute.opcost import has_formula, is_autograd_node
from nsys_llm_explainer.compute.peaks import PLAUSIBLE_TOLERANCE, DevicePeaks, device_peaks, place_many
from nsys_llm_explainer.compute.shapes import Uncounted
from nsys_llm_explainer.compute.sources import NVTX_CAPTURE, shapes_missing
from nsys_llm_explainer.errors import UsageError
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.kernels.math_mode import math_mode
from nsys_llm_explainer.model import Skipped, Table
from nsys_llm_explainer.results.efficiency import (
    ComputeEfficiency,
    ComputeKernel,
    ComputeRoofline,
    ComputeTotals,
    DtypeRoof,
    FamilyRow,
    Json,
    Operation,
    Uncovered,
)
from nsys_llm_explainer.results.run import Workload

DIMS = ("batch", "m", "n", "k")
PLACE_COLUMNS = (
    "tflops", "gbps", "flop_per_byte", "ridge_flop_per_byte", "bound", "roof_tflops", "pct_of_roof",
    "implausible", "above_bandwidth",
)
OPERATION_COLUMNS = (
    "operator", "label", "shapes", "dtype", "compute_dtype", "dtype_source", "family", "direction",
    "device_id", "calls", "flops", "bytes", "kernel_ns", "pct_of_kernel_time", "flops_per_call",
    *PLACE_COLUMNS, *DIMS, "formula", "assumptions",
)
KERNEL_COLUMNS = (
    "name", "device_id", "compute_dtype", "family", "calls", "flops", "bytes", "kernel_ns",
    *PLACE_COLUMNS, "math_dtype", "tensor_cores", "operator", "unclaimed_calls",
)


LABEL_CHARS = 60


@frozen
class KeyAttrs:
    """Per cost key, as arrays and code tables."""

    family: np.ndarray  # object: "gemm", "attention", ... ("" for Uncounted)
    direction: np.ndarray
    dtype: np.ndarray
    source: np.ndarray
    formula: np.ndarray
    notes: np.ndarray
    dims: np.ndarray  # (keys, 4) int64: batch, M, N, K of matrix products, -1 otherwise
    shape_code: np.ndarray


def key_attrs(v: ComputeView) -> KeyAttrs:
    n = len(v.inst.costs)
    cols: dict[str, list[Any]] = {c: [""] * n for c in ("family", "direction", "dtype", "source", "formula", "notes")}
    dims = np.full((n, 4), -1, dtype=np.int64)
    for i, c in enumerate(v.inst.costs):
        if not isinstance(c, OpCost):
            continue
        cols["family"][i], cols["direction"][i], cols["dtype"][i] = c.family, c.direction, c.dtype
        cols["source"][i], cols["formula"][i] = c.dtype_source, c.formula
        notes = list(c.assumptions)
        if v.inst.source == "nvtx" and v.inst.dtype_evidence[i]:
            notes.insert(0, f"dtype {c.dtype} assumed: {v.inst.dtype_evidence[i]}")
        cols["notes"][i] = "; ".join(notes)
        if c.family == "gemm" and all(d in c.extra for d in DIMS):
            dims[i] = [int(c.extra[d]) for d in DIMS]  # type: ignore[call-overload]
    arrays = {k: np.array(x, dtype=object) for k, x in cols.items()}
    return KeyAttrs(**arrays, dims=dims, shape_code=_codes(np.array(v.inst.shapes, dtype=object)))


def _codes(values: np.ndarray) -> np.ndarray:
    """Dense codes of an object (text) array."""
    return pd.factorize(values, sort=False)[0].astype(np.int64)


def place(frame: pd.DataFrame, dp: DevicePeaks) -> pd.DataFrame:
    """Adds the roofline columns from flops, bytes, kernel_ns, device_id, compute_dtype."""
    pairs = list(zip(frame["device_id"].tolist(), frame["compute_dtype"].tolist(), strict=True))
    cache: dict[tuple[int, str], tuple[float, float]] = {}
    for dev, cls in set(pairs):
        cache[(dev, cls)] = (dp.peak_flops(dev, cls or None), dp.bandwidth(dev))
    peak = np.array([cache[p][0] for p in pairs], dtype=np.float64)
    bw = np.array([cache[p][1] for p in pairs], dtype=np.float64)
    flops = frame["flops"].to_numpy(np.float64)
    nbytes = frame["bytes"].to_numpy(np.float64)
    p = place_many(flops, nbytes, frame["kernel_ns"].to_numpy(np.float64) / 1e9, peak, bw)
    has_flops = flops > 0
    known = np.where(has_flops, np.isfinite(peak), np.isfinite(bw))
    with np.errstate(invalid="ignore", divide="ignore"):
        ridge = peak / bw
    return frame.assign(
        tflops=_round(np.where(has_flops, p.achieved_flops / 1e12, np.nan), 3),
        gbps=_round(p.achieved_bandwidth / 1e9, 1),
        flop_per_byte=_round(np.where(has_flops, p.intensity, np.nan), 2),
        ridge_flop_per_byte=_round(np.where(has_flops, ridge, np.nan), 1),
        bound=pd.Series(np.where(has_flops & p.compute_bound, "compute", "memory"), dtype=object).where(known, None),
        roof_tflops=_round(np.where(has_flops, p.attainable / 1e12, np.nan), 3),
        pct_of_roof=_round(100.0 * p.efficiency, 1),
        implausible=has_flops & p.implausible,
        above_bandwidth=p.above_bandwidth,
    )


def _round(x: np.ndarray, digits: int) -> pd.Series:
    """Rounded floats with None where not finite (JSON null, an empty CSV cell)."""
    s = pd.Series(np.round(np.asarray(x, dtype=np.float64), digits))
    return s.astype(object).where(np.isfinite(s.to_numpy(np.float64)), None)


def _notes(notes: str, cls: str) -> str:
    """A float32 product measured at the class its kernel showed, not PyTorch's default."""
    if FP32_NOTE not in notes:
        return notes
    if cls == "fp32":
        return notes.replace(FP32_NOTE, "float32 operands measured against the FP32 CUDA-core peak "
                             "(PyTorch's default allow_tf32=False; its kernel name shows no TF32)")
    return notes.replace(FP32_NOTE, f"float32 operands measured against the {cls} peak: its kernel runs {cls} math")


def _label(name: str, shapes: str) -> str:
    text = f"{short_name(name)} {shapes}"
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 3] + "..."


def operation_frame(v: ComputeView, a: KeyAttrs, dp: DevicePeaks, total_ns: int) -> pd.DataFrame:
    c = v.counted
    on = np.flatnonzero(c.kernel_ns > 0)
    if not len(on):
        return pd.DataFrame({col: pd.Series(dtype=object) for col in OPERATION_COLUMNS})
    key = v.call_key[on]
    name = v.inst.name[c.pos[on]]
    cls = v.call_cls[on]
    g, (g_name, _, _, _, g_dev) = group_codes(
        name, a.shape_code[key], _codes(cls), _codes(a.dtype[key]), v.call_device[on]
    )
    ng = int(g.max()) + 1
    first = np.zeros(ng, dtype=np.int64)
    first[g[::-1]] = np.arange(len(g) - 1, -1, -1)
    rep = key[first]
    calls = np.bincount(g, minlength=ng)
    flops = group_sum(v.kc.flops[key], g, ng)
    kernel_ns = group_sum(c.kernel_ns[on], g, ng)
    names = [v.inst.names[int(i)] for i in g_name]
    shapes = [v.inst.shapes[int(k)] for k in rep]
    frame = pd.DataFrame({
        "operator": names,
        "label": [_label(n, s) for n, s in zip(names, shapes, strict=True)],
        "shapes": shapes,
        "dtype": a.dtype[rep], "compute_dtype": cls[first], "dtype_source": a.source[rep],
        "family": a.family[rep], "direction": a.direction[rep], "device_id": g_dev,
        "calls": calls, "flops": flops, "bytes": group_sum(v.kc.bytes[key], g, ng),
        "kernel_ns": kernel_ns,
        "pct_of_kernel_time": np.round(100.0 * kernel_ns / total_ns, 2) if total_ns else 0.0,
        "flops_per_call": np.round(flops / calls, 0),
        **{d: a.dims[rep, i] for i, d in enumerate(DIMS)},
        "formula": a.formula[rep],
        "assumptions": [_notes(n, c) for n, c in zip(a.notes[rep], cls[first], strict=True)],
    })
    frame = place(frame, dp)
    for d in DIMS:
        frame[d] = frame[d].astype(object).where(frame[d] >= 0, None)
    frame = frame.sort_values(["kernel_ns", "flops", "operator"], ascending=[False, False, True], kind="stable")
    return frame.reset_index(drop=True)[list(OPERATION_COLUMNS)]


def kernel_frame(v: ComputeView, a: KeyAttrs, dp: DevicePeaks, kernels: Any,
                 names: dict[int, str]) -> pd.DataFrame:
    c = v.counted
    rows = np.flatnonzero(c.kernel_call >= 0)
    if not len(rows):
        return pd.DataFrame({col: pd.Series(dtype=object) for col in KERNEL_COLUMNS})
    call = c.kernel_call[rows]
    share = kernels.dur[rows] / np.maximum(c.kernel_ns[call], 1)
    key = v.call_key[call]
    cls = v.call_cls[call]
    g, (g_name, g_dev, _) = group_codes(kernels.name_id[rows], kernels.device[rows], _codes(cls))
    ng = int(g.max()) + 1
    first = np.zeros(ng, dtype=np.int64)
    first[g[::-1]] = np.arange(len(g) - 1, -1, -1)
    rep = key[first]
    full = [names.get(int(i), f"(unnamed kernel #{int(i)})") for i in g_name]
    family = a.family[rep]
    modes = [math_mode(n) if f in ("gemm", "conv") else None for n, f in zip(full, family, strict=True)]
    frame = pd.DataFrame({
        "name": full, "device_id": g_dev, "compute_dtype": cls[first], "family": family,
        "calls": np.bincount(g, minlength=ng),
        "unclaimed_calls": _unclaimed(c.kernel_call, kernels, g_name, g_dev),
        "flops": np.round(group_sum(v.kc.flops[key] * share, g, ng), 0),
        "bytes": np.round(group_sum(v.kc.bytes[key] * share, g, ng), 0),
        "kernel_ns": group_sum(kernels.dur[rows], g, ng),
        "math_dtype": [m.dtype if m else None for m in modes],
        "tensor_cores": [m.tensor_cores if m else None for m in modes],
        "operator": _launchers(g, v.inst.name[c.pos[call]], v.inst.names, ng),
    })
    frame = place(frame, dp)
    frame = frame.sort_values(["kernel_ns", "name"], ascending=[False, True], kind="stable")
    return frame.reset_index(drop=True)[list(KERNEL_COLUMNS)]


def _launchers(g: np.ndarray, op: np.ndarray, op_names: list[str], ng: int) -> list[str]:
    """Per kernel group, every operator whose counted calls launched it, with its kernel
    count, most first (ties by name): "aten::mm (96), aten::addmm (72)"."""
    pair, (p_group, p_op) = group_codes(g, op)
    counts = np.bincount(pair, minlength=int(pair.max()) + 1 if len(pair) else 0)
    by_group: list[list[tuple[int, str]]] = [[] for _ in range(ng)]
    for grp, o, n in zip(p_group.tolist(), p_op.tolist(), counts.tolist(), strict=True):
        by_group[grp].append((n, op_names[int(o)]))
    return [", ".join(f"{name} ({n:,})" for n, name in sorted(ops, key=lambda t: (-t[0], t[1])))
            for ops in by_group]


def _unclaimed(kernel_call: np.ndarray, kernels: Any, g_name: np.ndarray, g_dev: np.ndarray) -> np.ndarray:
    """Per kernel group (name, device): the kernels of that name on that device that no counted
    operator call launched (no operator encloses them, or theirs has no formula)."""
    out = np.flatnonzero(kernel_call < 0)
    if not len(out):
        return np.zeros(len(g_name), dtype=np.int64)
    key = pd.MultiIndex.from_arrays([kernels.name_id[out], kernels.device[out]])
    counts = pd.Series(1, index=key).groupby(level=[0, 1]).sum()
    want = pd.MultiIndex.from_arrays([g_name, g_dev])
    return counts.reindex(want, fill_value=0).to_numpy(dtype=np.int64)


def implausible_note(frame: pd.DataFrame) -> str | None:
    bad = frame[frame["implausible"].astype(bool)] if len(frame) else frame
    if not len(bad):
        return None
    worst = bad.sort_values("kernel_ns", ascending=False).iloc[0]
    return (
        f"{len(bad)} operation(s) exceed their dtype's peak by more than "
        f"{PLAUSIBLE_TOLERANCE:.0%} (e.g. {worst['label']}: {worst['tflops']} TFLOP/s against a "
        f"{worst['compute_dtype']} roof of {worst['roof_tflops']}): the shapes, the dtype or "
        "the peak figure is wrong for them"
    )


def bandwidth_note(frame: pd.DataFrame, dp: DevicePeaks) -> str | None:
    """A note naming the rows whose compulsory bytes moved faster than the memory peak
    allows (by more than the tolerance), with the longest of them."""
    bad = frame[frame["above_bandwidth"].astype(bool)] if len(frame) else frame
    if not len(bad):
        return None
    worst = bad.sort_values("kernel_ns", ascending=False).iloc[0]
    peak = dp.bandwidth(int(worst["device_id"])) / 1e9
    return (
        f"{len(bad)} operation(s) move their compulsory bytes faster than the memory peak "
        f"by more than {PLAUSIBLE_TOLERANCE:.0%} (e.g. {worst['label']}: {worst['gbps']:,} GB/s, "
        f"{100.0 * float(worst['gbps']) / peak:.0f}% of {peak:,.0f} GB/s): their data was served "
        "from L2 cache (inputs a previous operation left there), or the recorded shapes "
        "overstate the bytes they move"
    )


UNCOVERED_LISTED = 10
OPERATORS_LISTED = 30
COMPILED = ("CompiledFunction", "Torch-Compiled Region", "torch_compile")
SOURCES = {
    "kineto": "PyTorch profiler operators (record_shapes: Input Dims, Input type)",
    "nvtx": "PyTorch NVTX range names with sizes (emit_nvtx(record_shapes=True))",
}


def _family_rows(ops: pd.DataFrame, total_ns: int) -> tuple[FamilyRow, ...]:
    out = []
    for fam, g in ops.groupby("family", sort=False):
        ns, flops, nbytes = int(g["kernel_ns"].sum()), float(g["flops"].sum()), float(g["bytes"].sum())
        out.append(FamilyRow(
            family=str(fam), calls=int(g["calls"].sum()), flops=flops, bytes=nbytes,
            kernel_ns=ns, pct_of_kernel_time=round(100.0 * ns / total_ns, 2) if total_ns else 0.0,
            tflops=round(flops / ns / 1e3, 3) if ns and flops else None,
            gbps=round(nbytes / ns, 1) if ns else None,
        ))
    return tuple(sorted(out, key=lambda r: -r.kernel_ns))


def _by_operator(ops: pd.DataFrame, dp: DevicePeaks) -> tuple[Json, ...]:
    """Operations summed per operator, dtype and device, placed like the operations."""
    sums = ops.groupby(["operator", "compute_dtype", "device_id"], sort=False)[
        ["calls", "flops", "bytes", "kernel_ns"]
    ].sum().reset_index()
    placed = place(sums, dp).sort_values(["kernel_ns", "operator"], ascending=[False, True], kind="stable")
    return tuple(placed.head(OPERATORS_LISTED).to_dict("records"))


def _uncovered_reason(v: ComputeView, code: int) -> str:
    if code < 0:
        return "no operator encloses its launch"
    name = v.inst.names[code]
    if any(w in name for w in COMPILED):
        return "a torch.compile graph: its kernels run without recorded aten operators (no shapes)"
    if is_autograd_node(name):
        return "an autograd node whose aten operators were not recorded"
    if not has_formula(name):
        return f"no FLOP or byte formula for {name}"
    sel = (v.inst.name == code) & (v.inst.key >= 0)
    for key in np.unique(v.inst.key[sel]).tolist():
        cost = v.inst.costs[key]
        if isinstance(cost, Uncounted):
            return cost.reason
    if v.inst.source == "nvtx":
        return f"its ranges carry no sizes: {NVTX_CAPTURE}"
    return "its input shapes were not recorded"


def _uncovered(v: ComputeView, dur: np.ndarray) -> tuple[int, tuple[Uncovered, ...]]:
    """Kernel time outside every counted call, by the innermost operator around the launch."""
    out = np.flatnonzero(v.counted.kernel_call < 0)
    pos = v.inst.kernel_pos[out]
    code = np.where(pos >= 0, v.inst.name[np.maximum(pos, 0)], -1) if len(pos) else pos
    n = len(v.inst.names) + 1
    ns = group_sum(dur[out], code + 1, n)
    calls = np.bincount(code + 1, minlength=n)
    rows = []
    for i in np.argsort(-ns, kind="stable")[:UNCOVERED_LISTED].tolist():
        if ns[i] <= 0:
            break
        rows.append(Uncovered(
            operator=v.inst.names[i - 1] if i else "(no operator)", kernels=int(calls[i]),
            kernel_ns=int(ns[i]), reason=_uncovered_reason(v, i - 1),
        ))
    return int(dur[out].sum()), tuple(rows)


def _roofline(ops: pd.DataFrame, dp: DevicePeaks) -> ComputeRoofline | None:
    flop_ops = ops[ops["flops"] > 0]
    if not len(flop_ops):
        return None
    by_dev = flop_ops.groupby("device_id")["kernel_ns"].sum()
    dev = int(by_dev.idxmax())
    on_dev = flop_ops[flop_ops["device_id"] == dev]
    roofs = dp.roofs(dev, sorted(set(on_dev["compute_dtype"].tolist())))
    resolved = dp.resolved[dev]
    return ComputeRoofline(
        device_id=dev,
        model=resolved.spec.model if resolved.spec else None,
        peaks_basis=resolved.basis,
        roofs=tuple(
            DtypeRoof(dtype=r.dtype, peak_tflops=round(r.peak_flops / 1e12, 3),
                      bandwidth_gbps=round(r.peak_bandwidth / 1e9, 1), ridge_flop_per_byte=round(r.ridge, 1))
            for r in roofs
        ),
        operations=int(len(on_dev)),
    )


Computed = tuple[ComputeEfficiency, tuple[Table, ...], tuple[str, ...]]


def run(ctx: Context, metric_id: str) -> Computed | Skipped:
    """compute_efficiency's result, its tables (OPERATION_COLUMNS, KERNEL_COLUMNS) and notes."""
    k = ctx.data.kernels()
    if len(k) == 0:
        return Skipped(metric_id, NO_KERNELS)
    v = compute_view(ctx.data)
    if isinstance(v, str):
        wl = ctx.typed(Workload)
        why = shapes_missing(v, wl.kind if wl else "unknown", ctx.data.format)
        return Skipped(metric_id, f"FLOPs and bytes per operation need operator shapes: {why}")
    try:
        dp = device_peaks(ctx)
    except UsageError as exc:
        return Skipped(metric_id, exc.message)
    total = int(k.dur.sum())
    a = key_attrs(v)
    ops = operation_frame(v, a, dp, total)
    if not len(ops):
        return Skipped(metric_id,
            f"{v.counted.costed_calls:,} operator calls have a cost, but none launched a kernel"
        )
    names = ctx.data.kernel_names(np.unique(k.name_id))
    kern = kernel_frame(v, a, dp, k, names)
    counted_ns, flops = int(ops["kernel_ns"].sum()), float(ops["flops"].sum())
    uncovered_ns, uncovered = _uncovered(v, k.dur)
    notes = list(dp.notes)
    if v.inst.source == "nvtx":
        notes.append("NVTX names carry no dtype: each range's dtype is assumed from its kernels' names")
    notes.extend(n for n in (implausible_note(ops), bandwidth_note(ops, dp)) if n)
    result = ComputeEfficiency(
        source=v.inst.source,
        shapes_from=SOURCES[v.inst.source],
        devices=tuple(dp.describe(d) for d in dp.devices),
        peak_table=dp.table_source,
        totals=ComputeTotals(
            operations=int(len(ops)),
            calls=int(ops["calls"].sum()),
            costed_calls=v.counted.costed_calls,
            calls_without_kernels=int((v.counted.kernel_ns == 0).sum()),
            flops=flops,
            bytes=float(ops["bytes"].sum()),
            kernel_ns=counted_ns,
            total_kernel_ns=total,
            coverage_pct=round(100.0 * counted_ns / total, 2) if total else 0.0,
            tflops=round(flops / counted_ns / 1e3, 3) if counted_ns else None,
            uncovered_kernel_ns=uncovered_ns,
            implausible_operations=int(ops["implausible"].astype(bool).sum()),
            above_bandwidth_operations=int(ops["above_bandwidth"].astype(bool).sum()),
        ),
        by_family=_family_rows(ops, total),
        by_operator=_by_operator(ops, dp),
        roofline=_roofline(ops, dp),
        operations=tuple(Operation.of(r) for r in ops.to_dict("records")),
        kernels=tuple(ComputeKernel.of(r) for r in kern.to_dict("records")),
        uncovered=uncovered,
    )
    tables = (
        Table("compute_operations", OPERATION_COLUMNS, ops),
        Table("compute_kernels", KERNEL_COLUMNS, kern),
    )
    return result, tables, tuple(notes)
