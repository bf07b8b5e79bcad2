"""What a capture holds, beside the work itself: each fact changes what the figures mean, so
the reader sees it before the verdict (the capture metric reports them as `captured`).

- slice: the trace is a window of a longer capture: cut from it afterwards (the window the
  trace records, on the events' clock; where it sits is its start less the capture's start,
  when that start is on the same clock), begun --delay after the program, or begun by a
  trigger (a capture range). A slice is judged as one: its start-up is not counted, and no
  step is cut at its edges.
- carried: work queued before the capture (analysis/carried.py): how many kernels, their
  time, and the synchronize call that drained them (called before the capture's first launch
  and still in flight when the last of them ended: the step's leading cudaDeviceSynchronize
  that drains the previous step). Counted in the GPU's busy and idle figures, in no step.
- missing: events the trace lacks: kernels whose launch call is missing although their
  process's launches were traced and they are not carried (a filtered or sampled trace);
  stream waits on events (at least MIN_WAIT_CALLS cudaStreamWaitEvent calls) while the trace
  holds no synchronization records (what queued work waited on cannot be seen); fields that
  say the trace was sampled.
- overhead: profiler settings that inflate the host's times (PyTorch profiler with_stack,
  profile_memory, record_shapes), with the events they left (python_function events,
  memory events).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from nsys_llm_explainer.analysis.carried import carried
from nsys_llm_explainer.analysis.groups import group_codes
from nsys_llm_explainer.analysis.join import kernel_launch_index
from nsys_llm_explainer.analysis.launch_pairs import launch_api_mask
from nsys_llm_explainer.trace.data import CaptureSpan, TraceData, Unavailable

WAIT_CALL = re.compile(r"StreamWaitEvent")
MIN_WAIT_CALLS = 10  # fewer stream waits than this decide nothing the figures show
DRAIN_CALL = re.compile(r"Synchronize")
OVERHEAD_SETTINGS = ("with_stack", "profile_memory", "record_shapes")
# What each setting leaves in a PyTorch profiler trace (its event category), to count.
OVERHEAD_EVENTS = {"with_stack": "python_function", "profile_memory": "cpu_instant_event"}


def slice_of(span: CaptureSpan | None, w0: int | None, w1: int | None) -> dict[str, Any] | None:
    """The slice fact (module docstring), or None when the trace is not known to be one."""
    if span is None:
        return None
    total = span.duration_ns
    if span.cut is not None:
        c0, c1 = span.cut
        origin = None
        if span.start_ns is not None and span.start_ns <= c0 <= (span.stop_ns or c0):
            origin = span.start_ns
        elif total is not None and c1 <= total:
            origin = 0
        return {"how": "cut", "start_ns": c0, "end_ns": c1, "window_ns": c1 - c0,
                "offset_ns": c0 - origin if origin is not None else None, "capture_ns": total,
                "source": span.cut_source}
    if span.delay_ns > 0:
        window = w1 - w0 if w0 is not None and w1 is not None else None
        return {"how": "delay", "start_ns": w0, "end_ns": w1, "window_ns": window,
                "offset_ns": span.delay_ns, "capture_ns": None, "source": "META_DATA_CAPTURE.START_DELAY_MS"}
    if span.trigger is not None:
        window = w1 - w0 if w0 is not None and w1 is not None else None
        return {"how": "trigger", "start_ns": w0, "end_ns": w1, "window_ns": window, "offset_ns": None,
                "capture_ns": None, "source": "META_DATA_CAPTURE.START_TRIGGER", "trigger": span.trigger}
    return None


def carried_fact(data: TraceData) -> dict[str, Any] | None:
    """The carried fact (module docstring), or None when nothing was carried."""
    c = carried(data)
    if not c.kernels:
        return None
    drained, end = None, int(c.end_ns or 0)
    try:
        rt = data.runtime()
        names = data.runtime_api_names()
        sync = np.array([bool(DRAIN_CALL.search(n)) for n in names] or [False], dtype=bool)
        launch = launch_api_mask(names)[rt.api] if len(rt) else np.zeros(0, bool)
        lead = int(rt.start[launch].min()) if launch.any() else end
        rows = np.flatnonzero(sync[rt.api] & (rt.start <= min(lead, end)) & (rt.end >= end))
        if len(rows):
            drained = names[int(rt.api[rows[np.argmin(rt.start[rows])]])]
    except Unavailable:
        pass
    return {**c.to_json(), "drained_by": drained}


def missing_events(data: TraceData) -> dict[str, Any]:
    """The missing fact (module docstring): launches, sync records, sampling marks."""
    out: dict[str, Any] = {"launches": 0, "kernels": 0, "wait_calls": 0, "sync_records": None, "waits_unseen": False,
                           "sampled": list(data.profiler_options().sampled)}
    try:
        k = data.kernels()
        launch = kernel_launch_index(data)
    except Unavailable:
        return out
    out["kernels"] = len(k)
    if len(k) and (launch >= 0).any():
        process, _ = group_codes(k.pid)
        traced = np.zeros(int(process.max()) + 1, dtype=bool)
        traced[process[launch >= 0]] = True
        lost = (launch < 0) & traced[process] & ~carried(data).mask
        out["launches"] = int(lost.sum())
    try:
        rt = data.runtime()
        names = data.runtime_api_names()
    except Unavailable:
        return out
    calls = np.array([bool(WAIT_CALL.search(n)) for n in names] or [False], dtype=bool)
    out["wait_calls"] = int(calls[rt.api].sum()) if len(rt) else 0
    if out["wait_calls"] < MIN_WAIT_CALLS:
        return out  # too few waits to matter: the synchronization records are not read
    try:
        out["sync_records"] = len(data.sync())
    except Unavailable:
        out["sync_records"] = 0
    out["waits_unseen"] = out["sync_records"] == 0
    return out


def overhead(data: TraceData) -> dict[str, Any] | None:
    """The overhead fact (module docstring), or None when no such setting was on."""
    opts = data.profiler_options().settings
    on = [s for s in OVERHEAD_SETTINGS if opts.get(s)]
    if not on:
        return None
    counts = data.table_counts()
    return {"settings": on, "events": {OVERHEAD_EVENTS[s]: int(counts.get(OVERHEAD_EVENTS[s], 0))
                                       for s in on if s in OVERHEAD_EVENTS}}
