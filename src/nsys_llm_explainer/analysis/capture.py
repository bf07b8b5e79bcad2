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

What the profiler's own messages (nsys DIAGNOSTIC_EVENT warnings and errors) say about the
GPU figures, by their wording. Each message gets one kind, the first that matches:

- cpu_sampling: about CPU sampling or CPU backtraces ("Unable to collect CPU kernel IP samples
  ... perf event paranoid level is 2", "Hardware event ... used to trigger sample
  collection"): most Linux hosts print these; they say nothing about the CUDA trace.
- version: the installed driver or CUDA/CUPTI version is not the one this Nsight Systems was
  built for ("Installed CUDA driver version (12.0) is not supported by this build ... CUDA
  trace will be collected using libraries for driver version 11.7"): the CUDA trace was
  collected through a fallback, so some activity may be missing or misattributed.
- events_missing: CUDA tracing did not start or events were lost ("CUDA profiling might have
  not been started correctly", dropped or lost events, full or overflowing buffers, data not
  flushed, "No CUDA events collected").
- no_events: a kind of event the capture asked for and found none of, other than CUDA ("No
  NVTX events collected. Does the process use NVTX?", OpenGL, OS runtime): a fact about the
  application, not a loss.
- other: anything else (shown, not judged).

events_may_be_missing is true for events_missing only; version warnings are reported as
concerning the CUDA trace but do not by themselves say that events are missing.

Algorithm searches in a capture: cuBLAS/cuDNN (cudnn.benchmark, cublasLt heuristics) or a
framework autotuner timing several kernels for one operation before settling on one.

A search looks like this on one (process, device, stream): several variants of one GEMM or
convolution family (the kernel's function name with its digits removed, so tile sizes and
stage counts differ, the operation does not) run close together, each once, and afterwards
one of them, the winner, runs again and again. The trace has no operand shapes, so "the same
operation" is read from that pattern:

1. Per family and stream, the family's kernels in start order are cut into bursts: a burst
   ends when a name repeats or the next variant starts more than BURST_GAP_NS after the
   previous one ended.
2. A burst is a search when it has at least VARIANTS distinct names; afterwards at least one
   of them (a winner) runs at least WINNER_RUNS more times on that stream while fewer than
   half of them do; and at least half of them are rare, run at most RARE_RUNS times on that
   stream in the whole capture (the variants that lost are not run again). The last two
   matter: a steady loop of layers with different tiles (or a TensorRT engine, where every
   layer has its own tactic) also runs each name once per pass, but then every name repeats,
   and a workload whose shapes vary from step to step picks among the same tiles again and
   again, so none of them is rare.

The time counted is each search's variants' own kernel intervals (not the span from the
first variant to the last: the gaps between trials are reported by the idle split).
TensorRT engines are left out by the caller: TensorRT chooses tactics when the engine is
built, not while it runs."""

from __future__ import annotations

import re
from typing import NotRequired, TypedDict

import numpy as np

from nsys_llm_explainer.analysis import intervals
from nsys_llm_explainer.analysis.carried import carried
from nsys_llm_explainer.analysis.groups import group_codes
from nsys_llm_explainer.analysis.join import kernel_launch_index, launch_api_mask
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.kernels.categories import BUILTIN_TABLE
from nsys_llm_explainer.trace.columns import factorize
from nsys_llm_explainer.trace.data import CaptureSpan, TraceData, Unavailable

WAIT_CALL = re.compile(r"StreamWaitEvent")
MIN_WAIT_CALLS = 10  # fewer stream waits than this decide nothing the figures show
DRAIN_CALL = re.compile(r"Synchronize")
OVERHEAD_SETTINGS = ("with_stack", "profile_memory", "record_shapes")
# What each setting leaves in a PyTorch profiler trace (its event category), to count.
OVERHEAD_EVENTS = {"with_stack": "python_function", "profile_memory": "cpu_instant_event"}


# The facts, as the capture metric turns them into its result (results/run.py CaptureSlice,
# CarriedFact, MissingEvents, ProfilerOverhead).
class SliceFact(TypedDict):
    how: str  # cut, delay, trigger
    start_ns: int | None
    end_ns: int | None
    window_ns: int | None
    offset_ns: int | None
    capture_ns: int | None
    source: str | None
    trigger: NotRequired[str | None]  # how == "trigger"


class CarriedFactRow(TypedDict):
    kernels: int
    kernel_ns: int
    busy_ns: int
    end_ns: int | None
    devices: tuple[int, ...]
    drained_by: str | None


class MissingFact(TypedDict):
    launches: int
    kernels: int
    wait_calls: int
    sync_records: int | None  # None: not read (too few waits to matter)
    waits_unseen: bool
    sampled: tuple[str, ...]


class OverheadFact(TypedDict):
    settings: list[str]
    events: dict[str, int]  # event category -> events


def slice_of(span: CaptureSpan | None, w0: int | None, w1: int | None) -> SliceFact | None:
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


def carried_fact(data: TraceData) -> CarriedFactRow | None:
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
    return {"kernels": c.kernels, "kernel_ns": c.kernel_ns, "busy_ns": c.busy_ns, "end_ns": c.end_ns,
            "devices": c.devices, "drained_by": drained}


def missing_events(data: TraceData) -> MissingFact:
    """The missing fact (module docstring): launches, sync records, sampling marks."""
    out: MissingFact = {"launches": 0, "kernels": 0, "wait_calls": 0, "sync_records": None, "waits_unseen": False,
                        "sampled": data.profiler_options().sampled}
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


def overhead(data: TraceData) -> OverheadFact | None:
    """The overhead fact (module docstring), or None when no such setting was on."""
    opts = data.profiler_options().settings
    on = [s for s in OVERHEAD_SETTINGS if opts.get(s)]
    if not on:
        return None
    counts = data.table_counts()
    return {"settings": on, "events": {OVERHEAD_EVENTS[s]: int(counts.get(OVERHEAD_EVENTS[s], 0))
                                       for s in on if s in OVERHEAD_EVENTS}}


KINDS = ("cpu_sampling", "version", "events_missing", "no_events", "other")
CUDA_KINDS = ("version", "events_missing")  # the kinds that concern the GPU figures

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("cpu_sampling", re.compile(
        r"\bcpu\b.*\b(ip|sampl\w*|backtraces?)\b|perf[_ ]event|paranoid|backtrace|"
        r"\bip samples?\b|sampling period|sample collection|context switch", re.IGNORECASE)),
    ("version", re.compile(
        r"driver version|not supported by this build|libraries for driver|"
        r"\b(cupti|cuda|driver)\b.*\bversion\b.*\b(not supported|unsupported|mismatch|older|newer)|"
        r"unsupported (driver|gpu|device|cuda)", re.IGNORECASE)),
    ("events_missing", re.compile(
        r"not (been )?started correctly|not started correctly|dropp(ed|ing)|\blost\b|overflow|"
        r"buffers? (is |are |was |were )?(full|exhausted)|incomplete|truncat|"
        r"not (all|every)\b.*\b(flushed|collected|recorded)|(were|was|could) not (be )?(flushed|collected|recorded)|"
        r"fail(ed|ure)? to (flush|collect|enable|initiali[sz]e|inject|record)|"
        r"no cuda (events|activit|kernels|trace)|events? (may|might) be missing|missing events",
        re.IGNORECASE)),
    ("no_events", re.compile(r"^no \w+( \w+)? events collected", re.IGNORECASE)),
)


def kind_of(text: str) -> str:
    """The kind of one profiler message (module docstring)."""
    for kind, pattern in _PATTERNS:
        if pattern.search(text):
            return kind
    return "other"


VARIANTS = 4
WINNER_RUNS = 3
RARE_RUNS = 2
BURST_GAP_NS = 100_000_000  # 100 ms between one trial's end and the next trial's start
SEARCHED = ("gemm", "conv")
_DIGITS = re.compile(r"\d+")


@frozen
class Searches:
    starts: np.ndarray  # merged kernel intervals of the variants of every search
    ends: np.ndarray
    searches: int
    variants: int  # distinct variant names over all searches
    example: str | None  # the family of the largest search
    winner: str | None  # its winner


def _burst_starts(end: np.ndarray) -> np.ndarray:
    """Positions visited from 0 by following end[] (end[n] = n): the starts of the bursts,
    found by pointer doubling (log n vectorized rounds) instead of a walk per kernel."""
    n = len(end) - 1
    on = np.zeros(n + 1, dtype=bool)
    on[0] = True
    jump = end.copy()
    for _ in range(max(1, int(n).bit_length() + 1)):
        on[jump[on]] = True
        jump = jump[jump]
    return np.flatnonzero(on[:n])


def find(data: TraceData) -> Searches:
    """The searches in the trace's kernels (module docstring)."""
    k = data.kernels()
    empty = np.empty(0, np.int64)
    none = Searches(empty, empty, 0, 0, None, None)
    if not len(k):
        return none
    codes, uniq = factorize(k.name_id)
    lookup = data.kernel_names(np.asarray(uniq))
    names = [lookup.get(int(i), "") for i in uniq]
    cats, _ = BUILTIN_TABLE.classify(names)
    families: dict[str, int] = {}
    fam_of_name = np.full(len(uniq), -1, np.int64)
    for i, (name, cat) in enumerate(zip(names, cats, strict=True)):
        if cat in SEARCHED:
            family = _DIGITS.sub("#", name.split("(")[0])
            fam_of_name[i] = families.setdefault(family, len(families))
    family_names = list(families)
    kfam = fam_of_name[codes] if len(codes) else empty
    rows = np.flatnonzero(kfam >= 0)
    if not len(rows):
        return none
    key, _ = group_codes(k.pid[rows], k.device[rows], k.stream[rows], kfam[rows])
    del kfam  # kernel-sized arrays go as soon as they are used: this runs beside heavy metrics
    sort = np.lexsort((k.start[rows], key))
    pos, grp = rows[sort], key[sort]  # kernel rows, per (stream, family) in start order
    del rows, key, sort
    seq, start, end = codes[pos], k.start[pos], k.end[pos]
    del codes
    n = len(pos)
    at = np.arange(n)
    # prev: the previous position of the same name in the same group (-1: none); rank: how
    # many came before it; total: how many there are.
    by_name = np.lexsort((at, seq, grp))
    same = np.r_[False, (grp[by_name][1:] == grp[by_name][:-1]) & (seq[by_name][1:] == seq[by_name][:-1])]
    prev = np.full(n, -1, np.int64)
    prev[by_name[same]] = by_name[np.flatnonzero(same) - 1]
    run_start = np.maximum.accumulate(np.where(~same, np.arange(n), 0))
    rank = np.empty(n, np.int64)
    rank[by_name] = np.arange(n) - run_start
    run_len = np.diff(np.r_[np.flatnonzero(~same), n])
    total = np.empty(n, np.int64)
    total[by_name] = np.repeat(run_len, run_len)
    del by_name, same, run_start, run_len
    later = total - rank - 1
    del rank
    # A burst from f ends at the first position whose name already ran since f, or at a break
    # (a new group, or a gap longer than BURST_GAP_NS).
    first_repeat = np.full(n + 1, n, np.int64)
    np.minimum.at(first_repeat, prev[prev >= 0], at[prev >= 0])
    conflict = np.minimum.accumulate(first_repeat[::-1])[::-1]
    del first_repeat, prev
    brk = np.r_[False, (grp[1:] != grp[:-1]) | (start[1:] - end[:-1] > BURST_GAP_NS)]
    brk_at = np.r_[np.flatnonzero(brk), n]
    next_break = brk_at[np.searchsorted(brk_at, at, side="right")]
    stop = np.r_[np.minimum(conflict[:n], next_break), n]
    del conflict, next_break, brk, brk_at
    first = _burst_starts(stop)
    length = stop[first] - first
    first, length = first[length >= VARIANTS], length[length >= VARIANTS]
    if not len(first):
        return none
    member = np.repeat(np.arange(len(first)), length)
    where = np.repeat(first, length) + (np.arange(int(length.sum())) - np.repeat(np.cumsum(length) - length, length))
    winners = np.bincount(member, weights=later[where] >= WINNER_RUNS, minlength=len(first)).astype(np.int64)
    rare = np.bincount(member, weights=total[where] <= RARE_RUNS, minlength=len(first)).astype(np.int64)
    hit = (winners >= 1) & (2 * winners < length) & (2 * rare >= length)
    if not hit.any():
        return none
    chosen = where[hit[member]]
    s, e = intervals.merge(start[chosen], end[chosen])
    big = int(np.flatnonzero(hit)[np.argmax(length[hit])])
    trial = where[member == big]
    winner = trial[np.argmax(later[trial])]
    return Searches(
        s, e, int(hit.sum()), len(set(seq[chosen].tolist())),
        family_names[int(fam_of_name[seq[trial[0]]])], names[int(seq[winner])],
    )
