"""launch_overhead: how long launching takes on the host, and how long kernels then wait.

Per launch call joined to its first kernel on (pid, correlationId) (analysis/join.py):
API time = call end - call start; queue = kernel start - call end, clamped at 0;
launch-to-start latency = kernel start - call start, clamped at 0 (a negative value can only
come from host/GPU clock skew; those pairs are counted). TKLQT (total kernel launch and
queuing time) = sum of the clamped latencies.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis.context import NO_KERNELS, Context
from nsys_llm_explainer.analysis.groups import distinct_few, group_codes, group_sum
from nsys_llm_explainer.analysis.join import LaunchPairs, launch_api_mask, launch_pairs
from nsys_llm_explainer.analysis.stats import group_summary
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome, Table
from nsys_llm_explainer.results.launches import (
    ApiCalls,
    KernelLaunches,
    LaunchOverhead,
    LaunchTimes,
    ProcessLaunches,
)

PERCENTILES = (50, 90, 99)
MEASURES = ("api", "queue", "latency")
STAT_KEYS = tuple(f"{m}_{s}_ns" for m in MEASURES for s in ("p50", "p90", "p99", "max", "total"))
PROCESS_COLUMNS = (
    "pid",
    "launch_calls",
    "kernels",
    "kernels_without_launch",
    "kernel_ns",
    *STAT_KEYS,
)
KERNEL_COLUMNS = ("name", "launch_calls", "kernel_ns", *STAT_KEYS)


def measures(p: LaunchPairs) -> dict[str, np.ndarray]:
    """Per pair: API time, queue and latency (clamped), keyed as in MEASURES."""
    return {"api": p.api_ns, "queue": p.queue, "latency": p.latency}


def grouped_stats(
    values_of: dict[str, np.ndarray], codes: np.ndarray, ngroups: int
) -> list[dict[str, int]]:
    """p50/p90/p99/max/total of API time, queue and latency per group code (one sort each)."""
    cols: dict[str, np.ndarray] = {}
    for measure, values in values_of.items():
        pct, top = group_summary(values, codes, ngroups, PERCENTILES)
        for q in PERCENTILES:
            cols[f"{measure}_p{q}_ns"] = pct[q]
        cols[f"{measure}_max_ns"] = np.maximum(top, 0)
        cols[f"{measure}_total_ns"] = group_sum(values, codes, ngroups)
    return [{key: int(cols[key][i]) for key in STAT_KEYS} for i in range(ngroups)]


def run(ctx: Context) -> Outcome:
    k = ctx.data.kernels()
    if len(k) == 0:
        return METRIC.skipped(NO_KERNELS)
    rt = ctx.data.runtime()
    if len(rt) == 0:
        return METRIC.skipped(
            "the CUDA API table is empty, so no kernel can be joined to its launch call"
        )
    names = ctx.data.runtime_api_names()
    p = launch_pairs(ctx.data)
    is_launch = launch_api_mask(names)
    api_codes, api_counts = np.unique(rt.api[is_launch[rt.api]], return_counts=True)
    without = p.kernel_launch < 0
    n_pairs = len(p.call)
    values_of = measures(p)
    glob = (
        grouped_stats(values_of, np.zeros(n_pairs, np.int64), 1)[0]
        if n_pairs
        else dict.fromkeys(STAT_KEYS, 0)
    )

    pair_pid = k.pid[p.kernel]
    pids = distinct_few(k.pid)
    pid_code = np.searchsorted(pids, pair_pid)
    per_pid = grouped_stats(values_of, pid_code, len(pids))
    kcode = np.searchsorted(pids, k.pid)
    kernels = np.bincount(kcode, minlength=len(pids))
    missing = np.bincount(kcode[without], minlength=len(pids))
    calls = np.bincount(pid_code, minlength=len(pids))
    kernel_ns = group_sum(k.dur, kcode, len(pids))
    processes = [
        {
            "pid": int(pid),
            "launch_calls": int(calls[i]),
            "kernels": int(kernels[i]),
            "kernels_without_launch": int(missing[i]),
            "kernel_ns": int(kernel_ns[i]),
            **per_pid[i],
        }
        for i, pid in enumerate(pids.tolist())
    ]
    processes.sort(key=lambda r: (-r["latency_total_ns"], r["pid"]))
    del pair_pid, pid_code, kcode  # kernel-sized; the top-kernel stats below need the room
    top = _top_kernels(ctx, p, values_of)
    n_without = int(without.sum())
    skew_clamped = int((p.latency_raw < 0).sum())
    early = int((p.queue_raw < 0).sum())
    del values_of
    result = LaunchOverhead(
        launch_apis=tuple(
            ApiCalls(names[int(a)], int(c)) for a, c in zip(api_codes, api_counts, strict=True)
        ),
        kernels=int(len(k)),
        kernels_with_launch=int(len(k) - n_without),
        kernels_without_launch=n_without,
        kernels_without_launch_pct=round(100.0 * n_without / len(k), 2),
        kernels_joined_to_other_api=int(p.non_launch_match.sum()),
        launch_calls=int(n_pairs),
        graph_launch_calls=int(p.graph.sum()),
        skew_clamped=skew_clamped,
        started_before_call_returned=early,
        tklqt_ns=int(glob["latency_total_ns"]),
        global_=LaunchTimes(**glob),
        processes=tuple(ProcessLaunches(**r) for r in processes),
        top_kernels=tuple(KernelLaunches(**r) for r in top.to_dict("records")),
    )
    notes = []
    if n_without:
        notes.append(
            f"{n_without} kernels have no matching launch call (same pid and correlationId); "
            "usually launches issued before the capture window began"
        )
    if result.skew_clamped:
        notes.append(
            f"{result.skew_clamped} kernels start before their launch call (clock skew); "
            "their latency is clamped to 0"
        )
    tables = (
        Table(
            "launch_overhead",
            PROCESS_COLUMNS,
            pd.DataFrame(processes, columns=list(PROCESS_COLUMNS)),
        ),
        Table("launch_overhead_kernels", KERNEL_COLUMNS, top),
    )
    return MetricResult(METRIC.id, result.to_json(), tables, tuple(notes), typed=result)


def _top_kernels(ctx: Context, p: LaunchPairs, values_of: dict[str, np.ndarray]) -> pd.DataFrame:
    """Launch figures for the kernel names with the most kernel time (top_n of them)."""
    k = ctx.data.kernels()
    if len(p.call) == 0:
        return pd.DataFrame(columns=list(KERNEL_COLUMNS))
    codes, (name_ids,) = group_codes(k.name_id)
    total = group_sum(k.dur, codes, len(name_ids))
    chosen = np.argsort(-total, kind="stable")[: ctx.options.top_n]
    rank = np.full(len(name_ids), -1, dtype=np.int64)
    rank[chosen] = np.arange(len(chosen))
    # Pairs of other kernels go to one extra group, dropped below: cheaper in memory than
    # copying the selected pairs' values.
    pair_rank = rank[codes[p.kernel]]
    del codes
    pair_rank[pair_rank < 0] = len(chosen)
    stats = grouped_stats(values_of, pair_rank, len(chosen) + 1)[: len(chosen)]
    calls = np.bincount(pair_rank, minlength=len(chosen) + 1)[: len(chosen)]
    lookup = ctx.data.kernel_names(name_ids[chosen])
    rows = [
        {
            "name": lookup[int(name_ids[c])],
            "launch_calls": int(calls[i]),
            "kernel_ns": int(total[c]),
            **stats[i],
        }
        for i, c in enumerate(chosen.tolist())
    ]
    return pd.DataFrame(rows, columns=list(KERNEL_COLUMNS))


METRIC = Metric(
    id="launch_overhead",
    order=80,
    title="Launch overhead",
    run=run,
    tables={"launch_overhead": PROCESS_COLUMNS, "launch_overhead_kernels": KERNEL_COLUMNS},
    description="Launch API time, queue time and launch-to-start latency per launch call; TKLQT.",
    reads=("runtime", "launch_pairs", "kernel_launch_index"),
)
