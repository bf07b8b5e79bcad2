"""communication: NCCL and custom all-reduce kernel time per device, how much of it compute
kernels on the SAME device overlap, the exposed rest, and skew across ranks.

Communication kernels are those whose name matches COMM_PATTERN (the built-in
"communication" category rule, independent of --kernel-categories). Per device:
comm = union of communication kernel intervals, compute = union of all other kernel
intervals on that device and its whole-graph executions, with holes of at most
COMPUTE_GAP_TOLERANCE_NS filled in (the dispatch gaps between back-to-back kernels of a
stream that keeps running beside a collective hide nothing and expose nothing),
overlapped = |comm ∩ compute|, exposed = |comm| - overlapped.
Overlap is never counted across devices: another GPU computing does not hide this one's
communication. Skew = (max - min) / max of communication kernel time across devices (and
across processes when there are several). Shared streams: streams of a device that run both
communication and compute kernels; communication there cannot overlap that stream's compute
by construction (shared_stream_comm_ns: the union of those communication kernels).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis import intervals
from nsys_llm_explainer.analysis.busy import GRAPH, device_busy, gpu_work
from nsys_llm_explainer.analysis.comm_kernels import COMM_PATTERN, comm_mask
from nsys_llm_explainer.analysis.context import NO_KERNELS, Context
from nsys_llm_explainer.analysis.groups import distinct_few, group_codes, group_sum
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome, Table
from nsys_llm_explainer.results.devices import CommDevice, CommKernel, CommProcess, CommSkew, Communication

TOP_NAMES = 10
COMPUTE_GAP_TOLERANCE_NS = 10_000
DEVICE_COLUMNS = (
    "device_id",
    "comm_kernels",
    "comm_kernel_ns",
    "comm_union_ns",
    "overlapped_ns",
    "exposed_ns",
    "overlap_pct",
    "window_ns",
    "exposed_pct_of_window",
)
PROCESS_COLUMNS = ("pid", "device_id", "comm_kernels", "comm_kernel_ns")


def _skew(values: list[int]) -> CommSkew | None:
    if len(values) < 2:
        return None
    hi, lo = max(values), min(values)
    return CommSkew(hi, lo, round(100.0 * (hi - lo) / hi, 2) if hi else 0.0)


def run(ctx: Context) -> Outcome:
    k = ctx.data.kernels()
    if len(k) == 0:
        return METRIC.skipped(NO_KERNELS)
    comm = comm_mask(ctx.data)
    busy = device_busy(ctx.data)
    w = gpu_work(ctx.data)
    is_graph = w.source == GRAPH
    graph_rows = np.flatnonzero(is_graph)
    g_device, g_start, g_end = (w[n][graph_rows] for n in ("device", "start", "end")) if len(graph_rows) else (
        np.empty(0, np.int64),) * 3
    del is_graph, graph_rows
    devices: list[CommDevice] = []
    for dev in distinct_few(k.device).tolist():
        mine = k.device == dev
        c, o = mine & comm, mine & ~comm
        cs, ce = intervals.merge(k.start[c], k.end[c])
        graphs = g_device == dev
        os_, oe = intervals.close_gaps(
            *intervals.merge(np.r_[k.start[o], g_start[graphs]], np.r_[k.end[o], g_end[graphs]]),
            COMPUTE_GAP_TOLERANCE_NS,
        )
        union = int((ce - cs).sum())
        overlapped = int(intervals.overlap_with_union(cs, ce, os_, oe).sum())
        w0, w1 = busy[int(dev)].window
        shared = np.intersect1d(np.unique(k.stream[c]), np.unique(k.stream[o]))
        on_shared = c & np.isin(k.stream, shared)
        devices.append(CommDevice(
            device_id=int(dev),
            comm_kernels=int(c.sum()),
            comm_kernel_ns=int(k.dur[c].sum()),
            comm_union_ns=union,
            overlapped_ns=overlapped,
            exposed_ns=union - overlapped,
            overlap_pct=round(100.0 * overlapped / union, 2) if union else None,
            window_ns=w1 - w0,
            exposed_pct_of_window=round(100.0 * (union - overlapped) / (w1 - w0), 2) if w1 > w0 else None,
            shared_streams=tuple(int(s) for s in shared.tolist()),
            shared_stream_comm_ns=intervals.union_length(k.start[on_shared], k.end[on_shared]),
        ))
    idx = np.flatnonzero(comm)
    codes, (pids, devs) = group_codes(k.pid[idx], k.device[idx])
    g = len(pids)
    procs = pd.DataFrame(
        {
            "pid": pids,
            "device_id": devs,
            "comm_kernels": np.bincount(codes, minlength=g),
            "comm_kernel_ns": group_sum(k.dur[idx], codes, g),
        },
        columns=list(PROCESS_COLUMNS),
    )
    procs = procs.sort_values(["pid", "device_id"], kind="stable").reset_index(drop=True)
    name_codes, (name_ids,) = group_codes(k.name_id[idx])
    lookup = ctx.data.kernel_names(name_ids)
    name_ns = group_sum(k.dur[idx], name_codes, len(name_ids))
    name_calls = np.bincount(name_codes, minlength=len(name_ids))
    order = np.argsort(-name_ns, kind="stable")[:TOP_NAMES]
    active = [d for d in devices if d.comm_kernels > 0]
    per_pid = procs.groupby("pid")["comm_kernel_ns"].sum()
    result = Communication(
        comm_pattern=COMM_PATTERN,
        comm_kernels=int(comm.sum()),
        comm_kernel_ns=int(k.dur[comm].sum()),
        pct_of_kernel_time=round(100.0 * int(k.dur[comm].sum()) / int(k.dur.sum()), 2) if k.dur.sum() else 0.0,
        exposed_ns=int(sum(d.exposed_ns for d in devices)),
        devices=tuple(devices),
        processes=tuple(CommProcess(*(r[c] for c in PROCESS_COLUMNS)) for r in procs.to_dict("records")),
        device_skew=_skew([d.comm_kernel_ns for d in active]),
        process_skew=_skew([int(v) for v in per_pid.tolist()]),
        top_kernels=tuple(
            CommKernel(lookup.get(int(name_ids[i]), f"(unnamed kernel #{int(name_ids[i])})"), int(name_calls[i]),
                       int(name_ns[i]))
            for i in order.tolist()
        ),
    )
    rows = pd.DataFrame([[getattr(d, c) for c in DEVICE_COLUMNS] for d in devices], columns=list(DEVICE_COLUMNS))
    tables = (
        Table("communication", DEVICE_COLUMNS, rows),
        Table("communication_processes", PROCESS_COLUMNS, procs),
    )
    return MetricResult(METRIC.id, result.to_json(), tables, typed=result)


METRIC = Metric(
    id="communication",
    order=220,
    run_after="capture",  # the last reader of the device work besides idle_causes and steps
    title="Multi-GPU communication (NCCL)",
    run=run,
    tables={"communication": DEVICE_COLUMNS, "communication_processes": PROCESS_COLUMNS},
    description=(
        "Communication kernel time per device, overlap with compute on the same "
        "device, exposed time, rank skew."
    ),
    reads=("device_busy", "comm_mask", "gpu_work"),
)
