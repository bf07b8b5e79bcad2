"""What-if changes: one modification of the graph's durations or edges each, named by the
row id report.json uses. Each says exactly what it removes; everything else keeps its
measured (or, for waits on the device, recomputed) time.

Built in:
- host: the host's work between CUDA calls is removed; each call keeps its own cost: its
  duration and what issuing it costs, the process's typical gap between two calls (the
  DISPATCH_PCT-th percentile, at most DISPATCH_MAX_NS), to which every longer gap shrinks;
- launch: CUDA graphs: each run of consecutive launch calls (also memsets and event calls,
  which CUDA graphs capture) becomes one graph launch: the run's other calls and the host
  work between them take no time; a step that launches without interruption is one graph;
- host+launch: both;
- copies: host-device copies off the critical path (pinned, on a side stream, overlapped):
  they take no stream time and their calls neither wait for them nor stage data (the call
  costs what a launch call costs); small device-to-host copies the host waits for are
  read-backs, changed by `readbacks` instead;
- readbacks: the host no longer waits for read-backs (device-to-host copies of at most
  build.READBACK_MAX_BYTES): the copy call and a synchronize waiting for it return at once;
- syncs: synchronize calls that do not wait for a read-back no longer wait;
- communication: collectives (the "communication" kernel category, peer-to-peer copies)
  fully overlapped: they take no stream time.
Automatic, where the capture holds what they change:
- fusion: each run of short memory-bound kernels (FUSABLE categories, at most FUSE_MAX_NS)
  launched one after another on one stream, with at most FUSE_MAX_GAP_NS of host work between
  their launch calls, is one fused kernel: the run's other launch calls and the host work
  and stream gaps between its kernels are removed, and the fused kernel reads and writes the
  run's memory once: it takes as long as the run's longest kernel (which moves the largest
  tensor the run touches), not the sum;
- slow_rank: where one capture holds several ranks whose collectives pair up, the rank the
  others wait for made as fast as they are: its kernels take the other ranks' median time
  for the same kernel, and each collective no longer waits for it (its wait on the other
  ranks shrinks by the time the slow rank arrived after the last of the others).
Given (--what-if): "kernel:SELECTOR=Kx": the kernels of category SELECTOR (a category name
of the kernel category table), else every kernel whose name contains SELECTOR (case
insensitive), run K times faster. Any of these joined with "+" is one scenario: the
changes applied together ("host+kernel:gemm=2x").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import field

import numpy as np

from nsys_llm_explainer.analysis.groups import group_codes
from nsys_llm_explainer.analysis.stats import sort_within_groups
from nsys_llm_explainer.errors import UsageError
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.graph.build import READBACK_MAX_BYTES, WAIT_QUEUE, Graph
from nsys_llm_explainer.graph.host import COPY, EVENT, LAUNCH, MEMSET, SYNC
from nsys_llm_explainer.graph.replay import Params
from nsys_llm_explainer.graph.scan import segmented_cumsum
from nsys_llm_explainer.graph.tasks import COPY as TASK_COPY
from nsys_llm_explainer.graph.tasks import KERNEL

SINGLE = ("host", "launch", "copies", "readbacks", "syncs", "communication")
BUILTIN = ("host", "launch", "host+launch", "copies", "readbacks", "syncs", "communication")
AUTOMATIC = ("fusion", "slow_rank")
NAMED = (*SINGLE, *AUTOMATIC)
WORDS = {
    "host": "No host work between CUDA calls (each call keeps its own cost and typical dispatch gap)",
    "launch": "Launches as CUDA graphs (one graph launch per run of launches)",
    "host+launch": "No host work between calls, and launches as CUDA graphs",
    "copies": "Host-device copies taking no stream or host time (overlapped or avoided)",
    "readbacks": "Read-backs made asynchronous",
    "syncs": "Synchronizations that guard no read-back removed",
    "communication": "Communication fully overlapped",
    "fusion": "Runs of short memory-bound kernels fused (one launch, memory traffic counted once)",
    "slow_rank": "The slow rank as fast as the others",
}
_KERNEL = re.compile(r"^kernel:(?P<sel>[^=]+)=(?P<k>\d+(?:\.\d+)?)x$", re.IGNORECASE)
_JOIN = re.compile(r"\+(?=(?:" + "|".join(NAMED) + r")(?:\+|$)|kernel:)")
MAX_FACTOR = 1000.0
H2D, D2H, PTOP = 1, 2, 10
HOST_DEVICE = (1, 2, 3, 4)  # HtoD, DtoH, HtoA, AtoH
OFF_STREAM = -(1 << 38)  # a latency that never binds
# The short memory-bound ops fusion applies to (NLE302's small ops), and its limits.
FUSABLE = ("activation_elementwise", "memory", "cast_copy", "layout", "reduction", "norm")
FUSE_MAX_NS = 30_000
FUSE_MAX_GAP_NS = 50_000
DISPATCH_MAX_NS = 10_000  # the most host time per call that counts as issuing it (host: kept)
DISPATCH_PCT = 90  # a process's typical gap between calls: this percentile of them


@frozen
class Change:
    key: str  # what report.json calls it: a built-in name or the --what-if text as given
    selector: str = ""  # kernel changes: the category or name part
    factor: float = 1.0
    parts: tuple[Change, ...] = ()  # a combined scenario: its changes, applied together

    def steps(self) -> tuple[Change, ...]:
        """The single changes this one applies, in order."""
        if self.parts:
            return self.parts
        if self.key == "host+launch":
            return (Change("host"), Change("launch"))
        return (self,)

    def words(self) -> str:
        """The change in words (WORDS; a kernel change as its text)."""
        if self.key in WORDS:
            return WORDS[self.key]
        if self.parts:
            return "; ".join(p.words() for p in self.parts)
        return f"kernels matching {self.selector} {self.factor:g}x faster"


def _single(text: str, whole: str) -> Change:
    if text in NAMED:
        return Change(text)
    m = _KERNEL.match(text)
    if not m:
        raise UsageError(
            f"--what-if {whole!r}: expected kernel:CATEGORY_OR_NAME=Kx (for example kernel:gemm=2x), one of "
            f"{', '.join(NAMED)}, or several joined with + (for example host+kernel:gemm=2x)"
        )
    factor = float(m.group("k"))
    if not 1.0 <= factor <= MAX_FACTOR:
        raise UsageError(f"--what-if {whole!r}: the factor must be between 1 and {MAX_FACTOR:g}")
    return Change(text, m.group("sel").strip(), factor)


def parse(text: str) -> Change:
    """A --what-if value; UsageError with the accepted forms otherwise."""
    whole = text.strip()
    pieces = [p.strip() for p in _JOIN.split(whole)]
    if len(pieces) == 1:
        return _single(pieces[0], whole)
    return Change(whole, parts=tuple(_single(p, whole) for p in pieces))


@frozen
class TaskLabels:
    """What the changes need to know about each task of the graph."""

    category: list[str]  # per category code
    task_category: np.ndarray  # per task: category code, -1 for work that is not a kernel
    kernel_name: Callable[[np.ndarray], list[str]]  # name ids -> full names
    # slow_rank: per task, how much shorter its collective's wait on the other ranks gets when
    # the slow rank arrives with them (0 elsewhere), and the slow rank's pid (-1: none)
    peer_saving: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    slow_pid: int = -1


def apply(change: Change, g: Graph, base: Params, labels: TaskLabels) -> tuple[Params, float, int]:
    """The parameters with the change applied, the scale of host work after a step's last
    call (0 when host work is removed), and how many nodes the change touched."""
    p = base.copy()
    tail, touched = 1.0, 0
    for one in change.steps():
        key = one.key if one.key in _APPLY else "kernel"
        scale, n = _APPLY[key](one, g, p, labels)
        tail, touched = min(tail, scale), touched + n
    return p, tail, touched


def typical_gap(g: Graph) -> np.ndarray:
    """Per host node: what issuing a call costs its process besides the call itself: the
    DISPATCH_PCT-th percentile of the gaps before its calls (the bulk of them, with their
    jitter), at most DISPATCH_MAX_NS (more is host work)."""
    out = np.zeros(g.n_host, np.int64)
    live = ~g.h_fixed & ~g.h_first
    if live.any():
        codes, (pids,) = group_codes(g.block_pid[g.h_block])
        typ = sort_within_groups(g.h_gap[live], codes[live], len(pids)).quantile(DISPATCH_PCT / 100)
        out = np.minimum(np.nan_to_num(typ, nan=0.0).astype(np.int64)[codes], DISPATCH_MAX_NS)
    return out


def _host(_c: Change, g: Graph, p: Params, _l: TaskLabels) -> tuple[float, int]:
    keep = np.minimum(p.h_gap, typical_gap(g))
    touched = int((p.h_gap > keep).sum())
    p.h_gap[:] = keep
    return 0.0, touched


def launch_runs(g: Graph) -> np.ndarray:
    """Per host node: the position within its run of capturable calls (0: not in a run or
    the run's first call)."""
    capturable = np.isin(g.h_kind, (LAUNCH, MEMSET, EVENT))
    first = g.h_first | ~capturable | np.r_[True, ~capturable[:-1]]
    pos = segmented_cumsum(capturable.astype(np.int64), first) - 1
    return np.where(capturable, pos, 0)


def _launch(_c: Change, g: Graph, p: Params, _l: TaskLabels) -> tuple[float, int]:
    later = launch_runs(g) > 0
    p.h_own[later] = 0
    p.h_gap[later] = 0
    return 1.0, int(later.sum())


def _typical_launch_call(g: Graph) -> np.ndarray:
    """Per block: the median duration of its launch calls (what an async call costs)."""
    out = np.zeros(len(g.origin), np.int64)
    launch = g.h_kind == LAUNCH
    if launch.any():
        med = sort_within_groups(g.h_own[launch], g.h_block[launch], len(out)).median()
        has = ~np.isnan(med)
        out[has] = med[has].astype(np.int64)
    return out


def _copies(_c: Change, g: Graph, p: Params, _l: TaskLabels) -> tuple[float, int]:
    readback = _readback_tasks(g)
    bulk = (g.d_kind == TASK_COPY) & np.isin(g.d_copy_kind, HOST_DEVICE) & ~readback & ~g.d_fixed
    _off_stream(p, bulk)
    calls = np.unique(g.d_launch[bulk & (g.d_launch >= 0)])
    if len(calls):
        stop = np.isin(g.w_dst, calls) & (g.w_kind != WAIT_QUEUE)
        p.w_active &= ~stop
        cheap = _typical_launch_call(g)[g.h_block[calls]]
        p.h_own[calls] = np.minimum(p.h_own[calls], cheap)
    return 1.0, int(bulk.sum())


def _off_stream(p: Params, sel: np.ndarray) -> None:
    """The selected tasks take no time and hold nothing up: no run time, no queue gap, and
    no launch latency that later work on their stream would inherit."""
    p.d_dur[sel] = 0
    p.d_queue[sel] = 0
    p.d_pin[sel] = 0
    p.d_lat[sel] = OFF_STREAM


def _readback_tasks(g: Graph) -> np.ndarray:
    return (g.d_kind == TASK_COPY) & np.isin(g.d_copy_kind, (D2H, 4)) & (g.d_bytes <= READBACK_MAX_BYTES)


def _readbacks(_c: Change, g: Graph, p: Params, _l: TaskLabels) -> tuple[float, int]:
    rb = _readback_tasks(g)
    waits_on_rb = rb[g.w_src] & (g.w_kind != WAIT_QUEUE)
    nodes = np.unique(g.w_dst[waits_on_rb])
    stop = np.isin(g.w_dst, nodes) & (g.w_kind != WAIT_QUEUE)
    p.w_active &= ~stop
    return 1.0, int(len(nodes))


def _syncs(_c: Change, g: Graph, p: Params, _l: TaskLabels) -> tuple[float, int]:
    rb = _readback_tasks(g)
    rb_nodes = np.unique(g.w_dst[rb[g.w_src]])
    sync_nodes = np.flatnonzero(g.h_kind == SYNC)
    nodes = np.setdiff1d(sync_nodes, rb_nodes)
    stop = np.isin(g.w_dst, nodes)
    p.w_active &= ~stop
    return 1.0, int(len(np.unique(g.w_dst[stop])))


def _communication(_c: Change, g: Graph, p: Params, labels: TaskLabels) -> tuple[float, int]:
    comm = communication_tasks(g, labels) & ~g.d_fixed
    _off_stream(p, comm)
    return 1.0, int(comm.sum())


def communication_tasks(g: Graph, labels: TaskLabels) -> np.ndarray:
    code = labels.category.index("communication") if "communication" in labels.category else -2
    peer = (g.d_kind == TASK_COPY) & (g.d_copy_kind == PTOP)
    return (labels.task_category == code) | peer


def kernel_selection(change: Change, g: Graph, labels: TaskLabels) -> np.ndarray:
    """The tasks a kernel change speeds up: a category's kernels, else kernels by name."""
    sel = change.selector.lower()
    if sel in labels.category:
        return labels.task_category == labels.category.index(sel)
    kernels = np.flatnonzero(g.d_kind == KERNEL)
    ids = np.unique(g.d_name[kernels])
    names = labels.kernel_name(ids)
    hit_ids = ids[[sel in n.lower() for n in names]] if len(ids) else ids
    return (g.d_kind == KERNEL) & np.isin(g.d_name, hit_ids)


def _kernel(c: Change, g: Graph, p: Params, labels: TaskLabels) -> tuple[float, int]:
    sel = kernel_selection(c, g, labels) & ~g.d_fixed
    p.d_dur[sel] = np.rint(p.d_dur[sel] / c.factor).astype(np.int64)
    return 1.0, int(sel.sum())


def fusion_runs(g: Graph, labels: TaskLabels) -> np.ndarray:
    """Per task: its run's first task when it belongs to a fusable run of two or more
    kernels (see the module docstring), -1 otherwise."""
    codes = [labels.category.index(c) for c in FUSABLE if c in labels.category]
    fusable = (g.d_kind == KERNEL) & np.isin(labels.task_category, codes) & ~g.d_fixed & \
        (g.d_dur <= FUSE_MAX_NS) & (g.d_launch >= 0)
    n = g.n_device
    if n < 2 or not fusable.any():
        return np.full(n, -1, np.int64)
    call = g.d_launch
    nxt_call = call[1:]
    linked = fusable[1:] & fusable[:-1] & ~g.d_first[1:] & (nxt_call == call[:-1] + 1)
    linked &= ~g.h_first[np.maximum(nxt_call, 0)] & (g.h_gap[np.maximum(nxt_call, 0)] <= FUSE_MAX_GAP_NS)
    link = np.r_[False, linked]  # task i joins the run of task i-1
    head = np.flatnonzero(~link)
    first = head[np.searchsorted(head, np.arange(n), "right") - 1]
    in_run = link | np.r_[linked, False]
    return np.where(in_run, first, -1)


def _fusion(_c: Change, g: Graph, p: Params, labels: TaskLabels) -> tuple[float, int]:
    run = fusion_runs(g, labels)
    members = np.flatnonzero(run >= 0)
    if len(members) == 0:
        return 1.0, 0
    heads = run[members]
    longest = np.zeros(g.n_device, np.int64)
    np.maximum.at(longest, heads, p.d_dur[members])
    gone = members[members != heads]
    p.d_dur[np.unique(heads)] = longest[np.unique(heads)]
    _off_stream(p, np.isin(np.arange(g.n_device), gone))
    calls = g.d_launch[gone]
    p.h_own[calls] = 0
    p.h_gap[calls] = 0
    p.w_active &= ~np.isin(g.w_dst, calls)
    return 1.0, int(len(members))


def _slow_rank(_c: Change, g: Graph, p: Params, labels: TaskLabels) -> tuple[float, int]:
    if labels.slow_pid < 0 or len(labels.peer_saving) != g.n_device:
        return 1.0, 0
    comm = communication_tasks(g, labels)
    pid = g.block_pid[g.d_block]
    saving = np.where(comm & ~g.d_fixed, labels.peer_saving, 0)
    p.d_dur[:] = np.maximum(p.d_dur - saving, 0)
    touched = int((saving > 0).sum())
    kernels = (g.d_kind == KERNEL) & ~comm & ~g.d_fixed
    slow = kernels & (pid == labels.slow_pid)
    others = kernels & (pid != labels.slow_pid)
    if slow.any() and others.any():
        codes, (names,) = group_codes(g.d_name)
        typical = sort_within_groups(p.d_dur[others], codes[others], len(names)).median()
        fast = typical[codes[slow]]
        known = ~np.isnan(fast)
        idx = np.flatnonzero(slow)[known]
        new = np.minimum(p.d_dur[idx], np.rint(fast[known]).astype(np.int64))
        touched += int((new < p.d_dur[idx]).sum())
        p.d_dur[idx] = new
    return 1.0, touched


_APPLY: dict[str, Callable[[Change, Graph, Params, TaskLabels], tuple[float, int]]] = {
    "host": _host,
    "launch": _launch,
    "copies": _copies,
    "readbacks": _readbacks,
    "syncs": _syncs,
    "communication": _communication,
    "fusion": _fusion,
    "slow_rank": _slow_rank,
    "kernel": _kernel,
}

__all__ = ["AUTOMATIC", "BUILTIN", "Change", "TaskLabels", "WORDS", "apply", "parse", "COPY"]
