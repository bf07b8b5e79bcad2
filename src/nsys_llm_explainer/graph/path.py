"""The critical path of a replayed step: the chain of host and device intervals that sets
its length, followed back from the step's end through each node's binding predecessor
(replay.Times) to the step's start.

Each piece of the path is one of:
- a task's run time (a kernel, a copy, a memset, a whole CUDA graph);
- the queue gap between two tasks of one stream, a task's launch latency, or the part of a
  task's delay no recorded edge explains ("unexplained wait");
- a host call's own time (a launch call, a synchronize call, any other runtime call), or
  the time a blocking call took to return after the work it waited for ended;
- host work between two calls of the thread;
- work queued before the block, whose measured times were kept;
- the time before a task with no recorded launch call started (its measured start is kept).
The pieces tile the step exactly: their lengths add up to the replayed step time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsys_llm_explainer.graph.build import Graph
from nsys_llm_explainer.graph.host import LAUNCH, SYNC
from nsys_llm_explainer.graph.replay import (
    BY_BLOCK_START,
    BY_CROSS,
    BY_FIXED,
    BY_LAUNCH,
    BY_STREAM,
    Params,
    Times,
)

# Piece kinds
TASK, QUEUE, LATENCY, UNEXPLAINED, CALL, RETURN, HOST_WORK, CARRIED, UNLAUNCHED = range(9)
PIECE_NAMES = ("task", "queue", "latency", "unexplained", "call", "return", "host_work", "carried", "unlaunched")
MAX_PIECES = 1_000_000  # per step: a path cannot be longer than its nodes; this guards loops
# The walk reads single values: up to this many nodes it reads them from Python lists, made
# once (a numpy scalar read costs several times a list's); above it, where a few steps are
# followed through many nodes, from the arrays themselves.
LIST_NODES = 200_000  # lists of 12 arrays: about 90 MB at this size
# ... and only when the blocks followed hold at least a quarter of the nodes: one step of many
# (what a what-if's bound follows) reads fewer values than the lists would copy.
LIST_SHARE = 4


@dataclass(frozen=True)
class Path:
    """Pieces of the critical paths of all blocks (one path per block)."""

    block: np.ndarray
    kind: np.ndarray  # piece kind (above)
    node: np.ndarray  # host node (CALL, RETURN, HOST_WORK) or task (others), -1: none
    start: np.ndarray  # replayed, block-relative, clipped to the step
    end: np.ndarray


def critical_paths(
    g: Graph, p: Params, t: Times, chain: np.ndarray, t0: np.ndarray, t1: np.ndarray,
    last_task: np.ndarray, span: bool, blocks: np.ndarray | None = None,
) -> Path:
    """Follow each block's path back from its end t1 to its start t0 (replayed times).

    chain: per block the anchor thread's host chain (host anchors); last_task: the task
    whose end closes a device-bound step (-1: the step ends on the anchor thread); span: the
    step ends with the block's last node instead (no anchor thread); blocks: the blocks to
    follow (all by default)."""
    out: list[int] = []  # kind, node, start, end of each piece, flat
    sizes: list[tuple[int, int]] = []  # (block, pieces)
    nodes = g.n_host + g.n_device
    followed = nodes if blocks is None else \
        int(np.isin(g.h_block, blocks).sum()) + int(np.isin(g.d_block, blocks).sum())
    v = _Values(g, p, t, nodes <= LIST_NODES and followed * LIST_SHARE >= nodes)
    for b in (range(len(t0)) if blocks is None else blocks.tolist()):
        lo, hi = int(t0[b]), int(t1[b])
        if hi <= lo:
            continue
        if last_task[b] >= 0:
            state = ("task", int(last_task[b]), int(t.d_end[last_task[b]]))
        else:
            state = _end_state(g, t, b, int(chain[b]), hi, span)
        before = len(out)
        _walk(v, state, lo, hi, out)
        sizes.append((b, (len(out) - before) // 4))
    if not out:
        z = np.empty(0, np.int64)
        return Path(z, z, z, z, z)
    arr = np.array(out, dtype=np.int64).reshape(-1, 4)
    block = np.repeat(np.array([b for b, _ in sizes], np.int64), [n for _, n in sizes])
    return Path(block, arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3])


def _end_state(g: Graph, t: Times, b: int, chain: int, when: int, span: bool) -> tuple[str, int, int]:
    """Where the walk starts: ('gap', node, time), ('call', node, time) or ('task', node, time)."""
    if span or chain < 0:
        hs = np.flatnonzero(g.h_block == b)
        ds = np.flatnonzero(g.d_block == b)
        best_h = hs[np.argmax(t.h_end[hs])] if len(hs) else -1
        best_d = ds[np.argmax(t.d_end[ds])] if len(ds) else -1
        if best_d >= 0 and (best_h < 0 or t.d_end[best_d] >= t.h_end[best_h]):
            return ("task", int(best_d), int(t.d_end[best_d]))
        if best_h >= 0:
            return ("call", int(best_h), int(t.h_end[best_h]))
        return ("none", -1, when)
    lo = int(np.searchsorted(g.h_chain, chain, "left"))
    hi = int(np.searchsorted(g.h_chain, chain, "right"))
    k = lo + int(np.searchsorted(t.h_start[lo:hi], when, "left"))
    # the last node that has begun by `when`
    j = k - 1 if k > lo else -1
    if k < hi and t.h_start[k] == when:
        return ("gap", k, when)
    if j >= lo and when == t.h_end[j]:
        return ("call", j, when)
    if j >= lo and when < t.h_end[j]:
        return ("call_part", j, when)
    if j >= lo:
        return ("tail", j, when)
    return ("gap", lo, when) if lo < hi else ("none", -1, when)


class _Values:
    """The per-node values the walk reads, as lists where the graph is small enough."""

    def __init__(self, g: Graph, p: Params, t: Times, lists: bool) -> None:
        h_prev = np.where(g.h_first, -1, np.arange(g.n_host) - 1)
        d_prev = np.where(g.d_first, -1, np.arange(g.n_device) - 1)
        # tolist() for reading; the arrays have the same values
        as_read = (lambda a: a.tolist()) if lists else (lambda a: a)
        self.h_prev, self.d_prev = as_read(h_prev), as_read(d_prev)
        self.h_start, self.h_end, self.h_wait = as_read(t.h_start), as_read(t.h_end), as_read(t.h_wait)
        self.d_start, self.d_end = as_read(t.d_start), as_read(t.d_end)
        self.d_bind, self.d_cross = as_read(t.d_bind), as_read(t.d_cross)
        self.d_pin, self.d_launch, self.d_issue = as_read(p.d_pin), as_read(g.d_launch), as_read(g.d_issue)
        self.w_src, self.x_src = as_read(g.w_src), as_read(g.x_src)


def _walk(v: _Values, state: tuple[str, int, int], lo: int, hi: int, pieces: list[int]) -> None:
    """Append the pieces of one path to `pieces`, four values each: kind, node, start, end."""
    where, node, now = state
    extend = pieces.extend

    def add(kind: int, n: int, s: int, e: int) -> None:
        if s < lo:
            s = lo
        if e > hi:
            e = hi
        if e > s:
            extend((kind, n, s, e))

    for _ in range(MAX_PIECES):
        if now <= lo or where == "none":
            return
        if where == "tail":  # host work after the anchor thread's last call
            add(HOST_WORK, node, int(v.h_end[node]), now)
            where, now = "call", int(v.h_end[node])
        elif where == "call_part":  # inside a call: its start set the time
            add(CALL, node, int(v.h_start[node]), now)
            where, now = "gap", int(v.h_start[node])
        elif where == "gap":
            prev = int(v.h_prev[node])
            begin = int(v.h_end[prev]) if prev >= 0 else 0
            add(HOST_WORK, node, begin, now)
            if prev < 0:
                return
            where, node, now = "call", prev, begin
        elif where == "call":
            w = int(v.h_wait[node])
            if w >= 0:
                src = int(v.w_src[w])
                add(RETURN, node, int(v.d_end[src]), now)
                where, node, now = "task", src, min(now, int(v.d_end[src]))
            else:
                add(CALL, node, int(v.h_start[node]), now)
                where, now = "gap", int(v.h_start[node])
        else:  # task
            s = int(v.d_start[node])
            add(TASK, node, s, now)
            now = s
            bind = int(v.d_bind[node])
            pin = int(v.d_pin[node])
            if bind == BY_FIXED:
                add(CARRIED, node, lo, now)
                return
            if pin > 0:
                add(UNEXPLAINED, node, now - pin, now)
                now -= pin
            # A predecessor that ends after this task began (work overlapping on its stream)
            # is entered where the walk is, not at its end.
            if bind == BY_STREAM:
                prev = int(v.d_prev[node])
                add(QUEUE, node, int(v.d_end[prev]), now)
                where, node, now = "task", prev, min(now, int(v.d_end[prev]))
            elif bind == BY_CROSS:
                src = int(v.x_src[v.d_cross[node]])
                add(QUEUE, node, int(v.d_end[src]), now)
                where, node, now = "task", src, min(now, int(v.d_end[src]))
            elif bind == BY_LAUNCH:
                call = int(v.d_launch[node])
                add(LATENCY, node, int(v.h_start[call]), now)
                where, node, now = "gap", call, int(v.h_start[call])
            else:  # BY_BLOCK_START: launched before the step, or no launch call recorded
                add(CARRIED if v.d_issue[node] < 0 else UNLAUNCHED, node, lo, now)
                return


def call_is(g: Graph, nodes: np.ndarray, kind: int) -> np.ndarray:
    return g.h_kind[nodes] == kind


__all__ = ["Path", "critical_paths", "PIECE_NAMES", "LAUNCH", "SYNC", "BY_BLOCK_START"]
