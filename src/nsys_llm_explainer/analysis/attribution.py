"""Kernel -> launch call (on pid, correlationId) -> innermost NVTX range around the launch:
the attribution nvtx_attribution reports and other metrics (categories, idle causes, host
patterns, compute) group by."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsys_llm_explainer.analysis import nvtx_tree
from nsys_llm_explainer.analysis.join import kernel_launch_index
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
