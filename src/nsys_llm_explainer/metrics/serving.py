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
from nsys_llm_explainer.analysis.blocking import sync_kinds
from nsys_llm_explainer.analysis.carried import carried
from nsys_llm_explainer.analysis.context import NO_KERNELS, Context
from nsys_llm_explainer.analysis.groups import group_codes
from nsys_llm_explainer.analysis.iterations import Iterations, find
from nsys_llm_explainer.analysis.join import (
    GRAPH_API,
    kernel_attribution,
    kernel_categories,
    kernel_launch_index,
    launch_api_mask,
)
from nsys_llm_explainer.analysis.nvtx import normalize
from nsys_llm_explainer.analysis.operators import operator_attribution
from nsys_llm_explainer.analysis.stats import percentiles, rank_of
from nsys_llm_explainer.compute.cost import OpCost
from nsys_llm_explainer.compute.count import compute_view
from nsys_llm_explainer.compute.dtypes import size as dtype_size
from nsys_llm_explainer.compute.peaks import device_peaks
from nsys_llm_explainer.errors import UsageError
from nsys_llm_explainer.kernels.categories import load_table
from nsys_llm_explainer.metrics.base import Metric
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


def _skip_reason(its: Iterations | None, workload: str) -> str | None:
    llm = workload in LLM_WORKLOADS
    if its is None:
        what = "no repeating layer stack was found" if llm else (
            f"the workload is {workload}, not LLM inference (the layer structure is read only for LLM inference)")
        return (f"no iteration marks (vLLM, SGLang, TensorRT-LLM or prefill/decode ranges) and no model-runner "
                f"frames, and {what}: the capture is not LLM serving or generation")
    if its.source in STRUCTURAL and not llm:
        return (f"no engine or user marks iterations, and the workload is {workload}, not LLM inference: "
                f"the {len(its.items)} model pass{'es' * (len(its.items) != 1)} found are not serving iterations")
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


class _Covered:
    """Per thread, the union of its CUDA calls (all, and blocking synchronize calls alone) as
    prefix sums: the time a thread spent in calls inside any window in two binary searches."""

    def __init__(self, ctx: Context, tkeys: set[int]) -> None:
        rt = ctx.data.runtime()
        kinds = sync_kinds(ctx.data.runtime_api_names())
        self._all: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._sync: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        for tkey in tkeys:
            mine = np.flatnonzero(rt.tkey == tkey)
            self._all[tkey] = self._prefix(rt.start[mine], rt.end[mine])
            blocking = mine[kinds[rt.api[mine]] == 1]
            self._sync[tkey] = self._prefix(rt.start[blocking], rt.end[blocking])

    @staticmethod
    def _prefix(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ms, me = intervals.merge(start, end)
        return ms, me, np.r_[0, np.cumsum(me - ms)]

    @staticmethod
    def _upto(u: tuple[np.ndarray, np.ndarray, np.ndarray], t: np.ndarray) -> np.ndarray:
        """Per time: the union's length before it."""
        ms, me, cum = u
        if len(ms) == 0:
            return np.zeros(len(t), dtype=np.int64)
        i = np.searchsorted(ms, t, side="right") - 1
        j = np.maximum(i, 0)
        inside = np.clip(t - ms[j], 0, me[j] - ms[j])
        return np.where(i >= 0, cum[j] + inside, 0)

    def gaps(self, tkey: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> list[HostGap]:
        total = np.zeros(len(lo), dtype=np.int64)
        sync = np.zeros(len(lo), dtype=np.int64)
        for t in np.unique(tkey).tolist():
            m = tkey == t
            total[m] = self._upto(self._all[t], hi[m]) - self._upto(self._all[t], lo[m])
            sync[m] = self._upto(self._sync[t], hi[m]) - self._upto(self._sync[t], lo[m])
        return [HostGap(int(s), int(a - s), int(b - x - a)) for s, a, b, x in
                zip(sync.tolist(), total.tolist(), hi.tolist(), lo.tolist(), strict=True)]


def _launching_thread(its: Iterations, call: np.ndarray, tkey_of_call: np.ndarray) -> np.ndarray:
    """Per iteration: the thread that launched most of its kernels (its mark's otherwise)."""
    out = np.array([it.tkey for it in its.items], dtype=np.int64)
    k_it = its.kernel_iter
    sel = np.flatnonzero((k_it >= 0) & (call >= 0))
    if len(sel):
        codes, (g_it, g_tk) = group_codes(k_it[sel], tkey_of_call[call[sel]])
        count = np.bincount(codes)
        o = np.lexsort((-count, g_it))
        first = np.r_[True, g_it[o][1:] != g_it[o][:-1]]
        out[g_it[o][first]] = g_tk[o][first]
    return out


def _softmax(ctx: Context, groups: np.ndarray) -> np.ndarray:
    """Per kernel: a softmax kernel outside the attention class (a separate score-matrix pass)."""
    k = ctx.data.kernels()
    ids = np.unique(k.name_id)
    names = ctx.data.kernel_names(ids.astype(np.int64))
    soft = np.array([bool(SOFTMAX.search(names.get(int(i), ""))) for i in ids.tolist()] or [False])
    out = soft[np.searchsorted(ids, k.name_id)] if len(ids) else np.zeros(0, bool)
    return out & (groups != CATEGORY_GROUPS.index("attention"))


def _rows(ctx: Context, its: Iterations, groups: np.ndarray) -> list[IterationRow]:
    """Every iteration's figures, for all iterations at once (group sums over the kernel ->
    iteration map)."""
    k = ctx.data.kernels()
    softmax = _softmax(ctx, groups)
    call = kernel_launch_index(ctx.data)
    rt = ctx.data.runtime()
    graph = _graph_calls(ctx)
    items = list(its.items)
    n = len(items)
    sel = np.flatnonzero(its.kernel_iter >= 0)
    g = its.kernel_iter[sel]
    dur = k.dur[sel].astype(np.int64)
    gpu_start = np.full(n, np.iinfo(np.int64).max, np.int64)
    gpu_end = np.full(n, -1, np.int64)
    np.minimum.at(gpu_start, g, k.start[sel])
    np.maximum.at(gpu_end, g, k.end[sel])
    kernels = np.bincount(g, minlength=n)
    kernel_ns = np.bincount(g, weights=dur, minlength=n).astype(np.int64)
    busy = intervals.grouped_union(g, k.start[sel], k.end[sel], n)
    ng = len(CATEGORY_GROUPS)
    cat_ns = np.bincount(g * ng + groups[sel], weights=dur, minlength=n * ng).astype(np.int64).reshape(n, ng)
    soft = softmax[sel]
    soft_n = np.bincount(g[soft], minlength=n)
    soft_ns = np.bincount(g[soft], weights=dur[soft], minlength=n).astype(np.int64)
    # launches: distinct (iteration, call) pairs; graph replays: those whose call is a graph launch
    ok = call[sel] >= 0
    width = len(rt) + 1
    pairs = np.unique(g[ok] * width + call[sel][ok])
    p_it, p_call = pairs // width, pairs % width
    launches = np.bincount(p_it, minlength=n)
    replays = np.bincount(p_it[graph[p_call]], minlength=n) if len(graph) else np.zeros(n, np.int64)
    # the device most of an iteration's kernel time ran on
    codes, (d_it, d_dev) = group_codes(g, k.device[sel])
    d_ns = np.bincount(codes, weights=dur)
    o = np.lexsort((-d_ns, d_it))
    first = np.r_[True, d_it[o][1:] != d_it[o][:-1]]
    device = np.zeros(n, np.int64)
    device[d_it[o][first]] = d_dev[o][first]
    # the previous and the next iteration of the same process, by GPU start
    prev_end = np.full(n, -1, np.int64)
    next_start = np.full(n, -1, np.int64)
    pids = np.array([it.pid for it in items])
    for pid in np.unique(pids).tolist():
        idx = np.flatnonzero(pids == pid)
        idx = idx[np.argsort(gpu_start[idx], kind="stable")]
        prev_end[idx[1:]] = gpu_end[idx[:-1]]
        next_start[idx[:-1]] = gpu_start[idx[1:]]
    launcher = _launching_thread(its, call, rt.tkey)
    has_gap = np.flatnonzero((prev_end >= 0) & (gpu_start > prev_end))
    covered = _Covered(ctx, set(launcher[has_gap].tolist()))
    gap_host = dict(zip(has_gap.tolist(), covered.gaps(launcher[has_gap], prev_end[has_gap], gpu_start[has_gap]),
                        strict=True))
    rows = []
    for i, it in enumerate(items):
        m = it.mark if it.phase == "mixed" else None
        gap = None if prev_end[i] < 0 else int(max(0, gpu_start[i] - prev_end[i]))
        rows.append(IterationRow(
            iteration=i, pid=it.pid, device=int(device[i]), name=it.name, outer=it.outer, phase=it.phase,
            sequences=it.sequences, tokens=it.tokens, kv_tokens=it.kv_tokens,
            prefill_sequences=m.prefill_seqs if m is not None else None,
            prefill_tokens=m.prefill_tokens if m is not None else None,
            decode_sequences=m.decode_seqs if m is not None else None,
            decode_tokens=None if m is None else m.decode_tokens if m.decode_tokens is not None else m.decode_seqs,
            numbers_from=it.numbers_from, host_start_ns=it.start, host_end_ns=it.end,
            gpu_start_ns=int(gpu_start[i]), gpu_end_ns=int(gpu_end[i]), gpu_busy_ns=int(busy[i]),
            kernel_ns=int(kernel_ns[i]), kernels=int(kernels[i]), launches=int(launches[i]), gap_before_ns=gap,
            gap_host=None if gap is None else gap_host.get(i, HostGap(0, 0, 0)),
            period_ns=int(next_start[i] - gpu_start[i]) if next_start[i] >= 0 else None,
            graph_replays=int(replays[i]), layers=it.layers,
            categories={CATEGORY_GROUPS[j]: int(v) for j, v in enumerate(cat_ns[i].tolist()) if v > 0},
            softmax_kernels=int(soft_n[i]), softmax_ns=int(soft_ns[i]),
        ))
    return rows


def _p(values: list[int], q: int) -> int:
    return percentiles(np.array(values, dtype=np.int64), (q,))[q] if values else 0


def _utilization(ctx: Context, phase: str, rows: list[IterationRow], weights: np.ndarray | None,
                 its: Iterations) -> dict[str, Any] | None:
    """MFU/MBU of a phase: model_utilization's phase of the same name when the steps are these
    iterations; else, for decode, MBU from the weight bytes its GEMMs read (operator shapes)."""
    mu = ctx.result("model_utilization")
    steps = ctx.result("steps")
    row = None
    if mu is not None and steps is not None and steps.data.get("method") == "serving_iterations":
        row = next((p for p in mu.data.get("phases", []) if p.get("phase") == phase), None)
    if row is not None and (row.get("mfu_pct") is not None or row.get("mbu_pct") is not None):
        return {"mfu_pct": row.get("mfu_pct"), "mbu_pct": row.get("mbu_pct"), "hfu_pct": row.get("hfu_pct"),
                "from": "model_utilization", "missing": None}
    hfu = row.get("hfu_pct") if row is not None else None
    if phase == "decode" and weights is not None:
        mbu = _weight_mbu(ctx, rows, weights)
        if mbu is not None:
            return {"mfu_pct": None, "mbu_pct": mbu, "hfu_pct": hfu,
                    "from": "the weight bytes the decode GEMMs read (operator shapes; KV cache not counted: a lower "
                            "bound)", "missing": None}
    if mu is None:
        why = getattr(ctx.results.get("model_utilization"), "reason", "model_utilization did not run")
    elif row is None:
        why = "the steps are not these iterations, so model_utilization's phases do not match them"
    else:
        why = "; ".join(m for m in mu.data.get("missing", []) if m.startswith(("MFU", "MBU"))) or None
    if phase == "decode" and weights is None and why:
        why += "; without a model, MBU needs the GEMMs' operator shapes (record_shapes)"
    # The reason is model_utilization's own text: its code spans stay there (in this metric's
    # data a backtick would read as one from the trace, and the writers escape those).
    return {"mfu_pct": None, "mbu_pct": None, "hfu_pct": hfu, "from": None,
            "missing": why.replace("`", "") if why else None}


def _weight_bytes(ctx: Context, its: Iterations) -> np.ndarray | None:
    """Per iteration: the bytes of the weight matrices its forward GEMMs read (each distinct
    call's N x K operand in its storage dtype), from recorded operator shapes; None without them."""
    view = compute_view(ctx.data)
    if isinstance(view, str):
        return None
    kc = view.counted.kernel_call
    sel = np.flatnonzero((kc >= 0) & (its.kernel_iter >= 0))
    if len(sel) == 0:
        return None
    per_key = np.zeros(len(view.inst.costs), dtype=np.float64)
    for key, cost in enumerate(view.inst.costs):
        if (isinstance(cost, OpCost) and cost.family == "gemm" and cost.direction == "forward"
                and int(cost.extra.get("batch", 1)) == 1 and "n" in cost.extra):  # type: ignore[call-overload]
            per_key[key] = float(int(cost.extra["n"]) * int(cost.extra["k"]) * dtype_size(cost.dtype))  # type: ignore[call-overload]
    width = len(its.items)
    pairs = np.unique(kc[sel].astype(np.int64) * width + its.kernel_iter[sel])
    call, it = pairs // width, pairs % width
    out = np.bincount(it, weights=per_key[view.call_key[call]], minlength=width)
    return out if out.any() else None


def _weight_mbu(ctx: Context, rows: list[IterationRow], weights: np.ndarray) -> float | None:
    try:
        dp = device_peaks(ctx)
    except UsageError:
        return None
    bw = dp.bandwidth(rows[0].device) if rows else float("nan")
    span = sum(r.gpu_span_ns for r in rows)
    total = float(sum(weights[r.iteration] for r in rows))
    if not np.isfinite(bw) or not span or not total:
        return None
    return round(100.0 * total / (span / 1e9 * bw), 2)


def _phase_row(ctx: Context, phase: str, rows: list[IterationRow], kernel_graph: np.ndarray,
               its: Iterations, weights: np.ndarray | None) -> PhaseRow:
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
        per_token: float | None = None
        per_s: float | None = round(sum(r.tokens or 0 for r in rows if r.period_ns is not None)
                                    / (sum(periods) / 1e9), 1)
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
        utilization=_utilization(ctx, phase, rows, weights, its),
    )


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


def _per_config(rows: list[IterationRow], it: np.ndarray, item: np.ndarray, calls: np.ndarray, ns: np.ndarray,
                labels: list[str], label: str, extra: dict[str, list[Any]] | None = None) -> pd.DataFrame:
    """Per configuration (KEY_COLUMNS) and item (operator or kernel), from one row per
    (iteration, item) with its calls and ns: calls and ns per iteration, the ns mean and its
    nearest-rank p50 over the configuration's iterations (those without the item count 0)."""
    key_code: dict[tuple[Any, ...], int] = {}
    cfg = np.array([key_code.setdefault(_key(r), len(key_code)) for r in rows], dtype=np.int64)
    keys = list(key_code)
    n_of = np.bincount(cfg, minlength=len(keys))
    if len(it) == 0:
        return pd.DataFrame(columns=[*KEY_COLUMNS, "iterations", label])
    c = cfg[it]
    codes, (g_cfg, g_item) = group_codes(c, item)
    ngroups = int(codes.max()) + 1
    calls_sum = np.bincount(codes, weights=calls, minlength=ngroups)
    ns_sum = np.bincount(codes, weights=ns, minlength=ngroups)
    held = np.bincount(codes, minlength=ngroups)
    n = n_of[g_cfg]
    # p50 over n values of which n - held are zeros: the values sorted within their group
    order = np.lexsort((ns, codes))
    start = np.r_[0, np.cumsum(held)[:-1]]
    q = rank_of(50, n) - 1
    zeros = n - held
    pos = start + np.maximum(q - zeros, 0)
    p50 = np.where(q < zeros, 0, ns[order][np.minimum(pos, len(order) - 1)])
    frame = pd.DataFrame({col: [keys[x][j] for x in g_cfg.tolist()] for j, col in enumerate(KEY_COLUMNS)})
    frame["iterations"] = n
    frame[label] = [labels[x] for x in g_item.tolist()]
    for col, values in (extra or {}).items():
        frame[col] = [values[x] for x in g_item.tolist()]
    frame["calls_per_iteration"] = np.round(calls_sum / n, 3)
    frame["ns_per_iteration_mean"] = np.round(ns_sum / n, 1)
    frame["ns_per_iteration_p50"] = p50.astype(np.int64)
    return frame.sort_values(["iterations", label], ascending=[False, True], kind="stable").reset_index(drop=True)


def _op_times(ctx: Context, its: Iterations, rows: list[IterationRow]) -> tuple[pd.DataFrame, str | None]:
    k = ctx.data.kernels()
    try:
        att = operator_attribution(ctx.data)
        owner, names, label = att.kernel_op, ctx.data.operator_names(), att.ops.name
    except Unavailable:
        try:
            owner = kernel_attribution(ctx.data).range_row()
            names = [normalize(x) for x in ctx.data.nvtx_names()]
            label = ctx.data.nvtx().name
        except Unavailable:
            return pd.DataFrame(columns=list(OP_COLUMNS)), "no operators or NVTX ranges name the kernels' operations"
    sel = np.flatnonzero((its.kernel_iter >= 0) & (owner >= 0))
    if len(sel) == 0:
        return pd.DataFrame(columns=list(OP_COLUMNS)), "no kernel is attributed to an operator or NVTX range"
    name_code, uniq = pd.factorize(np.array(names, dtype=object), sort=False)
    op = name_code[label[owner[sel]]]
    it = its.kernel_iter[sel]
    codes, (p_it, p_op) = group_codes(it, op)
    ns = np.bincount(codes, weights=k.dur[sel].astype(np.float64)).astype(np.int64)
    calls_codes, _ = group_codes(codes, owner[sel])  # distinct operator calls per (iteration, op)
    first = np.zeros(int(calls_codes.max()) + 1, dtype=np.int64)
    first[calls_codes] = codes
    calls = np.bincount(first, minlength=len(ns))
    frame = _per_config(rows, p_it, p_op, calls, ns, [str(x) for x in uniq], "operator")
    return frame.reindex(columns=list(OP_COLUMNS)), None


def _kernel_dat(ctx: Context, its: Iterations, rows: list[IterationRow]) -> pd.DataFrame:
    k = ctx.data.kernels()
    sel = np.flatnonzero(its.kernel_iter >= 0)
    codes, (p_it, p_name) = group_codes(its.kernel_iter[sel], k.name_id[sel].astype(np.int64))
    calls = np.bincount(codes)
    ns = np.bincount(codes, weights=k.dur[sel].astype(np.float64)).astype(np.int64)
    uniq, p_code = np.unique(p_name, return_inverse=True)
    lookup = ctx.data.kernel_names(uniq.astype(np.int64))
    labels = [lookup.get(int(x), f"(unnamed kernel #{int(x)})") for x in uniq.tolist()]
    try:
        kc = kernel_categories(ctx.data, load_table(ctx.options.kernel_categories))
        cat_of = dict(zip(kc.name_ids.tolist(), [kc.categories[c] for c in kc.name_category], strict=True))
    except (UsageError, Unavailable):
        cat_of = {}
    cats = [cat_of.get(int(x), "other") for x in uniq.tolist()]
    frame = _per_config(rows, p_it, p_code, calls, ns, labels, "kernel", {"category": cats})
    return frame.reindex(columns=list(KERNEL_COLUMNS))


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
    wl = ctx.result("workload")
    workload = str(wl.data.get("kind")) if wl is not None else "unknown"
    its = find(ctx.data, structure=workload in LLM_WORKLOADS)
    why = _skip_reason(its, workload)
    if why is not None:
        return METRIC.skipped(why)
    assert its is not None
    groups = _groups(ctx)
    rows = _rows(ctx, its, groups)
    call = kernel_launch_index(ctx.data)
    graph = _graph_calls(ctx)
    kernel_graph = np.where(call >= 0, graph[np.maximum(call, 0)] if len(graph) else False, False)
    present = [p for p in PHASE_ORDER if any(r.phase == p for r in rows)]
    weights = _weight_bytes(ctx, its) if "decode" in present else None
    phases = tuple(_phase_row(ctx, p, [r for r in rows if r.phase == p], kernel_graph, its, weights)
                   for p in present)
    fits = tuple(LatencyFit.of(p, [r for r in rows if r.phase == p]) for p in present)
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
    reads=(
        "runtime", "kernel_launch_index", "kernel_attribution", "kernel_categories:",
        "operator_attribution", "carried", "serving_iterations", "serving_iterations:structure",
        "compute_instances", "compute_view", "compute_peaks:",
    ),
)
