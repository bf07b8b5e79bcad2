"""What the critical path is made of: each piece (path.py) by kind and by named item.

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
- carried: work queued before the step began (its times are measured, not replayed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from nsys_llm_explainer.graph import path as P
from nsys_llm_explainer.graph.build import WAIT_QUEUE, Graph
from nsys_llm_explainer.graph.changes import TaskLabels, communication_tasks
from nsys_llm_explainer.graph.host import COPY, LAUNCH, MEMSET, SYNC
from nsys_llm_explainer.graph.tasks import COPY as TASK_COPY
from nsys_llm_explainer.graph.tasks import GRAPH, KERNEL
from nsys_llm_explainer.graph.tasks import MEMSET as TASK_MEMSET

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


@dataclass(frozen=True)
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
    path: P.Path, g: Graph, labels: TaskLabels, api_names: list[str],
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

    task = np.flatnonzero(path.kind == P.TASK)
    if len(task):
        tn = node[task]
        tk = g.d_kind[tn]
        names = _kernel_names(labels, g.d_name[tn])
        for i, (t, nm, ck) in enumerate(zip(tk.tolist(), names, g.d_copy_kind[tn].tolist(), strict=True)):
            label[task[i]] = nm if t == KERNEL else COPY_NAMES.get(ck, "copy") if t == TASK_COPY \
                else "memset" if t == TASK_MEMSET else "(whole CUDA graph)"
    for piece, text in ((P.QUEUE, "stream queue gap"), (P.LATENCY, "launch latency"),
                        (P.UNEXPLAINED, "(no recorded dependency)"), (P.UNLAUNCHED, "(no launch call recorded)"),
                        (P.CARRIED, "(queued before the step)")):
        label[path.kind == piece] = text
    calls = np.flatnonzero((path.kind == P.CALL) | (path.kind == P.RETURN))
    if len(calls):
        ret = path.kind[calls] == P.RETURN
        queued = np.zeros(g.n_host, bool)
        queued[g.w_dst[g.w_kind == WAIT_QUEUE]] = True
        for i, (a, r, q) in enumerate(zip(g.h_api[node[calls]].tolist(), ret.tolist(),
                                          queued[node[calls]].tolist(), strict=True)):
            label[calls[i]] = api_names[a] + ((" (return once the launch queue had room)" if q
                                               else " (return after the wait)") if r else "")
    work = np.flatnonzero(path.kind == P.HOST_WORK)
    if len(work):
        mid = (path.start[work] + path.end[work]) // 2 + g.origin[path.block[work]]
        label[work] = host_ranges(g.h_tkey[node[work]], mid)
    pieces = Pieces(path.block, kind, label, path.end - path.start, path.kind, path.node, path.start)
    if peer_wait is not None and task_start is not None and len(task):
        pieces = _split_peer_waits(pieces, path, peer_wait, task_start)
    return pieces


def kinds_of(path: P.Path, g: Graph, comm: np.ndarray) -> np.ndarray:
    """Per piece of the path: its kind (an index into KINDS). comm: per task, a collective or
    peer-to-peer copy."""
    K = {k: i for i, k in enumerate(KINDS)}
    kind = np.full(len(path.kind), K["host"], np.int64)
    node = path.node
    task = np.flatnonzero(path.kind == P.TASK)
    if len(task):
        tn = node[task]
        tk = g.d_kind[tn]
        kind[task] = np.select(
            [comm[tn], tk == KERNEL, tk == TASK_COPY, tk == TASK_MEMSET, tk == GRAPH],
            [K["communication"], K["kernel"], K["copy"], K["memset"], K["kernel"]], K["kernel"])
    for piece, k in ((P.QUEUE, "gpu_gap"), (P.LATENCY, "launch"), (P.UNEXPLAINED, "unexplained"),
                     (P.UNLAUNCHED, "unexplained"), (P.CARRIED, "carried")):
        kind[path.kind == piece] = K[k]
    calls = np.flatnonzero((path.kind == P.CALL) | (path.kind == P.RETURN))
    if len(calls):
        hk = g.h_kind[node[calls]]
        kind[calls] = np.select([hk == LAUNCH, hk == SYNC, hk == COPY, hk == MEMSET],
                                [K["launch"], K["sync"], K["copy"], K["host"]], K["host"])
    return kind


def _split_peer_waits(pieces: Pieces, path: P.Path, wait: np.ndarray, task_start: np.ndarray) -> Pieces:
    """Collective pieces split in two: the part before the last rank arrived, the rest."""
    comm = (path.kind == P.TASK) & (pieces.kind == KINDS.index("communication"))
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
    sel = np.flatnonzero((pieces.piece == P.TASK) & (pieces.kind == KINDS.index("kernel")))
    if len(sel):
        codes = labels.task_category[pieces.node[sel]]
        out[sel] = [labels.category[c] if c >= 0 else "CUDA graph" for c in codes.tolist()]
    return out
