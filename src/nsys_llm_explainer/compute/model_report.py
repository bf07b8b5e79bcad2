"""model_utilization's work (model_utilization.py holds the metric and its definitions): the
inputs, one row per step (model_steps.py) and the phases."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.compute import model_flops as mf
from nsys_llm_explainer.compute.count import compute_view
from nsys_llm_explainer.compute.model_checks import phase_warnings
from nsys_llm_explainer.compute.model_inputs import StepShapes, matmul_dtype, model_config, step_shapes
from nsys_llm_explainer.compute.model_steps import PidGpus, StepContext, phase_rows, step_row
from nsys_llm_explainer.compute.peaks import device_peaks
from nsys_llm_explainer.compute.sources import hfu_missing, model_inputs, shapes_missing
from nsys_llm_explainer.errors import UsageError
from nsys_llm_explainer.model import MetricResult, Outcome, Skipped, Table, TraceFormat


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
    steps = ctx.result("steps")
    if steps is None:
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
    wl = ctx.result("workload")
    workload, fmt = (str(wl.data.get("kind", "unknown")) if wl else "unknown"), ctx.data.format
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
            "steps_from": f"{steps.data.get('method')}: {steps.data.get('detail')}",
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
