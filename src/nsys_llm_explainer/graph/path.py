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

What the critical path is made of: each piece (path.py) by kind and by named item.

Kinds, in report order:
- host: host work between calls, named by the innermost annotation range or PyTorch
  operator around it, and runtime calls that are not launches, copies or synchronizes;
- launch: launch calls and launch latency;
- kernel: kernels by category (the kernel category table);
- communication: collectives and peer-to-peer copies;
- copy: host-device copies, with the time their calls spend staging data;
- memset;
- sync: synchronize calls, and the time a blocking call takes to return once the work it
  waited for is done;
- gpu_gap: gaps between back-to-back work of one stream, and cross-stream waits;
- unexplained: delays no recorded dependency explains (build.py);
- carried: work queued before the step began (its times are measured, not replayed)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.graph.build import WAIT_QUEUE, Graph
from nsys_llm_explainer.graph.changes import TaskLabels, communication_tasks
from nsys_llm_explainer.graph.host import COPY, LAUNCH, MEMSET, SYNC
from nsys_llm_explainer.graph.replay import BY_BLOCK_START, BY_CROSS, BY_FIXED, BY_LAUNCH, BY_STREAM, Params, Times
from nsys_llm_explainer.graph.tasks import COPY as TASK_COPY
from nsys_llm_explainer.graph.tasks import GRAPH, KERNEL
from nsys_llm_explainer.graph.tasks import MEMSET as TASK_MEMSET

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


@frozen
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


KINDS = ("host", "launch", "kernel", "communication", "copy", "memset", "sync", "gpu_gap",
         "unexplained", "carried")
KIND_TITLES = {
    "host": "host work", "launch": "launch overhead", "kernel": "kernels", "communication": "communication",
    "copy": "copies", "memset": "memsets", "sync": "synchronization", "gpu_gap": "GPU queue gaps",
    "unexplained": "unexplained waits", "carried": "work queued before the step",
}
COPY_NAMES = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD",
              9: "HtoH", 10: "PtoP"}
NO_RANGE = "(outside any range)"
CALL_KIND_NAMES = ("runtime", "launch", "copy", "memset", "sync", "event")  # host.CALL_KINDS
TASK_KIND_NAMES = ("kernel", "copy", "memset", "CUDA graph")  # tasks.KIND_NAMES


@frozen
class Pieces:
    """The path's pieces with their kind (index into KINDS) and item label."""

    block: np.ndarray
    kind: np.ndarray
    label: np.ndarray  # object array of str
    ns: np.ndarray
    piece: np.ndarray  # the path piece kind (path.py) it comes from
    node: np.ndarray  # its node (host node or task, as in path.Path)
    start: np.ndarray  # replayed, block-relative

    def take(self, sel: np.ndarray) -> Pieces:
        return Pieces(self.block[sel], self.kind[sel], self.label[sel], self.ns[sel], self.piece[sel],
                      self.node[sel], self.start[sel])


PEER_WAIT = "(waiting for the other ranks)"


def classify(
    path: Path, g: Graph, labels: TaskLabels, api_names: list[str],
    host_ranges: Callable[[np.ndarray, np.ndarray], list[str]],
    peer_wait: np.ndarray | None = None, task_start: np.ndarray | None = None,
) -> Pieces:
    """host_ranges(tkey, absolute time) -> the range name around each host-work piece;
    peer_wait: per task, how long its collective waited for the other ranks (-1: unknown),
    with task_start its replayed start: that part of a collective's piece is labelled
    PEER_WAIT."""
    n = len(path.kind)
    label = np.empty(n, dtype=object)
    node = path.node
    comm = communication_tasks(g, labels) if g.n_device else np.zeros(0, bool)
    kind = kinds_of(path, g, comm)

    task = np.flatnonzero(path.kind == TASK)
    if len(task):
        tn = node[task]
        tk = g.d_kind[tn]
        names = _kernel_names(labels, g.d_name[tn])
        for i, (t, nm, ck) in enumerate(zip(tk.tolist(), names, g.d_copy_kind[tn].tolist(), strict=True)):
            label[task[i]] = nm if t == KERNEL else COPY_NAMES.get(ck, "copy") if t == TASK_COPY \
                else "memset" if t == TASK_MEMSET else "(whole CUDA graph)"
    for piece, text in ((QUEUE, "stream queue gap"), (LATENCY, "launch latency"),
                        (UNEXPLAINED, "(no recorded dependency)"), (UNLAUNCHED, "(no launch call recorded)"),
                        (CARRIED, "(queued before the step)")):
        label[path.kind == piece] = text
    calls = np.flatnonzero((path.kind == CALL) | (path.kind == RETURN))
    if len(calls):
        ret = path.kind[calls] == RETURN
        queued = np.zeros(g.n_host, bool)
        queued[g.w_dst[g.w_kind == WAIT_QUEUE]] = True
        for i, (a, r, q) in enumerate(zip(g.h_api[node[calls]].tolist(), ret.tolist(),
                                          queued[node[calls]].tolist(), strict=True)):
            label[calls[i]] = api_names[a] + ((" (return once the launch queue had room)" if q
                                               else " (return after the wait)") if r else "")
    work = np.flatnonzero(path.kind == HOST_WORK)
    if len(work):
        mid = (path.start[work] + path.end[work]) // 2 + g.origin[path.block[work]]
        label[work] = host_ranges(g.h_tkey[node[work]], mid)
    pieces = Pieces(path.block, kind, label, path.end - path.start, path.kind, path.node, path.start)
    if peer_wait is not None and task_start is not None and len(task):
        pieces = _split_peer_waits(pieces, path, peer_wait, task_start)
    return pieces


def kinds_of(path: Path, g: Graph, comm: np.ndarray) -> np.ndarray:
    """Per piece of the path: its kind (an index into KINDS). comm: per task, a collective or
    peer-to-peer copy."""
    K = {k: i for i, k in enumerate(KINDS)}
    kind = np.full(len(path.kind), K["host"], np.int64)
    node = path.node
    task = np.flatnonzero(path.kind == TASK)
    if len(task):
        tn = node[task]
        tk = g.d_kind[tn]
        kind[task] = np.select(
            [comm[tn], tk == KERNEL, tk == TASK_COPY, tk == TASK_MEMSET, tk == GRAPH],
            [K["communication"], K["kernel"], K["copy"], K["memset"], K["kernel"]], K["kernel"])
    for piece, k in ((QUEUE, "gpu_gap"), (LATENCY, "launch"), (UNEXPLAINED, "unexplained"),
                     (UNLAUNCHED, "unexplained"), (CARRIED, "carried")):
        kind[path.kind == piece] = K[k]
    calls = np.flatnonzero((path.kind == CALL) | (path.kind == RETURN))
    if len(calls):
        hk = g.h_kind[node[calls]]
        kind[calls] = np.select([hk == LAUNCH, hk == SYNC, hk == COPY, hk == MEMSET],
                                [K["launch"], K["sync"], K["copy"], K["host"]], K["host"])
    return kind


def _split_peer_waits(pieces: Pieces, path: Path, wait: np.ndarray, task_start: np.ndarray) -> Pieces:
    """Collective pieces split in two: the part before the last rank arrived, the rest."""
    comm = (path.kind == TASK) & (pieces.kind == KINDS.index("communication"))
    node = np.where(comm, path.node, 0)
    w = np.where(comm, wait[node], -1)
    waited = np.clip(task_start[node] + w - path.start, 0, path.end - path.start)
    split = np.flatnonzero(comm & (w > 0) & (waited > 0))
    if len(split) == 0:
        return pieces
    ns = pieces.ns.copy()
    ns[split] -= waited[split]
    start = pieces.start.copy()
    start[split] += waited[split]
    keep = ns > 0

    def both(values: np.ndarray, extra: np.ndarray) -> np.ndarray:
        return np.concatenate([values[keep], extra])

    return Pieces(both(pieces.block, pieces.block[split]), both(pieces.kind, pieces.kind[split]),
                  both(pieces.label, np.full(len(split), PEER_WAIT, dtype=object)), both(ns, waited[split]),
                  both(pieces.piece, pieces.piece[split]), both(pieces.node, pieces.node[split]),
                  both(start, pieces.start[split]))


def _kernel_names(labels: TaskLabels, ids: np.ndarray) -> list[str]:
    valid = ids[ids >= 0]
    uniq = np.unique(valid)
    names = dict(zip(uniq.tolist(), labels.kernel_name(uniq), strict=True)) if len(uniq) else {}
    return [names.get(int(i), "") for i in ids.tolist()]


def per_kind(pieces: Pieces, n_blocks: int) -> np.ndarray:
    """[block, kind] -> ns on the path."""
    out = np.zeros((n_blocks, len(KINDS)), np.int64)
    np.add.at(out, (pieces.block, pieces.kind), pieces.ns)
    return out


def kernel_categories_of(pieces: Pieces, labels: TaskLabels) -> np.ndarray:
    """Per piece: the kernel category name for kernel pieces ('' elsewhere)."""
    out = np.full(len(pieces.kind), "", dtype=object)
    sel = np.flatnonzero((pieces.piece == TASK) & (pieces.kind == KINDS.index("kernel")))
    if len(sel):
        codes = labels.task_category[pieces.node[sel]]
        out[sel] = [labels.category[c] if c >= 0 else "CUDA graph" for c in codes.tolist()]
    return out
