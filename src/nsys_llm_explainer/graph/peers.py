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

from nsys_llm_explainer.trace.data import TraceData

UNKNOWN = -1


def peer_waits(data: TraceData, comm: np.ndarray) -> np.ndarray:
    """Per kernel row: the time its collective waited for the last peer to arrive, or
    UNKNOWN (not a collective, a single rank, or runs that do not pair up). `comm`: per
    kernel row, True for collectives. Cached."""

    def build() -> np.ndarray:
        k = data.kernels()
        out = np.full(len(k), UNKNOWN, np.int64)
        rows = np.flatnonzero(comm)
        if len(rows) == 0 or len(np.unique(k.pid[rows])) < 2:
            return out
        f = pd.DataFrame({"row": rows, "pid": k.pid[rows], "name": k.name_id[rows], "start": k.start[rows]})
        f = f.sort_values(["pid", "name", "start"], kind="stable")
        f["seq"] = f.groupby(["pid", "name"], sort=False).cumcount()
        runs = f.groupby(["name", "pid"], sort=False).size().rename("runs").reset_index()
        shape = runs.groupby("name").agg(ranks=("pid", "size"), lo=("runs", "min"), hi=("runs", "max"))
        paired = shape.index[(shape["ranks"] >= 2) & (shape["lo"] == shape["hi"])]
        f = f[f["name"].isin(paired)]
        if f.empty:
            return out
        last = f.groupby(["name", "seq"], sort=False)["start"].transform("max")
        out[f["row"].to_numpy(np.int64)] = (last - f["start"]).to_numpy(np.int64)
        return out

    return data.cached("graph_peer_waits", build)
