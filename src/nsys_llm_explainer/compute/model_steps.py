"""One model_utilization row per step, and their sums per phase (model_utilization.py).

A step's kind decides which figure matters: prefill, training and plain forward steps are
compute-heavy (MFU), decode steps read every weight and the KV cache for a few tokens (MBU).
The kind comes from the phase name, else backward operators in the step (training), else
the workload kind, else the embedding input's sequence length (1: decode) or the attention
query length, else "forward".

With --model, the LM head's FLOPs count for the tokens whose logits the step computed: the
rows of its LM-head products when they are fewer than the tokens (a generate loop that keeps
the last position's logits), none when the step's recorded products hold the rest of the
model and none has the vocabulary dimension (the traced module has no head), else every
token. Every row also carries the FLOPs the hardware must compute at least (the model's,
with causal attention halved outside decode) for the plausibility checks (model_checks.py).
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
from nsys_llm_explainer.compute.model_inputs import StepShapes

PHASE_KINDS = (
    ("decode", re.compile(r"decod|generat|\bgen\b", re.IGNORECASE)),
    ("prefill", re.compile(r"prefill|prompt|context|encod", re.IGNORECASE)),
    ("training", re.compile(r"train|backward|optim|fwd_?bwd", re.IGNORECASE)),
)
TRAINING_WORKLOADS = ("llm_training", "pytorch_training")
# The LM head is left out only when the step's recorded matrix products hold the rest of the
# model's product FLOPs less at most this share (its other products were all recorded).
HEAD_SHAPES_TOLERANCE = 0.10
COMPUTE_KINDS = ("prefill", "training", "forward")


@dataclass(frozen=True)
class PidGpus:
    """The GPUs one process ran kernels on, with the peaks that apply."""

    devices: tuple[int, ...]
    peak: float  # FLOP/s of the model's dtype class per GPU (NaN: unknown)
    bandwidth: float  # bytes/s per GPU (NaN: unknown)
    what: str  # the GPU model and where its figures came from
    assumed: str = ""  # why, when the peaks were assumed from kernel names


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


@dataclass(frozen=True)
class ModelFlops:
    """A step's model FLOPs and where they came from."""

    per_token: float | None  # model FLOPs / tokens
    total: float | None  # model FLOPs of the step
    floor: float | None  # what the hardware must compute at least (causal attention halved)
    flops_from: str
    head_from: str  # the LM head's part ("" without --model)


def _head_rows(sc: StepContext, sh: StepShapes, tokens: int) -> tuple[int | None, str]:
    """Tokens whose LM-head product the step computed (None: every token), and why."""
    cfg = sc.cfg
    assert cfg is not None
    vocab, head = cfg.vocab_size, mf.head_params(cfg)
    body = 2 * (mf.param_counts(cfg).matmul_active - head) * tokens
    recorded = body > 0 and sh.gemm_flops >= (1 - HEAD_SHAPES_TOLERANCE) * body
    if sh.head_rows and sh.head_rows < tokens:
        return sh.head_rows, (
            f"counted for {sh.head_rows:,} of {tokens:,} tokens: the step's products with the "
            f"{vocab:,}-word vocabulary as output have {sh.head_rows:,} rows (logits of the last "
            "position only)"
        )
    if sh.head_rows:
        return None, f"counted for every token: the step's LM-head products have {sh.head_rows:,} rows"
    if recorded and not sh.head_gemms:
        return 0, (
            f"left out: no matrix product of the step has the vocabulary dimension {vocab:,}, while "
            f"its recorded products hold the rest of the model's {body / 1e9:,.1f} GFLOP (the traced "
            "code does not run the LM head)"
        )
    return None, "counted for every token (assumed: the step's recorded shapes do not show it)"


def _model_flops(sc: StepContext, kind: str, sh: StepShapes, tokens: int | None) -> ModelFlops:
    if sc.flops_per_token:
        model = sc.flops_per_token * tokens if tokens else None
        return ModelFlops(sc.flops_per_token, model, model, "--model-flops-per-token", "")
    if sc.cfg is None:
        return ModelFlops(None, None, None, "unknown: pass --model CONFIG.json or --model-flops-per-token", "")
    causal = kind != "decode"  # prefill and training of a decoder: a causal mask
    if not causal:
        ctx, what = sh.context, "the attention key length"
    else:
        seq = sh.indices[-1] if sh.indices is not None and len(sh.indices) == 2 else None
        ctx, what = seq or sh.query or sh.context, "the sequence length"
    if not ctx:
        note = "attention not counted (context unknown)"
    elif causal:
        palm = mf.attention_flops_per_token(sc.cfg, ctx) - mf.attention_flops_per_token(sc.cfg, ctx, causal=True)
        note = (f"causal attention over {ctx:,} keys ({what}), counted half as the kernels compute it "
                f"(PaLM's convention counts all of them: {palm:,} FLOPs per token more)")
    else:
        note = f"attention over {ctx:,} keys ({what})"
    n = mf.param_counts(sc.cfg).matmul_active
    head = mf.head_params(sc.cfg)
    rows, head_from = _head_rows(sc, sh, tokens) if tokens else (None, "")
    training = kind == "training"
    if rows is None:
        formula = f"2 x {n:,} + {note}"
    elif rows == 0:
        formula = f"2 x {n - head:,} (no LM head) + {note}"
    else:
        formula = f"2 x {n - head:,} + {note}, and 2 x {head:,} (LM head) for {rows:,} tokens"
    flops_from = f"{sc.config_name}: {'3 x (' + formula + ')' if training else formula}"
    if not tokens:
        per = (mf.training_flops_per_token if training else mf.forward_flops_per_token)(sc.cfg, ctx or 0, causal)
        return ModelFlops(float(per), None, None, flops_from, head_from)
    total = mf.step_flops(sc.cfg, tokens, ctx or 0, rows, training, causal=causal)
    return ModelFlops(total / tokens, float(total), float(total), flops_from, head_from)


def _ratio(value: float | None, time_s: float, peak: float, gpus: int) -> float | None:
    if value is None or not value or time_s <= 0 or not math.isfinite(peak) or gpus < 1:
        return None
    return round(100.0 * value / (time_s * peak * gpus), 2)


def step_row(sc: StepContext, rec: dict[str, Any], sh: StepShapes) -> dict[str, Any]:
    pid = int(rec["pid"])
    pg = sc.per_pid.get(pid, PidGpus((), float("nan"), float("nan"), ""))
    gpus, peak, bw = len(pg.devices), pg.peak, pg.bandwidth
    window = int(rec.get("gpu_latency_ns") or 0) or int(rec["latency_ns"])
    t = window / 1e9
    kind, kind_from = _kind(str(rec["phase"]), sh, sc.workload)
    tokens, tokens_from = _tokens(sc, sh)
    flops = _model_flops(sc, kind, sh, tokens)
    fpt, flops_from, model = flops.per_token, flops.flops_from, flops.total
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
        "latency_ns": int(rec["latency_ns"]), "window_ns": window, "kind": kind, "tokens": tokens, "batch": batch,
        "context": sh.context, "gpus": gpus, "flops_per_token": fpt, "model_flops": model,
        "mfu_pct": _ratio(model, t, peak, gpus), "bytes_per_step": nbytes,
        "mbu_pct": _ratio(nbytes, t, bw, gpus), "measured_flops": sh.measured_flops or None,
        "hfu_pct": _ratio(sh.measured_flops, t, peak, gpus),
        "peak_tflops": round(peak / 1e12, 3) if math.isfinite(peak) else None,
        "bandwidth_gbps": round(bw / 1e9, 1) if math.isfinite(bw) else None,
        "kind_from": kind_from, "tokens_from": tokens_from, "flops_from": flops_from,
        "head_from": flops.head_from, "bytes_from": bytes_from,
        # for the plausibility checks (model_checks.py), not in the table
        "floor_flops": flops.floor, "launched_ns": sh.launched_ns, "covered_ns": sh.covered_ns,
    }


def _share(num: pd.Series, g: pd.DataFrame, per_s: pd.Series) -> float | None:
    """sum(num) / sum(time x rate x GPUs) over the steps that have both."""
    ok = num.notna() & per_s.notna() & (g["gpus"] > 0)
    if not ok.any():
        return None
    denom = float((g.loc[ok, "window_ns"] / 1e9 * per_s[ok] * g.loc[ok, "gpus"]).sum())
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
            *([f"LM head: {g['head_from'].iloc[0]}"] if g["head_from"].iloc[0] else []),
            f"peak: {sc.cls} dense, {what}; GPUs per step: {int(g['gpus'].max())}",
            "step time: each step's own GPU window (first start to last end of the kernels it launched, or "
            "its GPU-side annotation), not its host range",
        ]
        if kind == "decode":
            inputs.append(f"bytes per step: {g['bytes_from'].iloc[0]}")
        out.append({
            "phase": str(phase), "kind": kind, "compute_heavy": kind in COMPUTE_KINDS,
            "steps": int(len(g)), "time_ns": int(g["window_ns"].sum()),
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
