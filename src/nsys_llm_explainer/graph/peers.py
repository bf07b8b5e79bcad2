"""The wait on peer ranks inside collective kernels, where one capture holds several ranks.

A collective kernel runs from when its rank reaches it until the last rank arrives and
the data has moved: the part before the last rank's start is waiting for peers, the rest
is the transfer. When several processes of one capture run the same collective kernel (by
name) the same number of times, the n-th run on each is the same collective (NCCL issues a
communicator's collectives in the same order on every rank), and the wait of each is the
latest start of the n-th run across processes minus its own start. A capture of one rank
cannot tell the two apart (the fleet view measures the wait across rank captures).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.trace.data import TraceData

UNKNOWN = -1


@frozen
class ByRow:
    """A value for each kernel row of a paired collective, and `default` for every other row:
    only those rows are kept, since most rows (all, with one rank) have no value."""

    rows: np.ndarray  # kernel rows, ascending
    values: np.ndarray  # int64, one per row
    default: int

    def at(self, rows: np.ndarray) -> np.ndarray:
        """The value of each of `rows` (kernel rows)."""
        out = np.full(len(rows), self.default, np.int64)
        if len(self.rows) and len(rows):
            pos = np.minimum(np.searchsorted(self.rows, rows), len(self.rows) - 1)
            hit = self.rows[pos] == rows
            out[hit] = self.values[pos[hit]]
        return out


def _none(default: int) -> ByRow:
    return ByRow(np.empty(0, np.int64), np.empty(0, np.int64), default)


def peer_waits(data: TraceData, comm: np.ndarray) -> ByRow:
    """Per kernel row (ByRow.at): the time its collective waited for the last peer to arrive, or
    UNKNOWN (not a collective, a single rank, or runs that do not pair up). `comm`: per
    kernel row, True for collectives. Cached."""

    def build() -> ByRow:
        k = data.kernels()
        rows = np.flatnonzero(comm)
        if len(rows) == 0 or len(np.unique(k.pid[rows])) < 2:
            return _none(UNKNOWN)
        f = pd.DataFrame({"row": rows, "pid": k.pid[rows], "name": k.name_id[rows], "start": k.start[rows]})
        f = f.sort_values(["pid", "name", "start"], kind="stable")
        f["seq"] = f.groupby(["pid", "name"], sort=False).cumcount()
        runs = f.groupby(["name", "pid"], sort=False).size().rename("runs").reset_index()
        shape = runs.groupby("name").agg(ranks=("pid", "size"), lo=("runs", "min"), hi=("runs", "max"))
        paired = shape.index[(shape["ranks"] >= 2) & (shape["lo"] == shape["hi"])]
        f = f[f["name"].isin(paired)]
        if f.empty:
            return _none(UNKNOWN)
        last = f.groupby(["name", "seq"], sort=False)["start"].transform("max")
        known = f["row"].to_numpy(np.int64)
        order = np.argsort(known, kind="stable")
        return ByRow(known[order], (last - f["start"]).to_numpy(np.int64)[order], UNKNOWN)

    return data.cached("graph_peer_waits", build)


def slow_rank(data: TraceData, comm: np.ndarray) -> tuple[int, ByRow]:
    """The rank the others wait for, and per kernel row (ByRow.at) how much its collective's wait would
    shrink if that rank arrived no later than the last of the others (0 elsewhere).

    Per paired collective (the n-th run of one kernel on every process, as in peer_waits) a
    process is late by its start less the latest start of the other processes (0 when it is
    not the last); the slow rank is the process late by the most in all, and -1 when none is.
    Cached."""

    def build() -> tuple[int, ByRow]:
        k = data.kernels()
        waits = peer_waits(data, comm)
        rows = waits.rows  # a wait is never UNKNOWN on a paired collective
        if len(rows) == 0:
            return -1, _none(0)
        pid, name, start = k.pid[rows], k.name_id[rows], k.start[rows].astype(np.int64)
        # the n-th run of a kernel on each process (as peer_waits pairs them)
        order = np.lexsort((start, name, pid))
        new = np.r_[True, (pid[order][1:] != pid[order][:-1]) | (name[order][1:] != name[order][:-1])]
        first = np.maximum.accumulate(np.where(new, np.arange(len(order)), 0))
        seq = np.empty(len(rows), np.int64)
        seq[order] = np.arange(len(order)) - first
        # Each occurrence's starts in order: the last process to arrive is late by its start
        # less the one before it (the latest of the others).
        occ = np.lexsort((start, seq, name))
        same = np.r_[False, (name[occ][1:] == name[occ][:-1]) & (seq[occ][1:] == seq[occ][:-1])]
        last = np.r_[~same[1:], True]
        late = np.zeros(len(rows), np.int64)
        take = np.flatnonzero(last & same)
        late[occ[take]] = start[occ[take]] - start[occ[take - 1]]
        pids, codes = np.unique(pid, return_inverse=True)
        lateness = np.bincount(codes, weights=late, minlength=len(pids))
        if lateness.max() <= 0:
            return -1, _none(0)
        slow = int(pids[int(np.argmax(lateness))])
        # per occurrence, how late the slow process was (0 where it was not the last)
        occ_id = np.cumsum(~same) - 1
        excess = np.zeros(int(occ_id[-1]) + 1, np.int64)
        mine = pid[occ] == slow
        np.maximum.at(excess, occ_id[mine], late[occ][mine])
        saving = np.where(pid[occ] == slow, 0, np.minimum(waits.values[occ], excess[occ_id]))
        values = np.zeros(len(rows), np.int64)
        values[occ] = np.maximum(saving, 0)
        return slow, ByRow(rows, values, 0)

    return data.cached("graph_slow_rank", build)
