"""memory_transfers: memcpy/memset by kind, pageable async copies, synchronous copies from
the launch thread, and tiny transfers.

Kinds come from the trace's own enum labels when it has them (an Nsight Systems export's
ENUM_CUDA_MEMCPY_OPER / ENUM_CUDA_MEM_KIND), else from the built-in CUPTI values below.
Achieved bandwidth is bytes / busy time of the copies (bytes per ns = GB/s, 1 GB = 1e9 bytes).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis import intervals
from nsys_llm_explainer.analysis.busy import copy_kind_labels
from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.analysis.groups import distinct_few, group_codes, group_sum
from nsys_llm_explainer.analysis.join import kernel_launch_index, match_calls
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome, Table
from nsys_llm_explainer.results.devices import (
    CopySummary,
    DeviceTransfers,
    KindTransfers,
    LaunchThreadCopies,
    MemoryTransfers,
    SizeBucket,
    TinyTransfers,
    TransferIssue,
)
from nsys_llm_explainer.trace.columns import Columns
from nsys_llm_explainer.trace.data import TraceData, Unavailable

PAGEABLE_KIND = 0
MEMSET_KIND = "Memset"
LAUNCH_CHUNK = 1 << 20  # kernels whose launch threads are gathered at a time
TINY_BYTES = 4096  # at this size a copy costs its fixed overhead, not its bytes
SIZE_EDGES = (4096, 65536, 1 << 20, 16 << 20)
SIZE_LABELS = ("<=4KiB", "4-64KiB", "64KiB-1MiB", "1-16MiB", ">16MiB")
ISSUE_LIMIT = 50  # rows of each issue list in report.json (the CSV keeps all)
KIND_COLUMNS = ("device_id", "kind", "count", "bytes", "time_ns", "achieved_gbps", "tiny_count")
ISSUE_COLUMNS = ("issue", "pid", "device_id", "kind", "start_ns", "duration_ns", "bytes", "api")


def pageable_codes(data: TraceData) -> set[int]:
    found = data.enum_labels("mem")
    if found:
        return {i for i, n in found.items() if "PAGEABLE" in n.upper()}
    return {PAGEABLE_KIND}


def _size_buckets(b: np.ndarray) -> tuple[SizeBucket, ...]:
    idx = np.searchsorted(SIZE_EDGES, b, side="left")  # edges are inclusive upper bounds
    counts = np.bincount(idx, minlength=len(SIZE_LABELS))
    return tuple(SizeBucket(lab, int(c)) for lab, c in zip(SIZE_LABELS, counts, strict=True))


def _launch_threads(data: TraceData) -> np.ndarray:
    """Thread keys that launched at least one kernel."""
    try:
        launch = kernel_launch_index(data)
    except Unavailable:
        return np.empty(0, np.int64)
    rt = data.runtime()
    found: set[int] = set()
    for lo in range(0, len(launch), LAUNCH_CHUNK):  # no kernel-sized gather at once
        part = launch[lo : lo + LAUNCH_CHUNK]
        found.update(distinct_few(rt.tkey[part[part >= 0]]).tolist())
    return np.array(sorted(found), dtype=np.int64)


def _step_mask(ctx: Context, pid: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, str]:
    """Copies that start inside a serving step of their process (steps metric), else all."""
    steps = ctx.result("steps")
    frame = (
        next((t.frame for t in steps.tables if t.name == "steps"), None)
        if steps is not None
        else None
    )
    if frame is None or len(frame) == 0 or not {"pid", "start_ns", "end_ns"} <= set(frame.columns):
        return np.ones(len(start), dtype=bool), "whole capture (no step boundaries)"
    inside = np.zeros(len(start), dtype=bool)
    for p, g in frame.groupby("pid", sort=False):
        ms, me = intervals.merge(g["start_ns"].to_numpy(np.int64), g["end_ns"].to_numpy(np.int64))
        mine = np.flatnonzero(pid == int(p))
        i = np.searchsorted(ms, start[mine], side="right") - 1
        inside[mine] = (i >= 0) & (start[mine] < me[np.maximum(i, 0)])
    return inside, "during steps"


def _issue_frame(
    issue: str, c: Columns, sel: np.ndarray, kinds: list[str], api: list[str]
) -> pd.DataFrame:
    idx = np.flatnonzero(sel)
    return pd.DataFrame(
        {
            "issue": issue,
            "pid": c.pid[idx],
            "device_id": c.device[idx],
            "kind": [kinds[i] for i in idx.tolist()],
            "start_ns": c.start[idx],
            "duration_ns": c.dur[idx],
            "bytes": c.bytes[idx],
            "api": [api[i] for i in idx.tolist()],
        },
        columns=list(ISSUE_COLUMNS),
    )


def _all_transfers(ctx: Context) -> tuple[Columns, list[str], bool]:
    data = ctx.data
    labels, from_enum = copy_kind_labels(data)
    parts, kinds = [], []
    try:
        mc = data.memcpy()
        parts.append(mc.with_columns(mem_kind=np.full(len(mc), -1, np.int64)))
        kinds += [labels.get(int(v), f"kind {int(v)}") for v in mc.copy_kind.tolist()]
    except Unavailable:
        pass
    try:
        ms = data.memset()
        n = len(ms)
        parts.append(
            ms.with_columns(
                copy_kind=np.full(n, -1, np.int64),
                src_kind=np.full(n, -1, np.int64),
                dst_kind=np.full(n, -1, np.int64),
            )
        )
        kinds += [MEMSET_KIND] * n
    except Unavailable:
        pass
    if not parts:
        raise Unavailable(
            "the export has neither memcpy nor memset tables (CUDA memory operations not traced)"
        )
    names = (
        "start",
        "end",
        "dur",
        "device",
        "pid",
        "corr",
        "bytes",
        "copy_kind",
        "src_kind",
        "dst_kind",
    )
    cols = Columns("transfers", {n: np.concatenate([p[n] for p in parts]) for n in names})
    return cols, kinds, from_enum


def run(ctx: Context) -> Outcome:
    c, kinds, from_enum = _all_transfers(ctx)
    if len(c) == 0:
        return METRIC.skipped(
            "the memcpy and memset tables are empty: no CUDA memory operations were captured"
        )
    kind_arr = np.array(kinds, dtype=object)
    kcode, kuniq = pd.factorize(kind_arr, sort=False)
    codes, (devs, kc) = group_codes(c.device, kcode.astype(np.int64))
    g = len(devs)
    tiny = c.bytes <= TINY_BYTES
    per = pd.DataFrame(
        {
            "device_id": devs,
            "kind": [str(kuniq[i]) for i in kc.tolist()],
            "count": np.bincount(codes, minlength=g),
            "bytes": group_sum(c.bytes, codes, g),
            "time_ns": group_sum(c.dur, codes, g),
            "tiny_count": np.bincount(codes, weights=tiny, minlength=g).astype(np.int64),
        }
    )
    per["achieved_gbps"] = np.where(
        per["time_ns"] > 0, per["bytes"] / per["time_ns"].clip(lower=1), np.nan
    ).round(3)
    per = per.sort_values(
        ["device_id", "time_ns"], ascending=[True, False], kind="stable"
    ).reset_index(drop=True)
    by_kind = (
        per.groupby("kind", sort=False)[["count", "bytes", "time_ns", "tiny_count"]]
        .sum()
        .reset_index()
    )
    by_kind["achieved_gbps"] = np.where(
        by_kind["time_ns"] > 0, by_kind["bytes"] / by_kind["time_ns"].clip(lower=1), np.nan
    ).round(3)
    by_kind = by_kind.sort_values(["time_ns", "kind"], ascending=[False, True], kind="stable")
    # The API call behind each transfer, joined on (pid, correlationId).
    notes: list[str] = []
    api = ["" for _ in range(len(c))]
    try:
        rt = ctx.data.runtime()
        if len(rt) == 0:  # rt.api[...] below cannot index an empty table
            raise Unavailable("the CUDA API table is empty")
        call = match_calls(c.pid, c.corr, rt)
        api_names = ctx.data.runtime_api_names()
        has = call >= 0
        api_code = np.where(has, rt.api[np.maximum(call, 0)], -1)
        api = [api_names[a] if a >= 0 else "" for a in api_code.tolist()]
        tkey = np.where(has, rt.tkey[np.maximum(call, 0)], -1)
    except Unavailable as exc:
        notes.append(
            f"API calls of transfers unknown ({exc.reason}): pageable-async and "
            "synchronous copies not checked"
        )
        has, tkey = np.zeros(len(c), bool), np.full(len(c), -1, np.int64)
    api_arr = pd.Series(api, dtype=object)
    is_async = api_arr.str.contains("Async", regex=False).to_numpy(bool)
    is_copy_api = api_arr.str.contains("Memcpy", regex=False).to_numpy(bool)
    pageable = np.isin(c.src_kind, list(pageable_codes(ctx.data))) | np.isin(
        c.dst_kind, list(pageable_codes(ctx.data))
    )
    memcpy_rows = kind_arr != MEMSET_KIND
    pageable_async = memcpy_rows & pageable & is_async & has
    launchers = _launch_threads(ctx.data)
    in_steps, step_scope = _step_mask(ctx, c.pid, c.start)
    sync_copy = memcpy_rows & has & is_copy_api & ~is_async & np.isin(tkey, launchers) & in_steps
    frames = [
        _issue_frame("pageable_async", c, pageable_async, kinds, api),
        _issue_frame("sync_on_launch_thread", c, sync_copy, kinds, api),
    ]
    issues = pd.concat(frames, ignore_index=True)
    span = int(c.end.max() - c.start.min())
    sync = _summary(c, sync_copy)
    result = MemoryTransfers(
        kinds_from_enum=from_enum,
        transfer_count=int(len(c)),
        total_bytes=int(c.bytes.sum()),
        total_time_ns=int(c.dur.sum()),
        by_kind=tuple(KindTransfers(**r) for r in by_kind.to_dict("records")),
        by_device=tuple(DeviceTransfers(**r) for r in per.to_dict("records")),
        size_buckets=_size_buckets(c.bytes),
        tiny_bytes=TINY_BYTES,
        tiny=TinyTransfers(
            count=int(tiny.sum()),
            time_ns=int(c.dur[tiny].sum()),
            bytes=int(c.bytes[tiny].sum()),
            per_s=round(float(tiny.sum()) * 1e9 / span, 1) if span > 0 else None,
        ),
        pageable_async=_summary(c, pageable_async),
        sync_on_launch_thread=LaunchThreadCopies(
            sync.count, sync.bytes, sync.time_ns, scope=step_scope, launch_threads=int(len(launchers))
        ),
        issues=tuple(
            TransferIssue(**r) for r in issues.groupby("issue", sort=False).head(ISSUE_LIMIT).to_dict("records")
        ),
    )
    tables = (
        Table("memory_transfers", KIND_COLUMNS, per),
        Table("memory_transfer_issues", ISSUE_COLUMNS, issues),
    )
    return MetricResult(METRIC.id, result.to_json(), tables, tuple(notes), typed=result)


def _summary(c: Columns, sel: np.ndarray) -> CopySummary:
    return CopySummary(count=int(sel.sum()), bytes=int(c.bytes[sel].sum()), time_ns=int(c.dur[sel].sum()))


METRIC = Metric(
    id="memory_transfers",
    order=200,
    title="Memory transfers",
    run=run,
    tables={"memory_transfers": KIND_COLUMNS, "memory_transfer_issues": ISSUE_COLUMNS},
    after=("steps",),
    description=(
        "memcpy/memset by kind and device (count, bytes, time, GB/s); pageable "
        "async, synchronous and tiny copies."
    ),
    reads=("runtime", "kernel_launch_index"),
)
