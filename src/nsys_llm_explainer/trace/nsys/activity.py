"""Activity besides kernels and CUDA calls, on the device and on the host.

On the device: memcpy, memset, synchronization, whole-graph executions, and the GPU list.

Each table is described by a spec: the integer columns a row must have to be used, and the
optional columns with the value that stands in when a column is absent, NULL or not an
integer. One loader reads them all the same way.

What an Nsight Systems export says about CUDA events and streams, for the step graph.

- The recording side of a stream wait: CUPTI_ACTIVITY_KIND_CUDA_EVENT (written with
  `--cuda-event-trace=true`) holds one row per event record (stream, record call's
  correlation id, eventId, eventSyncId); a synchronization record of type "stream wait
  event" names the same event by eventSyncId (newer exports) or eventId. A wait is matched
  to the record with its eventSyncId, else to the latest record of its eventId issued
  before it (correlation ids count up in issue order). Without that table, or without a
  match, the recording side stays unknown (-1).
- Stream types: TARGET_INFO_CUDA_STREAM.flag per (process, stream): 1 a stream created with
  the default flag (blocking), 2 non-blocking, 3 the legacy default (NULL) stream.

On the host (os_calls, cpu_samples, program_output, cuda_trace_requested): what an Nsight
Systems export records beyond CUDA calls: the program's captured output (ProcessStreams), OS
runtime calls (OSRT_API), CPU samples (COMPOSITE_EVENTS with their leaf frame in
SAMPLING_CALLCHAINS) and whether the capture asked for CUDA tracing (META_DATA_CAPTURE's
COLLECT_CUDA_TRACE rows only: no other capture metadata is read).

Each query is a constant; table names are fixed, never taken from the trace."""

from __future__ import annotations

import sqlite3
from dataclasses import field
from typing import TYPE_CHECKING

import numpy as np

from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.model import GpuInfo
from nsys_llm_explainer.trace.clean import clamp_sizes
from nsys_llm_explainer.trace.columns import Columns
from nsys_llm_explainer.trace.data import StreamText, Unavailable
from nsys_llm_explainer.trace.nsys.export import pid_of, pids, thread_keys
from nsys_llm_explainer.trace.nsys.fetch import MAX_TIMESTAMP, count_rows, fetch_ints, int_or
from nsys_llm_explainer.trace.nsys.probe import (
    CAPTURE_META_TABLE,
    GPU_TABLE,
    GRAPH_TRACE_TABLE,
    MEMCPY_TABLE,
    MEMSET_TABLE,
    STRINGS_TABLE,
    SYNC_TABLE,
    quote_ident,
)

if TYPE_CHECKING:
    from nsys_llm_explainer.trace.nsys.export import NsysExport


@frozen
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
    return cols.with_columns(dur=cols.end - cols.start, pid=pids(cols.gpid))


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


CUDA_EVENT_TABLE = "CUPTI_ACTIVITY_KIND_CUDA_EVENT"
STREAM_TABLE = "TARGET_INFO_CUDA_STREAM"
STREAM_WAIT_EVENT = 2


def _rows(data: NsysExport, table: str, columns: dict[str, str]) -> dict[str, np.ndarray] | None:
    have = data.schema.tables.get(table)
    if not have:
        return None
    exprs = [int_or(col) if col in have else "-1" for col in columns.values()]
    rows = data.query(f"SELECT {', '.join(exprs)} FROM {quote_ident(table)}")
    if not rows:
        return None
    arr = np.array(rows, dtype=np.int64).reshape(-1, len(columns))
    return {name: arr[:, i] for i, name in enumerate(columns)}


def record_sides(data: NsysExport, sync: Columns) -> Columns:
    """sync with record_stream and record_corr added (-1 where unknown)."""
    n = len(sync)
    stream = np.full(n, -1, np.int64)
    corr = np.full(n, -1, np.int64)
    waits = np.flatnonzero(sync.sync_type == STREAM_WAIT_EVENT) if "sync_type" in sync else np.empty(0, np.int64)
    rec = _rows(data, CUDA_EVENT_TABLE, {"stream": "streamId", "corr": "correlationId", "gpid": "globalPid",
                                         "event": "eventId", "sync_id": "eventSyncId"}) if len(waits) else None
    if rec is not None:
        rpid = pids(rec["gpid"])
        wpid = sync.pid[waits]
        found = np.full(len(waits), -1, np.int64)
        if "event_sync_id" in sync:
            found = _match(rpid, rec["sync_id"], rec["corr"], wpid, sync.event_sync_id[waits], None)
        if "event_id" in sync:
            missing = found < 0
            by_event = _match(rpid, rec["event"], rec["corr"], wpid[missing], sync.event_id[waits][missing],
                              sync.corr[waits][missing])
            found[missing] = by_event
        hit = found >= 0
        stream[waits[hit]] = rec["stream"][found[hit]]
        corr[waits[hit]] = rec["corr"][found[hit]]
    return sync.with_columns(record_stream=stream, record_corr=corr)


def _match(rpid: np.ndarray, rkey: np.ndarray, rcorr: np.ndarray, qpid: np.ndarray, qkey: np.ndarray,
           before: np.ndarray | None) -> np.ndarray:
    """Per query: the record with its (pid, key), the latest one issued before `before` (a
    correlation id) when given, else the only or last one; -1 when none."""
    out = np.full(len(qpid), -1, np.int64)
    ok = (rkey >= 0)
    if not ok.any() or len(qpid) == 0:
        return out
    idx = np.flatnonzero(ok)
    order = idx[np.lexsort((rcorr[idx], rkey[idx], rpid[idx]))]
    sp, sk, sc = rpid[order], rkey[order], rcorr[order]
    for i in np.flatnonzero(qkey >= 0).tolist():
        lo = np.searchsorted(sp, qpid[i], "left")
        hi = np.searchsorted(sp, qpid[i], "right")
        a = lo + np.searchsorted(sk[lo:hi], qkey[i], "left")
        b = lo + np.searchsorted(sk[lo:hi], qkey[i], "right")
        if a == b:
            continue
        if before is None:
            out[i] = order[b - 1]
            continue
        j = a + np.searchsorted(sc[a:b], before[i], "left") - 1
        if j >= a:
            out[i] = order[j]
    return out


def stream_types(data: NsysExport) -> Columns:
    """pid, stream, type of each stream TARGET_INFO_CUDA_STREAM describes."""
    rows = _rows(data, STREAM_TABLE, {"stream": "streamId", "pid": "processId", "type": "flag"})
    if rows is None:
        raise Unavailable(f"the export has no {STREAM_TABLE} rows (stream types unknown)")
    keep = (rows["stream"] >= 0) & (rows["pid"] >= 0) & (rows["type"] >= 0)
    return Columns("streams", {k: rows[k][keep] for k in ("pid", "stream", "type")})


STREAMS_TABLE = "ProcessStreams"
OSRT_TABLE = "OSRT_API"
SAMPLES_TABLE = "COMPOSITE_EVENTS"
CALLCHAINS_TABLE = "SAMPLING_CALLCHAINS"
TAIL_CHARS = 65536  # the end of each stream is where a program says why it stopped
# The stream's file name says which stream it is (".../pid_42_stdout.log"); the name itself
# holds a session path and is never kept.
STREAMS_SQL = (
    f"SELECT p.globalPid, substr(f.value, -16), substr(c.value, -{TAIL_CHARS}) "
    f"FROM {STREAMS_TABLE} p LEFT JOIN {STRINGS_TABLE} f ON f.id = p.filenameId "
    f"LEFT JOIN {STRINGS_TABLE} c ON c.id = p.contentId"
)
CUDA_SETTING_SQL = (
    f"SELECT value FROM {CAPTURE_META_TABLE} WHERE name = 'COLLECT_CUDA_TRACE' "
    "OR name GLOB 'PROCESS_*:COLLECT_CUDA_TRACE'"
)


def program_output(data: NsysExport) -> list[StreamText]:
    """The tail of each process's captured stdout and stderr ([] when not recorded)."""
    if not data.schema.has(STREAMS_TABLE, "globalPid", "filenameId", "contentId"):
        return []
    if not data.schema.has(STRINGS_TABLE, "id", "value"):
        return []
    try:
        rows = data.query(STREAMS_SQL)
    except sqlite3.DatabaseError:
        return []
    out = []
    for gpid, suffix, text in rows:
        if not isinstance(gpid, int) or not isinstance(text, str) or not text.strip():
            continue
        name = suffix if isinstance(suffix, str) else ""
        stream = "stdout" if name.endswith("stdout.log") else "stderr" if name.endswith("stderr.log") else None
        if stream is not None:
            out.append(StreamText(pid_of(gpid), stream, text))
    return out


def cuda_trace_requested(data: NsysExport) -> bool | None:
    """Whether the capture asked for CUDA tracing (any process), None when not recorded."""
    if not data.schema.has(CAPTURE_META_TABLE, "name", "value"):
        return None
    try:
        values = {str(v).strip().lower() for (v,) in data.query(CUDA_SETTING_SQL)}
    except sqlite3.DatabaseError:
        return None
    if not values & {"true", "false", "1", "0"}:
        return None
    return bool(values & {"true", "1"})


def os_calls(data: NsysExport) -> Columns:
    """OS runtime calls: start, end, pid, tkey, name (index into os_call_names()); none when
    the export has no OSRT_API table (OS runtime calls not traced)."""
    if OSRT_TABLE not in data.schema.tables:
        data.put("os_call_names", [])
        return Columns.empty(OSRT_TABLE, ("start", "end", "pid", "tkey", "name"))
    table = data.require(OSRT_TABLE, "OS runtime", "start", "end", "globalTid", "nameId")
    cols = data.load_table(table, {"start": '"start"', "end": '"end"', "gtid": '"globalTid"', "name_id": '"nameId"'},
                      ("start", "end", "globalTid", "nameId"))
    uniq, codes = np.unique(cols.name_id, return_inverse=True)
    lookup = data.strings.resolve(uniq.tolist())
    data.put("os_call_names", [lookup[int(i)] for i in uniq])
    return Columns(table, {"start": cols.start, "end": cols.end, "pid": pids(cols.gtid),
                           "tkey": thread_keys(cols.gtid), "name": codes.astype(np.int64)})


def cpu_samples(data: NsysExport) -> Columns:
    """CPU samples with their leaf frame: time, pid, tkey, symbol (index into
    cpu_sample_names(): the function name, and the module's file name in brackets); none when
    the export holds no samples."""
    have = data.schema.has(SAMPLES_TABLE, "id", "start", "globalTid") and data.schema.has(
        CALLCHAINS_TABLE, "id", "symbol", "module", "stackDepth")
    if not have:  # not sampled: none
        data.put("cpu_sample_names", [])
        return Columns.empty(SAMPLES_TABLE, ("time", "pid", "tkey", "symbol"))
    sql = (
        f'SELECT e."start", e.globalTid, c.symbol, c.module FROM {SAMPLES_TABLE} e '
        f"JOIN {CALLCHAINS_TABLE} c ON c.id = e.id AND c.stackDepth = 0 "
        f"WHERE typeof(e.\"start\") = 'integer' AND e.\"start\" >= 0 AND e.\"start\" < {MAX_TIMESTAMP} "
        "AND typeof(e.globalTid) = 'integer' AND typeof(c.symbol) = 'integer' AND typeof(c.module) = 'integer'"
    )
    with data.sql:
        total = count_rows(data.conn, SAMPLES_TABLE)
        cols = fetch_ints(data.conn, sql, ("time", "gtid", "symbol", "module"), total)
    pair = cols["symbol"] * (1 << 31) + cols["module"]
    uniq, codes = np.unique(pair, return_inverse=True)
    sym, mod = uniq // (1 << 31), uniq % (1 << 31)
    lookup = data.strings.resolve(np.unique(np.concatenate((sym, mod))).tolist())
    names = [f"{lookup[int(s)]} [{_module_file(lookup[int(m)])}]" for s, m in zip(sym, mod, strict=True)]
    data.put("cpu_sample_names", names)
    return Columns(SAMPLES_TABLE, {"time": cols["time"], "pid": pids(cols["gtid"]),
                                   "tkey": thread_keys(cols["gtid"]), "symbol": codes.astype(np.int64)})


def _module_file(path: str) -> str:
    """A module's file name, never its directory (paths name users and hosts)."""
    name = path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    return name or "?"
