"""What-if changes: one modification of the graph's durations or edges each.

Built in (the `change` names report.json uses):
- host: no host work between calls (an infinitely fast host); the calls keep their time;
- launch: each run of consecutive launch calls (also memsets and event calls, which CUDA
  graphs capture) costs one launch: the other calls of the run and the host work between
  them take no time, as when the run is replayed as one CUDA graph;
- copies: host-device copies off the critical path (pinned, on a side stream, overlapped):
  they take no stream time and their calls neither wait for them nor stage data (the call
  costs what a launch call costs); small device-to-host copies the host waits for are
  read-backs, changed by `readbacks` instead;
- readbacks: the host no longer waits for read-backs (device-to-host copies of at most
  build.READBACK_MAX_BYTES): the copy call and a synchronize waiting for it return at once;
- syncs: synchronize calls that do not wait for a read-back no longer wait;
- communication: collectives (the "communication" kernel category, peer-to-peer copies)
  fully overlapped: they take no stream time.
Given (--what-if): "kernel:SELECTOR=Kx": the kernels of category SELECTOR (a category name
of the kernel category table), else every kernel whose name contains SELECTOR (case
insensitive), run K times faster.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from nsys_llm_explainer.errors import UsageError
from nsys_llm_explainer.graph.build import READBACK_MAX_BYTES, Graph
from nsys_llm_explainer.graph.host import COPY, EVENT, LAUNCH, MEMSET, SYNC
from nsys_llm_explainer.graph.replay import Params
from nsys_llm_explainer.graph.scan import segmented_cumsum
from nsys_llm_explainer.graph.tasks import COPY as TASK_COPY
from nsys_llm_explainer.graph.tasks import KERNEL

BUILTIN = ("host", "launch", "copies", "readbacks", "syncs", "communication")
_KERNEL = re.compile(r"^kernel:(?P<sel>[^=]+)=(?P<k>\d+(?:\.\d+)?)x$", re.IGNORECASE)
MAX_FACTOR = 1000.0
H2D, D2H, PTOP = 1, 2, 10
HOST_DEVICE = (1, 2, 3, 4)  # HtoD, DtoH, HtoA, AtoH
OFF_STREAM = -(1 << 38)  # a latency that never binds


@dataclass(frozen=True)
class Change:
    key: str  # what report.json calls it: a built-in name or the --what-if text as given
    selector: str = ""  # kernel changes: the category or name part
    factor: float = 1.0


def parse(text: str) -> Change:
    """A --what-if value; UsageError with the accepted form otherwise."""
    m = _KERNEL.match(text.strip())
    if not m:
        raise UsageError(
            f"--what-if {text!r}: expected kernel:CATEGORY_OR_NAME=Kx (for example kernel:gemm=2x)"
        )
    factor = float(m.group("k"))
    if not 1.0 <= factor <= MAX_FACTOR:
        raise UsageError(f"--what-if {text!r}: the factor must be between 1 and {MAX_FACTOR:g}")
    return Change(text.strip(), m.group("sel").strip(), factor)


@dataclass(frozen=True)
class TaskLabels:
    """What the changes need to know about each task of the graph."""

    category: list[str]  # per category code
    task_category: np.ndarray  # per task: category code, -1 for work that is not a kernel
    kernel_name: Callable[[np.ndarray], list[str]]  # name ids -> full names


def apply(change: Change, g: Graph, base: Params, labels: TaskLabels) -> tuple[Params, float, int]:
    """The parameters with the change applied, the scale of host work after a step's last
    call (0 when host work is removed), and how many nodes the change touched."""
    p = base.copy()
    key = change.key if change.key in BUILTIN else "kernel"
    return _APPLY[key](change, g, p, labels)


def _host(_c: Change, g: Graph, p: Params, _l: TaskLabels) -> tuple[Params, float, int]:
    touched = int((p.h_gap > 0).sum())
    p.h_gap[:] = 0
    return p, 0.0, touched


def launch_runs(g: Graph) -> np.ndarray:
    """Per host node: the position within its run of capturable calls (0: not in a run or
    the run's first call)."""
    capturable = np.isin(g.h_kind, (LAUNCH, MEMSET, EVENT))
    first = g.h_first | ~capturable | np.r_[True, ~capturable[:-1]]
    pos = segmented_cumsum(capturable.astype(np.int64), first) - 1
    return np.where(capturable, pos, 0)


def _launch(_c: Change, g: Graph, p: Params, _l: TaskLabels) -> tuple[Params, float, int]:
    later = launch_runs(g) > 0
    p.h_own[later] = 0
    p.h_gap[later] = 0
    return p, 1.0, int(later.sum())


def _typical_launch_call(g: Graph) -> np.ndarray:
    """Per block: the median duration of its launch calls (what an async call costs)."""
    out = np.zeros(len(g.origin), np.int64)
    launch = g.h_kind == LAUNCH
    if launch.any():
        med = pd.Series(g.h_own[launch]).groupby(g.h_block[launch]).median()
        out[med.index.to_numpy(np.int64)] = med.to_numpy().astype(np.int64)
    return out


def _copies(_c: Change, g: Graph, p: Params, _l: TaskLabels) -> tuple[Params, float, int]:
    readback = _readback_tasks(g)
    bulk = (g.d_kind == TASK_COPY) & np.isin(g.d_copy_kind, HOST_DEVICE) & ~readback & ~g.d_fixed
    _off_stream(p, bulk)
    calls = np.unique(g.d_launch[bulk & (g.d_launch >= 0)])
    if len(calls):
        stop = np.isin(g.w_dst, calls)
        p.w_active &= ~stop
        cheap = _typical_launch_call(g)[g.h_block[calls]]
        p.h_own[calls] = np.minimum(p.h_own[calls], cheap)
    return p, 1.0, int(bulk.sum())


def _off_stream(p: Params, sel: np.ndarray) -> None:
    """The selected tasks take no time and hold nothing up: no run time, no queue gap, and
    no launch latency that later work on their stream would inherit."""
    p.d_dur[sel] = 0
    p.d_queue[sel] = 0
    p.d_pin[sel] = 0
    p.d_lat[sel] = OFF_STREAM


def _readback_tasks(g: Graph) -> np.ndarray:
    return (g.d_kind == TASK_COPY) & np.isin(g.d_copy_kind, (D2H, 4)) & (g.d_bytes <= READBACK_MAX_BYTES)


def _readbacks(_c: Change, g: Graph, p: Params, _l: TaskLabels) -> tuple[Params, float, int]:
    rb = _readback_tasks(g)
    waits_on_rb = rb[g.w_src]
    nodes = np.unique(g.w_dst[waits_on_rb])
    stop = np.isin(g.w_dst, nodes)
    p.w_active &= ~stop
    return p, 1.0, int(len(nodes))


def _syncs(_c: Change, g: Graph, p: Params, _l: TaskLabels) -> tuple[Params, float, int]:
    rb = _readback_tasks(g)
    rb_nodes = np.unique(g.w_dst[rb[g.w_src]])
    sync_nodes = np.flatnonzero(g.h_kind == SYNC)
    nodes = np.setdiff1d(sync_nodes, rb_nodes)
    stop = np.isin(g.w_dst, nodes)
    p.w_active &= ~stop
    return p, 1.0, int(len(np.unique(g.w_dst[stop])))


def _communication(_c: Change, g: Graph, p: Params, labels: TaskLabels) -> tuple[Params, float, int]:
    comm = communication_tasks(g, labels) & ~g.d_fixed
    _off_stream(p, comm)
    return p, 1.0, int(comm.sum())


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


def _kernel(c: Change, g: Graph, p: Params, labels: TaskLabels) -> tuple[Params, float, int]:
    sel = kernel_selection(c, g, labels) & ~g.d_fixed
    p.d_dur[sel] = np.rint(p.d_dur[sel] / c.factor).astype(np.int64)
    return p, 1.0, int(sel.sum())


_APPLY: dict[str, Callable[[Change, Graph, Params, TaskLabels], tuple[Params, float, int]]] = {
    "host": _host,
    "launch": _launch,
    "copies": _copies,
    "readbacks": _readbacks,
    "syncs": _syncs,
    "communication": _communication,
    "kernel": _kernel,
}

__all__ = ["BUILTIN", "Change", "TaskLabels", "apply", "parse", "COPY"]
