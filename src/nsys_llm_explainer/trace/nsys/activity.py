"""Device activity besides kernels (memcpy, memset, synchronization, whole-graph executions)
and the GPU list.

Each table is described by a spec: the integer columns a row must have to be used, and the
optional columns with the value that stands in when a column is absent, NULL or not an
integer. One loader reads them all the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nsys_llm_explainer.model import GpuInfo
from nsys_llm_explainer.trace.clean import clamp_sizes
from nsys_llm_explainer.trace.columns import Columns
from nsys_llm_explainer.trace.nsys import ids
from nsys_llm_explainer.trace.nsys.fetch import int_or
from nsys_llm_explainer.trace.nsys.probe import (
    GPU_TABLE,
    GRAPH_TRACE_TABLE,
    MEMCPY_TABLE,
    MEMSET_TABLE,
    SYNC_TABLE,
    quote_ident,
)

if TYPE_CHECKING:
    from nsys_llm_explainer.trace.nsys.export import NsysExport


@dataclass(frozen=True)
class ActivitySpec:
    key: str  # cache key, and the label of its warnings
    table: str
    what: str  # what is missing when the table is absent
    required: tuple[str, ...]  # rows without valid integers here are ignored (and counted)
    optional: dict[str, tuple[str, int]] = field(default_factory=dict)  # name -> (column, default)
    size_column: str | None = None  # byte counts, clamped to a sane range with a warning


_IDS = {"stream": ("streamId", -1), "corr": ("correlationId", -1), "gpid": ("globalPid", -1)}

MEMCPY = ActivitySpec(
    "memcpy",
    MEMCPY_TABLE,
    "memcpy",
    ("start", "end", "deviceId"),
    {
        **_IDS,
        "bytes": ("bytes", 0),
        "copy_kind": ("copyKind", -1),
        "src_kind": ("srcKind", -1),
        "dst_kind": ("dstKind", -1),
        "src_device": ("srcDeviceId", -1),
        "dst_device": ("dstDeviceId", -1),
    },
    size_column="bytes",
)
MEMSET = ActivitySpec(
    "memset",
    MEMSET_TABLE,
    "memset",
    ("start", "end", "deviceId"),
    {**_IDS, "bytes": ("bytes", 0), "mem_kind": ("memKind", -1)},
    size_column="bytes",
)
SYNC = ActivitySpec(
    "sync",
    SYNC_TABLE,
    "synchronization",
    ("start", "end"),
    {"device": ("deviceId", -1), **_IDS, "sync_type": ("syncType", -1), "event_id": ("eventId", -1),
     "event_sync_id": ("eventSyncId", -1)},
)
# nsys --cuda-graph-trace=graph (its default): one row per graph execution, no kernel rows
# for its nodes. Rows whose deviceId is not a device ordinal (CUPTI writes INT_MAX when the
# graph starts on the host) are left out like any other damaged row.
GRAPH_TRACE = ActivitySpec(
    "graph_execs",
    GRAPH_TRACE_TABLE,
    "CUDA graph trace",
    ("start", "end", "deviceId"),
    {**_IDS, "graph_id": ("graphId", -1), "graph_exec_id": ("graphExecId", -1)},
)


def load(data: NsysExport, spec: ActivitySpec) -> Columns:
    table = data.require(spec.table, spec.what, *spec.required)
    have = data.schema.tables[table]
    select = {"start": '"start"', "end": '"end"'}
    if "deviceId" in spec.required:
        select["device"] = "deviceId"
    for name, (column, default) in spec.optional.items():
        select[name] = int_or(column, default) if column in have else str(default)
    cols = data.load_table(table, select, spec.required)
    if spec.size_column is not None:
        cols = clamp_sizes(cols, spec.size_column, data.warnings, spec.key)
    return cols.with_columns(dur=cols.end - cols.start, pid=ids.pids(cols.gpid))


GPU_COLUMNS = ("id", "name", "smCount", "totalMemory", "memoryBandwidth", "clockRate", "computeMajor", "computeMinor")


def load_gpus(data: NsysExport) -> list[GpuInfo]:
    """TARGET_INFO_GPU rows, one per device id (typed values only; anything else is None)."""
    if not data.schema.has(GPU_TABLE, "id"):
        return []
    have = data.schema.tables[GPU_TABLE]
    exprs = [quote_ident(c) if c in have else "NULL" for c in GPU_COLUMNS]
    sql = f"SELECT DISTINCT {', '.join(exprs)} FROM {GPU_TABLE} ORDER BY 1"
    out: list[GpuInfo] = []
    seen: set[int] = set()
    for dev, name, sms, mem, bw, clock, major, minor in data.query(sql):
        if not isinstance(dev, int) or dev in seen:
            continue
        seen.add(dev)
        out.append(
            GpuInfo(
                device_id=dev,
                name=name if isinstance(name, str) else None,
                sm_count=sms if isinstance(sms, int) else None,
                total_memory_bytes=mem if isinstance(mem, int) else None,
                memory_bandwidth_bytes_per_s=bw if isinstance(bw, int) else None,
                clock_hz=clock if isinstance(clock, int) else None,
                compute_capability=f"{major}.{minor}" if isinstance(major, int) and isinstance(minor, int) else None,
                vendor="nvidia",
            )
        )
    return out
