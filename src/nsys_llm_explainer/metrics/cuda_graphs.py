"""cuda_graphs: CUDA graph launches, kernels traced per graph node, and the capture's
CUDA-graph trace mode.

Graph launches are runtime/driver calls named in GRAPH_LAUNCH_APIS. A kernel was traced
as a graph node when its graphNodeId or graphId is set (> 0); CUPTI gives node kernels
the correlation id of the launch call, so they join their graph launch on (pid, corr).
The trace mode comes from TraceData.graph_trace_mode() (in an Nsight Systems export, the
single CUDA_GRAPH_TRACE_OPTIONS:MODE capture-metadata row, never any other). When graphs
were traced whole ("Graph" mode, or graph launches with no node kernels), individual
kernels inside graphs are not in the kernel table.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis.busy import GRAPH_LAUNCH_APIS
from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.analysis.groups import distinct_few, group_codes, group_sum
from nsys_llm_explainer.analysis.join import kernel_launch_index
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome, Table
from nsys_llm_explainer.results.launches import CudaGraphs, GraphRow

FIX_FLAG = "--cuda-graph-trace=node"
COLUMNS = ("pid", "graph_id", "launches", "node_kernels", "kernels_per_launch", "kernel_ns")


def run(ctx: Context) -> Outcome:
    k = ctx.data.kernels()
    rt = ctx.data.runtime()
    api_names = ctx.data.runtime_api_names()
    launch_codes = [i for i, n in enumerate(api_names) if n in GRAPH_LAUNCH_APIS]
    is_launch = np.isin(rt.api, launch_codes)
    have_node_cols = "graph_node_id" in k or "graph_id" in k
    node = np.zeros(len(k), dtype=bool)
    for col in ("graph_node_id", "graph_id"):
        if col in k:
            node |= k[col] > 0
    mode = ctx.data.graph_trace_mode()
    launches = int(is_launch.sum())
    node_kernels = int(node.sum())
    launch_of = kernel_launch_index(ctx.data) if len(k) else np.empty(0, np.int64)
    attributed = node & (launch_of >= 0)
    attributed[attributed] &= is_launch[launch_of[attributed]]
    graph_id = k["graph_id"] if "graph_id" in k else np.full(len(k), -1, np.int64)
    rows = _per_graph(k.pid, graph_id, k.dur, launch_of, attributed)
    # nsys traces graphs whole by default, so the mode alone matters only when graphs ran.
    whole = launches > 0 and (node_kernels == 0 or mode == "graph")
    per_launch = (
        np.bincount(launch_of[attributed], minlength=len(rt))[is_launch]
        if launches
        else np.empty(0)
    )
    notes = []
    if not have_node_cols:
        notes.append(
            "the kernel table has no graphNodeId/graphId columns: node kernels cannot be told apart"
        )
    result = CudaGraphs(
        trace_mode=mode,
        graph_launches=launches,
        launching_processes=tuple(sorted(int(p) for p in distinct_few(rt.pid[is_launch]).tolist())),
        node_kernels=node_kernels,
        node_kernel_ns=int(k.dur[node].sum()),
        node_kernels_attributed=int(attributed.sum()),
        kernels_per_launch_avg=round(float(per_launch.mean()), 2) if len(per_launch) else None,
        kernels_per_launch_max=int(per_launch.max()) if len(per_launch) else None,
        traced_whole=bool(whole),
        fix_flag=FIX_FLAG if whole else None,
        graphs=tuple(GraphRow(**r) for r in rows.to_dict("records")),
    )
    tables = (Table("cuda_graphs", COLUMNS, rows),)
    return MetricResult(METRIC.id, result.to_json(), tables, tuple(notes), typed=result)


def _per_graph(
    pid: np.ndarray,
    graph_id: np.ndarray,
    dur: np.ndarray,
    launch_of: np.ndarray,
    attributed: np.ndarray,
) -> pd.DataFrame:
    idx = np.flatnonzero(attributed)
    if len(idx) == 0:
        return pd.DataFrame(columns=list(COLUMNS))
    codes, (pids, gids) = group_codes(pid[idx], graph_id[idx])
    g = len(pids)
    # Distinct launches per graph: unique (group, launch row) pairs.
    pairs = np.unique(codes * (int(launch_of.max()) + 1) + launch_of[idx])
    n_launch = np.bincount(pairs // (int(launch_of.max()) + 1), minlength=g)
    n_kern = np.bincount(codes, minlength=g)
    frame = pd.DataFrame(
        {
            "pid": pids,
            "graph_id": gids,
            "launches": n_launch,
            "node_kernels": n_kern,
            "kernels_per_launch": np.round(n_kern / np.maximum(n_launch, 1), 2),
            "kernel_ns": group_sum(dur[idx], codes, g),
        }
    )
    return frame.sort_values(
        ["kernel_ns", "pid", "graph_id"], ascending=[False, True, True], kind="stable"
    ).reset_index(drop=True)


METRIC = Metric(
    id="cuda_graphs",
    order=230,
    title="CUDA graphs",
    run=run,
    tables={"cuda_graphs": COLUMNS},
    description=(
        "Graph launches, node-traced kernels per graph and launch, and the CUDA-graph trace mode."
    ),
    reads=("runtime", "kernel_launch_index"),
)
