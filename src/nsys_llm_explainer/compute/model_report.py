"""model_utilization's work (model_utilization.py holds the metric and its definitions): the
inputs, one row per step and their sums per phase, and the plausibility checks.

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
boost or timer granularity can explain.

Rows: one per step, and their sums per phase.

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
with causal attention halved outside decode) for the plausibility checks (above).

What model_utilization needs to know per step, and where each answer came from.

- Steps: the steps metric's table (start, end, pid, phase, latency).
- Per step, from the operator calls whose host start lies in the step (same process): the
  token embedding's index sizes (tokens = their element count; [B, S] gives batch and
  sequence length), the longest key length of its attention calls (the context a decode step
  attends), whether it ran backward operators, the FLOPs of its counted calls (all, and
  matrix products alone), and the kernel time its calls launched (all, and the part in
  counted calls: how much of the step the measured FLOPs cover).
- The LM head in the step, with --model: its counted matrix products with the vocabulary as
  the output dimension and the hidden size as the inner one (model_flops.is_vocab_dim: also
  padded) and their rows (batch x M), the tokens whose logits
  the step computed; and the products with any vocabulary dimension (forward or backward).
- The dtype the model's matrix products run in: the one most GEMM FLOPs were recorded in,
  else the one most kernel time states in kernel names, else bf16, assumed."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from functools import lru_cache
from typing import Any, Literal, NotRequired, TypedDict

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.analysis.groups import group_sum
from nsys_llm_explainer.compute import model_flops as mf
from nsys_llm_explainer.compute.cost import OpCost
from nsys_llm_explainer.compute.count import ComputeView, compute_view
from nsys_llm_explainer.compute.dtypes import dtype_from_kernel
from nsys_llm_explainer.compute.model_flops import ModelConfig, load_model_config
from nsys_llm_explainer.compute.peaks import PLAUSIBLE_TOLERANCE, device_peaks
from nsys_llm_explainer.compute.sources import hfu_missing, model_inputs, shapes_missing
from nsys_llm_explainer.errors import UsageError
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.model import Skipped, Table, TraceFormat
from nsys_llm_explainer.results.efficiency import (
    ModelUtilization,
    UtilizationInputs,
    UtilizationPhase,
    UtilizationStep,
)
from nsys_llm_explainer.results.run import Steps, Workload
from nsys_llm_explainer.trace.columns import factorize
from nsys_llm_explainer.trace.data import TraceData

UTILIZATION_TOLERANCE = PLAUSIBLE_TOLERANCE
MIN_COVERAGE = 0.9
CEILING_PCT = 100.0 * (1 + UTILIZATION_TOLERANCE)
Figure = Literal["mfu_pct", "mbu_pct", "hfu_pct"]


class StepRecord(TypedDict):
    """A step of the steps table as step_row reads it (one of frame.to_dict("records"))."""

    step: int
    phase: str
    pid: int
    latency_ns: int
    gpu_latency_ns: NotRequired[int | None]


class StepRow(TypedDict):
    """One row of model_utilization_steps, with the keys the plausibility checks read."""

    step: int
    phase: str
    pid: int
    latency_ns: int
    window_ns: int
    kind: str
    tokens: int | None
    batch: int | None
    context: int | None
    gpus: int
    flops_per_token: float | None
    model_flops: float | None
    mfu_pct: float | None
    bytes_per_step: float | None
    mbu_pct: float | None
    measured_flops: float | None
    hfu_pct: float | None
    peak_tflops: float | None
    bandwidth_gbps: float | None
    kind_from: str
    tokens_from: str
    flops_from: str
    head_from: str
    bytes_from: str
    # for the plausibility checks (phase_warnings), not in the table
    floor_flops: float | None
    launched_ns: int
    covered_ns: int


def _figure(phase: UtilizationPhase, steps: list[StepRow], key: Figure) -> tuple[float, str] | None:
    """The highest of the phase's figure and its steps', and how to say it."""
    values = [float(v) for s in steps if (v := s[key]) is not None]
    figure = getattr(phase, key)
    whole = float(figure) if figure is not None else None
    top = max(values, default=whole if whole is not None else float("nan"))
    if whole is None:
        return (top, f"up to {top:,.1f}% in its steps") if values else None
    if top > whole:
        return top, f"{whole:,.1f}% (steps up to {top:,.1f}%)"
    return whole, f"{whole:,.1f}%"


def _assumed(sc: StepContext, steps: list[StepRow]) -> str:
    notes = sorted({sc.per_pid[s["pid"]].assumed for s in steps if s["pid"] in sc.per_pid} - {""})
    if not notes:
        return ""
    return f"; the figures use assumed {notes[0]}"


def _ceiling(phase: UtilizationPhase, steps: list[StepRow], sc: StepContext) -> list[str]:
    out = []
    first = steps[0]
    gpus = f"the GPU count ({phase.gpus} per step)"
    peak = f"the {sc.cls} dense peak ({first['peak_tflops']} TFLOP/s per GPU)"
    bandwidth = f"the memory bandwidth ({first['bandwidth_gbps']} GB/s per GPU)"
    checks: tuple[tuple[str, Figure, str], ...] = (
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
            f"phase {phase.phase!r}: {name} {fig[1]} is above 100% by more than the "
            f"{UTILIZATION_TOLERANCE:.0%} tolerance, which no GPU can reach: check {inputs}"
            f"{_assumed(sc, steps)}"
        )
    return out


def _below_model(phase: UtilizationPhase, steps: list[StepRow]) -> list[str]:
    covered = [s for s in steps if s["measured_flops"] and s["floor_flops"]
               and s["launched_ns"] and s["covered_ns"] >= MIN_COVERAGE * s["launched_ns"]]
    if not covered:
        return []
    measured = sum(float(s["measured_flops"] or 0.0) for s in covered)
    floor = sum(float(s["floor_flops"] or 0.0) for s in covered)
    if measured >= (1 - UTILIZATION_TOLERANCE) * floor:
        return []
    share = sum(s["covered_ns"] for s in covered) / sum(s["launched_ns"] for s in covered)
    hfu, mfu = phase.hfu_pct, phase.mfu_pct
    figures = f"HFU {hfu:.1f}% below MFU {mfu:.1f}%" if hfu is not None and mfu is not None else "HFU below MFU"
    return [
        f"phase {phase.phase!r}: {figures} is inconsistent: its operators with shapes cover "
        f"{100 * share:.0f}% of the kernel time its steps launched and compute "
        f"{measured / 1e9:,.1f} GFLOP, {100 * (1 - measured / floor):.0f}% less than the model's "
        f"{floor / 1e9:,.1f} GFLOP (causal attention counted half in both), so the model FLOPs count work the "
        "steps did not run: check the tokens per step, the FLOPs per token or the model config "
        "(a module the traced code does not run, such as the LM head)"
    ]


def phase_warnings(phase: UtilizationPhase, steps: list[StepRow], sc: StepContext) -> list[str]:
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


Computed = tuple[ModelUtilization, tuple[Table, ...], tuple[str, ...]]


def run(ctx: Context, metric_id: str, columns: tuple[str, ...]) -> Computed | Skipped:
    """The metric's result, its table and notes; `columns`: tables/model_utilization_steps.csv's
    (model_utilization.py)."""
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
    phases = []
    for ph in phase_rows(table, sc):
        warnings = phase_warnings(ph, [r for r in rows if r["phase"] == ph.phase], sc)
        ctx.data.warnings.extend(f"{metric_id}: {w}" for w in warnings)
        phases.append(replace(ph, warnings=tuple(warnings)))
    result = ModelUtilization(
        inputs=UtilizationInputs(
            model_config=sc.config_name,
            model_flops_per_token=opts.model_flops_per_token,
            tokens_per_step=opts.tokens_per_step,
            parameters=mf.param_counts(cfg).total if cfg else None,
            matmul_parameters=mf.param_counts(cfg).matmul_active if cfg else None,
            dtype=dtype,
            peak_dtype=cls,
            dtype_from=dtype_from,
            steps_from=f"{found.method}: {found.detail}",
        ),
        phases=tuple(phases),
        steps=tuple(UtilizationStep.of(r) for r in table.to_dict("records")),
        missing=tuple(_missing(sc, table, v is not None, fmt)),
    )
    return result, (Table("model_utilization_steps", columns, table),), tuple(notes)


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


DEFAULT_DTYPE = ("bf16", "bf16", "assumed bf16: no operator or kernel name states a type")


@lru_cache(maxsize=8)
def model_config(path: str) -> ModelConfig:
    return load_model_config(path)


@frozen
class StepShapes:
    tokens: int | None  # elements of the token embedding's indices in the step
    indices: tuple[int, ...] | None  # the first embedding call's index sizes ([B, S])
    embedding_calls: int
    context: int | None  # longest key length of the step's attention calls
    query: int | None  # longest query length
    backward: bool  # a counted backward call ran in the step
    measured_flops: float  # FLOPs of the step's counted calls that launched kernels
    gemm_flops: float = 0.0  # of those, the matrix products'
    head_rows: int = 0  # rows of the step's forward LM-head products (batch x M)
    head_gemms: int = 0  # counted products with a vocabulary dimension (any direction)
    launched_ns: int = 0  # kernel time launched by the step's operator calls
    covered_ns: int = 0  # of that, kernels of counted calls


def _step_of(start: np.ndarray, pid: np.ndarray, steps: pd.DataFrame) -> np.ndarray:
    """Per host event: the step (row of `steps`) of its process whose [start, end) holds it."""
    out = np.full(len(start), -1, dtype=np.int64)
    for p in np.unique(steps["pid"].to_numpy(np.int64)).tolist():
        mine = steps.index[steps["pid"].to_numpy(np.int64) == p].to_numpy()
        s = steps["start_ns"].to_numpy(np.int64)[mine]
        e = steps["end_ns"].to_numpy(np.int64)[mine]
        order = np.argsort(s, kind="stable")
        sel = np.flatnonzero(pid == p)
        i = np.searchsorted(s[order], start[sel], "right") - 1
        ok = i >= 0
        row = mine[order][np.maximum(i, 0)]
        ok &= start[sel] < e[order][np.maximum(i, 0)]
        out[sel[ok]] = row[ok]
    return out


def _head_keys(costs: list[OpCost | Any], vocab: int | None, hidden: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Per cost key: rows of a forward LM-head product (0 otherwise), and whether the key is
    a matrix product with a vocabulary dimension and a hidden-size one."""
    rows = np.zeros(max(len(costs), 1), dtype=np.int64)
    head = np.zeros(max(len(costs), 1), dtype=bool)
    if not vocab or not hidden:
        return rows, head
    for i, c in enumerate(costs):
        if not isinstance(c, OpCost) or c.family != "gemm" or "m" not in c.extra:
            continue
        b, m, n, k = (int(c.extra[d]) for d in ("batch", "m", "n", "k"))  # type: ignore[call-overload]
        if any(mf.is_vocab_dim(d, vocab) for d in (m, n, k)) and hidden in (m, n, k):
            head[i] = True
            if mf.is_vocab_dim(n, vocab) and k == hidden:
                rows[i] = b * m
    return rows, head


def step_shapes(
    v: ComputeView | None,
    steps: pd.DataFrame,
    vocab: int | None,
    hidden: int | None = None,
    kernel_dur: np.ndarray | None = None,
) -> list[StepShapes]:
    n = len(steps)
    empty = [StepShapes(None, None, 0, None, None, False, 0.0) for _ in range(n)]
    if v is None or n == 0:
        return empty
    inst = v.inst
    step = _step_of(inst.start, inst.pid, steps.reset_index(drop=True))
    # Measured FLOPs and backward work of the counted calls that ran kernels.
    c = v.counted
    cstep = step[c.pos]
    ran = (cstep >= 0) & (c.kernel_ns > 0)
    keys = v.call_key[ran]
    measured = group_sum(v.kc.flops[keys], cstep[ran], n)
    gemm_keys = np.array([isinstance(x, OpCost) and x.family == "gemm" for x in inst.costs] or [False])
    gemm = group_sum(v.kc.flops[keys] * gemm_keys[keys], cstep[ran], n)
    back_keys = np.array(
        [isinstance(x, OpCost) and x.direction == "backward" for x in inst.costs] or [False]
    )
    backward = np.bincount(cstep[ran], weights=back_keys[keys], minlength=n) > 0
    head_rows, head_key = _head_keys(inst.costs, vocab, hidden)
    head_n = np.bincount(cstep[ran], weights=head_rows[keys], minlength=n)
    heads = np.bincount(cstep[ran], weights=head_key[keys], minlength=n)
    # Kernel time launched inside the step's calls, and the part in counted calls.
    launched = covered = np.zeros(n)
    if kernel_dur is not None and len(inst.kernel_pos):
        kp = inst.kernel_pos
        kstep = np.where(kp >= 0, step[np.maximum(kp, 0)], -1)
        mine = kstep >= 0
        launched = group_sum(kernel_dur[mine], kstep[mine], n)
        mine &= c.kernel_call >= 0
        covered = group_sum(kernel_dur[mine], kstep[mine], n)
    # Embedding and attention calls, counted or not (an embedding is composite).
    emb: dict[int, list[tuple[int, tuple[int, ...]]]] = {}
    ctx: dict[int, tuple[int, int]] = {}
    sel = np.flatnonzero((step >= 0) & (inst.key >= 0))
    keys, key_code = np.unique(inst.key[sel], return_inverse=True)
    for j, key in enumerate(keys.tolist()):
        info, cost = inst.info[key], inst.costs[key]
        is_attn = isinstance(cost, OpCost) and cost.family == "attention" and cost.direction == "forward"
        if info is None and not is_attn:
            continue
        for s in step[sel[key_code == j]].tolist():
            if info is not None:
                emb.setdefault(s, []).append((info.table_rows, info.indices))
            if is_attn:
                lq, lk = int(cost.extra.get("lq", 0)), int(cost.extra.get("lk", 0))  # type: ignore[union-attr, call-overload]
                old = ctx.get(s, (0, 0))
                ctx[s] = (max(old[0], lq), max(old[1], lk))
    out = []
    for s in range(n):
        calls = emb.get(s, [])
        if calls:
            rows = vocab if vocab and any(r == vocab for r, _ in calls) else max(r for r, _ in calls)
            calls = [cl for cl in calls if cl[0] == rows]
        q, k = ctx.get(s, (0, 0))
        out.append(StepShapes(
            tokens=sum(math.prod(ix) for _, ix in calls) if calls else None,
            indices=calls[0][1] if calls else None,
            embedding_calls=len(calls),
            context=k or None,
            query=q or None,
            backward=bool(backward[s]),
            measured_flops=float(measured[s]),
            gemm_flops=float(gemm[s]),
            head_rows=int(head_n[s]),
            head_gemms=int(heads[s]),
            launched_ns=int(launched[s]),
            covered_ns=int(covered[s]),
        ))
    return out


def matmul_dtype(v: ComputeView | None, data: TraceData) -> tuple[str, str, str]:
    """(storage dtype, peak class, where it came from) of the model's matrix products."""
    if v is not None:
        flops: dict[tuple[str, str, str], float] = {}
        ran = v.counted.kernel_ns > 0
        keys, classes = v.call_key[ran].tolist(), v.call_cls[ran].tolist()
        for key, cls, f in zip(keys, classes, v.kc.flops[v.call_key[ran]].tolist(), strict=True):
            cost = v.inst.costs[key]
            if isinstance(cost, OpCost) and cost.family == "gemm" and cls:
                entry = (cost.dtype, cls, cost.dtype_source)
                flops[entry] = flops.get(entry, 0.0) + f
        if flops:
            dtype, cls, source = max(flops, key=lambda e: flops[e])
            how = "recorded" if source == "stated" else "assumed from kernel names"
            return dtype, cls, f"{cls}: the dtype of most GEMM FLOPs ({how})"
    k = data.kernels()
    codes, uniq = factorize(k.name_id)
    names = data.kernel_names(np.asarray(uniq, dtype=np.int64))
    per_name = group_sum(k.dur, codes, len(uniq))
    best: dict[tuple[str, str], float] = {}
    evidence: dict[tuple[str, str], str] = {}
    for i, name_id in enumerate(uniq.tolist()):
        kd = dtype_from_kernel(names.get(int(name_id), ""))
        if kd is not None:
            best[(kd.dtype, kd.compute_class)] = best.get((kd.dtype, kd.compute_class), 0) + float(per_name[i])
            evidence.setdefault((kd.dtype, kd.compute_class), kd.evidence)
    if not best:
        return DEFAULT_DTYPE
    dtype, cls = max(best, key=lambda e: best[e])
    return dtype, cls, f"{cls}: assumed from kernel names ({evidence[(dtype, cls)]})"


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


@frozen
class PidGpus:
    """The GPUs one process ran kernels on, with the peaks that apply."""

    devices: tuple[int, ...]
    peak: float  # FLOP/s of the model's dtype class per GPU (NaN: unknown)
    bandwidth: float  # bytes/s per GPU (NaN: unknown)
    what: str  # the GPU model and where its figures came from
    assumed: str = ""  # why, when the peaks were assumed from kernel names


@frozen
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


@frozen
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


def step_row(sc: StepContext, rec: StepRecord, sh: StepShapes) -> StepRow:
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
        "floor_flops": flops.floor, "launched_ns": sh.launched_ns, "covered_ns": sh.covered_ns,
    }


def _share(num: pd.Series, g: pd.DataFrame, per_s: pd.Series) -> float | None:
    """sum(num) / sum(time x rate x GPUs) over the steps that have both."""
    ok = num.notna() & per_s.notna() & (g["gpus"] > 0)
    if not ok.any():
        return None
    denom = float((g.loc[ok, "window_ns"] / 1e9 * per_s[ok] * g.loc[ok, "gpus"]).sum())
    return round(100.0 * float(num[ok].sum()) / denom, 2) if denom > 0 else None


def phase_rows(table: pd.DataFrame, sc: StepContext) -> list[UtilizationPhase]:
    """One row per phase, in the table's order, without its warnings (phase_warnings)."""
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
        out.append(UtilizationPhase(
            phase=str(phase), kind=kind, compute_heavy=kind in COMPUTE_KINDS,
            steps=int(len(g)), time_ns=int(g["window_ns"].sum()),
            tokens=_sum(g["tokens"]), model_flops=_sum(g["model_flops"]),
            mfu_pct=_share(g["model_flops"].astype(float), g, peak),
            mfu_min_pct=float(mfu.min()) if len(mfu) else None,
            mfu_max_pct=float(mfu.max()) if len(mfu) else None,
            bytes=_sum(g["bytes_per_step"]),
            mbu_pct=_share(g["bytes_per_step"].astype(float), g, bw),
            measured_flops=_sum(g["measured_flops"]),
            hfu_pct=_share(g["measured_flops"].astype(float), g, peak),
            gpus=int(g["gpus"].max()),
            device_ids=tuple(devices),
            inputs=tuple(inputs),
            warnings=(),
        ))
    return out


def _sum(s: pd.Series) -> float | None:
    x = s.dropna().astype(float)
    if not len(x):
        return None
    total = float(np.sum(x))
    return int(total) if total.is_integer() and abs(total) < 2**53 else total
