"""Per process of one trace (one rank): the compact numbers fleet compares across ranks.

Read from the trace's columns (TraceData) and its report; nothing here is whole-trace sized
except transiently. Definitions (all per process, times in the trace's own clock):

- compute_ns: summed duration of its non-communication kernels; comm_kernel_ns: of its
  communication kernels (metrics/communication.py's pattern).
- busy_pct: union of its kernel intervals / its window (first kernel start to last end).
- exposed_comm_ns: per device it uses, the union of its communication kernels minus the part
  that non-communication kernels on that device overlap (as the communication metric).
- collectives: its communication kernels in start order (start, end, stream, kind, bytes;
  bytes is -1 because kernel records do not carry message sizes).
- steps: step boundaries of the steps metric, with the compute kernel time of the kernels
  that start inside each step.
- timeline: cumulative compute-busy and communication-busy ns at TIMELINE_BINS + 1 equally
  spaced instants of its window, so the coordinator can rebin it onto any common axis.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis import intervals
from nsys_llm_explainer.analysis.comm_kernels import comm_mask
from nsys_llm_explainer.analysis.groups import distinct_few
from nsys_llm_explainer.analysis.stats import percentiles
from nsys_llm_explainer.trace.columns import factorize
from nsys_llm_explainer.trace.data import TraceData, Unavailable

TIMELINE_BINS = 2048
TOP_NAMES = 200
_ALIASES = (
    (re.compile(r"cross_device_reduce|custom_?all_?reduce|quick_?reduce|lamport", re.I), "AllReduce"),
    (re.compile(r"all_?reduce", re.I), "AllReduce"),
    (re.compile(r"all_?gather", re.I), "AllGather"),
    (re.compile(r"reduce_?scatter", re.I), "ReduceScatter"),
    (re.compile(r"all_?to_?all", re.I), "AllToAll"),
    (re.compile(r"send_?recv", re.I), "SendRecv"),
    (re.compile(r"broadcast", re.I), "Broadcast"),
    (re.compile(r"reduce", re.I), "Reduce"),
    (re.compile(r"send", re.I), "Send"),
    (re.compile(r"recv", re.I), "Recv"),
)


def collective_kind(name: str) -> str:
    """AllReduce, AllGather, ... from a communication kernel name; else its bare function name."""
    for rx, kind in _ALIASES:
        if rx.search(name):
            return kind
    head = name.split("(", 1)[0].split("<", 1)[0].strip()
    return (head.split()[-1] if head else name).rsplit("::", 1)[-1] or "collective"


def cumulative_union(start: np.ndarray, end: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Covered length of the union of [start, end) up to each instant in `at`."""
    s, e = intervals.merge(start, end)
    if len(s) == 0:
        return np.zeros(len(at), dtype=np.int64)
    prefix = np.r_[0, np.cumsum(e - s)]
    i = np.searchsorted(s, at, side="right")  # intervals that started by then
    last = np.maximum(i - 1, 0)
    inside = np.clip(at - s[last], 0, (e - s)[last])
    return np.where(i > 0, prefix[last] + inside, 0).astype(np.int64)


def _per_device_exposed(k: Any, mine: np.ndarray, comm: np.ndarray) -> tuple[int, int]:
    union = exposed = 0
    for dev in distinct_few(k.device[mine]).tolist():
        on = k.device == dev
        c = on & mine & comm
        o = on & ~comm
        cs, ce = intervals.merge(k.start[c], k.end[c])
        os_, oe = intervals.merge(k.start[o], k.end[o])
        u = int((ce - cs).sum())
        union += u
        exposed += u - int(intervals.overlap_with_union(cs, ce, os_, oe).sum())
    return union, exposed


def _top_names(data: TraceData, name_id: np.ndarray, dur: np.ndarray, is_comm: np.ndarray) -> dict[str, Any]:
    codes, uniq = factorize(name_id)
    ns = np.bincount(codes, weights=dur, minlength=len(uniq)).astype(np.int64)
    calls = np.bincount(codes, minlength=len(uniq))
    comm = np.zeros(len(uniq), dtype=bool)
    comm[codes[is_comm]] = True
    lookup = data.kernel_names(np.asarray(uniq))
    order = np.lexsort((np.asarray(uniq), -ns))[:TOP_NAMES]
    rows: list[dict[str, Any]] = [
        {
            "name": lookup.get(int(uniq[i]), f"(unnamed kernel #{int(uniq[i])})"),
            "ns": int(ns[i]),
            "calls": int(calls[i]),
            "comm": bool(comm[i]),
        }
        for i in order.tolist()
    ]
    return {"kernels": rows, "other_ns": int(ns.sum() - sum(r["ns"] for r in rows))}


def _steps(frame: pd.DataFrame | None, reason: str | None, pid: int, cstart: np.ndarray,
           cdur: np.ndarray) -> dict[str, Any]:
    if frame is None:
        return {"status": "skipped", "reason": reason or "the steps metric found no steps"}
    mine = frame[frame["pid"] == pid].sort_values("start_ns", kind="stable")
    if mine.empty:
        return {"status": "skipped", "reason": "the steps metric found no step of this process"}
    s = mine["start_ns"].to_numpy(np.int64)
    e = mine["end_ns"].to_numpy(np.int64)
    order = np.argsort(cstart, kind="stable")
    cs = np.r_[0, np.cumsum(cdur[order])]
    st = cstart[order]
    compute = cs[np.searchsorted(st, e, "left")] - cs[np.searchsorted(st, s, "left")]
    lat = e - s
    p = percentiles(lat, (50, 99))
    return {
        "status": "ok",
        "count": int(len(s)),
        "p50_ns": int(p[50]),
        "p99_ns": int(p[99]),
        "start": s,
        "end": e,
        "compute_ns": compute.astype(np.int64),
    }


def _copies(data: TraceData, pid: int) -> dict[str, int] | None:
    total = count = 0
    seen = False
    for loader in (data.memcpy, data.memset):
        try:
            cols = loader()
        except Unavailable:
            continue
        seen = True
        sel = cols.pid == pid
        total += int(cols.dur[sel].sum())
        count += int(sel.sum())
    return {"ns": total, "count": count} if seen else None


def ranks(data: TraceData, steps_frame: pd.DataFrame | None, steps_reason: str | None) -> list[dict[str, Any]]:
    """One compact record per process that ran kernels (pid order)."""
    k = data.kernels()
    if len(k) == 0:
        return []
    comm = comm_mask(data)
    try:
        origin = data.clock_origin()
        clock: dict[str, Any] = {"origin_ns": origin.epoch_ns, "source": origin.source, "reason": None}
    except Unavailable as exc:
        clock = {"origin_ns": None, "source": None, "reason": exc.reason}
    out = []
    for pid in sorted(distinct_few(k.pid).tolist()):
        mine = k.pid == pid
        c = mine & comm
        o = mine & ~comm
        start, end = k.start[mine], k.end[mine]
        w0, w1 = int(start.min()), int(end.max())
        busy = intervals.union_length(start, end)
        union, exposed = _per_device_exposed(k, mine, comm)
        edges = np.linspace(w0, w1, TIMELINE_BINS + 1).round().astype(np.int64)
        cidx = np.flatnonzero(c)
        cidx = cidx[np.argsort(k.start[cidx], kind="stable")]
        names = data.kernel_names(np.unique(k.name_id[cidx])) if len(cidx) else {}
        kinds_of = [collective_kind(names.get(int(i), "")) for i in k.name_id[cidx].tolist()]
        kind_codes, kind_names = pd.factorize(pd.Series(kinds_of, dtype=object), sort=True)
        out.append({
            "pid": int(pid),
            "devices": sorted(int(d) for d in distinct_few(k.device[mine])),
            "clock": clock,
            "kernel_count": int(mine.sum()),
            "kernel_ns": int(k.dur[mine].sum()),
            "compute_ns": int(k.dur[o].sum()),
            "comm_kernel_ns": int(k.dur[c].sum()),
            "comm_ns": union,
            "exposed_comm_ns": exposed,
            "window_start_ns": w0,
            "window_ns": w1 - w0,
            "busy_ns": busy,
            "copies": _copies(data, int(pid)),
            "names": _top_names(data, k.name_id[mine], k.dur[mine], comm[mine]),
            "steps": _steps(steps_frame, steps_reason, int(pid), k.start[o], k.dur[o]),
            "collectives": {
                "kinds": [str(x) for x in kind_names],
                "kind": np.asarray(kind_codes, dtype=np.int64),
                "stream": k.stream[cidx].astype(np.int64),
                "start": k.start[cidx].astype(np.int64),
                "end": k.end[cidx].astype(np.int64),
                "bytes": np.full(len(cidx), -1, dtype=np.int64),
            },
            "timeline": {
                "start_ns": w0,
                "end_ns": w1,
                "compute_cum": cumulative_union(k.start[o], k.end[o], edges),
                "comm_cum": cumulative_union(k.start[c], k.end[c], edges),
            },
        })
    return out
