"""Kernel -> launch call join on (process, correlationId).

Correlation ids are per process: real multi-process traces reuse them, so joining on the
id alone pairs kernels with other processes' calls.

Kernel <-> launch call pairs shared by launch_overhead, boundness, idle_causes and steps.

A pair is one launch call and the first kernel it started. Graph launches start many
kernels under one correlation id; only the first one measures the launch, the others
queue behind their siblings, so each launch call counts once.

Kernel -> launch call (on pid, correlationId) -> innermost NVTX range around the launch:
the attribution nvtx_attribution reports and other metrics (categories, idle causes, host
patterns, compute) group by."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from nsys_llm_explainer.analysis import nvtx
from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.analysis.groups import MASK_SPLIT_MAX, distinct, distinct_few
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.kernels.categories import CategoryTable
from nsys_llm_explainer.trace.columns import Columns, factorize, narrow
from nsys_llm_explainer.trace.data import TraceData

if TYPE_CHECKING:
    from nsys_llm_explainer.trace.data import TraceData


_CORR_BITS = 39  # pid (24 bits) << 39 | corr keeps the key within int64
# The direct-address table may be this many times the number of calls (plus the slack)
# before the sorted join is used instead.
DENSE_FACTOR = 4
DENSE_SLACK = 1 << 20
# Items this many times fewer than the calls: only calls with an item's correlation id are
# joined (_may_match).
FEW_ITEMS = 16


def _keys(pid: np.ndarray, corr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    valid = (pid >= 0) & (corr > 0) & (corr < (1 << _CORR_BITS))
    return (pid.astype(np.int64) << _CORR_BITS) | np.where(valid, corr, 0), valid


def match_calls(
    items_pid: np.ndarray, items_corr: np.ndarray, calls: Columns, call_mask: np.ndarray | None = None
) -> np.ndarray:
    """Index into `calls` of the API call with the same (pid, corr), or -1.

    When several calls share the key, the one that started last (the innermost) wins.
    """
    result = np.full(len(items_pid), -1, dtype=np.int64)
    if len(items_pid) == 0 or len(calls) == 0:
        return result
    if call_mask is None and len(items_pid) * FEW_ITEMS < len(calls):
        call_mask = _may_match(items_corr, calls.corr)
    cand = np.arange(len(calls)) if call_mask is None else np.flatnonzero(call_mask)
    cpid, ccorr = calls.pid[cand], calls.corr[cand]
    cvalid = (cpid >= 0) & (ccorr > 0) & (ccorr < (1 << _CORR_BITS))
    if not cvalid.all():
        cand, cpid, ccorr = cand[cvalid], cpid[cvalid], ccorr[cvalid]
    if len(cand) == 0:
        return result
    found = _match_dense(items_pid, items_corr, cand, cpid, ccorr)
    if found is None:
        found = _match_sorted(items_pid, items_corr, cand, cpid, ccorr, calls.start[cand])
    return found


def _may_match(items_corr: np.ndarray, calls_corr: np.ndarray) -> np.ndarray:
    """Per call: some item has its correlation id. Only these can match, so a few items
    (copies, read-backs) join millions of calls without arrays as long as the calls."""
    wanted = distinct(items_corr[items_corr > 0])
    out = np.zeros(len(calls_corr), dtype=bool)
    if len(wanted) == 0:
        return out
    # a part of the calls at a time: the positions are int64, eight times the mask's size
    for a in range(0, len(calls_corr), MAY_MATCH_PART):
        part = calls_corr[a : a + MAY_MATCH_PART]
        pos = np.searchsorted(wanted, part)
        np.minimum(pos, len(wanted) - 1, out=pos)
        np.equal(wanted[pos], part, out=out[a : a + MAY_MATCH_PART])
    return out


MAY_MATCH_PART = 1 << 20


def _match_dense(
    items_pid: np.ndarray, items_corr: np.ndarray, cand: np.ndarray, cpid: np.ndarray,
    ccorr: np.ndarray,
) -> np.ndarray | None:
    """match_calls by direct addressing: CUPTI numbers correlation ids densely per process,
    so one slot per (pid, id in that pid's range) is a table about as long as the calls,
    and the join is a gather instead of a sort and a binary search. None when there are
    many processes, the ids are too sparse, or a key is shared (the sorted join then
    picks the latest call)."""
    pids = distinct_few(cpid)
    if len(pids) > MASK_SPLIT_MAX:  # one comparison pass per process below
        return None
    masks = [cpid == pid for pid in pids.tolist()]
    corr_of = [ccorr[m] for m in masks]
    lo = np.array([int(c.min()) for c in corr_of], dtype=np.int64)
    width = np.array([int(c.max()) for c in corr_of], dtype=np.int64) - lo + 1
    size = int(width.sum())
    if size > DENSE_FACTOR * len(cand) + DENSE_SLACK:
        return None
    base = np.r_[0, np.cumsum(width)[:-1]]
    table = np.full(size, -1, dtype=np.int64)
    for j, (m, corr) in enumerate(zip(masks, corr_of, strict=True)):
        table[corr + (base[j] - lo[j])] = cand[m]
    if int(np.count_nonzero(table >= 0)) != len(cand):
        return None  # a (pid, corr) key is shared by several calls
    del masks, corr_of
    result = np.full(len(items_pid), -1, dtype=np.int64)
    for j, pid in enumerate(pids.tolist()):
        mine = np.flatnonzero(items_pid == pid)
        off = items_corr[mine] - lo[j]
        inside = (off >= 0) & (off < width[j])
        result[mine[inside]] = table[off[inside] + base[j]]
    return result


def _match_sorted(
    items_pid: np.ndarray, items_corr: np.ndarray, cand: np.ndarray, cpid: np.ndarray,
    ccorr: np.ndarray, cstart: np.ndarray,
) -> np.ndarray:
    """match_calls by sorting the call keys and a binary search per item."""
    result = np.full(len(items_pid), -1, dtype=np.int64)
    ckey, _ = _keys(cpid, ccorr)
    order = np.argsort(ckey)  # one key: several times cheaper than the lexsort below
    sorted_key = ckey[order]
    if (sorted_key[1:] == sorted_key[:-1]).any():  # shared keys: the latest start must win
        order = np.lexsort((cstart, ckey))
        sorted_key = ckey[order]
    ckey, cand = sorted_key, cand[order]
    ikey, ivalid = _keys(items_pid, items_corr)
    pos = np.searchsorted(ckey, ikey, side="right") - 1
    ok = ivalid & (pos >= 0)
    ok[ok] &= ckey[pos[ok]] == ikey[ok]
    result[ok] = cand[pos[ok]]
    return result


def kernel_launch_index(data: TraceData) -> np.ndarray:
    """For each kernel, the row of its launch call in data.runtime(), or -1 (cached)."""

    def build() -> np.ndarray:
        k = data.kernels()
        return match_calls(k.pid, k.corr, data.runtime())

    return data.cached("kernel_launch_index", build)


# cudaLaunchKernel*, cudaLaunchKernelExC, cuLaunchKernel*, cudaGraphLaunch, cuGraphLaunch and
# cudaLaunchCooperativeKernel*, with the per-thread-stream suffixes (_ptsz/_ptds) allowed;
# on ROCm (PyTorch profiler traces) hipLaunchKernel, hipExtLaunchKernel, hipModuleLaunchKernel,
# hipExtModuleLaunchKernel, hipLaunchCooperativeKernel and hipGraphLaunch.
LAUNCH_API = re.compile(
    r"^(cudaLaunchKernel\w*|cuLaunchKernel\w*|cudaGraphLaunch|cuGraphLaunch"
    r"|cudaLaunchCooperativeKernel\w*"
    r"|hip(Ext)?(Module)?LaunchKernel\w*|hipLaunchCooperativeKernel\w*|hipGraphLaunch)(_pt(sz|ds)|_spt)?$"
)
GRAPH_API = re.compile(r"^(cu(da)?|hip)GraphLaunch(_pt(sz|ds)|_spt)?$")


def launch_api_mask(api_names: list[str], pattern: re.Pattern[str] = LAUNCH_API) -> np.ndarray:
    """Per runtime API code: True when the API is one of the launch calls above."""
    return np.array([bool(pattern.match(n)) for n in api_names] or [False], dtype=bool)


@frozen
class LaunchPairs:
    kernel_launch: (
        np.ndarray
    )  # per kernel: launch row in runtime(), -1 when none (launch APIs only)
    non_launch_match: np.ndarray  # per kernel: joined to an API call that is not a launch API
    call: np.ndarray  # per pair: runtime row of the launch call
    kernel: np.ndarray  # per pair: index of the first kernel it started
    kernels_per_call: np.ndarray  # per pair: how many kernels share the call
    graph: np.ndarray  # per pair: the call is a graph launch
    # Whole columns (kernel start, call start, call end): the per-pair times below are
    # gathered from them on use, so the cached pairs do not hold three more arrays of
    # millions of rows through every later metric.
    kernel_start: np.ndarray
    call_start: np.ndarray
    call_end: np.ndarray

    def subset(self, sel: np.ndarray) -> LaunchPairs:
        """The pairs selected by `sel` (per-kernel arrays are kept whole)."""
        return LaunchPairs(
            self.kernel_launch,
            self.non_launch_match,
            self.call[sel],
            self.kernel[sel],
            self.kernels_per_call[sel],
            self.graph[sel],
            self.kernel_start,
            self.call_start,
            self.call_end,
        )

    @property
    def api_ns(self) -> np.ndarray:
        """call end - call start"""
        return self.call_end[self.call] - self.call_start[self.call]

    @property
    def latency_raw(self) -> np.ndarray:
        """kernel start - call start (may be negative under clock skew)"""
        return self.kernel_start[self.kernel] - self.call_start[self.call]

    @property
    def queue_raw(self) -> np.ndarray:
        """kernel start - call end (negative: started before the call returned)"""
        return self.kernel_start[self.kernel] - self.call_end[self.call]

    @property
    def latency(self) -> np.ndarray:
        return np.maximum(self.latency_raw, 0)

    @property
    def queue(self) -> np.ndarray:
        return np.maximum(self.queue_raw, 0)


def launch_pairs(data: TraceData) -> LaunchPairs:
    """Pairs for every kernel whose (pid, correlationId) joins a launch API call (cached)."""

    def build() -> LaunchPairs:
        k = data.kernels()
        rt = data.runtime()
        names = data.runtime_api_names()
        joined = kernel_launch_index(data)
        is_launch = launch_api_mask(names)
        is_graph = launch_api_mask(names, GRAPH_API)
        ok = joined >= 0
        ok[ok] = is_launch[rt.api[joined[ok]]]
        kernel_launch = np.where(ok, joined, -1)
        non_launch = (joined >= 0) & ~ok
        idx = np.flatnonzero(ok)
        calls = kernel_launch[idx]
        # First kernel (earliest start) per launch call.
        order = np.lexsort((k.start[idx], calls))
        calls_sorted = calls[order]
        first = (
            np.flatnonzero(np.r_[True, calls_sorted[1:] != calls_sorted[:-1]])
            if len(order)
            else order
        )
        counts = narrow(np.diff(np.r_[first, len(order)]))
        kern = narrow(idx[order[first]])
        call = narrow(calls_sorted[first])
        # What steps reads, kept on its own so that the pairs can go after their last reader.
        data.put("launch_first_kernels", kern)
        return LaunchPairs(
            kernel_launch=kernel_launch,
            non_launch_match=non_launch,
            call=call,
            kernel=kern,
            kernels_per_call=counts,
            graph=is_graph[rt.api[call]] if len(call) else np.zeros(0, bool),
            kernel_start=k.start,
            call_start=rt.start,
            call_end=rt.end,
        )

    return data.cached("launch_pairs", build)


def launch_first_kernels(data: TraceData) -> np.ndarray:
    """launch_pairs(data).kernel: per launch call, the first kernel it started (cached apart
    from the pairs, which launch_overhead and boundness read)."""
    return data.cached("launch_first_kernels", lambda: launch_pairs(data).kernel)


QUERY_CHUNK = 1 << 18  # kernels looked up at a time


@frozen
class KernelAttribution:
    launch: np.ndarray  # per kernel: row in runtime(), or -1
    range_pos: np.ndarray  # per kernel: sorted position in `index`, or -1
    index: nvtx.RangeIndex
    depth: np.ndarray  # per sorted range

    def range_row(self, rows: np.ndarray | None = None) -> np.ndarray:
        """Per kernel (of `rows`, default all): row in data.nvtx() of its innermost range, or -1."""
        pos = self.range_pos if rows is None else self.range_pos[rows]
        if len(self.index.order) == 0:
            return np.full(len(pos), -1, dtype=np.int64)
        return np.where(pos >= 0, self.index.order[np.maximum(pos, 0)], -1)


KEY = "kernel_attribution"


def kernel_attribution(data: TraceData) -> KernelAttribution:
    """The per-kernel NVTX attribution, computed once and shared (phases, categories, steps)."""

    def build() -> KernelAttribution:
        rt = data.runtime()
        launch = kernel_launch_index(data)
        index = nvtx.build(data.nvtx())
        matched = np.flatnonzero(launch >= 0)
        calls = launch[matched]
        pos = np.full(len(launch), -1, dtype=np.int32 if len(index.order) < 2**31 else np.int64)
        # In chunks: the queries' gathered columns and the search's work arrays are a few
        # arrays per kernel, which at millions of kernels would add up to the run's peak.
        for lo in range(0, len(matched), QUERY_CHUNK):
            sel, c = matched[lo : lo + QUERY_CHUNK], calls[lo : lo + QUERY_CHUNK]
            pos[sel] = nvtx.innermost(index, rt.tkey[c], rt.start[c], rt.end[c])
        return KernelAttribution(launch, pos, index, nvtx.depths(index))

    return data.cached(KEY, build)


def cached_range_index(data: TraceData) -> nvtx.RangeIndex | None:
    """The NVTX range index of every thread when the kernel attribution is cached already
    (None otherwise: nothing is built here). A thread's ranges form the same tree in it as
    in an index of that thread's ranges alone."""
    try:
        return data.cached_value(KEY).index  # type: ignore[no-any-return]
    except KeyError:
        return None


NO_PHASE = -1


def instance_phases(ctx: Context, att: KernelAttribution, names: list[str]) -> tuple[np.ndarray, list[str]]:
    """Phase code per sorted range: its own name's phase, else its nearest ancestor's."""
    phases = ctx.options.phase_map.phases()
    code_of = {p: i for i, p in enumerate(phases)}
    by_name = np.array([code_of.get(ctx.options.phase_map.phase_of(n) or "", NO_PHASE) for n in names] or [NO_PHASE])
    name = ctx.data.nvtx().name[att.index.order]
    phase = by_name[name] if len(name) else np.empty(0, np.int64)
    for level in range(1, int(att.depth.max(initial=0)) + 1):
        idx = np.flatnonzero((att.depth == level) & (phase == NO_PHASE))
        phase[idx] = phase[att.index.parent[idx]]
    return phase, phases


@frozen
class KernelCategories:
    categories: list[str]  # code -> category name, "other" last
    code: np.ndarray  # per kernel row of data.kernels()
    name_ids: np.ndarray  # distinct name ids
    name_code: np.ndarray  # per kernel: index into name_ids
    name_category: np.ndarray  # per distinct name: category code
    name_rule: np.ndarray  # per distinct name: matching rule index, -1 for none
    names: list[str]
    matched: list[str]  # per distinct name: the text the deciding rule matched


def kernel_categories(data: TraceData, table: CategoryTable) -> KernelCategories:
    """Category code of every kernel (cached per table; fusion_candidates reuses it)."""

    def build() -> KernelCategories:
        k = data.kernels()
        codes, uniq = factorize(k.name_id)
        name_ids = np.asarray(uniq, dtype=np.int64)
        lookup = data.kernel_names(name_ids)
        names = [lookup.get(int(i), f"(unnamed kernel #{int(i)})") for i in name_ids]
        cats, rule, matched = table.explain(names)
        order = table.categories()
        code_of = {c: i for i, c in enumerate(order)}
        name_cat = np.array([code_of[c] for c in cats], dtype=np.int64)
        kcode = name_cat[codes] if len(codes) else np.empty(0, np.int64)
        return KernelCategories(
            order, kcode, name_ids, codes.astype(np.int64), name_cat, rule, names, matched
        )

    return data.cached(f"kernel_categories:{table.source}", build)
