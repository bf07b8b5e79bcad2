"""A deliberately simple reference for the peer comparison (benchmarks/peers.py).

Plain json / sqlite3 and Python loops, no numpy and no cleverness: it exists so that every
figure a peer tool or nsys-llm-explain prints can be traced back to one stated definition.
All times are integer nanoseconds. Definitions, per device:

- ``kernel_sum_ns``: sum of kernel durations (overlapping kernels each count in full).
- ``window``: ``[first kernel start, last kernel end]`` on that device.
- ``busy_ns``: length of the union of the kernel intervals (overlap counted once).
- ``idle_ns``: ``window - busy_ns``.
- ``*_with_copies``: the same three with memcpy and memset intervals added to the kernels
  (their window is then first/last of kernels and copies together).
- ``stream_gap_ns``: per stream, the sum of the positive gaps between consecutive kernels
  (sorted by start), summed over streams: idle counted per stream, not per device.
- ``stream_gap_over_1ms_ns``: the same, only gaps longer than 1 ms.
- ``stream_gap_with_copies_ns``: per-stream gaps with each stream's memcpy/memset events in
  the sequence too.
- ``compute_busy_ns``: union of the kernels HTA calls "computation": names not matching
  ``^nccl.*Kernel`` and containing none of Memcpy, Memset, Sync.

Kineto traces add ``rounded_kernel_sum_ns`` (each kernel rounded to whole microseconds the
way HTA does for fractional timestamps: start rounded up, end rounded down) and a
``steps`` block: the same quantities restricted to GPU events launched (by correlation id)
by a host event that began before the last ``ProfilerStep#N`` began, which is HTA's default
trimming when the trace names at least two different steps. ``cuda_sync`` gives the window
and idle time when ``cuda_sync`` events are counted as GPU activity too (HTA counts every
event that has a stream), and ``launch`` joins GPU events to the launch calls HTA's launch
statistics use.
"""

from __future__ import annotations

import sqlite3
import urllib.parse
from collections import defaultdict
from pathlib import Path
from typing import Any

ONE_MS_NS = 1_000_000


def union_ns(intervals: list[tuple[int, int]]) -> int:
    """Length of the union of [start, end) intervals: sort, sweep, add each merged run."""
    total = 0
    cur_start: int | None = None
    cur_end = 0
    for start, end in sorted(intervals):
        if cur_start is None or start > cur_end:
            if cur_start is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        elif end > cur_end:
            cur_end = end
    if cur_start is not None:
        total += cur_end - cur_start
    return total


def stream_gaps(events: list[tuple[int, int]], threshold_ns: int = 0) -> int:
    """Sum of the gaps longer than threshold_ns between consecutive events of one stream."""
    total = 0
    prev_end: int | None = None
    for start, end in sorted(events):
        if prev_end is not None and start - prev_end > threshold_ns:
            total += start - prev_end
        prev_end = end
    return total


def device_figures(kernels: list[tuple[int, int, int, str]], copies: list[tuple[int, int, int]]) -> dict[str, Any]:
    """The per-device block. kernels: (start, end, stream, name); copies: (start, end, stream)."""
    spans = [(s, e) for s, e, _, _ in kernels]
    copy_spans = [(s, e) for s, e, _ in copies]
    window_start = min(s for s, _ in spans)
    window_end = max(e for _, e in spans)
    busy = union_ns(spans)
    by_stream: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for s, e, stream, _ in kernels:
        by_stream[stream].append((s, e))
    with_copies: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for s, e, stream in copies:
        with_copies[stream].append((s, e))
    for stream, events in by_stream.items():
        with_copies[stream].extend(events)
    both = spans + copy_spans
    both_start = min(s for s, _ in both)
    both_end = max(e for _, e in both)
    busy_both = union_ns(both)
    window = window_end - window_start
    return {
        "kernels": len(kernels),
        "streams": len(by_stream),
        "kernel_sum_ns": sum(e - s for s, e in spans),
        "window_start_ns": window_start,
        "window_end_ns": window_end,
        "window_ns": window,
        "busy_ns": busy,
        "idle_ns": window - busy,
        "idle_pct": round(100.0 * (window - busy) / window, 2) if window else 0.0,
        # HTA's "computation" kernels: names not matching ^nccl.*Kernel, nor containing
        # Memcpy / Memset / Sync (its NCCL_COMPUTE_KERNEL_RE).
        "compute_busy_ns": union_ns([(s, e) for s, e, _, name in kernels if _is_compute(name)]),
        "copies": len(copies),
        "window_with_copies_ns": both_end - both_start,
        "busy_with_copies_ns": busy_both,
        "idle_with_copies_ns": both_end - both_start - busy_both,
        "stream_gap_ns": sum(stream_gaps(v) for v in by_stream.values()),
        "stream_gap_over_1ms_ns": sum(stream_gaps(v, ONE_MS_NS) for v in by_stream.values()),
        "stream_gap_with_copies_ns": sum(stream_gaps(v) for v in with_copies.values()),
    }


def _is_compute(name: str) -> bool:
    if name.startswith("nccl") and "Kernel" in name:
        return False
    return not any(word in name for word in ("Memcpy", "Memset", "Sync"))


def top_names(totals: dict[tuple[int, str], list[int]], n: int) -> list[dict[str, Any]]:
    """The n largest names of each device by total time: name, device, calls, total_ns."""
    ranked = sorted(totals.items(), key=lambda kv: (kv[0][0], -kv[1][1], kv[0][1]))
    kept: dict[int, int] = defaultdict(int)
    out = []
    for (dev, name), (calls, total) in ranked:
        if kept[dev] < n:
            kept[dev] += 1
            out.append({"device": dev, "name": name, "calls": calls, "total_ns": total})
    return out


# ---------------------------------------------------------------- Nsight Systems SQLite


def _connect_ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro", uri=True)


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}


def nsys_reference(path: Path, top_n: int = 10) -> dict[str, Any]:
    """Per-device figures and kernel totals straight from an Nsight Systems SQLite export."""
    con = _connect_ro(path)
    try:
        tables = _tables(con)
        table = next((t for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL")
                      if t in tables), None)
        if table is None:
            return {"format": "nsys", "skipped": "no kernel table in the export"}
        names = {}
        if "StringIds" in tables:
            names = {i: v for i, v in con.execute("SELECT id, value FROM StringIds")}
        cols = _columns(con, table)
        name_col = "demangledName" if "demangledName" in cols else "shortName"
        short_col = "shortName" if "shortName" in cols else name_col
        rows = con.execute(f'SELECT start, "end", deviceId, streamId, {name_col}, {short_col} '
                           f"FROM {table}").fetchall()
        copies: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
        for copy_table in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
            if copy_table in tables:
                for s, e, dev, stream in con.execute(f'SELECT start, "end", deviceId, streamId FROM {copy_table}'):
                    copies[dev].append((s, e, stream))
    finally:
        con.close()
    if not rows:
        return {"format": "nsys", "skipped": "the kernel table is empty"}
    per_device: dict[int, list[tuple[int, int, int, str]]] = defaultdict(list)
    by_name: dict[tuple[int, str], list[int]] = defaultdict(lambda: [0, 0])
    by_short: dict[tuple[int, str], list[int]] = defaultdict(lambda: [0, 0])
    distinct_rows = set()
    for s, e, dev, stream, name_id, short_id in rows:
        name = names.get(name_id, f"#{name_id}")
        per_device[dev].append((s, e, stream, name))
        distinct_rows.add((s, e, dev, stream))
        for table_, key in ((by_name, name), (by_short, names.get(short_id, f"#{short_id}"))):
            table_[(dev, key)][0] += 1
            table_[(dev, key)][1] += e - s
    return {
        "format": "nsys",
        "kernel_rows": len(rows),
        "duplicate_rows": len(rows) - len(distinct_rows),
        "devices": {dev: device_figures(k, copies.get(dev, [])) for dev, k in sorted(per_device.items())},
        "top_kernels": top_names(by_name, top_n),
        "top_kernels_short": top_names(by_short, top_n),
        "kernel_sum_ns": sum(e - s for s, e, *_ in rows),
    }


def reference(path: Path, top_n: int = 10) -> dict[str, Any]:
    """The reference for either input format, chosen by file name."""
    name = path.name.lower()
    if name.endswith((".json", ".json.gz")):
        from benchmarks.peers_reference_kineto import kineto_reference

        return kineto_reference(path, top_n)
    return nsys_reference(path, top_n)
