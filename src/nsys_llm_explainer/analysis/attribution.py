"""What each kernel is attributed to, computed once per trace and shared by the metrics:

- kernel_attribution: kernel -> launch call (on pid, correlationId) -> innermost NVTX range
  around the launch, the attribution nvtx_attribution reports and other metrics (categories,
  idle causes, host patterns, compute) group by; instance_phases: the phase of each range;
- kernel_categories: the category of each kernel (kernels/categories.py's table), which the
  categories metric reports and others (critical path, step work, serving ...) group by."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsys_llm_explainer.analysis import nvtx_tree
from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.analysis.join import kernel_launch_index
from nsys_llm_explainer.kernels.categories import CategoryTable
from nsys_llm_explainer.trace.columns import factorize
from nsys_llm_explainer.trace.data import TraceData

QUERY_CHUNK = 1 << 18  # kernels looked up at a time


@dataclass(frozen=True)
class KernelAttribution:
    launch: np.ndarray  # per kernel: row in runtime(), or -1
    range_pos: np.ndarray  # per kernel: sorted position in `index`, or -1
    index: nvtx_tree.RangeIndex
    depth: np.ndarray  # per sorted range

    def range_row(self) -> np.ndarray:
        """Per kernel: row in data.nvtx() of its innermost range, or -1."""
        if len(self.index.order) == 0:
            return np.full(len(self.range_pos), -1, dtype=np.int64)
        return np.where(self.range_pos >= 0, self.index.order[np.maximum(self.range_pos, 0)], -1)


KEY = "kernel_attribution"


def kernel_attribution(data: TraceData) -> KernelAttribution:
    """The per-kernel NVTX attribution, computed once and shared (phases, categories, steps)."""

    def build() -> KernelAttribution:
        rt = data.runtime()
        launch = kernel_launch_index(data)
        index = nvtx_tree.build(data.nvtx())
        matched = np.flatnonzero(launch >= 0)
        calls = launch[matched]
        pos = np.full(len(launch), -1, dtype=np.int32 if len(index.order) < 2**31 else np.int64)
        # In chunks: the queries' gathered columns and the search's work arrays are a few
        # arrays per kernel, which at millions of kernels would add up to the run's peak.
        for lo in range(0, len(matched), QUERY_CHUNK):
            sel, c = matched[lo : lo + QUERY_CHUNK], calls[lo : lo + QUERY_CHUNK]
            pos[sel] = nvtx_tree.innermost(index, rt.tkey[c], rt.start[c], rt.end[c])
        return KernelAttribution(launch, pos, index, nvtx_tree.depths(index))

    return data.cached(KEY, build)


def cached_range_index(data: TraceData) -> nvtx_tree.RangeIndex | None:
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


@dataclass(frozen=True)
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
