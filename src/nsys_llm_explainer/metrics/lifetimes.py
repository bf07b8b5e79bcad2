"""When each cached table or shared intermediate can be dropped during a run.

TraceData caches every loaded table and shared derived array for the metrics after the
first reader. At millions of rows they add up to gigabytes if all of them live until the
end, so the runner releases each one after the last metric (in REGISTRY order) that reads
it. The readers listed here include indirect ones (a metric that calls a helper which reads
the key). A missing reader only costs time: a released key is rebuilt on its next use,
with the same result.
"""

from __future__ import annotations

from collections.abc import Iterable

# cache key (a trailing ":" matches every key with that prefix) -> metric ids reading it
READERS: dict[str, tuple[str, ...]] = {
    "runtime": (
        "sync", "nvtx_attribution", "launch_overhead", "boundness", "idle_causes", "steps",
        "memory_transfers", "cuda_graphs",
    ),
    "launch_pairs": ("launch_overhead", "boundness", "idle_causes", "steps"),
    "kernel_launch_index": (
        "nvtx_attribution", "launch_overhead", "boundness", "idle_causes", "steps",
        "memory_transfers", "cuda_graphs",
    ),
    # phase_scope (boundness, steps) and categories read the NVTX attribution too.
    "kernel_attribution": ("nvtx_attribution", "boundness", "idle_causes", "steps", "categories"),
    "kernel_categories:": ("categories",),
    "comm_mask": ("communication",),
}


def release_plan(metric_ids: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """metric id -> the keys to release once it has run (the keys' last registered reader).

    A key none of whose readers is registered is never released."""
    order = {mid: i for i, mid in enumerate(metric_ids)}
    plan: dict[str, list[str]] = {}
    for key, readers in READERS.items():
        present = [order[r] for r in readers if r in order]
        if not present:
            continue
        last = max(present)
        plan.setdefault(next(m for m, i in order.items() if i == last), []).append(key)
    return {mid: tuple(keys) for mid, keys in plan.items()}
