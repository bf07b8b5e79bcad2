"""Which steps are replayed, in which blocks, and where each step begins and ends.

Each replayed step is one block: the step itself and the step before it (its warm-up),
so that what a change does to the previous step reaches this one as it would in the
run; whatever was still queued when the warm-up began is kept as measured. When the steps
hold more nodes than NODE_BUDGET, an evenly spaced sample of them is replayed (the report
names it). A trace without steps is replayed whole, one block per process.

A step's ends are points on its anchor thread (the thread that launched most of its work):
a point between two calls moves with the host work around it, in proportion; a point
inside a call moves with the call's start.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.graph.build import Graph
from nsys_llm_explainer.graph.host import LAUNCH
from nsys_llm_explainer.graph.replay import Params, Times
from nsys_llm_explainer.graph.scan import Blocks
from nsys_llm_explainer.graph.tasks import GRAPH, KERNEL

NODE_BUDGET = 160_000
HOST, SPAN = "host", "span"  # anchor kinds


@frozen
class Plan:
    """The replayed steps: one block each."""

    blocks: Blocks
    step: np.ndarray  # per block: the step's id (the steps table's `step`)
    start: np.ndarray  # per block: the step's start, absolute
    end: np.ndarray  # and the end of its period: the next step's start (its end for the last)
    warm: np.ndarray  # per block: the warm-up step's id, -1 for none
    anchor: str  # HOST or SPAN
    total_steps: int
    sampled: bool
    pid_steps: dict[int, int]  # steps per process (replayed or not)


def plan(steps: pd.DataFrame | None, nodes_per_step: float, capture: list[tuple[int, int, int]]) -> Plan:
    """`steps`: columns step, pid, start_ns, end_ns (None: no steps; `capture` then gives
    each process's (pid, first, last) time, replayed whole)."""
    if steps is None or len(steps) == 0:
        pid = np.array([c[0] for c in capture], dtype=np.int64)
        s = np.array([c[1] for c in capture], dtype=np.int64)
        e = np.array([c[2] for c in capture], dtype=np.int64)
        return Plan(Blocks(pid, s, e + 1), np.arange(len(pid)), s, e, np.full(len(pid), -1), SPAN,
                    len(pid), False, {int(x): 1 for x in pid.tolist()})
    f = steps.sort_values(["pid", "start_ns"], kind="stable").reset_index(drop=True)
    pid = f["pid"].to_numpy(np.int64)
    start = f["start_ns"].to_numpy(np.int64)
    end = f["end_ns"].to_numpy(np.int64)
    ids = f["step"].to_numpy(np.int64)
    n = len(f)
    per_block = 2.0 * max(nodes_per_step, 1.0)
    keep = max(1, int(NODE_BUDGET // per_block))
    chosen = np.arange(n) if keep >= n else np.unique(np.linspace(0, n - 1, keep).round().astype(np.int64))
    has_prev = np.r_[False, pid[1:] == pid[:-1]]
    has_next = np.r_[pid[1:] == pid[:-1], False]
    prev = chosen - 1
    warm_ok = has_prev[chosen]
    bstart = np.where(warm_ok, start[np.maximum(prev, 0)], start[chosen])
    # A step's period on the host runs to the next step's start (its own end for the last
    # step of a process, or when the next one starts before it ends).
    nxt = np.minimum(chosen + 1, n - 1)
    period_end = np.where(has_next[chosen], np.maximum(start[nxt], end[chosen]), end[chosen])
    blocks = Blocks(pid[chosen], bstart, period_end + 1)
    warm = np.where(warm_ok, ids[np.maximum(prev, 0)], -1)
    per_pid = {int(x): int(c) for x, c in zip(*np.unique(pid, return_counts=True), strict=True)}
    return Plan(blocks, ids[chosen], start[chosen], period_end, warm, HOST, n, len(chosen) < n, per_pid)


@frozen
class Anchors:
    """Per block, where the measured step's ends lie in the graph."""

    chain: np.ndarray  # host chain of the anchor thread (-1: none)
    start_rel: np.ndarray
    end_rel: np.ndarray
    carried_wait: np.ndarray  # its last call in the step that waits for work queued before the capture (-1)


def anchors(g: Graph, pl: Plan) -> Anchors:
    """The anchor thread of each block: the chain with the most launch calls in its step;
    when no call of the step launches anything (a thread blocked through the whole step),
    the chain whose calls cover most of the step."""
    nb = len(pl.blocks)
    start_rel = pl.start - g.origin
    end_rel = pl.end - g.origin
    chain = np.full(nb, -1, np.int64)
    if g.n_host == 0:
        return Anchors(chain, start_rel, end_rel, np.full(nb, -1, np.int64))
    lo, hi = start_rel[g.h_block], end_rel[g.h_block]
    launches = ((g.h_kind == LAUNCH) & (g.h_start >= lo) & (g.h_start < hi)).astype(np.int64)
    covered = np.maximum(np.minimum(g.h_end, hi) - np.maximum(g.h_start, lo), 0)
    f = pd.DataFrame({"b": g.h_block, "c": g.h_chain, "n": launches, "t": covered})
    per = f.groupby(["b", "c"], sort=False, as_index=False)[["n", "t"]].sum()
    per = per[(per["n"] > 0) | (per["t"] > 0)]
    best = per.sort_values(["b", "n", "t", "c"], ascending=[True, False, False, True]).drop_duplicates("b")
    chain[best["b"].to_numpy(np.int64)] = best["c"].to_numpy(np.int64)
    return Anchors(chain, start_rel, end_rel, _carried_waits(g, chain, start_rel, end_rel))


def _carried_waits(g: Graph, chain: np.ndarray, start_rel: np.ndarray, end_rel: np.ndarray) -> np.ndarray:
    """Per block: the anchor thread's last call inside the step that waits for work queued
    before the capture (-1: none)."""
    out = np.full(len(chain), -1, np.int64)
    nodes = g.w_dst[g.d_before[g.w_src]] if len(g.w_src) else g.w_dst
    b = g.h_block[nodes]
    mine = (g.h_chain[nodes] == chain[b]) & (g.h_start[nodes] >= start_rel[b]) & (g.h_start[nodes] < end_rel[b])
    np.maximum.at(out, b[mine], nodes[mine])
    return out


@frozen
class StepTimes:
    """Per block: the step's host and device periods, the step time (the larger), and the
    interval the critical path covers (block-relative); last_task: the task whose end closes
    a device-bound step (-1 when the host period is the step's); own: the step's own window,
    the step time less the time its anchor thread waits at its start for work queued before
    the capture (which no change to the step moves): what a change's gain is measured on."""

    host: np.ndarray
    device: np.ndarray
    step: np.ndarray
    start: np.ndarray
    end: np.ndarray
    last_task: np.ndarray
    own: np.ndarray


def step_times(
    g: Graph, pl: Plan, an: Anchors, p: Params, t: Times | None, tail_scale: float = 1.0
) -> StepTimes:
    """Per block, the step's host period, its device period and the step time (the larger),
    replayed (t) or measured (t None).

    Host period: from the step's start to the next step's start on the anchor thread (to its
    own end for a process's last step). Device period: from the end of the previous step's
    kernels to the end of this step's (a step's kernels: those launched inside its period;
    all its tasks when it launched no kernel); from its first kernel's start when no step
    precedes it.
    A step takes as long as the slower of the two: a host that runs ahead of the device
    only queues work, and a device that waits for the host only idles."""
    nb = len(pl.blocks)
    if t is None:
        h_start, h_end, d_start, d_end = g.h_start, g.h_end, g.d_start, g.d_end
    else:
        h_start, h_end, d_start, d_end = t.h_start, t.h_end, t.d_start, t.d_end
    if pl.anchor == SPAN:
        end = np.zeros(nb, np.int64)
        if g.n_device:
            np.maximum.at(end, g.d_block, d_end)
        if g.n_host:
            np.maximum.at(end, g.h_block, h_end)
        return StepTimes(end, end, end, np.zeros(nb, np.int64), end, np.full(nb, -1, np.int64), end)
    if t is None:
        h0, h1 = an.start_rel, an.end_rel
    else:
        h0 = _map(g, an, an.start_rel, p, h_start, h_end, tail_scale)
        h1 = _map(g, an, an.end_rel, p, h_start, h_end, tail_scale)
    host = h1 - h0
    # The step's own window opens when the wait for work queued before the capture is over (a
    # fixed time: that work keeps its measured times), wherever a change moves the wait.
    lead = an.carried_wait
    own_start = np.where(lead >= 0, np.clip(g.h_end[np.maximum(lead, 0)], h0, h1), h0) if g.n_host else h0
    # Kernels mark where a step's device work ends (copies and memsets move with what-ifs
    # that take them off their stream); a block without kernels uses all its work.
    # Only tasks whose launch call is in the block have a known step.
    known = ~g.d_fixed & (g.d_launch >= 0)
    marks = known & ((g.d_kind == KERNEL) | (g.d_kind == GRAPH))
    with_kernels = np.zeros(nb, bool)
    with_kernels[g.d_block[marks]] = True
    marks |= known & ~with_kernels[g.d_block]
    own = marks & (g.d_issue >= an.start_rel[g.d_block]) & (g.d_issue < an.end_rel[g.d_block])
    warm = marks & (g.d_issue < an.start_rel[g.d_block])
    end = np.full(nb, np.iinfo(np.int64).min, np.int64)
    first = np.full(nb, np.iinfo(np.int64).max, np.int64)
    prev = np.full(nb, np.iinfo(np.int64).min, np.int64)
    np.maximum.at(end, g.d_block[own], d_end[own])
    np.minimum.at(first, g.d_block[own], d_start[own])
    np.maximum.at(prev, g.d_block[warm], d_end[warm])
    has = end > np.iinfo(np.int64).min
    base = np.where(prev > np.iinfo(np.int64).min, np.minimum(prev, end), first)
    device = np.where(has, end - base, 0)
    by_device = device > host
    last = np.full(nb, -1, np.int64)
    if by_device.any():
        sel = np.flatnonzero(own & by_device[g.d_block])
        order = np.lexsort((d_end[sel], g.d_block[sel]))
        tail = np.r_[g.d_block[sel][order][1:] != g.d_block[sel][order][:-1], True]
        last[g.d_block[sel][order][tail]] = sel[order][tail]
    return StepTimes(host, device, np.maximum(host, device), np.where(by_device, base, h0),
                     np.where(by_device, end, h1), last, np.maximum(h1 - own_start, device))


def _map(
    g: Graph, an: Anchors, when: np.ndarray, p: Params, h_start: np.ndarray, h_end: np.ndarray,
    tail_scale: float,
) -> np.ndarray:
    """Replayed time of the measured point `when` (per block) on its anchor chain."""
    out = when.copy()
    for b in np.flatnonzero(an.chain >= 0).tolist():
        lo = int(np.searchsorted(g.h_chain, an.chain[b], "left"))
        hi = int(np.searchsorted(g.h_chain, an.chain[b], "right"))
        out[b] = map_point(g.h_start[lo:hi], g.h_end[lo:hi], g.h_gap[lo:hi], p.h_gap[lo:hi],
                           h_start[lo:hi], h_end[lo:hi], int(when[b]), tail_scale)
    return out


def map_point(
    s: np.ndarray, e: np.ndarray, gap: np.ndarray, gap_new: np.ndarray,
    s_new: np.ndarray, e_new: np.ndarray, when: int, tail_scale: float,
) -> int:
    """The replayed time of measured time `when` on one chain (see the module docstring)."""
    k = int(np.searchsorted(s, when, "left"))  # first call starting at or after `when`
    if k < len(s) and (k == 0 or when >= e[k - 1]):
        before = int(s[k] - when)  # inside the host work that precedes call k
        scale = gap_new[k] / gap[k] if gap[k] > 0 else 0.0
        return int(s_new[k] - round(before * scale))
    if k == 0:
        return when
    j = k - 1
    if when < e[j]:  # inside call j
        return int(min(s_new[j] + (when - s[j]), e_new[j]))
    return int(e_new[j] + round((when - e[j]) * tail_scale))  # after the chain's last call
