"""Per-device detail of the idle split for the diagnosis' evidence (idle_causes reports it).

- host_blocked: what the owning processes' blocking calls (synchronize calls and copy calls
  that block the host, without the refill after them) overlapped inside the device's work
  window: the device's own work (busy), idle a transfer covers, idle with nothing queued
  (sync_wait), and the rest (idle with queued work, or a collective). Whether "the host
  simply waited for the copies" is true is read from it.
- transfers: the device's transfers (host<->device and peer copies; gpu_idle.py) by kind and
  direction, with the transfer idle time each kind's copies cover (kinds that run at the same
  time each claim the overlap).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nsys_llm_explainer.analysis import intervals
from nsys_llm_explainer.analysis.busy import copy_kind_labels, device_busy, device_local_copies
from nsys_llm_explainer.analysis.idle_sweep import SYNC_WAIT, TRANSFER, GapCauses, HostRows
from nsys_llm_explainer.trace.data import TraceData, Unavailable

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
