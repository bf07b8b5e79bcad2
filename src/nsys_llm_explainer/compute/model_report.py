"""model_utilization's work (model_utilization.py holds the metric and its definitions): the
inputs, one row per step (model_steps.py) and the phases.

Plausibility of model_utilization's figures: warnings that name the inputs to check.

- Above the roof: no GPU computes faster than its dense peak or reads faster than its memory
  bandwidth, so an MFU, MBU or HFU above 100% x (1 + UTILIZATION_TOLERANCE) (the phase's, or
  its highest step's) means an input is wrong: tokens per step, FLOPs per token or bytes per
  step, the peak (the GPU model, or the dtype its peak class came from) or the GPU count.
  When the peak was assumed from kernel names (the export names no GPU), the warning says so:
  a newer GPU than the assumed one has higher peaks.
- HFU below MFU: the operators measured in a step compute at least the model's FLOPs (the
  hardware does the model's work, plus recomputation and padding), once their shapes cover
  the step (counted calls hold at least MIN_COVERAGE of the kernel time its operator calls
  launched). Measured FLOPs below the model's by more than the tolerance (both count causal
  attention half, as the kernels run it) mean the model FLOPs count work the steps did not run.

UTILIZATION_TOLERANCE is the operator roofline's PLAUSIBLE_TOLERANCE (10%): more than clock
boost or timer granularity can explain."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.compute import model_flops as mf
from nsys_llm_explainer.compute.count import compute_view
from nsys_llm_explainer.compute.model_steps import (
    PidGpus,
    StepContext,
    StepShapes,
    matmul_dtype,
    model_config,
    phase_rows,
    step_row,
    step_shapes,
)
from nsys_llm_explainer.compute.peaks import PLAUSIBLE_TOLERANCE, device_peaks
from nsys_llm_explainer.compute.sources import hfu_missing, model_inputs, shapes_missing
from nsys_llm_explainer.errors import UsageError
from nsys_llm_explainer.model import MetricResult, Outcome, Skipped, Table, TraceFormat
from nsys_llm_explainer.results.run import Steps, Workload

UTILIZATION_TOLERANCE = PLAUSIBLE_TOLERANCE
MIN_COVERAGE = 0.9
CEILING_PCT = 100.0 * (1 + UTILIZATION_TOLERANCE)


def _figure(phase: dict[str, Any], steps: list[dict[str, Any]], key: str) -> tuple[float, str] | None:
    """The highest of the phase's figure and its steps', and how to say it."""
    values = [float(s[key]) for s in steps if s.get(key) is not None]
    whole = float(phase[key]) if phase.get(key) is not None else None
    top = max(values, default=whole if whole is not None else float("nan"))
    if whole is None:
        return (top, f"up to {top:,.1f}% in its steps") if values else None
    if top > whole:
        return top, f"{whole:,.1f}% (steps up to {top:,.1f}%)"
    return whole, f"{whole:,.1f}%"


def _assumed(sc: StepContext, steps: list[dict[str, Any]]) -> str:
    notes = sorted({sc.per_pid[s["pid"]].assumed for s in steps if s["pid"] in sc.per_pid} - {""})
    if not notes:
        return ""
    return f"; the figures use assumed {notes[0]}"


def _ceiling(phase: dict[str, Any], steps: list[dict[str, Any]], sc: StepContext) -> list[str]:
    out = []
    first = steps[0]
    gpus = f"the GPU count ({phase['gpus']} per step)"
    peak = f"the {sc.cls} dense peak ({first['peak_tflops']} TFLOP/s per GPU)"
    bandwidth = f"the memory bandwidth ({first['bandwidth_gbps']} GB/s per GPU)"
    checks = (
        ("MFU", "mfu_pct", f"tokens per step ({first['tokens_from']}), FLOPs per token "
                           f"({first['flops_from']}), {peak} or {gpus}"),
        ("MBU", "mbu_pct", f"bytes per step ({first['bytes_from']}), {bandwidth} or {gpus}"),
        ("HFU", "hfu_pct", f"the recorded operator shapes or dtypes (measured FLOPs), {peak} or {gpus}"),
    )
    for name, key, inputs in checks:
        fig = _figure(phase, steps, key)
        if fig is None or not fig[0] > CEILING_PCT:
            continue
        out.append(
            f"phase {phase['phase']!r}: {name} {fig[1]} is above 100% by more than the "
            f"{UTILIZATION_TOLERANCE:.0%} tolerance, which no GPU can reach: check {inputs}"
            f"{_assumed(sc, steps)}"
        )
    return out


def _below_model(phase: dict[str, Any], steps: list[dict[str, Any]]) -> list[str]:
    covered = [s for s in steps if s.get("measured_flops") and s.get("floor_flops")
               and s["launched_ns"] and s["covered_ns"] >= MIN_COVERAGE * s["launched_ns"]]
    if not covered:
        return []
    measured = sum(float(s["measured_flops"]) for s in covered)
    floor = sum(float(s["floor_flops"]) for s in covered)
    if measured >= (1 - UTILIZATION_TOLERANCE) * floor:
        return []
    share = sum(s["covered_ns"] for s in covered) / sum(s["launched_ns"] for s in covered)
    hfu, mfu = phase.get("hfu_pct"), phase.get("mfu_pct")
    figures = f"HFU {hfu:.1f}% below MFU {mfu:.1f}%" if hfu is not None and mfu is not None else "HFU below MFU"
    return [
        f"phase {phase['phase']!r}: {figures} is inconsistent: its operators with shapes cover "
        f"{100 * share:.0f}% of the kernel time its steps launched and compute "
        f"{measured / 1e9:,.1f} GFLOP, {100 * (1 - measured / floor):.0f}% less than the model's "
        f"{floor / 1e9:,.1f} GFLOP (causal attention counted half in both), so the model FLOPs count work the "
        "steps did not run: check the tokens per step, the FLOPs per token or the model config "
        "(a module the traced code does not run, such as the LM head)"
    ]


def phase_warnings(phase: dict[str, Any], steps: list[dict[str, Any]], sc: StepContext) -> list[str]:
    """The warnings of one phase, from its row and its steps' rows (with the check keys)."""
    if not steps:
        return []
    return _ceiling(phase, steps, sc) + _below_model(phase, steps)


def _per_pid(ctx: Context, cls: str, pids: list[int]) -> dict[int, PidGpus]:
    """Per process: the GPUs it ran kernels on, and their peaks for `cls`."""
    k = ctx.data.kernels()
    dp = device_peaks(ctx)
    out = {}
    for pid in pids:
        devs = tuple(sorted(set(k.device[k.pid == pid].tolist()))) or tuple(dp.devices[:1])
        if not devs:
            continue
        r = dp.resolved.get(devs[0])
        what, assumed = "unknown GPU", ""
        if r is not None:
            what = f"{r.spec.model if r.spec else 'unknown GPU'} ({r.basis})"
            assumed = r.note.removeprefix("assumed: ") if r.assumed else ""
        out[pid] = PidGpus(devs, dp.peak_flops(devs[0], cls), dp.bandwidth(devs[0]), what, assumed)
    return out


def run(ctx: Context, metric_id: str, columns: tuple[str, ...]) -> Outcome:
    """The metric's result; `columns`: tables/model_utilization_steps.csv's (model_utilization.py)."""
    steps, found = ctx.result("steps"), ctx.typed(Steps)
    if steps is None or found is None:
        why = getattr(ctx.results.get("steps"), "reason", "the steps metric did not run")
        return Skipped(metric_id, f"MFU and MBU are per step, and there are no steps: {why}")
    opts = ctx.options
    try:
        cfg = model_config(opts.model_config) if opts.model_config else None
        device_peaks(ctx)
    except UsageError as exc:
        return Skipped(metric_id, exc.message)
    view = compute_view(ctx.data)
    v = None if isinstance(view, str) else view
    wl = ctx.typed(Workload)
    workload, fmt = (wl.kind if wl else "unknown"), ctx.data.format
    if cfg is None and opts.model_flops_per_token is None and v is None:
        return Skipped(metric_id,
            f"no model FLOPs and no operator FLOPs: {model_inputs(workload, fmt)}; operator "
            f"shapes were not available either ({shapes_missing(str(view), workload, fmt)})"
        )
    frame = next(t.frame for t in steps.tables if t.name == "steps")
    assert frame is not None
    frame = frame.reset_index(drop=True)
    dtype, cls, dtype_from = matmul_dtype(v, ctx.data)
    shapes: list[StepShapes] = step_shapes(
        v, frame, cfg.vocab_size if cfg else None, cfg.hidden_size if cfg else None,
        ctx.data.kernels().dur,
    )
    sc = StepContext(
        cfg=cfg,
        config_name=opts.model_config.rsplit("/", 1)[-1] if opts.model_config else None,
        flops_per_token=opts.model_flops_per_token,
        tokens_per_step=opts.tokens_per_step,
        dtype=dtype,
        cls=cls,
        workload=workload,
        per_pid=_per_pid(ctx, cls, sorted(set(frame["pid"].astype(int).tolist()))),
    )
    rows = [step_row(sc, rec, sh) for rec, sh in zip(frame.to_dict("records"), shapes, strict=True)]
    table = pd.DataFrame(rows, columns=list(columns))
    notes = []
    if v is not None and v.counted.kernel_ns.sum() < 0.5 * ctx.data.kernels().dur.sum():
        notes.append("measured FLOPs cover less than half of the kernel time: HFU is a lower bound")
    notes.extend(sorted({f"every percentage uses assumed {p.assumed}" for p in sc.per_pid.values() if p.assumed}))
    phases = phase_rows(table, sc)
    for ph in phases:
        ph["warnings"] = phase_warnings(ph, [r for r in rows if r["phase"] == ph["phase"]], sc)
        ctx.data.warnings.extend(f"{metric_id}: {w}" for w in ph["warnings"])
    data: dict[str, Any] = {
        "inputs": {
            "model_config": sc.config_name,
            "model_flops_per_token": opts.model_flops_per_token,
            "tokens_per_step": opts.tokens_per_step,
            "parameters": mf.param_counts(cfg).total if cfg else None,
            "matmul_parameters": mf.param_counts(cfg).matmul_active if cfg else None,
            "dtype": dtype,
            "peak_dtype": cls,
            "dtype_from": dtype_from,
            "steps_from": f"{found.method}: {found.detail}",
        },
        "phases": phases,
        "steps": table.to_dict("records"),
        "missing": _missing(sc, table, v is not None, fmt),
    }
    return MetricResult(metric_id, data, (Table("model_utilization_steps", columns, table),), tuple(notes))


def _missing(sc: StepContext, table: pd.DataFrame, measured: bool, fmt: TraceFormat) -> list[str]:
    out = []
    if table["mfu_pct"].isna().all():
        out.append(f"MFU: {model_inputs(sc.workload, fmt)}")
    decode = table["kind"] == "decode"
    if decode.any() and table.loc[decode, "mbu_pct"].isna().all():
        out.append("MBU of decode steps: pass --model CONFIG.json (weights and KV cache bytes)")
    if not measured:
        out.append(hfu_missing(sc.workload, fmt))
    if not any(np.isfinite(p.peak) for p in sc.per_pid.values()):
        out.append(f"every percentage: no {sc.cls} peak figure for this GPU (add it with --gpu-peaks)")
    return out
