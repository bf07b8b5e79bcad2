"""When each cached table or shared intermediate can be dropped during a run.

TraceData caches every loaded table and shared derived array for the metrics after the
first reader. At millions of rows they add up to gigabytes if all of them live until the
end, so the runner releases each one once every metric that reads it has finished. Each
metric declares the keys it reads (Metric.reads, in its module), indirect ones included (a
helper it calls that reads the key). A missing reader only costs time: a released key is
rebuilt on its next use, with the same result.
"""

from __future__ import annotations

from collections.abc import Iterable

from nsys_llm_explainer.metrics.base import Metric

# Metrics whose working memory grows with the kernel rows beyond the shared keys they read (sorts,
# joins and per-gap arrays over millions of rows). When metrics run in threads on a big trace
# (runner.HEAVY_ALONE_KERNELS), at most one of these runs at a time, so the peak stays near
# that of a one-thread run. model_utilization and ncu_plan are here because side by side they
# made the 1 GB PyTorch profiler trace's peak (ncu_plan's 117 MiB on model_utilization's 55).
# Not serving: it works over the kernels a block of iterations at a time
# (metrics/serving.BLOCK_ROWS) and runs last (its run_after), beside critical_path or
# fusion_candidates, when the large intermediates are gone (the 5M-kernel export peaks earlier,
# from host_patterns to step_work).
HEAVY: frozenset[str] = frozenset({
    "nvtx_attribution", "launch_overhead", "boundness", "idle_causes", "steps", "fusion_candidates",
    "step_work", "host_patterns", "critical_path", "gpu_idle", "model_utilization", "ncu_plan",
})


class Releases:
    """Which keys to release as metrics finish, in any order: a key goes once every one of
    `metrics` that reads it (Metric.reads) has finished. Run in run order
    (metrics.in_run_order), that is right after its last reader. A key none of `metrics`
    reads is never released."""

    def __init__(self, metrics: Iterable[Metric]) -> None:
        self._waiting: dict[str, set[str]] = {}
        for m in metrics:
            for key in m.reads:
                self._waiting.setdefault(key, set()).add(m.id)

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
