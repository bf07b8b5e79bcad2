"""What an Nsight Systems export records about the host beyond CUDA calls: the program's
captured output (ProcessStreams), OS runtime calls (OSRT_API), CPU samples
(COMPOSITE_EVENTS with their leaf frame in SAMPLING_CALLCHAINS) and whether the capture
asked for CUDA tracing (META_DATA_CAPTURE's COLLECT_CUDA_TRACE rows only: no other capture
metadata is read).

Each query is a constant; table names are fixed, never taken from the trace.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import numpy as np

from nsys_llm_explainer.trace.columns import Columns
from nsys_llm_explainer.trace.data import StreamText
from nsys_llm_explainer.trace.nsys import ids
from nsys_llm_explainer.trace.nsys.fetch import MAX_TIMESTAMP, count_rows, fetch_ints
from nsys_llm_explainer.trace.nsys.probe import CAPTURE_META_TABLE, STRINGS_TABLE

if TYPE_CHECKING:
    from nsys_llm_explainer.trace.nsys.export import NsysExport

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
            out.append(StreamText(ids.pid_of(gpid), stream, text))
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
    return Columns(table, {"start": cols.start, "end": cols.end, "pid": ids.pids(cols.gtid),
                           "tkey": ids.thread_keys(cols.gtid), "name": codes.astype(np.int64)})


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
    return Columns(SAMPLES_TABLE, {"time": cols["time"], "pid": ids.pids(cols["gtid"]),
                                   "tkey": ids.thread_keys(cols["gtid"]), "symbol": codes.astype(np.int64)})


def _module_file(path: str) -> str:
    """A module's file name, never its directory (paths name users and hosts)."""
    name = path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    return name or "?"
