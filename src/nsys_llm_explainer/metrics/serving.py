"""serving: an LLM engine's scheduler iterations, their phases, tokens and what each costs.

Iterations come from analysis/iterations.py (engine marks, user marks, model-runner frames,
the outermost model module frame, else the layer structure; `source` says which). The
structure and module-frame sources count only on LLM inference captures (the workload
metric); elsewhere a layer pass is not a serving iteration and the metric is skipped.

Per iteration (tables/iterations.csv; report.json keeps the first rows):

- phase (prefill: every new token belongs to a prompt; decode: one new token per sequence;
  mixed: both in one batch, with each part's sequences and tokens), sequences, new tokens,
  kv_tokens (the key/value tokens it attends to: a prefill's context), and where they came
  from (`numbers_from`);
- the host range of its mark (`host_start_ns`, `host_end_ns`), and the GPU window of its own
  work: the first start to the last end of the kernels launched inside it (`span_from`
  names the mark), GPU busy (union of those kernels) and kernel time;
- gap_before_ns: from the previous iteration's GPU end (same process) to this iteration's
  first kernel, 0 when they overlap, null for the first; gap_host: what the thread that
  launched the iteration's kernels did in that gap (in synchronizing calls, in other CUDA
  calls, in none);
- period_ns: to the next iteration's first kernel (same process): for decode, the
  inter-token latency each sequence sees;
- launches, CUDA graph replays (graph launch calls among its launches), layers (the repeats
  of its layer unit, iterations.layers_in), kernel time per category group.

Per phase: iterations; sequences, KV tokens (p50) and new tokens (sum); GPU span and busy
p50/p90; kernels and launches per iteration; period p50/p90; GPU span per new token and
tokens/s (span sum / token sum); kernel time by category group (CATEGORY_GROUPS: the
categories metric's classes grouped: memory (KV-cache writes) counts as attention; norm,
activation/elementwise, reduction, layout, casts and copies, compiler-fused as
norm_elementwise; convolution, pooling, FFT and other as other); the host's share (gaps before
iterations plus GPU idle inside their spans, over gaps plus spans); CUDA graph use; and MFU
(prefill) or MBU (decode) from model_utilization's phase of the same name when the steps are
these iterations (it abstains, with the reason, without a model).

Latency model (fits): per phase, the GPU span fitted by least squares, prefill against its new
tokens (span = a + b x tokens), decode against its sequences and KV tokens (span = a + b x
sequences [+ c x kv_tokens]), with the root-mean-square and largest relative error; a phase
whose iterations show fewer distinct configurations than the fit has terms says so instead.

op_times.csv and kernel_dat.csv: per configuration (phase, sequences, tokens, kv_tokens),
each operator's (PyTorch profiler operators, else the innermost NVTX range) or kernel's calls
and GPU kernel time per iteration, mean and p50 over the configuration's iterations: the
tables a serving simulator is calibrated from.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis import intervals
from nsys_llm_explainer.analysis.attribution import kernel_attribution
from nsys_llm_explainer.analysis.carried import carried
from nsys_llm_explainer.analysis.context import NO_KERNELS, Context
from nsys_llm_explainer.analysis.iterations import Iterations, find
from nsys_llm_explainer.analysis.join import kernel_launch_index
from nsys_llm_explainer.analysis.launch_pairs import GRAPH_API, launch_api_mask
from nsys_llm_explainer.analysis.nvtx_names import normalize
from nsys_llm_explainer.analysis.operators_attr import operator_attribution
from nsys_llm_explainer.analysis.stats import percentiles
from nsys_llm_explainer.analysis.sync_calls import sync_kinds
from nsys_llm_explainer.errors import UsageError
from nsys_llm_explainer.kernels.categories import load_table
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.metrics.categories import kernel_categories
from nsys_llm_explainer.model import MetricResult, Outcome, Table
from nsys_llm_explainer.results.serving import (
    CATEGORY_GROUPS,
    HostGap,
    IterationRow,
    LatencyFit,
    PhaseRow,
    Serving,
)
from nsys_llm_explainer.trace.data import Unavailable

LLM_WORKLOADS = ("llm_inference",)
SOFTMAX = re.compile(r"softmax", re.IGNORECASE)
STRUCTURAL = ("model_forward", "model_structure")
PHASE_ORDER = ("prefill", "mixed", "decode")
GROUP_OF = {
    "gemm": "gemm", "attention": "attention", "memory": "attention", "moe": "moe",
    "communication": "communication", "sampling": "sampling", "norm": "norm_elementwise",
    "activation_elementwise": "norm_elementwise", "reduction": "norm_elementwise",
    "layout": "norm_elementwise", "cast_copy": "norm_elementwise", "compiler_fused": "norm_elementwise",
}
OVERHEAD_FLAGS = (("with_stack", "Python stack tracing"), ("profile_memory", "memory profiling"),
                  ("record_shapes", "shape recording"))
ITERATION_COLUMNS = (
    "iteration", "pid", "device", "name", "outer", "phase", "sequences", "tokens", "kv_tokens", "prefill_sequences",
    "prefill_tokens", "decode_sequences", "decode_tokens", "numbers_from", "host_start_ns", "host_end_ns",
    "gpu_start_ns", "gpu_end_ns", "gpu_span_ns", "gpu_busy_ns", "kernel_ns", "kernels", "launches",
    "gap_before_ns", "gap_host_sync_ns", "gap_host_cuda_ns", "gap_host_other_ns", "period_ns",
    "graph_replays", "layers", "softmax_kernels", "softmax_ns",
)
KEY_COLUMNS = ("phase", "sequences", "tokens", "kv_tokens")
OP_COLUMNS = (*KEY_COLUMNS, "iterations", "operator", "calls_per_iteration", "ns_per_iteration_mean",
              "ns_per_iteration_p50")
KERNEL_COLUMNS = (*KEY_COLUMNS, "iterations", "kernel", "category", "calls_per_iteration",
                  "ns_per_iteration_mean", "ns_per_iteration_p50")


def _skip_reason(ctx: Context, its: Iterations | None) -> str | None:
    if its is None:
        return ("no iteration marks (vLLM, SGLang, TensorRT-LLM or prefill/decode ranges), no model-runner "
                "frames and no repeating layer stack were found: the capture is not LLM serving or generation")
    if its.source in STRUCTURAL:
        wl = ctx.result("workload")
        kind = str(wl.data.get("kind")) if wl is not None else "unknown"
        if kind not in LLM_WORKLOADS:
            return (f"no engine or user marks iterations, and the workload is {kind}, not LLM inference: "
                    f"the {len(its.items)} layer pass{'es' * (len(its.items) != 1)} found are not serving "
                    "iterations")
    return None


def _groups(ctx: Context) -> np.ndarray:
    """Per kernel: index into CATEGORY_GROUPS."""
    try:
        kc = kernel_categories(ctx.data, load_table(ctx.options.kernel_categories))
    except (UsageError, Unavailable):
        return np.full(len(ctx.data.kernels()), CATEGORY_GROUPS.index("other"), dtype=np.int64)
    code = {g: i for i, g in enumerate(CATEGORY_GROUPS)}
    of_cat = np.array([code[GROUP_OF.get(c, "other")] for c in kc.categories], dtype=np.int64)
    return of_cat[kc.code]


def _graph_calls(ctx: Context) -> np.ndarray:
    rt = ctx.data.runtime()
    return launch_api_mask(ctx.data.runtime_api_names(), GRAPH_API)[rt.api] if len(rt) else np.zeros(0, bool)


def _gap_host(ctx: Context, tkey: int, lo: int, hi: int) -> HostGap:
    """The launching thread's time in [lo, hi): in blocking sync calls, other CUDA calls, none."""
    rt = ctx.data.runtime()
    sel = np.flatnonzero((rt.tkey == tkey) & (rt.end > lo) & (rt.start < hi))
    if len(sel) == 0:
        return HostGap(0, 0, hi - lo)
    kinds = sync_kinds(ctx.data.runtime_api_names())[rt.api[sel]]
    s, e = np.maximum(rt.start[sel], lo), np.minimum(rt.end[sel], hi)
    sync = intervals.union_length(s[kinds == 1], e[kinds == 1])
    total = intervals.union_length(s, e)
    return HostGap(int(sync), int(total - sync), int(hi - lo - total))


def _softmax(ctx: Context, groups: np.ndarray) -> np.ndarray:
    """Per kernel: a softmax kernel outside the attention class (a separate score-matrix pass)."""
    k = ctx.data.kernels()
    ids = np.unique(k.name_id)
    names = ctx.data.kernel_names(ids.astype(np.int64))
    soft = np.array([bool(SOFTMAX.search(names.get(int(i), ""))) for i in ids.tolist()] or [False])
    out = soft[np.searchsorted(ids, k.name_id)] if len(ids) else np.zeros(0, bool)
    return out & (groups != CATEGORY_GROUPS.index("attention"))


def _rows(ctx: Context, its: Iterations, groups: np.ndarray) -> list[IterationRow]:
    k = ctx.data.kernels()
    softmax = _softmax(ctx, groups)
    call = kernel_launch_index(ctx.data)
    rt = ctx.data.runtime()
    graph = _graph_calls(ctx)
    items = list(its.items)
    gpu = [(int(k.start[it.kernels].min()), int(k.end[it.kernels].max())) for it in items]
    prev_end: dict[int, int] = {}
    next_start: dict[int, int | None] = {}
    by_pid: dict[int, list[int]] = {}
    for i, it in enumerate(items):
        by_pid.setdefault(it.pid, []).append(i)
    for idx in by_pid.values():
        idx.sort(key=lambda i: gpu[i][0])
        for a, b in zip(idx, idx[1:], strict=False):
            prev_end[b] = gpu[a][1]
            next_start[a] = gpu[b][0]
    rows = []
    for i, it in enumerate(items):
        ks = it.kernels
        calls = np.unique(call[ks][call[ks] >= 0])
        tk = rt.tkey[calls]
        tkey = int(np.bincount(tk - tk.min()).argmax() + tk.min()) if len(tk) else it.tkey
        g0, g1 = gpu[i]
        gap = gap_host = None
        if i in prev_end:
            gap = max(0, g0 - prev_end[i])
            gap_host = _gap_host(ctx, tkey, prev_end[i], g0) if gap > 0 else HostGap(0, 0, 0)
        cat_ns = np.bincount(groups[ks], weights=k.dur[ks].astype(np.float64), minlength=len(CATEGORY_GROUPS))
        m = it.mark
        mixed = it.phase == "mixed" and m is not None
        dev = k.device[ks]
        ud, inv = np.unique(dev, return_inverse=True)
        device = int(ud[np.argmax(np.bincount(inv, weights=k.dur[ks].astype(np.float64)))])
        rows.append(IterationRow(
            iteration=i, pid=it.pid, device=device, name=it.name, outer=it.outer, phase=it.phase,
            sequences=it.sequences, tokens=it.tokens, kv_tokens=it.kv_tokens,
            prefill_sequences=m.prefill_seqs if mixed else None,
            prefill_tokens=m.prefill_tokens if mixed else None,
            decode_sequences=m.decode_seqs if mixed else None,
            decode_tokens=(m.decode_tokens if m.decode_tokens is not None else m.decode_seqs) if mixed else None,
            numbers_from=it.numbers_from, host_start_ns=it.start, host_end_ns=it.end,
            gpu_start_ns=g0, gpu_end_ns=g1, gpu_busy_ns=int(intervals.union_length(k.start[ks], k.end[ks])),
            kernel_ns=int(k.dur[ks].sum()), kernels=len(ks), launches=len(calls), gap_before_ns=gap,
            gap_host=gap_host, period_ns=(next_start[i] - g0) if next_start.get(i) is not None else None,
            graph_replays=int(graph[calls].sum()) if len(graph) else 0, layers=it.layers,
            categories={CATEGORY_GROUPS[j]: int(v) for j, v in enumerate(cat_ns.tolist()) if v > 0},
            softmax_kernels=int(softmax[ks].sum()), softmax_ns=int(k.dur[ks][softmax[ks]].sum()),
        ))
    return rows


def _p(values: list[int], q: int) -> int:
    return percentiles(np.array(values, dtype=np.int64), (q,))[q] if values else 0


def _utilization(ctx: Context, phase: str, n: int) -> dict[str, Any] | None:
    mu = ctx.result("model_utilization")
    steps = ctx.result("steps")
    if steps is None or steps.data.get("method") != "serving_iterations":
        reason = "the steps are not these iterations, so model_utilization's phases do not match them"
        return {"mfu_pct": None, "mbu_pct": None, "hfu_pct": None, "from": None, "missing": reason}
    if mu is None:
        why = getattr(ctx.results.get("model_utilization"), "reason", "model_utilization did not run")
        return {"mfu_pct": None, "mbu_pct": None, "hfu_pct": None, "from": None, "missing": why}
    row = next((p for p in mu.data.get("phases", []) if p.get("phase") == phase), None)
    if row is None:
        return None
    missing = [m for m in mu.data.get("missing", []) if m.startswith(("MFU", "MBU"))]
    return {"mfu_pct": row.get("mfu_pct"), "mbu_pct": row.get("mbu_pct"), "hfu_pct": row.get("hfu_pct"),
            "from": "model_utilization", "missing": "; ".join(missing) or None}


def _phase_row(ctx: Context, phase: str, rows: list[IterationRow], kernel_graph: np.ndarray,
               its: Iterations) -> PhaseRow:
    spans = [r.gpu_span_ns for r in rows]
    busy = [r.gpu_busy_ns for r in rows]
    periods = [r.period_ns for r in rows if r.period_ns is not None]
    tokens_known = all(r.tokens is not None for r in rows)
    tokens = sum(int(r.tokens or 0) for r in rows) if tokens_known else None
    seqs = [r.sequences for r in rows if r.sequences is not None]
    kvs = [r.kv_tokens for r in rows if r.kv_tokens is not None]
    cats = {g: sum(r.categories.get(g, 0) for r in rows) for g in CATEGORY_GROUPS}
    gaps = sum(r.gap_before_ns or 0 for r in rows)
    idle = sum(max(r.gpu_span_ns - r.gpu_busy_ns, 0) for r in rows)
    span_sum = sum(spans)
    if phase == "decode" and tokens is not None and periods:
        # decode: time per output token of one sequence is the period; tokens/s over the periods
        per_token = None
        per_s = round(sum(r.tokens or 0 for r in rows if r.period_ns is not None) / (sum(periods) / 1e9), 1)
    elif tokens:
        per_token = round(span_sum / tokens, 2)
        per_s = round(tokens / (span_sum / 1e9), 1) if span_sum else None
    else:
        per_token = per_s = None
    kernels = sum(r.kernels for r in rows)
    in_graphs = int(sum(int(kernel_graph[its.items[r.iteration].kernels].sum()) for r in rows))
    return PhaseRow(
        phase=phase, iterations=len(rows), sequences_p50=_p(seqs, 50) if seqs else None, tokens=tokens,
        kv_tokens_p50=_p(kvs, 50) if kvs else None, gpu_span_p50_ns=_p(spans, 50), gpu_span_p90_ns=_p(spans, 90),
        gpu_busy_p50_ns=_p(busy, 50), gpu_busy_p90_ns=_p(busy, 90),
        kernels_per_iteration=round(kernels / len(rows), 2),
        launches_per_iteration=round(sum(r.launches for r in rows) / len(rows), 2),
        period_p50_ns=_p(periods, 50) if periods else None, period_p90_ns=_p(periods, 90) if periods else None,
        ns_per_token=per_token, tokens_per_s=per_s, categories=cats, gap_ns=gaps, idle_in_span_ns=idle,
        host_share_pct=round(100.0 * (gaps + idle) / (gaps + span_sum), 2) if gaps + span_sum else None,
        graph_iterations=sum(1 for r in rows if r.graph_replays), graph_kernel_pct=round(
            100.0 * in_graphs / kernels, 2) if kernels else 0.0,
        utilization=_utilization(ctx, phase, len(rows)),
    )


def _fit(phase: str, rows: list[IterationRow]) -> LatencyFit:
    if phase == "prefill":
        names, pick = ["intercept_ns", "ns_per_token"], lambda r: (r.tokens,)
    elif phase == "decode":
        with_kv = all(r.kv_tokens is not None for r in rows)
        names = ["intercept_ns", "ns_per_sequence"] + (["ns_per_kv_token"] if with_kv else [])
        pick = (lambda r: (r.sequences, r.kv_tokens)) if with_kv else (lambda r: (r.sequences,))
    else:
        return LatencyFit(phase, "gpu_span_ns", None, len(rows), 0, None, None,
                          "mixed batches are not fitted: each holds two kinds of work")
    xs = [pick(r) for r in rows]
    known = [(x, r.gpu_span_ns) for x, r in zip(xs, rows, strict=True) if all(v is not None for v in x)]
    configs = len({x for x, _ in known})
    if not known:
        what = "new tokens" if phase == "prefill" else "sequences"
        return LatencyFit(phase, "gpu_span_ns", None, len(rows), 0, None, None,
                          f"no iteration states its {what}: there is nothing to fit the GPU span against")
    if len(known) < len(names) + 1 or configs < len(names):
        what = "tokens" if phase == "prefill" else "sequences and KV tokens"
        return LatencyFit(phase, "gpu_span_ns", None, len(rows), configs, None, None,
                          f"{configs} distinct configuration{'s' * (configs != 1)} of {what} among {len(known)} "
                          f"iteration{'s' * (len(known) != 1)} with known numbers: a fit of {len(names)} terms "
                          "needs more")
    a = np.array([[1.0, *map(float, x)] for x, _ in known])
    y = np.array([float(v) for _, v in known])
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    pred = a @ coef
    err = pred - y
    rel = np.abs(err) / np.maximum(y, 1.0)
    return LatencyFit(phase, "gpu_span_ns", {n: round(float(c), 3) for n, c in zip(names, coef, strict=True)},
                      len(rows), configs, round(float(np.sqrt(np.mean(err ** 2))), 1),
                      round(100.0 * float(rel.max()), 2))


def _overhead(ctx: Context) -> tuple[str, ...]:
    """Profiler options that inflate host time, as the capture records them."""
    settings = {s["name"]: s["value"] for s in ctx.data.capture_info([]).get("settings", [])}
    on = {key for key, _ in OVERHEAD_FLAGS if settings.get(key) in ("1", "true")}
    try:
        py = len(ctx.data.python_functions())
    except Unavailable:
        py = 0
    found = []
    for key, what in OVERHEAD_FLAGS:
        if key == "with_stack" and (py or key in on):
            found.append(f"{what} ({py:,} Python function events)" if py else what)
        elif key in on and key != "with_stack":
            found.append(what)
    return tuple(found)


def _tensor_parallel(ctx: Context, rows: list[IterationRow]) -> dict[str, Any] | None:
    dist = ctx.data.distributed() or {}
    world = dist.get("world_size")
    pids = sorted({r.pid for r in rows})
    comm = sum(r.categories.get("communication", 0) for r in rows)
    if not (isinstance(world, int) and world > 1) and not comm:
        return None
    ranks = len(pids)
    return {"world_size": world if isinstance(world, int) else None, "rank": dist.get("rank"),
            "processes_captured": ranks, "communication_ns": comm}


def _window(ctx: Context, rows: list[IterationRow]) -> int:
    """First to last kernel of each process that ran iterations, summed over those processes."""
    k = ctx.data.kernels()
    total = 0
    for pid in sorted({r.pid for r in rows}):
        mine = k.pid == pid
        total += int(k.end[mine].max() - k.start[mine].min())
    return total


def _key(r: IterationRow) -> tuple[Any, ...]:
    return (r.phase, r.sequences, r.tokens, r.kv_tokens)


def _per_config(rows: list[IterationRow], per_iter: list[dict[Any, tuple[int, int]]],
                label: str, extra: dict[Any, dict[str, Any]] | None = None) -> pd.DataFrame:
    """Per configuration and item (operator or kernel): calls and ns per iteration."""
    configs: dict[tuple[Any, ...], list[int]] = {}
    for i, r in enumerate(rows):
        configs.setdefault(_key(r), []).append(i)
    out = []
    for key, idx in configs.items():
        names = sorted({n for i in idx for n in per_iter[i]}, key=str)
        for name in names:
            calls = np.array([per_iter[i].get(name, (0, 0))[0] for i in idx], dtype=np.int64)
            ns = np.array([per_iter[i].get(name, (0, 0))[1] for i in idx], dtype=np.int64)
            out.append({**dict(zip(KEY_COLUMNS, key, strict=True)), "iterations": len(idx), label: name,
                        **(extra.get(name, {}) if extra else {}),
                        "calls_per_iteration": round(float(calls.mean()), 3),
                        "ns_per_iteration_mean": round(float(ns.mean()), 1),
                        "ns_per_iteration_p50": percentiles(ns, (50,))[50]})
    return pd.DataFrame(out)


def _op_times(ctx: Context, its: Iterations, rows: list[IterationRow]) -> tuple[pd.DataFrame, str | None]:
    k = ctx.data.kernels()
    try:
        att = operator_attribution(ctx.data)
        owner, names = att.kernel_op, ctx.data.operator_names()
        label = att.ops.name
    except Unavailable:
        try:
            ka = kernel_attribution(ctx.data)
            owner = ka.range_row()
            raw = ctx.data.nvtx_names()
            names = [normalize(n) for n in raw]
            label = ctx.data.nvtx().name
        except Unavailable:
            return pd.DataFrame(columns=list(OP_COLUMNS)), "no operators or NVTX ranges name the kernels' operations"
    if not (owner >= 0).any():
        return pd.DataFrame(columns=list(OP_COLUMNS)), "no kernel is attributed to an operator or NVTX range"
    per_iter = []
    for r in rows:
        ks = its.items[r.iteration].kernels
        own = owner[ks]
        sel = own >= 0
        d: dict[Any, tuple[int, int]] = {}
        if sel.any():
            frame = pd.DataFrame({"op": [names[int(x)] for x in label[own[sel]]], "row": own[sel],
                                  "ns": k.dur[ks][sel]})
            g = frame.groupby("op", sort=False).agg(calls=("row", "nunique"), ns=("ns", "sum"))
            d = {str(n): (int(c), int(v)) for n, c, v in zip(g.index, g["calls"], g["ns"], strict=True)}
        per_iter.append(d)
    return _per_config(rows, per_iter, "operator").reindex(columns=list(OP_COLUMNS)), None


def _kernel_dat(ctx: Context, its: Iterations, rows: list[IterationRow]) -> pd.DataFrame:
    k = ctx.data.kernels()
    try:
        kc = kernel_categories(ctx.data, load_table(ctx.options.kernel_categories))
        cat_of_name = dict(zip(kc.name_ids.tolist(), [kc.categories[c] for c in kc.name_category], strict=True))
    except (UsageError, Unavailable):
        cat_of_name = {}
    ids = np.unique(np.concatenate([its.items[r.iteration].kernels for r in rows])) if rows else np.empty(0, int)
    lookup = ctx.data.kernel_names(np.unique(k.name_id[ids]).astype(np.int64)) if len(ids) else {}
    per_iter = []
    for r in rows:
        ks = its.items[r.iteration].kernels
        nid = k.name_id[ks]
        u, inv = np.unique(nid, return_inverse=True)
        calls = np.bincount(inv, minlength=len(u))
        ns = np.bincount(inv, weights=k.dur[ks].astype(np.float64), minlength=len(u))
        per_iter.append({lookup.get(int(n), f"(unnamed kernel #{int(n)})"): (int(c), int(v))
                         for n, c, v in zip(u.tolist(), calls.tolist(), ns.tolist(), strict=True)})
    names = {lookup.get(int(n), f"(unnamed kernel #{int(n)})"): int(n) for n in np.unique(k.name_id[ids]).tolist()}
    extra = {name: {"category": cat_of_name.get(nid, "other")} for name, nid in names.items()}
    return _per_config(rows, per_iter, "kernel", extra).reindex(columns=list(KERNEL_COLUMNS))


def _iteration_frame(rows: list[IterationRow]) -> pd.DataFrame:
    out = []
    for r in rows:
        g = r.gap_host
        gap = {"gap_host_sync_ns": g.sync_ns if g else None, "gap_host_cuda_ns": g.cuda_ns if g else None,
               "gap_host_other_ns": g.other_ns if g else None}
        out.append({c: gap[c] if c in gap else getattr(r, c) for c in ITERATION_COLUMNS})
    return pd.DataFrame(out, columns=list(ITERATION_COLUMNS))


def run(ctx: Context) -> Outcome:
    k = ctx.data.kernels()
    if len(k) == 0:
        return METRIC.skipped(NO_KERNELS)
    its = find(ctx.data)
    why = _skip_reason(ctx, its)
    if why is not None:
        return METRIC.skipped(why)
    assert its is not None
    groups = _groups(ctx)
    rows = _rows(ctx, its, groups)
    call = kernel_launch_index(ctx.data)
    graph = _graph_calls(ctx)
    kernel_graph = np.where(call >= 0, graph[np.maximum(call, 0)] if len(graph) else False, False)
    present = [p for p in PHASE_ORDER if any(r.phase == p for r in rows)]
    phases = tuple(_phase_row(ctx, p, [r for r in rows if r.phase == p], kernel_graph, its) for p in present)
    fits = tuple(_fit(p, [r for r in rows if r.phase == p]) for p in present)
    outer = {it.outer for it in its.items if it.outer}
    span_from = ("the kernels launched inside each iteration's mark" if its.from_marks
                 else "the kernels of each pass")
    if outer:
        span_from += f" (the innermost mark: inside {sorted(outer)[0][:60]!r} and its like)"
    result = Serving(
        source=its.source, engine=its.engine, detail=its.detail, span_from=span_from, iterations=tuple(rows),
        phases=phases, fits=fits, empty_marks=len(its.empty), loops=its.loops, merged=its.merged,
        profiler_overhead=_overhead(ctx), tensor_parallel=_tensor_parallel(ctx, rows),
        carried_kernels=int(carried(ctx.data).kernels), window_ns=_window(ctx, rows),
        unassigned_kernels=int((its.kernel_iter < 0).sum() - carried(ctx.data).kernels),
    )
    op_frame, op_reason = _op_times(ctx, its, rows)
    notes = []
    if op_reason:
        notes.append(f"op_times.csv is empty, because {op_reason}")
    unknown = sum(1 for r in rows if r.phase is None)
    if unknown:
        notes.append(f"{unknown} iteration{'s' * (unknown != 1)} with no phase: nothing tells prefill from decode")
    tables = (
        Table("iterations", ITERATION_COLUMNS, _iteration_frame(rows)),
        Table("op_times", OP_COLUMNS, op_frame),
        Table("kernel_dat", KERNEL_COLUMNS, _kernel_dat(ctx, its, rows)),
    )
    return MetricResult(METRIC.id, result.to_json(), tables, tuple(notes), typed=result)


METRIC = Metric(
    id="serving",
    title="LLM serving: iterations, prefill and decode",
    run=run,
    tables={"iterations": ITERATION_COLUMNS, "op_times": OP_COLUMNS, "kernel_dat": KERNEL_COLUMNS},
    description="Scheduler iterations of an LLM engine (from its marks, else the model's structure): phase, "
    "sequences, tokens, GPU span and busy, host gaps, graph replays; per phase latency, time per token, "
    "category split, host share; latency fits; per-configuration operator and kernel times.",
    after=("workload", "steps", "model_utilization"),
)
