"""Kernel <-> launch call pairs shared by launch_overhead, boundness, idle_causes and steps.

A pair is one launch call and the first kernel it started. Graph launches start many
kernels under one correlation id; only the first one measures the launch, the others
queue behind their siblings, so each launch call counts once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from nsys_llm_explainer.analysis.join import kernel_launch_index
from nsys_llm_explainer.trace.columns import narrow
from nsys_llm_explainer.trace.data import TraceData

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


@dataclass(frozen=True)
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
