"""What model_utilization needs to know per step, and where each answer came from.

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
  else the one most kernel time states in kernel names, else bf16, assumed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis.groups import group_sum
from nsys_llm_explainer.compute import model_flops as mf
from nsys_llm_explainer.compute.cost import OpCost
from nsys_llm_explainer.compute.count import ComputeView
from nsys_llm_explainer.compute.dtypes import dtype_from_kernel
from nsys_llm_explainer.compute.model_config import ModelConfig, load_model_config
from nsys_llm_explainer.trace.columns import factorize
from nsys_llm_explainer.trace.data import TraceData

DEFAULT_DTYPE = ("bf16", "bf16", "assumed bf16: no operator or kernel name states a type")


@lru_cache(maxsize=8)
def model_config(path: str) -> ModelConfig:
    return load_model_config(path)


@dataclass(frozen=True)
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
        if not info and not is_attn:
            continue
        for s in step[sel[key_code == j]].tolist():
            if info:
                emb.setdefault(s, []).append((int(info["table_rows"]), tuple(info["indices"])))
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
