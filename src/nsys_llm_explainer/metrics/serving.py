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
from collections.abc import Callable, Iterator, Sequence
from operator import attrgetter
from typing import Any

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis import intervals
from nsys_llm_explainer.analysis.blocking import sync_kinds
from nsys_llm_explainer.analysis.carried import carried
from nsys_llm_explainer.analysis.context import NO_KERNELS, Context
from nsys_llm_explainer.analysis.groups import distinct, distinct_few, distinct_per_group, group_codes, group_rows
from nsys_llm_explainer.analysis.iterations import Iterations, find, size_blocks
from nsys_llm_explainer.analysis.join import (
    GRAPH_API,
    kernel_attribution,
    kernel_categories,
    kernel_launch_index,
    launch_api_mask,
)
from nsys_llm_explainer.analysis.nvtx import normalized_names
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
from nsys_llm_explainer.results.efficiency import ModelUtilization
from nsys_llm_explainer.results.run import Steps
from nsys_llm_explainer.results.serving import (
    CATEGORY_GROUPS,
    HostGap,
    IterationRow,
    LatencyFit,
    PhaseRow,
    Serving,
    TensorParallel,
    Utilization,
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


class _Kinds:
    """What a kernel is, looked up per block of kernel rows (no per-kernel array of the whole
    trace): its CATEGORY_GROUPS entry, and whether it is a softmax kernel outside the attention
    class (a separate score-matrix pass)."""

    def __init__(self, ctx: Context) -> None:
        self._k = ctx.data.kernels()
        try:
            kc = kernel_categories(ctx.data, load_table(ctx.options.kernel_categories))
        except (UsageError, Unavailable):
            self._code: np.ndarray | None = None
            self._of_cat = np.array([CATEGORY_GROUPS.index("other")], dtype=np.int64)
        else:
            code = {g: i for i, g in enumerate(CATEGORY_GROUPS)}
            self._code = kc.code
            self._of_cat = np.array([code[GROUP_OF.get(c, "other")] for c in kc.categories], dtype=np.int64)
        self.ids = distinct_few(self._k.name_id)  # the kernel name ids, sorted
        names = ctx.data.kernel_names(self.ids.astype(np.int64))
        self._soft = np.array([bool(SOFTMAX.search(names.get(int(i), ""))) for i in self.ids.tolist()] or [False])

    def groups(self, rows: np.ndarray) -> np.ndarray:
        """Per kernel of `rows`: index into CATEGORY_GROUPS."""
        if self._code is None:
            return np.full(len(rows), self._of_cat[0], dtype=np.int64)
        return self._of_cat[self._code[rows]]

    def names(self, rows: np.ndarray) -> np.ndarray:
        """Per kernel of `rows`: its name's index in `ids` (a small dense code)."""
        return np.searchsorted(self.ids, self._k.name_id[rows])

    def softmax(self, names: np.ndarray, groups: np.ndarray) -> np.ndarray:
        """Per kernel (`names`, `groups`: theirs): a softmax kernel outside the attention class."""
        return self._soft[names] & (groups != CATEGORY_GROUPS.index("attention"))


BLOCK_ROWS = 1 << 17  # kernel rows per block of iterations (_blocks)


def _blocks(its: Iterations, kernel_iter: np.ndarray) -> Iterator[tuple[int, int, np.ndarray]]:
    """(first, end, rows): consecutive ranges of iterations holding about BLOCK_ROWS kernels
    each, with the rows of their kernels (kernel_iter in [first, end)), ascending. Per-kernel
    temporaries then stay at a block's size however many kernels the capture holds, and each
    iteration's kernels keep their order."""
    for a, b in size_blocks([it.kernel_count for it in its.items], BLOCK_ROWS):
        yield a, b, its.rows(kernel_iter, a, b)


def _graph_calls(ctx: Context) -> np.ndarray:
    rt = ctx.data.runtime()
    return launch_api_mask(ctx.data.runtime_api_names(), GRAPH_API)[rt.api] if len(rt) else np.zeros(0, bool)


def _host_gaps(ctx: Context, tkey: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> list[HostGap]:
    """Per gap [lo, hi) of the thread `tkey`: the time the thread spent in blocking
    synchronize calls, in other CUDA calls, and in none (each thread's calls merged into
    their union, one thread at a time; only the calls that can reach into a gap, _near)."""
    rt = ctx.data.runtime()
    kinds = sync_kinds(ctx.data.runtime_api_names())
    total = np.zeros(len(lo), dtype=np.int64)
    sync = np.zeros(len(lo), dtype=np.int64)
    near = _near(rt.start, rt.end, lo, hi)
    for t in distinct_few(tkey).tolist():
        m = tkey == t
        q0, q1 = lo[m], hi[m]
        mine = np.flatnonzero(rt.tkey == t) if near is None else near[rt.tkey[near] == t]
        total[m] = intervals.overlap_with_union(q0, q1, *intervals.merge(rt.start[mine], rt.end[mine]))
        blocking = mine[kinds[rt.api[mine]] == 1]
        del mine
        sync[m] = intervals.overlap_with_union(q0, q1, *intervals.merge(rt.start[blocking], rt.end[blocking]))
    return [HostGap(int(s), int(a - s), int(b - x - a)) for s, a, b, x in
            zip(sync.tolist(), total.tolist(), hi.tolist(), lo.tolist(), strict=True)]


def _near(start: np.ndarray, end: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray | None:
    """The rows of calls [start, end) (sorted by start) that may overlap a window [lo, hi),
    ascending: those from the first whose running maximum end passes the window's start to
    the last starting before its end; a call outside every such run overlaps no window, so
    the union of the others holds the same time inside each. None (use every row) when the
    calls are not sorted by start or a quarter of them or more lie in the runs."""
    if len(start) == 0 or len(lo) == 0 or not bool((start[1:] >= start[:-1]).all()):
        return None
    reach = np.maximum.accumulate(end)
    a = np.searchsorted(reach, lo, side="right")
    del reach
    b = np.searchsorted(start, hi, side="left")
    keep = b > a
    edges = np.zeros(len(start) + 1, dtype=np.int32)
    np.add.at(edges, a[keep], 1)
    np.add.at(edges, b[keep], -1)
    rows = np.flatnonzero(np.cumsum(edges[:-1]) > 0)
    return rows if len(rows) * 4 < len(start) else None


class _Ops:
    """The operation each kernel ran for, for op_times.csv: its PyTorch profiler operator,
    else its innermost NVTX range; `reason` says why there is none (and part() is not called)."""

    owner_of: Callable[[np.ndarray], np.ndarray]  # kernel rows -> their operator or range row, or -1

    def __init__(self, ctx: Context) -> None:
        self.reason: str | None = None
        try:
            att = operator_attribution(ctx.data)
            kernel_op = att.kernel_op
            self.owner_of = lambda r: kernel_op[r]  # noqa: E731
            names, self.label = ctx.data.operator_names(), att.ops.name
        except Unavailable:
            try:
                nvtx_att = kernel_attribution(ctx.data)
                self.owner_of = nvtx_att.range_row
                self.label = ctx.data.nvtx().name
            except Unavailable:
                self.reason = "no operators or NVTX ranges name the kernels' operations"
                return
            # the distinct normalized range names, in order of first appearance (cached)
            self.names, self.name_code = normalized_names(ctx.data)
            return
        self.name_code, self.names = pd.factorize(np.array(names, dtype=object), sort=False)

    def part(self, sel: np.ndarray, it: np.ndarray, dur: np.ndarray) -> _Part | None:
        """Per (iteration, operator name) among the kernel rows `sel` (`it`, `dur`: theirs):
        first row, iteration, name code, distinct operator calls, kernel ns."""
        owner = self.owner_of(sel)
        keep = owner >= 0
        if not keep.any():
            return None
        sel, owner, it = sel[keep], owner[keep], it[keep]
        op = self.name_code[self.label[owner]]
        codes, first = group_rows(it, op)
        ns = np.bincount(codes, weights=dur[keep].astype(np.float64)).astype(np.int64)
        # distinct operator calls per (iteration, op); an operator's kernels are mostly adjacent
        calls = distinct_per_group(codes, owner, len(ns), runs=True)
        return sel[first], it[first], op[first], calls, ns


# (first row, iteration, item, calls, ns) per (iteration, item) of one block, in the order of
# first appearance among the block's rows
_Part = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _kernel_part(sel: np.ndarray, it: np.ndarray, names: np.ndarray, ids: np.ndarray, dur: np.ndarray) -> _Part:
    """Per (iteration, kernel name) among the kernel rows `sel` (`names`: their indexes
    into the name ids `ids`): first row, iteration, name id, calls, kernel ns."""
    codes, first = group_rows(it, names)
    calls = np.bincount(codes)
    ns = np.bincount(codes, weights=dur.astype(np.float64)).astype(np.int64)
    return sel[first], it[first], ids[names[first]].astype(np.int64), calls, ns


def _rows(ctx: Context, its: Iterations, kernel_iter: np.ndarray, kinds: _Kinds,
          ops: _Ops) -> tuple[list[IterationRow], np.ndarray, list[_Part], list[_Part]]:
    """Every iteration's figures (group sums over the kernel -> iteration map, a block of
    iterations at a time), per iteration the kernels a CUDA graph replay ran, and in the same
    pass each block's parts of op_times.csv (none when ops.reason) and kernel_dat.csv."""
    k = ctx.data.kernels()
    call = kernel_launch_index(ctx.data)
    rt = ctx.data.runtime()
    graph = _graph_calls(ctx)
    items = list(its.items)
    n = len(items)
    ng = len(CATEGORY_GROUPS)
    gpu_start = np.full(n, np.iinfo(np.int64).max, np.int64)
    gpu_end = np.full(n, -1, np.int64)
    kernels = np.zeros(n, np.int64)
    kernel_ns = np.zeros(n, np.int64)
    busy = np.zeros(n, np.int64)
    cat_ns = np.zeros((n, ng), np.int64)
    soft_n = np.zeros(n, np.int64)
    soft_ns = np.zeros(n, np.int64)
    launches = np.zeros(n, np.int64)
    replays = np.zeros(n, np.int64)
    in_graphs = np.zeros(n, np.int64)
    device = np.zeros(n, np.int64)
    # the thread that launched most of an iteration's kernels (its mark's otherwise)
    launcher = np.array([it.tkey for it in items], dtype=np.int64)
    width = len(rt) + 1
    op_parts: list[_Part] = []
    kernel_parts: list[_Part] = []
    for a, b, sel in _blocks(its, kernel_iter):
        nb = b - a
        it_of = kernel_iter[sel].astype(np.int64)
        g = it_of - a
        raw = k.rows_of("dur", sel)
        names = kinds.names(sel)
        kernel_parts.append(_kernel_part(sel, it_of, names, kinds.ids, raw))
        if ops.reason is None and (part := ops.part(sel, it_of, raw)) is not None:
            op_parts.append(part)
        del it_of
        dur = raw.astype(np.int64, copy=False)
        del raw
        start, end = k.start[sel], k.end[sel]
        np.minimum.at(gpu_start[a:b], g, start)
        np.maximum.at(gpu_end[a:b], g, end)
        kernels[a:b] = np.bincount(g, minlength=nb)
        kernel_ns[a:b] = np.bincount(g, weights=dur, minlength=nb).astype(np.int64)
        busy[a:b] = intervals.grouped_union(g, start, end, nb)
        del start, end
        groups = kinds.groups(sel)
        cat_ns[a:b] = np.bincount(g * ng + groups, weights=dur, minlength=nb * ng).astype(np.int64).reshape(nb, ng)
        soft = kinds.softmax(names, groups)
        del groups, names
        soft_n[a:b] = np.bincount(g[soft], minlength=nb)
        soft_ns[a:b] = np.bincount(g[soft], weights=dur[soft], minlength=nb).astype(np.int64)
        del soft
        # launches: distinct (iteration, call) pairs; graph replays: those whose call is a graph launch
        c = call[sel]
        ok = c >= 0
        pairs = distinct(g[ok] * width + c[ok], runs=True)  # a graph launch's kernels are adjacent
        p_it, p_call = pairs // width, pairs % width
        launches[a:b] = np.bincount(p_it, minlength=nb)
        if len(graph):
            replays[a:b] = np.bincount(p_it[graph[p_call]], minlength=nb)
            in_graphs[a:b] = np.bincount(g[ok][graph[c[ok]]], minlength=nb)
        del pairs, p_it, p_call
        if ok.any():
            tk = rt.tkey[c[ok]]
            threads = distinct_few(tk)  # a few threads: small codes keep group_codes off its hash path
            codes, (t_it, t_code) = group_codes(g[ok], np.searchsorted(threads, tk))
            t_tk = threads[t_code]
            count = np.bincount(codes)
            o = np.lexsort((-count, t_it))
            first = np.r_[True, t_it[o][1:] != t_it[o][:-1]]
            launcher[a + t_it[o][first]] = t_tk[o][first]
        del c, ok
        # the device most of an iteration's kernel time ran on
        codes, (d_it, d_dev) = group_codes(g, k.device[sel])
        d_ns = np.bincount(codes, weights=dur)
        o = np.lexsort((-d_ns, d_it))
        first = np.r_[True, d_it[o][1:] != d_it[o][:-1]]
        device[a + d_it[o][first]] = d_dev[o][first]
    # the previous and the next iteration of the same process, by GPU start
    prev_end = np.full(n, -1, np.int64)
    next_start = np.full(n, -1, np.int64)
    pids = np.array([it.pid for it in items])
    for pid in distinct_few(pids).tolist():
        idx = np.flatnonzero(pids == pid)
        idx = idx[np.argsort(gpu_start[idx], kind="stable")]
        prev_end[idx[1:]] = gpu_end[idx[:-1]]
        next_start[idx[:-1]] = gpu_start[idx[1:]]
    has_gap = np.flatnonzero((prev_end >= 0) & (gpu_start > prev_end))
    gap_host = dict(zip(has_gap.tolist(), _host_gaps(ctx, launcher[has_gap], prev_end[has_gap], gpu_start[has_gap]),
                        strict=True))
    rows = []
    no_gap = HostGap(0, 0, 0)
    # plain ints, read once: a numpy scalar per field and iteration is slow at tens of thousands
    dev_l, busy_l, kns_l, nk_l, launch_l, replay_l, sn_l, sns_l = (
        _plain(a) for a in (device, busy, kernel_ns, kernels, launches, replays, soft_n, soft_ns))
    start_l, end_l, prev_l, next_l, cat_l = (_plain(a) for a in (gpu_start, gpu_end, prev_end, next_start, cat_ns))
    for i, it in enumerate(items):
        m = it.mark if it.phase == "mixed" else None
        gap = None if prev_l[i] < 0 else max(0, start_l[i] - prev_l[i])
        rows.append(IterationRow(
            iteration=i, pid=it.pid, device=dev_l[i], name=it.name, outer=it.outer, phase=it.phase,
            sequences=it.sequences, tokens=it.tokens, kv_tokens=it.kv_tokens,
            prefill_sequences=m.prefill_seqs if m is not None else None,
            prefill_tokens=m.prefill_tokens if m is not None else None,
            decode_sequences=m.decode_seqs if m is not None else None,
            decode_tokens=None if m is None else m.decode_tokens if m.decode_tokens is not None else m.decode_seqs,
            numbers_from=it.numbers_from, host_start_ns=it.start, host_end_ns=it.end,
            gpu_start_ns=start_l[i], gpu_end_ns=end_l[i], gpu_busy_ns=busy_l[i],
            kernel_ns=kns_l[i], kernels=nk_l[i], launches=launch_l[i], gap_before_ns=gap,
            gap_host=None if gap is None else gap_host.get(i, no_gap),
            period_ns=next_l[i] - start_l[i] if next_l[i] >= 0 else None,
            graph_replays=replay_l[i], layers=it.layers,
            categories={CATEGORY_GROUPS[j]: v for j, v in enumerate(cat_l[i]) if v > 0},
            softmax_kernels=sn_l[i], softmax_ns=sns_l[i],
        ))
    return rows, in_graphs, op_parts, kernel_parts


def _plain(a: np.ndarray) -> list[Any]:
    return list(a.tolist())


def _p(values: list[int], q: int) -> int:
    return percentiles(np.array(values, dtype=np.int64), (q,))[q] if values else 0


def _utilization(ctx: Context, phase: str, rows: list[IterationRow], weights: np.ndarray | None,
                 its: Iterations) -> Utilization:
    """MFU/MBU of a phase: model_utilization's phase of the same name when the steps are these
    iterations; else, for decode, MBU from the weight bytes its GEMMs read (operator shapes)."""
    mu = ctx.typed(ModelUtilization)
    steps = ctx.typed(Steps)
    row = None
    if mu is not None and steps is not None and steps.method == "serving_iterations":
        row = mu.phase(phase)
    if row is not None and (row.mfu_pct is not None or row.mbu_pct is not None):
        return {"mfu_pct": row.mfu_pct, "mbu_pct": row.mbu_pct, "hfu_pct": row.hfu_pct,
                "from": "model_utilization", "missing": None}
    hfu = row.hfu_pct if row is not None else None
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
        why = "; ".join(m for m in mu.missing if m.startswith(("MFU", "MBU"))) or None
    if phase == "decode" and weights is None and why:
        why += "; without a model, MBU needs the GEMMs' operator shapes (record_shapes)"
    # The reason is model_utilization's own text: its code spans stay there (in this metric's
    # data a backtick would read as one from the trace, and the writers escape those).
    return {"mfu_pct": None, "mbu_pct": None, "hfu_pct": hfu, "from": None,
            "missing": why.replace("`", "") if why else None}


def _weight_bytes(ctx: Context, its: Iterations, kernel_iter: np.ndarray) -> np.ndarray | None:
    """Per iteration: the bytes of the weight matrices its forward GEMMs read (each distinct
    call's N x K operand in its storage dtype), from recorded operator shapes; None without them."""
    view = compute_view(ctx.data)
    if isinstance(view, str):
        return None
    kc = view.counted.kernel_call
    sel = np.flatnonzero((kc >= 0) & (kernel_iter >= 0))
    if len(sel) == 0:
        return None
    per_key = np.zeros(len(view.inst.costs), dtype=np.float64)
    for key, cost in enumerate(view.inst.costs):
        if (isinstance(cost, OpCost) and cost.family == "gemm" and cost.direction == "forward"
                and int(cost.extra.get("batch", 1)) == 1 and "n" in cost.extra):  # type: ignore[call-overload]
            per_key[key] = float(int(cost.extra["n"]) * int(cost.extra["k"]) * dtype_size(cost.dtype))  # type: ignore[call-overload]
    width = len(its.items)
    pairs = distinct(kc[sel].astype(np.int64) * width + kernel_iter[sel])
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


def _phase_row(ctx: Context, phase: str, rows: list[IterationRow], graph_kernels: np.ndarray,
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
    in_graphs = int(sum(int(graph_kernels[r.iteration]) for r in rows))
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


def _tensor_parallel(ctx: Context, rows: list[IterationRow]) -> TensorParallel | None:
    dist = ctx.data.distributed()
    world = dist["world_size"] if dist else None
    pids = sorted({r.pid for r in rows})
    comm = sum(r.categories.get("communication", 0) for r in rows)
    if not (isinstance(world, int) and world > 1) and not comm:
        return None
    ranks = len(pids)
    return TensorParallel(world if isinstance(world, int) else None, dist["rank"] if dist else None, ranks, comm)


def _window(ctx: Context, rows: list[IterationRow]) -> int:
    """First to last kernel of each process that ran iterations, summed over those processes."""
    k = ctx.data.kernels()
    total = 0
    for pid in sorted({r.pid for r in rows}):  # each ran kernels (its iterations' own)
        mine = np.flatnonzero(k.pid == pid)  # a few processes: rows, not masked reductions (3x faster)
        if len(mine):
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


def _in_row_order(parts: Sequence[tuple[np.ndarray, ...]]) -> list[np.ndarray]:
    """Per-block group columns (the first: each group's first row) joined and put in the
    order of their first rows: the numbering group_codes gives over all the blocks' rows."""
    cols = [np.concatenate(c) for c in zip(*parts, strict=True)]
    order = np.argsort(cols[0], kind="stable")
    return [c[order] for c in cols[1:]]


def _op_times(rows: list[IterationRow], ops: _Ops, parts: list[_Part]) -> tuple[pd.DataFrame, str | None]:
    if ops.reason is not None:
        return pd.DataFrame(columns=list(OP_COLUMNS)), ops.reason
    if not parts:
        return pd.DataFrame(columns=list(OP_COLUMNS)), "no kernel is attributed to an operator or NVTX range"
    p_it, p_op, calls, ns = _in_row_order(parts)
    frame = _per_config(rows, p_it, p_op, calls, ns, [str(x) for x in ops.names], "operator")
    return frame.reindex(columns=list(OP_COLUMNS)), None


def _kernel_dat(ctx: Context, rows: list[IterationRow], parts: list[_Part]) -> pd.DataFrame:
    if not parts:
        return pd.DataFrame(columns=list(KERNEL_COLUMNS))
    p_it, p_name, calls, ns = _in_row_order(parts)
    uniq = distinct_few(p_name)
    p_code = np.searchsorted(uniq, p_name)
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
    """tables/iterations.csv, a column at a time (a Python list each, typed by pandas as a
    list of row dicts would be)."""
    gaps = [r.gap_host for r in rows]
    split = {"gap_host_sync_ns": "sync_ns", "gap_host_cuda_ns": "cuda_ns", "gap_host_other_ns": "other_ns"}
    cols = {c: ([None if g is None else getattr(g, split[c]) for g in gaps] if c in split
                else list(map(attrgetter(c), rows))) for c in ITERATION_COLUMNS}
    return pd.DataFrame(cols, columns=list(ITERATION_COLUMNS))


def _workload(ctx: Context) -> str:
    wl = ctx.result("workload")
    return str(wl.data.get("kind")) if wl is not None else "unknown"


def _iterations(ctx: Context) -> tuple[str | None, Iterations | None]:
    """Why this metric skips (None: it does not), and the iterations it found."""
    if len(ctx.data.kernels()) == 0:
        return NO_KERNELS, None
    workload = _workload(ctx)
    its = find(ctx.data, structure=workload in LLM_WORKLOADS)
    return _skip_reason(its, workload), its


def skip_reason(ctx: Context) -> str | None:
    """Why this metric skips (run's own first answer), from workload and steps alone: the
    runner asks once those have run and, on a capture that is not serving, releases what
    this metric would read without waiting for its place at the end."""
    return _iterations(ctx)[0]


def run(ctx: Context) -> Outcome:
    why, its = _iterations(ctx)
    if why is not None:
        return METRIC.skipped(why)
    assert its is not None
    ops = _Ops(ctx)
    kernel_iter = its.kernels.unpack()
    rows, graph_kernels, op_parts, kernel_parts = _rows(ctx, its, kernel_iter, _Kinds(ctx), ops)
    present = [p for p in PHASE_ORDER if any(r.phase == p for r in rows)]
    weights = _weight_bytes(ctx, its, kernel_iter) if "decode" in present else None
    phases = tuple(_phase_row(ctx, p, [r for r in rows if r.phase == p], graph_kernels, its, weights)
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
        unassigned_kernels=int((kernel_iter < 0).sum() - carried(ctx.data).kernels),
    )
    op_frame, op_reason = _op_times(rows, ops, op_parts)
    notes = []
    if op_reason:
        notes.append(f"op_times.csv is empty, because {op_reason}")
    unknown = sum(1 for r in rows if r.phase is None)
    if unknown:
        notes.append(f"{unknown} iteration{'s' * (unknown != 1)} with no phase: nothing tells prefill from decode")
    tables = (
        Table("iterations", ITERATION_COLUMNS, _iteration_frame(rows)),
        Table("op_times", OP_COLUMNS, op_frame),
        Table("kernel_dat", KERNEL_COLUMNS, _kernel_dat(ctx, rows, kernel_parts)),
    )
    return MetricResult(METRIC.id, result.to_json(), tables, tuple(notes), typed=result)


METRIC = Metric(
    id="serving",
    # after steps, workload and model_utilization
    order=280,
    run_after="ncu_plan",  # last: beside critical_path and fusion_candidates, once the big intermediates are gone
    title="LLM serving: iterations, prefill and decode",
    run=run,
    tables={"iterations": ITERATION_COLUMNS, "op_times": OP_COLUMNS, "kernel_dat": KERNEL_COLUMNS},
    description="Scheduler iterations of an LLM engine (from its marks, else the model's structure): phase, "
    "sequences, tokens, GPU span and busy, host gaps, graph replays; per phase latency, time per token, "
    "category split, host share; latency fits; per-configuration operator and kernel times.",
    after=("workload", "steps", "model_utilization"),
    skip_when=skip_reason,
    skip_after=("workload", "steps"),
    reads=(
        "runtime", "kernel_launch_index", "kernel_attribution", "kernel_categories:",
        "operator_attribution", "carried", "serving_iterations", "serving_iterations:structure", "nvtx_normalized",
        "compute_instances", "compute_view", "compute_peaks:",
    ),
)
