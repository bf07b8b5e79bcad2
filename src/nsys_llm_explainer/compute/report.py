"""compute_efficiency's work (compute_efficiency.py holds the metric): the operations and
kernels of the counted calls, their roofline placement, the families, the kernel time
without a count, and the roofline the plot draws."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis.context import NO_KERNELS, Context
from nsys_llm_explainer.analysis.groups import group_sum
from nsys_llm_explainer.compute.advice import shapes_missing
from nsys_llm_explainer.compute.columns import KERNEL_COLUMNS, OPERATION_COLUMNS
from nsys_llm_explainer.compute.count import ComputeView, compute_view
from nsys_llm_explainer.compute.device_peaks import DevicePeaks, device_peaks
from nsys_llm_explainer.compute.opcost import has_formula, is_autograd_node
from nsys_llm_explainer.compute.shapes import Uncounted
from nsys_llm_explainer.compute.sources import NVTX_CAPTURE
from nsys_llm_explainer.compute.tables import (
    bandwidth_note,
    implausible_note,
    kernel_frame,
    key_attrs,
    operation_frame,
    place,
)
from nsys_llm_explainer.errors import UsageError
from nsys_llm_explainer.model import MetricResult, Outcome, Skipped, Table
from nsys_llm_explainer.results.run import Workload

UNCOVERED_LISTED = 10
OPERATORS_LISTED = 30
COMPILED = ("CompiledFunction", "Torch-Compiled Region", "torch_compile")
SOURCES = {
    "kineto": "PyTorch profiler operators (record_shapes: Input Dims, Input type)",
    "nvtx": "PyTorch NVTX range names with sizes (emit_nvtx(record_shapes=True))",
}


def _family_rows(ops: pd.DataFrame, total_ns: int) -> list[dict[str, Any]]:
    out = []
    for fam, g in ops.groupby("family", sort=False):
        ns, flops, nbytes = int(g["kernel_ns"].sum()), float(g["flops"].sum()), float(g["bytes"].sum())
        out.append({
            "family": fam, "calls": int(g["calls"].sum()), "flops": flops, "bytes": nbytes,
            "kernel_ns": ns, "pct_of_kernel_time": round(100.0 * ns / total_ns, 2) if total_ns else 0.0,
            "tflops": round(flops / ns / 1e3, 3) if ns and flops else None,
            "gbps": round(nbytes / ns, 1) if ns else None,
        })
    return sorted(out, key=lambda r: -r["kernel_ns"])


def _by_operator(ops: pd.DataFrame, dp: DevicePeaks) -> list[dict[str, Any]]:
    """Operations summed per operator, dtype and device, placed like the operations."""
    sums = ops.groupby(["operator", "compute_dtype", "device_id"], sort=False)[
        ["calls", "flops", "bytes", "kernel_ns"]
    ].sum().reset_index()
    placed = place(sums, dp).sort_values(["kernel_ns", "operator"], ascending=[False, True], kind="stable")
    return placed.head(OPERATORS_LISTED).to_dict("records")


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


def _uncovered(v: ComputeView, dur: np.ndarray) -> tuple[int, list[dict[str, Any]]]:
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
        rows.append({
            "operator": v.inst.names[i - 1] if i else "(no operator)", "kernels": int(calls[i]),
            "kernel_ns": int(ns[i]), "reason": _uncovered_reason(v, i - 1),
        })
    return int(dur[out].sum()), rows


def _roofline(ops: pd.DataFrame, dp: DevicePeaks) -> dict[str, Any] | None:
    flop_ops = ops[ops["flops"] > 0]
    if not len(flop_ops):
        return None
    by_dev = flop_ops.groupby("device_id")["kernel_ns"].sum()
    dev = int(by_dev.idxmax())
    on_dev = flop_ops[flop_ops["device_id"] == dev]
    roofs = dp.roofs(dev, sorted(set(on_dev["compute_dtype"].tolist())))
    resolved = dp.resolved[dev]
    return {
        "device_id": dev,
        "model": resolved.spec.model if resolved.spec else None,
        "peaks_basis": resolved.basis,
        "roofs": [
            {"dtype": r.dtype, "peak_tflops": round(r.peak_flops / 1e12, 3),
             "bandwidth_gbps": round(r.peak_bandwidth / 1e9, 1), "ridge_flop_per_byte": round(r.ridge, 1)}
            for r in roofs
        ],
        "operations": int(len(on_dev)),
    }


def run(ctx: Context, metric_id: str) -> Outcome:
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
    data = {
        "source": v.inst.source,
        "shapes_from": SOURCES[v.inst.source],
        "devices": [dp.describe(d) for d in dp.devices],
        "peak_table": dp.table_source,
        "totals": {
            "operations": int(len(ops)),
            "calls": int(ops["calls"].sum()),
            "costed_calls": v.counted.costed_calls,
            "calls_without_kernels": int((v.counted.kernel_ns == 0).sum()),
            "flops": flops,
            "bytes": float(ops["bytes"].sum()),
            "kernel_ns": counted_ns,
            "total_kernel_ns": total,
            "coverage_pct": round(100.0 * counted_ns / total, 2) if total else 0.0,
            "tflops": round(flops / counted_ns / 1e3, 3) if counted_ns else None,
            "uncovered_kernel_ns": uncovered_ns,
            "implausible_operations": int(ops["implausible"].astype(bool).sum()),
            "above_bandwidth_operations": int(ops["above_bandwidth"].astype(bool).sum()),
        },
        "by_family": _family_rows(ops, total),
        "by_operator": _by_operator(ops, dp),
        "roofline": _roofline(ops, dp),
        "operations": ops.to_dict("records"),
        "kernels": kern.to_dict("records"),
        "uncovered": uncovered,
    }
    tables = (
        Table("compute_operations", OPERATION_COLUMNS, ops),
        Table("compute_kernels", KERNEL_COLUMNS, kern),
    )
    return MetricResult(metric_id, data, tables, tuple(notes))
