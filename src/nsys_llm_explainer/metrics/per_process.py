"""per_process: kernel time, launch rate, sync and NVTX per process (pid from globalPid)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis.context import NO_KERNELS, Context
from nsys_llm_explainer.analysis.groups import distinct_few, group_codes
from nsys_llm_explainer.analysis.stats import KERNEL_COLUMNS, csv_frame, kernel_table
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome, Table
from nsys_llm_explainer.results.kernels import KernelRow, PerProcess, ProcessKernel, ProcessRow
from nsys_llm_explainer.results.launches import LaunchStorm

TOP_KERNELS_PER_PID = 10
COLUMNS = ("pid", "kernel_count", "kernel_ns", "pct_of_kernel_time", "devices",
           "launches_per_s", "blocking_sync_ns", "nvtx_ranges")
BY_PID_COLUMNS = ("pid", *KERNEL_COLUMNS)


def _by_pid(ctx: Context, metric: str, key: str) -> dict[int, Any]:
    res = ctx.result(metric)
    if res is None:
        return {}
    return {int(r["pid"]): r[key] for r in res.data.get("processes", [])}


def run(ctx: Context) -> Outcome:
    k = ctx.data.kernels()
    if len(k) == 0:
        return METRIC.skipped(NO_KERNELS)
    codes, (name_ids, devices, pids) = group_codes(k.name_id, k.device, k.pid)
    lookup = ctx.data.kernel_names(name_ids)
    names = [lookup[int(i)] for i in name_ids]
    total = int(k.dur.sum())
    frames = []
    for pid in distinct_few(pids).tolist():
        sel = pids == pid
        sub = np.flatnonzero(sel)
        remap = np.full(len(name_ids), -1, dtype=np.int64)
        remap[sub] = np.arange(len(sub))
        rows = k.pid == pid
        frame = kernel_table([names[i] for i in sub], devices[sub], k.dur[rows], remap[codes[rows]])
        frame.insert(0, "pid", int(pid))
        frames.append(frame.head(TOP_KERNELS_PER_PID))
    by_pid = pd.concat(frames, ignore_index=True)
    storm = ctx.typed(LaunchStorm)
    rates = {int(p.pid): p.launches_per_s for p in storm.processes} if storm is not None else {}
    syncs = _by_pid(ctx, "sync", "blocking_ns")
    nvtx_counts: dict[int, int] = {}
    try:
        nv = ctx.data.nvtx()
        u, c = np.unique(nv.pid, return_counts=True)
        nvtx_counts = {int(a): int(b) for a, b in zip(u, c, strict=True)}
    except Exception:  # noqa: BLE001 - NVTX is optional here; its own metric reports why
        nvtx_counts = {}
    processes: list[ProcessRow] = []
    for pid in distinct_few(k.pid).tolist():
        rows = k.pid == pid
        ns = int(k.dur[rows].sum())
        processes.append(ProcessRow(
            pid=int(pid), kernel_count=int(rows.sum()), kernel_ns=ns,
            pct_of_kernel_time=round(100.0 * ns / total, 2) if total else 0.0,
            devices=tuple(sorted(int(d) for d in distinct_few(k.device[rows]))),
            launches_per_s=rates.get(int(pid)),
            blocking_sync_ns=syncs.get(int(pid)),
            nvtx_ranges=nvtx_counts.get(int(pid), 0),
        ))
    processes.sort(key=lambda r: (-r.kernel_ns, r.pid))
    # Each format says in its own terms why a pid is not real (Nsight Systems: globalPid).
    warning = ctx.data.kernel_pid_note(k.pid)
    result = PerProcess(
        processes=tuple(processes),
        top_kernels=tuple(
            ProcessKernel(pid=r.pop("pid"), kernel=KernelRow.of(r)) for r in by_pid.to_dict("records")
        ),
        pid_warning=warning,
    )
    table = pd.DataFrame([p.to_json() for p in processes], columns=list(COLUMNS))
    table["devices"] = table["devices"].map(lambda d: " ".join(str(x) for x in d))
    return MetricResult(
        METRIC.id, result.to_json(),
        (
            Table("processes", COLUMNS, table),
            Table("kernels_by_pid", BY_PID_COLUMNS, csv_frame(by_pid)),
        ),
        notes=(warning,) if warning else (),
        typed=result,
    )


METRIC = Metric(
    id="per_process",
    order=70,
    title="Per process",
    run=run,
    tables={"processes": COLUMNS, "kernels_by_pid": BY_PID_COLUMNS},
    after=("launch_storm", "sync"),
    description="Processes by kernel time, with their top kernels, launch rate, blocking sync and NVTX count.",
)
