"""Simulate one process's launch thread and its GPU, step by step.

A step is a fixed list of host events (catalog.Ev). Host times come from cumulative sums of
jittered gaps and call durations; device ops on the main stream run in submission order, so
their end times follow the recurrence e[i] = max(ready[i] + d[i], e[i-1] + gap[i] + d[i]),
which is computed in closed form with a running maximum (no loop over ops). The blocking
stream synchronize at the end of each step couples host and device: the host resumes only
when the GPU has drained, so steps are simulated one at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from benchmarks import catalog as cat
from benchmarks.catalog import Ev

MAIN_STREAM = 7
SIDE_STREAM = 13
LAUNCH_LATENCY_NS = 2_500  # call start -> earliest kernel start
GRAPH_LATENCY_NS = 6_000
KERNEL_GAP_NS = 1_200  # minimum gap between consecutive ops on one stream (eager)
GRAPH_NODE_GAP_NS = 600
SYNC_WAKE_NS = 2_000
JITTER = 0.15
KERNEL_JITTER = 0.12


@dataclass(frozen=True)
class Template:
    """One step's host events as arrays, plus its device ops (kernels and copies)."""

    prefill: bool
    ev: np.ndarray  # per event: Ev code
    sync_at: int  # index of the SYNC event
    pushes: np.ndarray  # event index of each range push, paired with `pops`
    pops: np.ndarray
    range_name: list[str]  # per pair
    op_event: np.ndarray  # per device op: the host event that issued it
    op_kernel: list[str]  # per op: kernel name, or "" for a copy
    op_stream: np.ndarray
    op_node: np.ndarray  # graph node index, or -1 for eager work
    op_inside: np.ndarray  # issued inside an NVTX range
    api_events: np.ndarray  # events that are CUDA API calls, in order (one correlation id each)
    base_ns: np.ndarray = field(repr=False)  # per op: nominal duration
    op_attn: np.ndarray = field(repr=False)  # per op: decode attention (scales with context)


def step_events(
    layers: int, tp: bool, prefill: bool, graph: bool, depth: int
) -> list[tuple[Ev, object]]:
    """The launch thread's events for one step. depth: 1 step, 2 +layer, 3 +op ranges."""
    out: list[tuple[Ev, object]] = []
    body: list[str] = [cat.EMBED]
    attn = cat.ATTN_PREFILL if prefill else cat.ATTN_DECODE
    for i in range(layers):
        a = [cat.RMS if i == 0 else cat.ADD_RMS, cat.QKV, cat.ROPE, cat.CACHE, attn, cat.OPROJ]
        m = [cat.ADD_RMS, cat.GATE_UP, cat.SILU, cat.QKV]
        if tp:
            a.append(cat.ALLREDUCE)
            m.append(cat.ALLREDUCE)
        if graph:
            body += a + m
            continue
        layer: list[tuple[Ev, object]] = []
        for op, ks in (("attention", a), ("mlp", m)):
            seq = [(Ev.LAUNCH, k) for k in ks]
            layer += [(Ev.PUSH, op), *seq, (Ev.POP, None)] if depth >= 3 else seq
        if depth >= 2:
            layer = [(Ev.PUSH, f"layer_{i}"), *layer, (Ev.POP, None)]
        body.append(layer)  # type: ignore[arg-type]
    body += [cat.ADD_RMS, cat.GATE_UP]  # final norm, lm_head
    out = [(Ev.PUSH, "prefill" if prefill else "decode_step"), (Ev.H2D, None)]
    if graph:
        out += [(Ev.LAUNCH, (cat.COPY_BLOCKS, SIDE_STREAM)), (Ev.GRAPH, body)]
    else:
        # The side-stream copy runs alongside the first layers: kernels overlap on the GPU.
        out += [(Ev.LAUNCH, body[0]), (Ev.LAUNCH, (cat.COPY_BLOCKS, SIDE_STREAM))]
        for item in body[1:]:
            out += item if isinstance(item, list) else [(Ev.LAUNCH, item)]
    out += [(Ev.PUSH, "sample"), (Ev.LAUNCH, cat.SOFTMAX), (Ev.LAUNCH, cat.ARGMAX), (Ev.POP, None),
            (Ev.D2H, None), (Ev.SYNC, None), (Ev.POP, None),
            (Ev.LAUNCH, cat.ADVANCE)]  # outside every range: vLLM prepares the next step
    return out


def compile_template(events: list[tuple[Ev, object]], prefill: bool) -> Template:
    ev = np.array([int(e) for e, _ in events], dtype=np.int64)
    stack: list[int] = []
    pushes, pops, names = [], [], []
    op_event, op_kernel, op_stream, op_node, op_inside = [], [], [], [], []
    for i, (e, arg) in enumerate(events):
        if e == Ev.PUSH:
            stack.append(i)
            names.append(str(arg))
            pushes.append(i)
            pops.append(-1)
        elif e == Ev.POP:
            pops[pushes.index(stack.pop())] = i
        elif e in (Ev.LAUNCH, Ev.H2D, Ev.D2H):
            name, stream = arg if isinstance(arg, tuple) else (arg or "", MAIN_STREAM)
            op_event.append(i)
            op_kernel.append(name)
            op_stream.append(stream)
            op_node.append(-1)
            op_inside.append(bool(stack))
        elif e == Ev.GRAPH:
            for n, name in enumerate(arg):  # type: ignore[arg-type]
                op_event.append(i)
                op_kernel.append(name)
                op_stream.append(MAIN_STREAM)
                op_node.append(n)
                op_inside.append(bool(stack))
    if stack:
        raise ValueError("unbalanced NVTX pushes in step template")
    base = [cat.kernel_ns(k, prefill) if k else 0 for k in op_kernel]
    api = np.flatnonzero(np.isin(ev, [int(e) for e in cat.API_NAMES]))
    return Template(
        prefill, ev, int(np.flatnonzero(ev == Ev.SYNC)[0]), np.array(pushes), np.array(pops), names,
        np.array(op_event), op_kernel, np.array(op_stream), np.array(op_node),
        np.array(op_inside, dtype=bool), api, np.array(base, dtype=np.int64),
        np.array([k == cat.ATTN_DECODE for k in op_kernel], dtype=bool),
    )


def _place(ready: np.ndarray, dur: np.ndarray, gap: np.ndarray, frontier: int) -> np.ndarray:
    """End times of in-order stream ops: e[i] = max(ready[i]+d[i], e[i-1]+gap[i]+d[i])."""
    c = np.cumsum(gap + dur)
    f = np.maximum.accumulate(np.maximum(ready + dur - c, frontier))
    return f + c


@dataclass
class StepOut:
    """Times of one simulated step (host events, device ops, sync)."""

    ev_start: np.ndarray
    ev_end: np.ndarray
    op_start: np.ndarray
    op_end: np.ndarray
    next_host: int
    next_frontier: int


def simulate_step(
    t: Template, rng: np.random.Generator, host: int, frontier: int, attn_scale: float,
    host_scale: float = 1.0,
) -> StepOut:
    """Place one step starting at host time `host`; `frontier` = main stream busy until.
    `host_scale` multiplies all host time outside CUDA API calls (the gaps before events and
    the NVTX push/pop calls); the random draws do not depend on it."""
    n = len(t.ev)
    jit = rng.lognormal(0.0, JITTER, size=(2, n))
    gap = np.rint(_HOST_GAP[t.ev] * jit[0] * host_scale).astype(np.int64)
    call = np.rint(_CALL[t.ev] * jit[1] * np.where(_IS_API[t.ev], 1.0, host_scale)).astype(np.int64)
    ops = len(t.op_event)
    dur = np.rint(t.base_ns * rng.lognormal(0.0, KERNEL_JITTER, size=ops)).astype(np.int64)
    if not t.prefill:  # decode attention grows with the context length
        dur[t.op_attn] = np.rint(dur[t.op_attn] * attn_scale).astype(np.int64)
    dur = np.maximum(dur, 800)
    # Host: the sync splits the step; events after it start once the GPU has drained.
    s = t.sync_at
    start = host + np.cumsum(gap) + np.r_[0, np.cumsum(call)[:-1]]
    end = start + call
    main = t.op_stream == MAIN_STREAM
    graph = t.op_node >= 0
    op_gap = np.where(graph, GRAPH_NODE_GAP_NS, KERNEL_GAP_NS).astype(np.int64)
    ready = start[t.op_event] + np.where(graph, GRAPH_LATENCY_NS, LAUNCH_LATENCY_NS)
    op_end = np.empty(ops, dtype=np.int64)
    before = t.op_event < s
    a = np.flatnonzero(main & before)
    op_end[a] = _place(ready[a], dur[a], op_gap[a], frontier)
    drained = int(op_end[a[-1]]) if len(a) else frontier
    sync_end = max(int(end[s]), drained + SYNC_WAKE_NS)
    shift = sync_end - int(end[s])
    end[s] = sync_end
    start[s + 1 :] += shift
    end[s + 1 :] += shift
    ready = start[t.op_event] + np.where(graph, GRAPH_LATENCY_NS, LAUNCH_LATENCY_NS)
    b = np.flatnonzero(main & ~before)
    op_end[b] = _place(ready[b], dur[b], op_gap[b], drained)
    side = np.flatnonzero(~main)
    op_end[side] = ready[side] + dur[side]
    last = int(op_end[b[-1]]) if len(b) else drained
    return StepOut(start, end, op_end - dur, op_end, int(end[-1]), last)


_HOST_GAP = np.array([cat.HOST_GAP_NS[e] for e in Ev], dtype=np.float64)
_CALL = np.array([cat.CALL_NS[e] for e in Ev], dtype=np.float64)
_IS_API = np.array([e in cat.API_NAMES for e in Ev], dtype=bool)
