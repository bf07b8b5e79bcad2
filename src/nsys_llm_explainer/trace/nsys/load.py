"""NsysTraceData: each core table of an Nsight Systems export read once, as numpy columns,
through NsysExport's checked load (export.py); the other tables through their readers
(activity.py, metadata.py).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsys_llm_explainer.model import CaptureInfo, Distributed, GpuInfo
from nsys_llm_explainer.trace.clean import (
    KERNEL_IDENTITY,
    api_base_name,
    drop_duplicate_rows,
    total_duration_problem,
)
from nsys_llm_explainer.trace.columns import Columns, factorize, surely_distinct
from nsys_llm_explainer.trace.data import (
    UNNAMED_KERNEL,
    CaptureSpan,
    ClockOrigin,
    CommandLine,
    Diagnostic,
    StreamText,
    Unavailable,
)
from nsys_llm_explainer.trace.nsys import activity, metadata
from nsys_llm_explainer.trace.nsys.export import NsysExport, implausible_pids, implausible_pids_note, pids, thread_keys
from nsys_llm_explainer.trace.nsys.fetch import (
    MAX_TIMESTAMP,
    count_rows,
    fetch_ints,
    int_or,
    is_int,
    rows_upper_bound,
)
from nsys_llm_explainer.trace.nsys.probe import (
    CORE_TABLES,
    NVTX_TABLE,
    RUNTIME_TABLE,
    quote_ident,
)

NVTX_RANGE_TYPES = (59, 60)  # NvtxPushPopRange, NvtxStartEndRange
KERNEL_NAME_COLUMNS = {"demangled": "demangledName", "short": "shortName", "mangled": "mangledName"}


def _first_int(*columns: str, have: tuple[str, ...]) -> str:
    """SQL for the first of `columns` holding an integer, else -1: a NULL mangledName
    (the column is nullable) falls back to the demangled name instead of no name."""
    cols = [quote_ident(c) for c in dict.fromkeys(columns) if c and c in have]
    whens = " ".join(f"WHEN typeof({c}) = 'integer' THEN {c}" for c in cols)
    return f"(CASE {whens} ELSE -1 END)" if cols else "-1"


GRAPH_ID_KEYS = ("graph_node_id", "graph_id")


def _unless_unused(ids_col: np.ndarray) -> np.ndarray:
    """An id column with no id in it (-1 in every row: no CUDA graph ran) as one read-only
    -1 repeated, which holds no memory, instead of millions of -1 kept all run."""
    if len(ids_col) and bool((ids_col == -1).all()):
        return np.broadcast_to(np.int64(-1), ids_col.shape)
    return ids_col


def _decode_distinct(raw: np.ndarray) -> np.ndarray:
    """bytes/None per row -> str/None per row, decoding each distinct value once.

    Invalid UTF-8 (real exports have it) is replaced, never raised, as open.py does."""
    codes, uniq = pd.factorize(raw, sort=False)  # None -> -1
    decoded = [u.decode("utf-8", "replace") if isinstance(u, bytes) else str(u) for u in uniq]
    return np.array([*decoded, None], dtype=object)[codes]  # -1 picks the trailing None


class NsysTraceData(NsysExport):
    """Lazily loaded, cached columns of one opened Nsight Systems export."""

    # -- tables ----------------------------------------------------------------------
    def kernels(self) -> Columns:
        return self.cached("kernels", self._load_kernels)

    def _load_kernels(self) -> Columns:
        table = self.require(self.schema.kernel_table, "kernel", "start", "end", "deviceId")
        have = self.schema.tables[table]
        name_col = KERNEL_NAME_COLUMNS.get(self.kernel_name_mode, "demangledName")
        if name_col not in have:
            name_col = next((c for c in KERNEL_NAME_COLUMNS.values() if c in have), "")
        select = {
            "start": '"start"',
            "end": '"end"',
            "device": "deviceId",
            "stream": int_or("streamId") if "streamId" in have else "-1",
            "corr": int_or("correlationId") if "correlationId" in have else "-1",
            "gpid": int_or("globalPid") if "globalPid" in have else "-1",
            "name_id": _first_int(name_col, *KERNEL_NAME_COLUMNS.values(), have=have),
        }
        for col, key in (("graphNodeId", "graph_node_id"), ("graphId", "graph_id")):
            if col in have:
                select[key] = int_or(col)
        cols = self.load_table(table, select, ("start", "end", "deviceId"))
        cols = drop_duplicate_rows(cols, KERNEL_IDENTITY, self.warnings, "kernel")
        # Held through most of the run: dur is computed when read, and globalPid, once
        # decoded and checked, is not kept (kernel_pid_note says what it found).
        self.put("kernel_implausible_pids", implausible_pids(cols.gpid))
        kept = {**cols.without("gpid").cols, "pid": pids(cols.gpid)}
        for key in GRAPH_ID_KEYS:
            if key in kept:
                kept[key] = _unless_unused(kept[key])
        return Columns(table, kept, derived=("dur",))

    def kernel_dims(self) -> Columns:
        return self.cached("kernel_dims", self._load_kernel_dims)

    def _load_kernel_dims(self) -> Columns:
        """Grid and block of every kernel record (rows with a valid interval), by name id."""
        table = self.require(self.schema.kernel_table, "kernel", "start", "end", "deviceId")
        have = self.schema.tables[table]
        dims = ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ")
        if not all(c in have for c in dims):
            raise Unavailable(f"{table} records no grid and block sizes")
        name_col = KERNEL_NAME_COLUMNS.get(self.kernel_name_mode, "demangledName")
        select = {"name_id": _first_int(name_col, *KERNEL_NAME_COLUMNS.values(), have=have),
                  **{f"{c[:-1].lower()}_{c[-1].lower()}": int_or(c) for c in dims}, "dur": '"end" - "start"'}
        sql = (f"SELECT {', '.join(select.values())} FROM {quote_ident(table)} WHERE {is_int('start')} AND "
               f'{is_int("end")} AND "start" >= 0 AND "end" >= "start" AND "end" < {MAX_TIMESTAMP}')
        with self.sql:
            total = self.row_counts.setdefault(table, count_rows(self.conn, table))
            cols = fetch_ints(self.conn, sql, tuple(select), total, label=table)
        return Columns(table, cols)

    def kernel_pid_note(self, pids: np.ndarray) -> str | None:
        self.kernels()
        return implausible_pids_note(self._cache.get("kernel_implausible_pids", 0))

    def kernel_names(self, name_ids: np.ndarray) -> dict[int, str]:
        wanted = np.unique(name_ids).tolist()
        names = self.strings.resolve(wanted)
        # -1: no name column held an id; metrics index this dict, so every id needs an entry.
        names.update({int(i): UNNAMED_KERNEL for i in wanted if int(i) < 0})
        return names

    def kernel_mangled_names(self, name_ids: np.ndarray) -> dict[int, str]:
        """Mangled names of a few kernels (the Nsight Compute plan's targets): one lookup per
        name, which stops at the first kernel row of that name carrying a mangledName."""
        table = self.schema.kernel_table
        have = self.schema.tables.get(table or "", ())
        name_col = KERNEL_NAME_COLUMNS.get(self.kernel_name_mode, "demangledName")
        if table is None or "mangledName" not in have or name_col not in have:
            return {}
        found: dict[int, int] = {}
        sql = (
            f'SELECT "mangledName" FROM {quote_ident(table)} WHERE {quote_ident(name_col)} = ? '
            "AND typeof(\"mangledName\") = 'integer' LIMIT 1"
        )
        for i in np.unique(name_ids).tolist():
            if int(i) < 0:
                continue
            rows = self.query(sql, (int(i),))
            if rows:
                found[int(i)] = int(rows[0][0])
        names = self.strings.resolve(found.values())
        return {i: names[m] for i, m in found.items() if m not in self.strings.missing and names[m]}

    def runtime(self) -> Columns:
        return self.cached("runtime", self._load_runtime)

    def _load_runtime(self) -> Columns:
        table = self.require(RUNTIME_TABLE, "CUDA API", "start", "end", "nameId")
        have = self.schema.tables[table]
        select = {
            "start": '"start"',
            "end": '"end"',
            "gtid": int_or("globalTid") if "globalTid" in have else "-1",
            "corr": int_or("correlationId") if "correlationId" in have else "-1",
            "name_id": "nameId",
        }
        cols = self.load_table(table, select, ("start", "end", "nameId"))
        # Factorizing millions of rows with a few dozen distinct APIs (table lookup or hash)
        # is much cheaper than np.unique's sort; the codes are re-sorted by name below anyway.
        inverse, uniq = factorize(cols.name_id)
        names = self.strings.resolve(uniq.tolist())
        base = [api_base_name(names[int(i)]) for i in uniq]
        base_names, base_code_of_uniq = np.unique(np.array(base, dtype=object), return_inverse=True)
        api = base_code_of_uniq[inverse].astype(np.int64) if len(uniq) else inverse.astype(np.int64)
        self.put("runtime_api_names", [str(b) for b in base_names])
        # globalTid and nameId are only read through pid/tkey and api: not kept, to save
        # two columns of millions of rows.
        cols = Columns(table, {
            "start": cols.start, "end": cols.end, "corr": cols.corr, "api": api,
            "pid": pids(cols.gtid), "tkey": thread_keys(cols.gtid),
        })
        return self._dedupe_runtime(cols)

    def _dedupe_runtime(self, cols: Columns) -> Columns:
        """Drop API rows recorded twice (same thread, correlation id and API).

        Nsight Systems 2022.2 records some runtime calls twice, an outer row without the
        version suffix around the inner one; keep the inner (shortest) row.
        """
        if len(cols) == 0:
            return cols
        has_corr = cols.corr > 0
        if surely_distinct(cols.tkey[has_corr], cols.corr[has_corr], cols.api[has_corr]):
            return cols  # the usual case; skips a four-key sort of every API row
        dur = cols.end - cols.start
        order = np.lexsort((dur, cols.api, cols.corr, cols.tkey))
        key_cols = (cols.tkey[order], cols.corr[order], cols.api[order])
        same = np.ones(len(order), dtype=bool)
        same[0] = False
        for k in key_cols:
            same[1:] &= k[1:] == k[:-1]
        same &= cols.corr[order] > 0
        if not same.any():
            return cols
        keep = np.sort(order[~same])
        self.warnings.append(
            f"{RUNTIME_TABLE}: {int(same.sum())} duplicated API rows (same thread, correlation "
            "id and API) counted once"
        )
        return cols.take(keep)

    def runtime_api_names(self) -> list[str]:
        self.runtime()
        return self._cache["runtime_api_names"]  # type: ignore[no-any-return]

    def nvtx(self) -> Columns:
        return self.cached("nvtx", self._load_nvtx)

    def _load_nvtx(self) -> Columns:
        table = self.require(NVTX_TABLE, "NVTX", "start", "eventType")
        have = self.schema.tables[table]
        types = ",".join(str(t) for t in NVTX_RANGE_TYPES)
        select = {
            "start": '"start"',
            "end": int_or("end") if "end" in have else "-1",
            "event_type": "eventType",
            "gtid": int_or("globalTid") if "globalTid" in have else "-1",
            "text_id": int_or("textId") if "textId" in have else "-1",
        }
        # As bytes: decoding once per distinct name (below) instead of once per row through
        # the connection's Python text_factory is most of the NVTX load time.
        text = {"text": "CAST(text AS BLOB)"} if "text" in have else {"text": "NULL"}
        cols = self.load_table(
            table, select, ("start", "eventType"), extra_where=f"eventType IN ({types})",
            text=text, interval=False,
        )
        ok = cols.start >= 0
        if not ok.all():
            self.warnings.append(f"{table}: {int((~ok).sum())} ranges with negative start ignored")
            cols = cols.take(ok)
        bad_end = (cols.end >= 0) & (cols.end < cols.start)
        end = np.where(bad_end | (cols.end >= MAX_TIMESTAMP), -1, cols.end)
        if bad_end.any():
            self.warnings.append(
                f"{table}: {int(bad_end.sum())} ranges end before they start; treated as unended"
            )
        ended = end >= 0
        problem = total_duration_problem(table, {"start": cols.start[ended], "end": end[ended]})
        if problem:
            raise Unavailable(problem)
        names = self._nvtx_names(cols)
        codes, uniques = pd.factorize(pd.Series(names, dtype=object), sort=False)
        self.put("nvtx_names", [str(u) for u in uniques])
        return Columns(
            table,
            {
                "start": cols.start,
                "end": end,
                "event_type": cols.event_type,
                "pid": pids(cols.gtid),
                "tkey": thread_keys(cols.gtid),
                "name": codes.astype(np.int64),
            },
        )

    def _nvtx_names(self, cols: Columns) -> np.ndarray:
        text = _decode_distinct(cols.text)
        names = np.where(pd.isna(text), np.array(None, dtype=object), text)
        need = np.flatnonzero(pd.isna(text) & (cols.text_id >= 0))
        if len(need):
            lookup = self.strings.resolve(np.unique(cols.text_id[need]).tolist())
            names[need] = [lookup[int(i)] for i in cols.text_id[need]]
        still = pd.isna(names)
        if still.any():
            names[still] = "(unnamed range)"
        return names

    def nvtx_names(self) -> list[str]:
        self.nvtx()
        return self._cache["nvtx_names"]  # type: ignore[no-any-return]

    def memcpy(self) -> Columns:
        return self.cached("memcpy", lambda: activity.load(self, activity.MEMCPY))

    def memset(self) -> Columns:
        return self.cached("memset", lambda: activity.load(self, activity.MEMSET))

    def sync(self) -> Columns:
        return self.cached("sync", lambda: activity.record_sides(self, activity.load(self, activity.SYNC)))

    def stream_types(self) -> Columns:
        return self.cached("stream_types", lambda: activity.stream_types(self))

    def graph_execs(self) -> Columns:
        return self.cached("graph_execs", lambda: activity.load(self, activity.GRAPH_TRACE))

    def gpus(self) -> list[GpuInfo]:
        return self.cached("gpus", lambda: activity.load_gpus(self))

    def table_rows(self, table: str) -> int:
        if table not in self.row_counts:
            with self.sql:
                self.row_counts[table] = count_rows(self.conn, table)
        return self.row_counts[table]

    def table_counts(self) -> dict[str, int]:
        return {t: self.table_rows(t) for t in CORE_TABLES if t in self.schema.tables}

    def kernel_rows_estimate(self) -> int:
        with self.sql:
            return rows_upper_bound(self.conn, self.schema.kernel_table)

    def missing_names(self) -> int:
        return len(self.strings.missing)

    def gpus_missing_reason(self) -> str:
        return metadata.gpus_missing_reason(self)

    def enum_labels(self, which: str) -> dict[int, str] | None:
        return metadata.enum_labels(self, which)

    def graph_trace_mode(self) -> str | None:
        return metadata.graph_trace_mode(self)

    def diagnostics(self) -> list[Diagnostic]:
        return self.cached("diagnostics", lambda: metadata.diagnostics(self))

    def clock_origin(self) -> ClockOrigin:
        return metadata.session_start(self)

    def distributed(self) -> Distributed | None:
        return self.cached("distributed", lambda: metadata.read_ranks(self))

    def os_calls(self) -> Columns:
        return self.cached("os_calls", lambda: activity.os_calls(self))

    def os_call_names(self) -> list[str]:
        self.os_calls()
        return self._cache["os_call_names"]  # type: ignore[no-any-return]

    def cpu_samples(self) -> Columns:
        return self.cached("cpu_samples", lambda: activity.cpu_samples(self))

    def cpu_sample_names(self) -> list[str]:
        self.cpu_samples()
        return self._cache["cpu_sample_names"]  # type: ignore[no-any-return]

    def program_output(self) -> list[StreamText]:
        return self.cached("program_output", lambda: activity.program_output(self))

    def cuda_trace_requested(self) -> bool | None:
        return self.cached("cuda_trace_requested", lambda: activity.cuda_trace_requested(self))

    def command_lines(self) -> list[CommandLine]:
        return self.cached("command_lines", lambda: metadata.command_lines(self))

    def process_names(self, pids: list[int]) -> dict[int, str]:
        return metadata.process_names(self, pids)

    def capture_span(self) -> CaptureSpan | None:
        return self.cached("capture_span", lambda: metadata.capture_span(self))

    def capture_info(self, pids: list[int]) -> CaptureInfo:
        with self.sql:
            return metadata.read_capture_info(self.conn, self.schema, pids)
