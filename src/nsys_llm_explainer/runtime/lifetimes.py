"""When each cached table or shared intermediate can be dropped during a run.

TraceData caches every loaded table and shared derived array for the metrics after the
first reader. At millions of rows they add up to gigabytes if all of them live until the
end, so the runner releases each one once every metric that reads it has finished. The
readers listed here include indirect ones (a metric that calls a helper which reads the
key). A missing reader only costs time: a released key is rebuilt on its next use, with
the same result.
"""

from __future__ import annotations

from collections.abc import Iterable

# cache key (a trailing ":" matches every key with that prefix) -> metric ids reading it
READERS: dict[str, tuple[str, ...]] = {
    "runtime": (
        "sync", "nvtx_attribution", "launch_overhead", "boundness", "idle_causes", "steps",
        "critical_path", "memory_transfers", "cuda_graphs", "capture", "host_patterns", "operators",
        "compute_efficiency", "ncu_plan", "step_work", "serving",
    ),
    "host_rows": ("idle_causes", "steps", "host_patterns"),
    # The idle split per device and the merged device work it is cut from.
    "gap_causes": ("idle_causes", "steps", "host_patterns", "timeline"),
    "device_busy": ("gpu_idle", "capture", "communication", "idle_causes", "steps", "timeline"),
    "launch_pairs": ("launch_overhead", "boundness"),
    "launch_first_kernels": ("steps",),
    "kernel_launch_index": (
        "gpu_idle", "nvtx_attribution", "launch_overhead", "boundness", "idle_causes", "steps",
        "critical_path", "memory_transfers", "cuda_graphs", "capture", "host_patterns", "operators",
        "compute_efficiency", "ncu_plan", "step_work", "serving",
    ),
    # phase_scope (boundness, steps) and categories read the NVTX attribution too.
    "kernel_attribution": (
        "nvtx_attribution", "boundness", "idle_causes", "steps", "critical_path", "categories",
        "host_patterns", "compute_efficiency", "serving",
    ),
    "kernel_categories:": ("critical_path", "categories", "gemm_precision", "ncu_plan", "step_work", "serving"),
    # the step graph (metrics/critical_path.py, graph/): its analysis, joins and pairings
    "graph_analysis": ("critical_path", "what_if"),
    "graph_calls:": ("critical_path",),
    "graph_calls_by_correlation": ("critical_path",),
    "graph_peer_waits": ("critical_path",),
    "comm_mask": ("communication", "idle_causes", "steps", "host_patterns", "step_work"),
    # The device work and its launch calls: gap_causes (which steps reads) and device_busy are
    # built from them by then.
    "gpu_work": ("gpu_idle", "communication", "idle_causes"),
    "work_calls": ("gpu_idle", "idle_causes"),
    "work_launch_times": ("idle_causes",),
    "transfer_union:": ("gpu_idle", "idle_causes"),
    "operator_attribution": ("operators", "compute_efficiency", "serving"),
    # work queued before the capture (analysis/carried.py) and the serving iterations
    "carried": ("steps", "step_work", "serving"),
    "serving_iterations": ("steps", "serving"),
    "serving_iterations:structure": ("serving",),
    # compute_sources / compute_count (FLOPs per call) and the peaks per device
    "compute_instances": ("compute_efficiency", "model_utilization", "serving"),
    "compute_view": ("compute_efficiency", "model_utilization", "serving"),
    "compute_peaks:": ("compute_efficiency", "model_utilization", "serving"),
    "host_source_names:": ("idle_causes",),
    # the read-back calls (analysis/blocking.find_blocking) and the calls that drain the queue
    "readbacks": ("host_patterns", "idle_causes"),
    "draining_calls": ("idle_causes",),
    "nvtx_normalized": (
        "nvtx_ranges", "nvtx_attribution", "compute_efficiency", "capture", "idle_causes", "steps",
        "host_patterns", "workload",
    ),
}


# Metrics whose working memory grows with the kernel rows beyond the shared keys above (sorts,
# joins and per-gap arrays over millions of rows). When metrics run in threads on a big trace
# (runner.HEAVY_ALONE_KERNELS), at most one of these runs at a time, so the peak stays near
# that of a one-thread run.
HEAVY: frozenset[str] = frozenset({
    "nvtx_attribution", "launch_overhead", "boundness", "idle_causes", "steps", "fusion_candidates",
    "step_work", "host_patterns", "critical_path", "gpu_idle",
})


class Releases:
    """Which keys to release as metrics finish, in any order: a key goes once every
    registered reader of it has finished. Run in run order (metrics.in_run_order), that is
    right after its last reader. A key none of whose readers is registered is never released."""

    def __init__(self, metric_ids: Iterable[str]) -> None:
        ids = set(metric_ids)
        self._waiting = {key: set(readers) & ids for key, readers in READERS.items()}
        self._waiting = {key: left for key, left in self._waiting.items() if left}

    def finished(self, metric_id: str) -> tuple[str, ...]:
        """Keys to release now that `metric_id` has finished."""
        done = []
        for key, left in self._waiting.items():
            if metric_id in left:
                left.discard(metric_id)
                if not left:
                    done.append(key)
        for key in done:
            del self._waiting[key]
        return tuple(done)
