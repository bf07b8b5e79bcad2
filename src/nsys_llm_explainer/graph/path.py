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
    out: list[tuple[int, int, int, int, int]] = []
    h_prev = np.where(g.h_first, -1, np.arange(g.n_host) - 1)
    d_prev = np.where(g.d_first, -1, np.arange(g.n_device) - 1)
    for b in (range(len(t0)) if blocks is None else blocks.tolist()):
        lo, hi = int(t0[b]), int(t1[b])
        if hi <= lo:
            continue
        if last_task[b] >= 0:
            state = ("task", int(last_task[b]), int(t.d_end[last_task[b]]))
        else:
            state = _end_state(g, t, b, int(chain[b]), hi, span)
        pieces: list[tuple[int, int, int, int]] = []
        _walk(g, p, t, h_prev, d_prev, state, lo, hi, pieces)
        out.extend((b, k, n, s, e) for k, n, s, e in pieces)
    if not out:
        z = np.empty(0, np.int64)
        return Path(z, z, z, z, z)
    arr = np.array(out, dtype=np.int64)
    return Path(arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3], arr[:, 4])


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


def _walk(
    g: Graph, p: Params, t: Times, h_prev: np.ndarray, d_prev: np.ndarray,
    state: tuple[str, int, int], lo: int, hi: int, pieces: list[tuple[int, int, int, int]],
) -> None:
    where, node, now = state

    def add(kind: int, n: int, s: int, e: int) -> None:
        s, e = max(s, lo), min(e, hi)
        if e > s:
            pieces.append((kind, n, s, e))

    for _ in range(MAX_PIECES):
        if now <= lo or where == "none":
            return
        if where == "tail":  # host work after the anchor thread's last call
            add(HOST_WORK, node, int(t.h_end[node]), now)
            where, now = "call", int(t.h_end[node])
        elif where == "call_part":  # inside a call: its start set the time
            add(CALL, node, int(t.h_start[node]), now)
            where, now = "gap", int(t.h_start[node])
        elif where == "gap":
            prev = int(h_prev[node])
            begin = int(t.h_end[prev]) if prev >= 0 else 0
            add(HOST_WORK, node, begin, now)
            if prev < 0:
                return
            where, node, now = "call", prev, begin
        elif where == "call":
            w = int(t.h_wait[node])
            if w >= 0:
                src = int(g.w_src[w])
                add(RETURN, node, int(t.d_end[src]), now)
                where, node, now = "task", src, min(now, int(t.d_end[src]))
            else:
                add(CALL, node, int(t.h_start[node]), now)
                where, now = "gap", int(t.h_start[node])
        else:  # task
            s = int(t.d_start[node])
            add(TASK, node, s, now)
            now = s
            bind = int(t.d_bind[node])
            pin = int(p.d_pin[node])
            if bind == BY_FIXED:
                add(CARRIED, node, lo, now)
                return
            if pin > 0:
                add(UNEXPLAINED, node, now - pin, now)
                now -= pin
            # A predecessor that ends after this task began (work overlapping on its stream)
            # is entered where the walk is, not at its end.
            if bind == BY_STREAM:
                prev = int(d_prev[node])
                add(QUEUE, node, int(t.d_end[prev]), now)
                where, node, now = "task", prev, min(now, int(t.d_end[prev]))
            elif bind == BY_CROSS:
                src = int(g.x_src[t.d_cross[node]])
                add(QUEUE, node, int(t.d_end[src]), now)
                where, node, now = "task", src, min(now, int(t.d_end[src]))
            elif bind == BY_LAUNCH:
                call = int(g.d_launch[node])
                add(LATENCY, node, int(t.h_start[call]), now)
                where, node, now = "gap", call, int(t.h_start[call])
            else:  # BY_BLOCK_START: no launch call recorded, its measured start kept
                add(UNLAUNCHED, node, lo, now)
                return


def call_is(g: Graph, nodes: np.ndarray, kind: int) -> np.ndarray:
    return g.h_kind[nodes] == kind


__all__ = ["Path", "critical_paths", "PIECE_NAMES", "LAUNCH", "SYNC", "BY_BLOCK_START"]
