"""Replay a graph: the earliest times every node can run, given its durations and edges.

Every chain (a host thread's calls, a stream's tasks) is evaluated in closed form
(scan.chain_ends); the edges between chains are brought to their fixed point by repeating
host chains, then device chains, until no time changes. Times only grow from one round to
the next, so the rounds needed are the number of times the longest path changes chain
through a host wait or a cross-stream edge, not the number of nodes.

The replay also records which edge set each node's time (its binding predecessor): the
critical path (path.py) follows those bindings back from a step's end.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from nsys_llm_explainer.graph.build import Graph
from nsys_llm_explainer.graph.scan import NEG, Chains, previous_in_chain

MAX_ROUNDS = 100_000
# What set a device task's start (Times.d_bind).
BY_STREAM, BY_LAUNCH, BY_CROSS, BY_BLOCK_START, BY_FIXED = 0, 1, 2, 3, 4


@dataclass
class Params:
    """The replayed durations and latencies (a what-if changes some of them)."""

    h_gap: np.ndarray
    h_own: np.ndarray
    h_ret: np.ndarray
    w_active: np.ndarray  # per host-wait edge
    d_dur: np.ndarray
    d_queue: np.ndarray
    d_lat: np.ndarray
    d_pin: np.ndarray

    @staticmethod
    def of(g: Graph) -> Params:
        return Params(
            g.h_gap.copy(), g.h_own.copy(), g.h_ret.copy(), np.ones(len(g.w_src), bool),
            g.d_dur.copy(), g.d_queue.copy(), g.d_lat.copy(), g.d_pin.copy(),
        )

    def copy(self) -> Params:
        return dataclasses.replace(self, **{f.name: getattr(self, f.name).copy() for f in dataclasses.fields(self)})


@dataclass
class Times:
    h_start: np.ndarray
    h_end: np.ndarray
    d_start: np.ndarray
    d_end: np.ndarray
    h_wait: np.ndarray  # per host node: the binding wait edge, -1: its own duration
    d_bind: np.ndarray  # per task: BY_* above
    d_cross: np.ndarray  # per task bound BY_CROSS: the cross edge
    rounds: int


def replay(g: Graph, p: Params) -> Times:
    n_h, n_d = g.n_host, g.n_device
    scan_first = g.d_first | g.d_fixed
    fixed_end = g.d_end
    has_launch = g.d_launch >= 0
    launch = np.maximum(g.d_launch, 0)
    ws, wd = g.w_src[p.w_active], g.w_dst[p.w_active]
    xs, xd = g.x_src, g.x_dst
    a_dev = np.where(g.d_fixed, 0, p.d_queue + p.d_pin + p.d_dur)
    init_dev = np.full(n_d, NEG, np.int64)
    init_host = np.zeros(n_h, np.int64)
    a_host = np.where(g.h_fixed, 0, p.h_gap + p.h_own)
    e_dev = np.full(n_d, NEG, np.int64)
    e_host = np.full(n_h, NEG, np.int64)
    host_chains, dev_chains = Chains(a_host, g.h_first), Chains(a_dev, scan_first)
    # What each round reads but never changes, and the nodes whose measured times are kept.
    ret_wd, pin_dur = p.h_ret[wd], p.d_pin + p.d_dur
    h_fixed, d_fixed = np.flatnonzero(g.h_fixed), np.flatnonzero(g.d_fixed)
    unlaunched = np.flatnonzero(~has_launch)
    rounds = 0
    while True:
        rounds += 1
        b_host = np.full(n_h, NEG, np.int64)
        if len(ws):
            np.maximum.at(b_host, wd, np.where(e_dev[ws] > NEG // 2, e_dev[ws] + ret_wd, NEG))
        b_host[h_fixed] = g.h_end[h_fixed]
        new_host = host_chains.ends(b_host, init_host)
        s_host = previous_in_chain(new_host, g.h_first, 0)
        s_host += p.h_gap
        s_host[h_fixed] = g.h_start[h_fixed]
        launch_t = _gather(s_host, launch)
        launch_t += p.d_lat
        launch_t[unlaunched] = 0
        inner = e_dev
        while True:
            b_dev = launch_t.copy()
            if len(xs):
                np.maximum.at(b_dev, xd, inner[xs])
            b_dev += pin_dur
            b_dev[d_fixed] = fixed_end[d_fixed]
            new_dev = dev_chains.ends(b_dev, init_dev)
            if len(xs) == 0 or np.array_equal(new_dev, inner):
                break
            inner = new_dev
            rounds += 1
        done = np.array_equal(new_host, e_host) and np.array_equal(new_dev, e_dev)
        e_host, e_dev = new_host, new_dev
        if done or rounds >= MAX_ROUNDS:
            break
    d_start = np.where(g.d_fixed, g.d_start, e_dev - p.d_dur)
    return Times(s_host, e_host, d_start, e_dev, *_bindings(g, p, s_host, e_host, e_dev, d_start, ws, wd),
                 rounds)


def _gather(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """values[index], zeros when there are no values (a block without host calls)."""
    return values[index] if len(values) else np.zeros(len(index), np.int64)


def _bindings(
    g: Graph, p: Params, s_host: np.ndarray, e_host: np.ndarray, e_dev: np.ndarray,
    d_start: np.ndarray, ws: np.ndarray, wd: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n_h, n_d = g.n_host, g.n_device
    # Host: the wait that set the call's end, when one did (ties go to the call itself).
    h_wait = np.full(n_h, -1, np.int64)
    edge_ids = np.flatnonzero(p.w_active)
    if len(edge_ids):
        val = e_dev[ws] + p.h_ret[wd]
        order = np.lexsort((val, wd))
        last = np.r_[wd[order][1:] != wd[order][:-1], True]
        best = order[last]
        own_end = s_host[wd[best]] + p.h_own[wd[best]]
        wins = (val[best] > own_end) & ~g.h_fixed[wd[best]]
        h_wait[wd[best][wins]] = edge_ids[best][wins]
    # Device: which constraint gave the start (stream order on ties).
    pred_end = previous_in_chain(e_dev, g.d_first, NEG)
    pred_end[g.d_first] = NEG
    by_stream = np.where(g.d_first, NEG, pred_end + p.d_queue)
    by_launch = np.where(g.d_launch >= 0, _gather(s_host, np.maximum(g.d_launch, 0)) + p.d_lat, 0)
    by_cross = np.full(n_d, NEG, np.int64)
    d_cross = np.full(n_d, -1, np.int64)
    if len(g.x_src):
        xv = e_dev[g.x_src]
        np.maximum.at(by_cross, g.x_dst, xv)
        order = np.lexsort((xv, g.x_dst))
        last = np.r_[g.x_dst[order][1:] != g.x_dst[order][:-1], True]
        d_cross[g.x_dst[order][last]] = order[last]
    d_bind = np.where(by_stream >= np.maximum(by_launch, by_cross), BY_STREAM,
                      np.where(by_cross > by_launch, BY_CROSS,
                               np.where(g.d_launch >= 0, BY_LAUNCH, BY_BLOCK_START)))
    d_bind = np.where(g.d_fixed, BY_FIXED, d_bind)
    return h_wait, d_bind, d_cross
