"""One model_utilization row per step, and their sums per phase (model_utilization.py).

A step's kind decides which figure matters: prefill, training and plain forward steps are
compute-heavy (MFU), decode steps read every weight and the KV cache for a few tokens (MBU).
The kind comes from the phase name, else backward operators in the step (training), else
the workload kind, else the embedding input's sequence length (1: decode) or the attention
query length, else "forward".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from nsys_llm_explainer.compute import model_flops as mf
from nsys_llm_explainer.compute.model_config import ModelConfig
from nsys_llm_explainer.metrics.model_inputs import StepShapes

PHASE_KINDS = (
    ("decode", re.compile(r"decod|generat|\bgen\b", re.IGNORECASE)),
    ("prefill", re.compile(r"prefill|prompt|context|encod", re.IGNORECASE)),
    ("training", re.compile(r"train|backward|optim|fwd_?bwd", re.IGNORECASE)),
)
TRAINING_WORKLOADS = ("llm_training", "pytorch_training")
COMPUTE_KINDS = ("prefill", "training", "forward")


@dataclass(frozen=True)
class PidGpus:
    """The GPUs one process ran kernels on, with the peaks that apply."""

    devices: tuple[int, ...]
    peak: float  # FLOP/s of the model's dtype class per GPU (NaN: unknown)
    bandwidth: float  # bytes/s per GPU (NaN: unknown)
    what: str  # the GPU model and where its figures came from


@dataclass(frozen=True)
class StepContext:
    cfg: ModelConfig | None
    config_name: str | None
    flops_per_token: float | None  # --model-flops-per-token
    tokens_per_step: int | None  # --tokens-per-step
    dtype: str  # storage dtype of the weights and KV cache (MBU)
    cls: str  # peak class of the model's matrix products (MFU)
    workload: str
    per_pid: dict[int, PidGpus]


def _kind(phase: str, sh: StepShapes, workload: str) -> tuple[str, str]:
    for kind, rx in PHASE_KINDS:
        if rx.search(phase):
            return kind, f"phase name {phase!r}"
    if sh.backward:
        return "training", "backward operators ran in the step"
    if workload in TRAINING_WORKLOADS:
        return "training", f"workload {workload}"
    if sh.indices is not None and len(sh.indices) == 2:
        return ("decode" if sh.indices[1] == 1 else "prefill"), f"embedding input {list(sh.indices)}"
    if sh.query:
        return ("decode" if sh.query == 1 else "prefill"), f"attention query length {sh.query}"
    return "forward", "nothing tells prefill from decode"


def _tokens(sc: StepContext, sh: StepShapes) -> tuple[int | None, str]:
    if sc.tokens_per_step:
        return sc.tokens_per_step, "--tokens-per-step"
    if sh.tokens:
        calls = f" ({sh.embedding_calls} calls)" if sh.embedding_calls > 1 else ""
        return sh.tokens, f"the token embedding's input {list(sh.indices or ())}{calls}"
    return None, "unknown: pass --tokens-per-step (or record shapes)"


def _flops_per_token(sc: StepContext, kind: str, sh: StepShapes) -> tuple[float | None, str]:
    if sc.flops_per_token:
        return sc.flops_per_token, "--model-flops-per-token"
    if sc.cfg is None:
        return None, "unknown: pass --model CONFIG.json or --model-flops-per-token"
    if kind == "decode":
        ctx, what = sh.context, "the attention key length"
    else:
        seq = sh.indices[-1] if sh.indices is not None and len(sh.indices) == 2 else None
        ctx, what = seq or sh.query or sh.context, "the sequence length"
    note = f"attention over {ctx:,} keys ({what})" if ctx else "attention not counted (context unknown)"
    n = mf.param_counts(sc.cfg).matmul_active
    if kind == "training":
        return float(mf.training_flops_per_token(sc.cfg, ctx or 0)), f"{sc.config_name}: 3 x (2 x {n:,} + {note})"
    return float(mf.forward_flops_per_token(sc.cfg, ctx or 0)), f"{sc.config_name}: 2 x {n:,} + {note}"


def _ratio(value: float | None, time_s: float, peak: float, gpus: int) -> float | None:
    if value is None or not value or time_s <= 0 or not math.isfinite(peak) or gpus < 1:
        return None
    return round(100.0 * value / (time_s * peak * gpus), 2)


def step_row(sc: StepContext, rec: dict[str, Any], sh: StepShapes) -> dict[str, Any]:
    pid = int(rec["pid"])
    pg = sc.per_pid.get(pid, PidGpus((), float("nan"), float("nan"), ""))
    gpus, peak, bw = len(pg.devices), pg.peak, pg.bandwidth
    t = int(rec["latency_ns"]) / 1e9
    kind, kind_from = _kind(str(rec["phase"]), sh, sc.workload)
    tokens, tokens_from = _tokens(sc, sh)
    fpt, flops_from = _flops_per_token(sc, kind, sh)
    model = fpt * tokens if fpt and tokens else None
    nbytes, bytes_from, batch = None, "", None
    if kind == "decode":
        batch = (sh.indices[0] if sh.indices is not None and len(sh.indices) == 2 else tokens)
        if sc.cfg is None:
            bytes_from = "unknown: pass --model CONFIG.json"
        elif batch:
            db = mf.decode_step_bytes(sc.cfg, int(batch), int(sh.context or 0), sc.dtype)
            nbytes = float(db.total)
            kv = f"KV cache at {sh.context:,} keys" if sh.context else "no KV cache (key length unknown: a lower bound)"
            bytes_from = f"{sc.config_name}: {sc.dtype} weights + {kv}, batch {batch}"
    return {
        "step": int(rec["step"]), "phase": str(rec["phase"]), "pid": pid,
        "latency_ns": int(rec["latency_ns"]), "kind": kind, "tokens": tokens, "batch": batch,
        "context": sh.context, "gpus": gpus, "flops_per_token": fpt, "model_flops": model,
        "mfu_pct": _ratio(model, t, peak, gpus), "bytes_per_step": nbytes,
        "mbu_pct": _ratio(nbytes, t, bw, gpus), "measured_flops": sh.measured_flops or None,
        "hfu_pct": _ratio(sh.measured_flops, t, peak, gpus),
        "peak_tflops": round(peak / 1e12, 3) if math.isfinite(peak) else None,
        "bandwidth_gbps": round(bw / 1e9, 1) if math.isfinite(bw) else None,
        "kind_from": kind_from, "tokens_from": tokens_from, "flops_from": flops_from,
        "bytes_from": bytes_from,
    }


def _share(num: pd.Series, g: pd.DataFrame, per_s: pd.Series) -> float | None:
    """sum(num) / sum(time x rate x GPUs) over the steps that have both."""
    ok = num.notna() & per_s.notna() & (g["gpus"] > 0)
    if not ok.any():
        return None
    denom = float((g.loc[ok, "latency_ns"] / 1e9 * per_s[ok] * g.loc[ok, "gpus"]).sum())
    return round(100.0 * float(num[ok].sum()) / denom, 2) if denom > 0 else None


def phase_rows(table: pd.DataFrame, sc: StepContext) -> list[dict[str, Any]]:
    out = []
    for phase, g in table.groupby("phase", sort=False):
        peak = g["peak_tflops"].astype(float) * 1e12
        bw = g["bandwidth_gbps"].astype(float) * 1e9
        kind = g["kind"].mode().iloc[0]
        mfu = g["mfu_pct"].dropna()
        pids = sorted(set(g["pid"].tolist()))
        what = "; ".join(sorted({sc.per_pid[p].what for p in pids if p in sc.per_pid}))
        devices = sorted({d for p in pids if p in sc.per_pid for d in sc.per_pid[p].devices})
        inputs = [
            f"step kind {kind}: {g['kind_from'].iloc[0]}",
            f"tokens per step: {g['tokens_from'].iloc[0]}",
            f"FLOPs per token: {g['flops_from'].iloc[0]}",
            f"peak: {sc.cls} dense, {what}; GPUs per step: {int(g['gpus'].max())}",
        ]
        if kind == "decode":
            inputs.append(f"bytes per step: {g['bytes_from'].iloc[0]}")
        out.append({
            "phase": str(phase), "kind": kind, "compute_heavy": kind in COMPUTE_KINDS,
            "steps": int(len(g)), "time_ns": int(g["latency_ns"].sum()),
            "tokens": _sum(g["tokens"]), "model_flops": _sum(g["model_flops"]),
            "mfu_pct": _share(g["model_flops"].astype(float), g, peak),
            "mfu_min_pct": float(mfu.min()) if len(mfu) else None,
            "mfu_max_pct": float(mfu.max()) if len(mfu) else None,
            "bytes": _sum(g["bytes_per_step"]),
            "mbu_pct": _share(g["bytes_per_step"].astype(float), g, bw),
            "measured_flops": _sum(g["measured_flops"]),
            "hfu_pct": _share(g["measured_flops"].astype(float), g, peak),
            "gpus": int(g["gpus"].max()),
            "device_ids": devices,
            "inputs": inputs,
        })
    return out


def _sum(s: pd.Series) -> float | None:
    x = s.dropna().astype(float)
    if not len(x):
        return None
    total = float(np.sum(x))
    return int(total) if total.is_integer() and abs(total) < 2**53 else total
