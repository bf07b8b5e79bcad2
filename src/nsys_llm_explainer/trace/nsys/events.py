"""What an Nsight Systems export says about CUDA events and streams, for the step graph.

- The recording side of a stream wait: CUPTI_ACTIVITY_KIND_CUDA_EVENT (written with
  `--cuda-event-trace=true`) holds one row per event record (stream, record call's
  correlation id, eventId, eventSyncId); a synchronization record of type "stream wait
  event" names the same event by eventSyncId (newer exports) or eventId. A wait is matched
  to the record with its eventSyncId, else to the latest record of its eventId issued
  before it (correlation ids count up in issue order). Without that table, or without a
  match, the recording side stays unknown (-1).
- Stream types: TARGET_INFO_CUDA_STREAM.flag per (process, stream): 1 a stream created with
  the default flag (blocking), 2 non-blocking, 3 the legacy default (NULL) stream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from nsys_llm_explainer.trace.columns import Columns
from nsys_llm_explainer.trace.data import Unavailable
from nsys_llm_explainer.trace.nsys import ids
from nsys_llm_explainer.trace.nsys.fetch import int_or
from nsys_llm_explainer.trace.nsys.probe import quote_ident

if TYPE_CHECKING:
    from nsys_llm_explainer.trace.nsys.export import NsysExport

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
        rpid = ids.pids(rec["gpid"])
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
