"""Split every GPU idle gap's time by what covers it, in precedence order.

Each nanosecond of idle time on a device (a hole in the union of its work, gpu_idle.py
gpu_work: kernels, whole-graph executions, device-local copies and memsets) gets the first
cause in this order that covers it:

1. transfer: a transfer runs on the device (a host<->device or peer copy; device-local
   copies and memsets are the device's own work, never idle).
2. communication: an owning process is inside a host-side communication call (an NVTX/MPI
   range named like NCCL, MPI, gloo or c10d collectives, see COMM_RANGE).
3. sync_wait: an owning process is blocked in a synchronizing call (sync.py's blocking
   calls, and copy calls that block the host: synchronous cudaMemcpy* and async copies to or
   from pageable memory), or is refilling the GPU right after such a call returned (the
   launch call that follows on the same thread within REFILL_GRACE_NS of the return).
4. launch_bound: a launch call of an owning process is in flight.
5. capture_edge: the time lies outside the owning processes' host activity window (first to
   last CUDA API call), where the host is not visible.
6. host_other: the host is visible and in none of the calls above (host work).

The owning processes of a device are the pids of the work that ran on it. Causes of a
device sum to its idle time to the nanosecond. A gap's listed cause is the one covering most
of it.

The work that ends each gap is checked first. Its launch (or copy) call returned at least
QUEUE_MARGIN_NS before the gap began: the GPU already had it (queued) and waited on a
device-side dependency, so the host is not the cause: the gap's time that rules 2-6 gave to
the host goes elsewhere. Otherwise the host was late, or barely ahead (a launch that returned
just before the GPU went idle may still have been on its way to the device: the host's issue
rate limits the GPU), and the order above says what the host was doing.

- Work launched before the capture started has no launch row: its correlation id lies below
  every CUDA API call its process recorded (CUPTI numbers them in order per process). It was
  queued too. Work with no launch row otherwise is left to the order above.
- A transfer ahead of the queued work on its own stream is found and reported (copy_ahead);
  its time is transfer by rule 1.
- When a communication kernel on the device ends where the gap begins, the queued work waited
  on that collective: the host-side time goes to communication (dependency_ns).
- When a collective was queued on the device before the gap began and had not started when it
  ended (a collective pending: launched, waiting on its dependencies or on the other ranks),
  and the gap lasts at least DISPATCH_GAP_NS (shorter ones are the device's own dispatch
  between back-to-back work), the work is queued behind communication: the gap's time goes to
  communication
  (behind_collective_ns; a collective waiting to start waits on other ranks or on what its
  stream waits for, which a one-rank trace does not show).
- Otherwise it goes to device_wait: the GPU had its next work queued and waited on something
  the trace does not name (an event on another stream, another device) or on its own
  dispatch between back-to-back kernels.

Work launched during the gap right after its thread made a stream wait on an event
(`cudaStreamWaitEvent` since its previous launch) waits on that event: from QUEUE_MARGIN_NS
after its launch call returned, the gap's time that rules 2-6 gave to the host (a synchronize
or a blocking copy waiting behind that work, say) goes to device_wait (stream_wait_ns), or to
communication when a collective is pending: the GPU waits on a dependency on its own side.

Host activity (rule 5) is every CUDA call of the owning processes, from the first to the last,
and every range (NVTX, PyTorch profiler annotation or operator) they recorded: a DataLoader
range before the first CUDA call is host work the trace names, not a capture edge.

Per-device detail of the idle split for the diagnosis' evidence (idle_causes reports it).

- host_blocked: what the owning processes' blocking calls (synchronize calls and copy calls
  that block the host, without the refill after them) overlapped inside the device's work
  window: the device's own work (busy), idle a transfer covers, idle with nothing queued
  (sync_wait), and the rest (idle with queued work, or a collective). Whether "the host
  simply waited for the copies" is true is read from it.
- transfers: the device's transfers (host<->device and peer copies; gpu_idle.py) by kind and
  direction, with the transfer idle time each kind's copies cover (kinds that run at the same
  time each claim the overlap).

Independent parts of one build (say, one per device), shared with idle metric threads.

On a big trace the metrics run in threads (runtime/runner.py), and one long metric can
leave the other threads with nothing they may start. A build whose parts share nothing
but the cache (TraceData.cached builds each key once) offers its parts to them
(TraceData.parts); the calling thread takes the parts nobody took, in order. So a part
runs beside others only where a thread would otherwise wait, and the memory peak does not
grow by a third thread's. Where the run has one thread (a small trace, --jobs 1), the parts
run one after another. The results come back in the order of the parts."""

from __future__ import annotations

import contextvars
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from nsys_llm_explainer.analysis import intervals
from nsys_llm_explainer.analysis.blocking import HostRows
from nsys_llm_explainer.analysis.busy import (
    GRAPH,
    KERNEL,
    DeviceBusy,
    copy_kind_labels,
    device_busy,
    device_local_copies,
    gpu_work,
    transfer_union,
    work_calls,
)
from nsys_llm_explainer.analysis.comm_kernels import comm_mask
from nsys_llm_explainer.analysis.groups import MASK_SPLIT_MAX, distinct, distinct_few, marked_at
from nsys_llm_explainer.analysis.nvtx import name_mask
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.model import IdleCause
from nsys_llm_explainer.trace.columns import Columns, narrow
from nsys_llm_explainer.trace.data import TraceData, Unavailable

T = TypeVar("T")
R = TypeVar("R")


def each(fn: Callable[[T], R], parts: Sequence[T], data: TraceData) -> list[R]:
    """[fn(p) for p in parts]. Each part runs in a copy of the caller's context, so the
    metric's --timeout deadline (trace/deadline.py) holds in whichever thread runs it."""
    n = len(parts)
    if data.threads < 2 or n < 2:
        return [fn(p) for p in parts]
    results: list[R | None] = [None] * n
    errors: list[BaseException | None] = [None] * n
    done = [threading.Event() for _ in parts]
    claimed = [False] * n
    lock = threading.Lock()

    def run(i: int, context: contextvars.Context) -> None:
        with lock:
            if claimed[i]:
                return
            claimed[i] = True
        if any(e is not None for e in errors):  # a part failed: the build fails, skip the rest
            done[i].set()
            return
        try:
            results[i] = context.run(fn, parts[i])
        except BaseException as exc:  # noqa: BLE001 - raised in the calling thread below
            errors[i] = exc
        finally:
            done[i].set()

    offered: list[Callable[[], None]] = []
    for i in range(1, n):
        context = contextvars.copy_context()
        offered.append(lambda i=i, context=context: run(i, context))  # type: ignore[misc]
        data.parts.offer(offered[-1])
    for i in range(n):
        run(i, contextvars.copy_context())
    data.parts.withdraw(offered)  # every part is claimed: what is left on offer is stale
    del offered
    for event in done:
        event.wait()
    for exc in errors:
        if exc is not None:
            raise exc
    return results  # type: ignore[return-value]


CAUSES: tuple[IdleCause, ...] = tuple(IdleCause)  # a gap's causes, in this order in cause_ns
TRANSFER, COMMUNICATION, SYNC_WAIT, LAUNCH_BOUND, CAPTURE_EDGE, HOST_OTHER, DEVICE_WAIT = (
    CAUSES.index(c) for c in IdleCause
)
HOST_SIDE = (SYNC_WAIT, LAUNCH_BOUND, HOST_OTHER)  # idle the host could have prevented
NOT_DEVICE_SIDE = (*HOST_SIDE, CAPTURE_EDGE)  # what a queued gap's time cannot be
NO_REFILL = -1
UNKNOWN_LAUNCH = np.iinfo(np.int64).max  # no launch row: when it was launched is unknown
LAUNCHED_EARLY = np.iinfo(np.int64).min  # launched before the capture started
QUEUE_MARGIN_NS = 10_000  # a launch returned at least this long before a gap was queued work
DISPATCH_GAP_NS = 10_000  # a queued gap shorter than this is the device's own dispatch, not a wait
COMM_RANGE = re.compile(
    r"^(nccl[A-Z]\w*|nccl:\w+|c10d::\w+|gloo:\w+|MPI_\w+|ProcessGroup\w*[:.]\w+|"
    r"record_param_comms|(all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast|"
    r"barrier)(_\w+)?)\b",
    re.IGNORECASE,
)


@frozen
class GapCauses:
    device_id: int
    owners: np.ndarray  # pids whose kernels ran on the device
    gap_start: np.ndarray
    gap_end: np.ndarray
    cause: np.ndarray  # per gap: the cause covering most of it (ties: the earlier cause), int8
    cause_total_ns: np.ndarray  # per cause: its idle ns over all gaps
    segments: tuple[tuple[np.ndarray, np.ndarray], ...]  # per cause: disjoint sorted intervals
    dependency_ns: int  # queued idle time moved from host-side causes to communication
    behind_collective_ns: int  # queued idle time with a collective pending, moved to communication
    stream_wait_ns: int  # idle time after a launch behind a stream wait, moved from the host
    # The communication time inside queued gaps and after launches behind a stream wait: with
    # device_wait, the idle time the GPU spent with its next work queued (waiting_overlap).
    comm_waiting: tuple[np.ndarray, np.ndarray]
    # The gaps in which a blocking call returned (few: most gaps have none) and, per such gap,
    # gap end - the latest such return (see refill_of).
    refill_gap: np.ndarray
    refill_ns: np.ndarray
    next_call: np.ndarray  # runtime() row of the launch call of the work that ends the gap, or -1
    queued: np.ndarray  # that work's call returned QUEUE_MARGIN_NS before the gap (or before the capture)
    copy_ahead: np.ndarray  # queued, and a transfer on its stream ended during the gap
    known: np.ndarray  # when that work was launched is known (a launch row, or before the capture)

    @property
    def length(self) -> np.ndarray:
        return self.gap_end - self.gap_start

    def waiting_overlap(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Per interval [start, end): its overlap with the idle time the GPU spent with its next
        work queued, waiting on a dependency: device_wait and comm_waiting. The causes' segments
        are disjoint, so the two overlaps add up; kept apart, not merged, because device_wait's
        segments are already held (a merged copy cost 19 MiB on a 1.4M-kernel trace)."""
        if len(start) == 0:
            return np.empty(0, np.int64)
        return (intervals.overlap_with_union(start, end, *self.segments[DEVICE_WAIT])
                + intervals.overlap_with_union(start, end, *self.comm_waiting))

    def refill_of(self, which: np.ndarray) -> np.ndarray:
        """Per selected gap (`which`: a mask or index of gaps): gap end - the latest
        blocking-call return inside it, NO_REFILL when none returned inside it."""
        full = np.full(len(self.gap_start), NO_REFILL, dtype=np.int64)
        full[self.refill_gap] = self.refill_ns
        return full[which]

    def cause_ns(self, which: np.ndarray) -> np.ndarray:
        """(len(CAUSES), selected gaps): ns of each selected gap per cause (`which`: a mask or
        index of gaps). Computed from the segments when asked: a per-gap table of every cause
        would hold seven numbers for each of millions of gaps, most of them 0."""
        g0, g1 = self.gap_start[which], self.gap_end[which]
        out = np.zeros((len(self.segments), len(g0)), np.int64)
        for i, (s, e) in enumerate(self.segments):
            out[i] = intervals.overlap_with_union(g0, g1, s, e)
        return out


def _kernel_launch_times(w: Columns, launched: np.ndarray, n_kernels: int) -> np.ndarray:
    """Per kernel row: when its launch call returned (_launch_times of its gpu_work row)."""
    out = np.full(n_kernels, UNKNOWN_LAUNCH, dtype=np.int64)
    sel = w.source == KERNEL
    out[w.row[sel]] = launched[sel]
    return out


def _host_ranges(data: TraceData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pid, start, end) of every range the host recorded (NVTX ranges; PyTorch profiler
    annotations and operators): the cached columns themselves, not a copy; _visible keeps
    the ended ones (end > start)."""
    empty = np.empty(0, np.int64)
    try:
        nv = data.nvtx()
    except Unavailable:
        return empty, empty, empty
    return nv.pid, nv.start, nv.end


def _comm_ranges(data: TraceData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pid, start, end) of ended NVTX ranges named like host-side communication calls."""
    empty = np.empty(0, np.int64)
    try:
        nv = data.nvtx()
    except Unavailable:
        return empty, empty, empty
    is_comm = name_mask(data, COMM_RANGE, anchored=True)
    sel = (nv.end >= 0) & is_comm[nv.name] if len(nv) else np.zeros(0, dtype=bool)
    return nv.pid[sel], nv.start[sel], nv.end[sel]


def _launch_times(data: TraceData) -> np.ndarray:
    """Per gpu_work row: when its launch (or copy) call returned; LAUNCHED_EARLY for work
    launched before the capture (see the module docstring), UNKNOWN_LAUNCH otherwise."""

    def build() -> np.ndarray:
        w = gpu_work(data)
        call = work_calls(data)
        out = np.full(len(w), UNKNOWN_LAUNCH, dtype=np.int64)
        try:
            rt = data.runtime()
        except Unavailable:
            return out
        has = call >= 0
        out[has] = rt.end[call[has]]
        pids, first = _first_corr(rt)
        if len(pids) == 0:
            return out
        wpid, wcorr = w.pid, w.corr
        pos = np.minimum(np.searchsorted(pids, wpid), len(pids) - 1)
        early = ~has & (pids[pos] == wpid) & (wcorr > 0) & (wcorr < first[pos])
        out[early] = LAUNCHED_EARLY
        return out

    return data.cached("work_launch_times", build)


def _first_corr(rt: Columns) -> tuple[np.ndarray, np.ndarray]:
    """(pids ascending, the smallest positive correlation id each recorded)."""
    ok = rt.corr > 0
    if not ok.any():
        return np.empty(0, np.int64), np.empty(0, np.int64)
    pids = distinct_few(rt.pid)
    if len(pids) <= MASK_SPLIT_MAX:  # few processes: one pass each, no sort of every row
        first = [(p, int(rt.corr[m].min())) for p in pids.tolist() if (m := ok & (rt.pid == p)).any()]
        return np.array([p for p, _ in first], np.int64), np.array([c for _, c in first], np.int64)
    pid, corr = rt.pid[ok], rt.corr[ok]
    order = np.lexsort((corr, pid))
    first = np.r_[True, pid[order][1:] != pid[order][:-1]]
    return pid[order][first], corr[order][first]


def _next_work(
    data: TraceData, device: int, g0: np.ndarray, g1: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For each gap: the launch call of the work that ends it (-1 when unknown), whether that
    work was queued before the gap began, whether a transfer on its stream ended during the
    gap (the work ahead of it), and whether its launch time is known.

    Work that starts at the same instant is ordered by (end, source, pid, corr) and the gap
    counts as "queued" when any of it was queued before the gap, so the answer does not
    depend on row order.
    """
    w = gpu_work(data)
    none = np.zeros(len(g1), dtype=bool)
    mine = np.flatnonzero(w.device == device)
    if len(g1) == 0 or len(mine) == 0:
        return np.full(len(g1), -1, np.int64), none, none, none
    mine = _by_start(w, mine)
    starts = w.start[mine]
    pos = np.minimum(np.searchsorted(starts, g1), len(mine) - 1)
    launched = _launch_times(data)[mine]
    calls = work_calls(data)[mine]
    first_of_group = np.flatnonzero(np.r_[True, starts[1:] != starts[:-1]])
    group_min = np.minimum.reduceat(launched, first_of_group)
    group_of = np.searchsorted(first_of_group, pos, side="right") - 1
    queued = group_min[group_of] <= g0 - QUEUE_MARGIN_NS
    known = group_min[group_of] != UNKNOWN_LAUNCH
    ahead = queued & _copy_ahead(data, device, w.stream[mine[pos]], g0, g1)
    return calls[pos], queued, ahead, known


def _by_start(w: Columns, rows: np.ndarray) -> np.ndarray:
    """`rows` ordered by (start, end, source, pid, corr). Where no two starts are equal,
    the start alone decides and one sort (none when already in order) is enough."""
    start = w.start[rows]
    if len(start) > 1 and not bool((start[1:] > start[:-1]).all()):
        order = np.argsort(start, kind="stable")
        start = start[order]
        if not bool((start[1:] > start[:-1]).all()):  # equal starts: the other keys decide
            return rows[np.lexsort((w.corr[rows], w.pid[rows], w.source[rows], w.end[rows], w.start[rows]))]
        rows = rows[order]
    return rows


def _copy_ahead(
    data: TraceData, device: int, stream: np.ndarray, g0: np.ndarray, g1: np.ndarray
) -> np.ndarray:
    """Per gap: a transfer on `stream` of the device ended inside the gap."""
    out = np.zeros(len(g0), dtype=bool)
    try:
        c = data.memcpy()
    except Unavailable:
        return out
    mine = (c.device == device) & ~device_local_copies(c)
    key = c.stream[mine]
    ends = c.end[mine]
    for s in np.unique(stream).tolist():
        e = np.sort(ends[key == s])
        if len(e) == 0:
            continue
        sel = stream == s
        # Some end in (g0, g1]: the copy finished during the gap, just before the work.
        hit = np.searchsorted(e, g1[sel], side="right") > np.searchsorted(e, g0[sel], side="right")
        out[sel] |= hit
    return out


def _union_of_rows(rows: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return intervals.merge(start[rows], end[rows])


@frozen
class PendingComm:
    """One device's communication kernels, to find the collectives pending during a gap:
    their starts in order, and the earliest launch among those starting at or after each."""

    starts: np.ndarray
    earliest_launch_after: np.ndarray  # suffix minimum of launch times in start order

    @staticmethod
    def of(starts: np.ndarray, launched: np.ndarray) -> PendingComm:
        order = np.argsort(starts, kind="stable")
        suffix = np.minimum.accumulate(launched[order][::-1])[::-1] if len(order) else launched
        return PendingComm(starts[order], suffix)

    def during(self, g0: np.ndarray, g1: np.ndarray) -> np.ndarray:
        """Per gap [g0, g1): a collective was launched QUEUE_MARGIN_NS before g0 and starts at
        or after g1 (queued all through the gap)."""
        if len(self.starts) == 0:
            return np.zeros(len(g0), dtype=bool)
        j = np.searchsorted(self.starts, g1, side="left")
        ok = j < len(self.starts)
        first = self.earliest_launch_after[np.minimum(j, len(self.starts) - 1)]
        return ok & (first <= g0 - QUEUE_MARGIN_NS)


def _visible(rt: Columns, mine: np.ndarray, owners: np.ndarray,
             ranges: tuple[np.ndarray, np.ndarray, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray]:
    """Where the owning processes' host is visible: from their first to their last CUDA call,
    and inside every ended range they recorded (module docstring, rule 5; ranges: pid, start,
    end)."""
    if not len(mine):
        hs, he = np.empty(0, np.int64), np.empty(0, np.int64)
    else:
        hs, he = np.array([rt.start[mine].min()]), np.array([rt.end[mine].max()])
    if ranges is None or not len(ranges[0]):
        return hs, he
    rp, rs, re_ = ranges
    keep = re_ > rs
    if len(hs):
        keep &= (rs < hs[0]) | (re_ > he[0])  # only what reaches outside the calls' span adds
    out = np.flatnonzero(keep)
    del keep
    rp, rs, re_ = rp[out], rs[out], re_[out]
    own = np.isin(rp, owners)
    if not own.any():
        return hs, he
    return intervals.merge(np.concatenate((hs, rs[own])), np.concatenate((he, re_[own])))


def classify(
    data: TraceData, busy_start: np.ndarray, busy_end: np.ndarray, device: int, owners: np.ndarray,
    host: HostRows, comm: tuple[np.ndarray, np.ndarray, np.ndarray],
    comm_ends: np.ndarray | None = None, pending: PendingComm | None = None,
    ranges: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> GapCauses:
    """The split of one device's gaps (see the module docstring); comm_ends: sorted end
    times of the communication kernels on the device; pending: its communication kernels'
    starts and launches; ranges: (pid, start, end) of the ranges the host recorded."""
    g0, g1 = busy_end[:-1], busy_start[1:]
    rt = data.runtime()
    mine = host.rows_of(owners)
    blocking = mine[host.blocking[mine]]
    launching = mine[host.launching[mine]]
    sources: list[tuple[np.ndarray, np.ndarray]] = [
        transfer_union(data, device),
        intervals.merge(comm[1][np.isin(comm[0], owners)], comm[2][np.isin(comm[0], owners)]),
        intervals.merge(rt.start[blocking], host.refill_end[blocking]),
        _union_of_rows(launching, rt.start, rt.end),
    ]
    hs, he = _visible(rt, mine, owners, ranges)
    left = (g0, g1)
    segments: list[tuple[np.ndarray, np.ndarray]] = []
    for us, ue in sources:
        segments.append(intervals.intersect(*left, us, ue))
        left = intervals.subtract(*left, us, ue)
    segments.append(intervals.subtract(*left, hs, he))  # capture_edge
    segments.append(intervals.intersect(*left, hs, he))  # host_other
    segments.append((np.empty(0, np.int64), np.empty(0, np.int64)))  # device_wait
    nxt, queued, ahead, known = _next_work(data, device, g0, g1)
    moved = behind = waited = 0
    held = pending.during(g0, g1) if pending is not None else np.zeros(len(g0), dtype=bool)
    if queued.any():
        after_comm = queued & np.isin(g0, comm_ends if comm_ends is not None else np.empty(0, np.int64))
        segments, moved = _queued_to(segments, COMMUNICATION, g0[after_comm], g1[after_comm])
        behind_comm = queued & ~after_comm & held & (g1 - g0 >= DISPATCH_GAP_NS)
        segments, behind = _queued_to(segments, COMMUNICATION, g0[behind_comm], g1[behind_comm])
        rest = queued & ~after_comm & ~behind_comm
        segments, _ = _queued_to(segments, DEVICE_WAIT, g0[rest], g1[rest])
    late = ~queued & (nxt >= 0)
    if late.any():
        late[late] = marked_at(host.after_wait, nxt[late])
    idx, w0 = np.flatnonzero(late), np.empty(0, np.int64)
    if len(idx):
        w0 = np.maximum(g0[idx], rt.end[nxt[idx]] + QUEUE_MARGIN_NS)
        keep = w0 < g1[idx]
        idx, w0 = idx[keep], w0[keep]
        comm_held = held[idx]
        segments, to_comm = _queued_to(segments, COMMUNICATION, w0[comm_held], g1[idx[comm_held]])
        segments, to_wait = _queued_to(segments, DEVICE_WAIT, w0[~comm_held], g1[idx[~comm_held]])
        waited = to_comm + to_wait
    windows = intervals.merge(np.concatenate((g0[queued], w0)), np.concatenate((g1[queued], g1[idx])))
    comm_waiting = intervals.intersect(*segments[COMMUNICATION], *windows)
    cause = np.zeros(len(g0), np.int8)  # the running argmax over causes (ties: the earlier)
    best = np.zeros(len(g0), np.int64)
    total = np.zeros(len(CAUSES), np.int64)
    for i, (s, e) in enumerate(segments):
        ns = _per_gap(g0, g1, s, e)
        total[i] = int(ns.sum())
        more = ns > best
        cause[more] = i
        best[more] = ns[more]
        del ns, more
    sync_end = _in_flight_end(rt.start[blocking], rt.end[blocking], g1)
    refill_gap = np.flatnonzero((sync_end >= g0) & (sync_end < g1))
    refill = (g1[refill_gap] - sync_end[refill_gap]).astype(np.int64)
    return GapCauses(device, owners, g0, g1, cause, total, tuple(segments), moved, behind, waited, comm_waiting,
                     refill_gap, refill, narrow(nxt), queued, ahead, known)


def _per_gap(g0: np.ndarray, g1: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Per gap [g0, g1), the length of the disjoint sorted pieces s/e inside it, as
    intervals.overlap_with_union. The pieces are cut from the gaps, so each lies in one gap
    and a sum per gap is enough; pieces that do not (none should) take the general way."""
    out = np.zeros(len(g0), np.int64)
    if len(s) == 0 or len(g0) == 0:
        return out
    j = np.searchsorted(g0, s, side="right") - 1
    if not (
        bool((j >= 0).all())
        and bool((e <= g1[np.maximum(j, 0)]).all())
        and bool((j[1:] >= j[:-1]).all())
        and bool((s[1:] >= e[:-1]).all())
    ):
        return intervals.overlap_with_union(g0, g1, s, e)
    first = np.flatnonzero(np.r_[True, j[1:] != j[:-1]])
    out[j[first]] = np.add.reduceat(e - s, first)
    return out


def _queued_to(
    segments: list[tuple[np.ndarray, np.ndarray]], target: int, q0: np.ndarray, q1: np.ndarray
) -> tuple[list[tuple[np.ndarray, np.ndarray]], int]:
    """The time of the queued gaps [q0, q1) that host-side causes or capture_edge hold goes to
    `target` (see the module docstring); also returns how much moved."""
    out = list(segments)
    if len(q0) == 0:
        return out, 0
    qs, qe = intervals.merge(q0, q1)
    moved_s, moved_e = [out[target][0]], [out[target][1]]
    moved = 0
    for c in NOT_DEVICE_SIDE:
        s, e = out[c]
        ms_, me_ = intervals.intersect(s, e, qs, qe)
        moved += int((me_ - ms_).sum())
        moved_s.append(ms_)
        moved_e.append(me_)
        out[c] = intervals.subtract(s, e, qs, qe)
    out[target] = intervals.merge(np.concatenate(moved_s), np.concatenate(moved_e))
    return out, moved


def _in_flight_end(start: np.ndarray, end: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Latest end among calls that started at or before each t (-1 when none started)."""
    if len(start) == 0:
        return np.full(len(t), -1, dtype=np.int64)
    order = np.argsort(start, kind="stable")
    run_max = np.maximum.accumulate(end[order])
    i = np.searchsorted(start[order], t, side="right") - 1
    return np.where(i >= 0, run_max[np.maximum(i, 0)], -1)


def gap_causes(data: TraceData) -> dict[int, GapCauses]:
    """Per device, every idle gap split by cause (cached; steps and timeline reuse it)."""

    def build() -> dict[int, GapCauses]:
        k = data.kernels()
        w = gpu_work(data)
        host = HostRows.of(data)
        comm = _comm_ranges(data)
        is_comm = comm_mask(data)
        computes = np.isin(w.source, (KERNEL, GRAPH))
        wdev, wpid = w.device[computes], w.pid[computes]
        del computes
        devices = list(device_busy(data).items())
        launched = _launch_times(data)  # shared by every device: built once, before the parts start
        comm_launch = _kernel_launch_times(w, launched, len(k))[is_comm] if is_comm.any() else None
        comm_rows = np.flatnonzero(is_comm)
        ranges = _host_ranges(data)

        def one(item: tuple[int, DeviceBusy]) -> GapCauses:
            dev, busy = item
            owners = distinct_few(wpid[wdev == dev])
            ends = distinct(k.end[is_comm & (k.device == dev)])
            pending = None
            if comm_launch is not None:
                on = k.device[comm_rows] == dev
                pending = PendingComm.of(k.start[comm_rows[on]], comm_launch[on]) if on.any() else None
            return classify(data, busy.busy_start, busy.busy_end, dev, owners, host, comm, ends, pending, ranges)

        return dict(zip((d for d, _ in devices), each(one, devices, data), strict=True))

    return data.cached("gap_causes", build)


def gap_at(causes: GapCauses, t0: int, t1: int) -> int:
    """Index of the longest gap overlapping [t0, t1] (clipped to it), or -1."""
    lo = int(np.searchsorted(causes.gap_end, t0, side="right"))
    hi = int(np.searchsorted(causes.gap_start, t1, side="left"))
    if hi <= lo:
        return -1
    clipped = np.minimum(causes.gap_end[lo:hi], t1) - np.maximum(causes.gap_start[lo:hi], t0)
    return lo + int(np.argmax(clipped))


# CUPTI_ACTIVITY_MEMCPY_KIND_* by direction; device-to-device between two devices is peer.
DIRECTIONS = {1: "host_to_device", 3: "host_to_device", 11: "host_to_device",
              2: "device_to_host", 4: "device_to_host", 12: "device_to_host",
              8: "peer", 10: "peer", 13: "peer"}


def _length(pair: tuple[np.ndarray, np.ndarray]) -> int:
    return int((pair[1] - pair[0]).sum())


def host_blocked(data: TraceData, gc: GapCauses, w0: int, w1: int) -> dict[str, int]:
    host = HostRows.of(data)
    rt = data.runtime()
    rows = host.rows_of(gc.owners)
    rows = rows[host.blocking[rows]]
    bs, be = intervals.merge(np.clip(rt.start[rows], w0, w1), np.clip(rt.end[rows], w0, w1))
    busy = device_busy(data)[gc.device_id]
    total = _length((bs, be))
    on_busy = _length(intervals.intersect(bs, be, busy.busy_start, busy.busy_end))
    on_transfer = _length(intervals.intersect(bs, be, *gc.segments[TRANSFER]))
    on_sync = _length(intervals.intersect(bs, be, *gc.segments[SYNC_WAIT]))
    return {
        "ns": total,
        "busy_ns": on_busy,
        "transfer_ns": on_transfer,
        "sync_wait_ns": on_sync,
        "other_idle_ns": total - on_busy - on_transfer - on_sync,
    }


def transfers(data: TraceData, gc: GapCauses) -> list[dict[str, Any]]:
    """The device's transfers by kind, most idle time covered first."""
    try:
        mc = data.memcpy()
    except Unavailable:
        return []
    mine = np.flatnonzero((mc.device == gc.device_id) & ~device_local_copies(mc))
    labels, _ = copy_kind_labels(data)
    out = []
    for kind in np.unique(mc.copy_kind[mine]).tolist():
        rows = mine[mc.copy_kind[mine] == kind]
        covered = intervals.intersect(*intervals.merge(mc.start[rows], mc.end[rows]), *gc.segments[TRANSFER])
        out.append({
            "kind": labels.get(int(kind), f"kind {int(kind)}"),
            "direction": DIRECTIONS.get(int(kind), "other"),
            "count": int(len(rows)),
            "bytes": int(mc.bytes[rows].sum()),
            "copy_ns": int((mc.end[rows] - mc.start[rows]).sum()),
            "idle_ns": _length(covered),
        })
    return sorted(out, key=lambda r: (-r["idle_ns"], -r["copy_ns"], r["kind"]))
