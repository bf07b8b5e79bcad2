"""Classify every GPU idle gap by what the owning processes' host threads were doing.

Whole gaps are assigned to one cause (so per-device cause totals sum to the idle time
exactly), tested in this order:

1. sync_wait: a blocking call (sync.py's classification) of an owning process is in flight at
   the gap start (call start <= gap start <= call end): the GPU drained while the host
   waited. The refill delay is gap end - the latest end of such a call (clipped to the gap).
2. memcpy: memcpy/memset activity on the device covers at least half of the gap.
3. launch_bound: launch API calls of the owning processes cover at least half of the gap.
4. capture_edge: at least half of the gap lies outside the owning processes' host activity
   window (first CUDA API call start to last call end), where the host is not visible.
5. host_other: everything else; the host was in none of the calls above.

The owning processes of a device are the pids of the kernels that ran on it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsys_llm_explainer.analysis import intervals
from nsys_llm_explainer.analysis.groups import distinct_few, rows_by_value
from nsys_llm_explainer.analysis.join import kernel_launch_index
from nsys_llm_explainer.metrics.gpu_idle import copy_union, device_busy
from nsys_llm_explainer.metrics.launch_pairs import launch_api_mask
from nsys_llm_explainer.metrics.sync import sync_kinds
from nsys_llm_explainer.trace.data import TraceData

CAUSES = ("sync_wait", "memcpy", "launch_bound", "host_other", "capture_edge")
SYNC_WAIT, MEMCPY, LAUNCH_BOUND, HOST_OTHER, CAPTURE_EDGE = range(5)
NO_REFILL = -1


@dataclass(frozen=True)
class GapCauses:
    device_id: int
    owners: np.ndarray  # pids whose kernels ran on the device
    gap_start: np.ndarray
    gap_end: np.ndarray
    cause: np.ndarray  # code into CAUSES
    refill_ns: np.ndarray  # sync_wait gaps: gap end - sync return; NO_REFILL otherwise
    copy_cover: np.ndarray  # ns of the gap covered by memcpy/memset on the device
    launch_cover: np.ndarray  # ns covered by launch calls of the owners
    outside_host: np.ndarray  # ns outside the owners' host activity window
    next_kernel: np.ndarray  # index in kernels() of the kernel that ends the gap
    queued: (
        np.ndarray
    )  # that kernel's launch call began before the gap: the GPU, not the host, held it

    @property
    def length(self) -> np.ndarray:
        return self.gap_end - self.gap_start


def _in_flight_end(start: np.ndarray, end: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Latest end among calls that started at or before each t (-1 when none started)."""
    if len(start) == 0:
        return np.full(len(t), -1, dtype=np.int64)
    order = np.argsort(start, kind="stable")
    run_max = np.maximum.accumulate(end[order])
    i = np.searchsorted(start[order], t, side="right") - 1
    return np.where(i >= 0, run_max[np.maximum(i, 0)], -1)


def _next_kernels(
    data: TraceData, device: int, g0: np.ndarray, g1: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The first kernel starting at each gap end, and whether it was launched before the gap.

    Kernels that start at the same instant are ordered by (end, pid, corr) and the gap counts
    as "queued" when any of them was launched before it, so the answer does not depend on
    row order.
    """
    k = data.kernels()
    mine = np.flatnonzero(k.device == device)
    mine = mine[np.lexsort((k.corr[mine], k.pid[mine], k.end[mine], k.start[mine]))]
    if len(g1) == 0 or len(mine) == 0:
        return g1, np.zeros(len(g1), dtype=bool)
    starts = k.start[mine]
    pos = np.minimum(np.searchsorted(starts, g1), len(mine) - 1)
    nxt = mine[pos]
    call = kernel_launch_index(data)[mine]
    rt_start = data.runtime().start
    never = np.iinfo(np.int64).max
    launched = np.where(call >= 0, rt_start[np.maximum(call, 0)], never) if len(rt_start) else np.full(len(mine), never)
    # Earliest launch among kernels sharing each start time.
    first_of_group = np.flatnonzero(np.r_[True, starts[1:] != starts[:-1]])
    group_min = np.minimum.reduceat(launched, first_of_group)
    group_of = np.searchsorted(first_of_group, pos, side="right") - 1
    queued = group_min[group_of] < g0
    return nxt, queued


@dataclass(frozen=True)
class HostRows:
    """CUDA API rows grouped once for every device's classification."""

    by_pid: dict[int, np.ndarray]  # pid -> its rows in runtime(), ascending
    blocking: np.ndarray  # per row: a blocking call (sync.py)
    launching: np.ndarray  # per row: a launch call

    @staticmethod
    def of(data: TraceData) -> HostRows:
        rt = data.runtime()
        names = data.runtime_api_names()
        return HostRows(
            dict(rows_by_value(rt.pid)),
            sync_kinds(names)[rt.api] == 1,
            launch_api_mask(names)[rt.api],
        )

    def rows_of(self, pids: np.ndarray) -> np.ndarray:
        parts = [self.by_pid[p] for p in pids.tolist() if p in self.by_pid]
        if len(parts) == 1:
            return parts[0]
        return np.sort(np.concatenate(parts)) if parts else np.empty(0, np.int64)


def classify(
    data: TraceData, busy_start: np.ndarray, busy_end: np.ndarray, device: int, owners: np.ndarray,
    host: HostRows,
) -> GapCauses:
    g0, g1 = busy_end[:-1], busy_start[1:]
    n = len(g0)
    rt = data.runtime()
    mine = host.rows_of(owners)
    blocking = mine[host.blocking[mine]]
    launching = mine[host.launching[mine]]
    sync_end = _in_flight_end(rt.start[blocking], rt.end[blocking], g0)
    in_sync = sync_end >= g0
    ls, le = intervals.merge(rt.start[launching], rt.end[launching])
    launch_cover = intervals.overlap_with_union(g0, g1, ls, le)
    cs, ce = copy_union(data, "device", device)
    copy_cover = intervals.overlap_with_union(g0, g1, cs, ce)
    length = g1 - g0
    if len(mine):
        hw0, hw1 = np.array([rt.start[mine].min()]), np.array([rt.end[mine].max()])
        outside = length - intervals.overlap_with_union(g0, g1, hw0, hw1)
    else:
        outside = length.copy()
    cause = np.full(n, HOST_OTHER, dtype=np.int64)
    # Assign from the lowest priority up so that higher priorities overwrite.
    cause[2 * outside >= length] = CAPTURE_EDGE
    cause[2 * launch_cover >= length] = LAUNCH_BOUND
    cause[2 * copy_cover >= length] = MEMCPY
    cause[in_sync] = SYNC_WAIT
    refill = np.where(in_sync, g1 - np.clip(sync_end, g0, g1), NO_REFILL)
    nxt, queued = _next_kernels(data, device, g0, g1)
    return GapCauses(
        device,
        owners,
        g0,
        g1,
        cause,
        refill.astype(np.int64),
        copy_cover,
        launch_cover,
        outside,
        nxt,
        queued,
    )


def gap_causes(data: TraceData) -> dict[int, GapCauses]:
    """Per device, every idle gap with its cause (cached; steps reuses it for outliers)."""

    def build() -> dict[int, GapCauses]:
        k = data.kernels()
        host = HostRows.of(data)
        out: dict[int, GapCauses] = {}
        for dev, busy in device_busy(data).items():
            owners = distinct_few(k.pid[k.device == dev])
            out[dev] = classify(data, busy.busy_start, busy.busy_end, dev, owners, host)
        return out

    return data.cached("gap_causes", build)


def gap_at(causes: GapCauses, t0: int, t1: int) -> int:
    """Index of the longest gap overlapping [t0, t1] (clipped to it), or -1."""
    lo = int(np.searchsorted(causes.gap_end, t0, side="right"))
    hi = int(np.searchsorted(causes.gap_start, t1, side="left"))
    if hi <= lo:
        return -1
    clipped = np.minimum(causes.gap_end[lo:hi], t1) - np.maximum(causes.gap_start[lo:hi], t0)
    return lo + int(np.argmax(clipped))
