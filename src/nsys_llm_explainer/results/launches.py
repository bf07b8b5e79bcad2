"""The results about kernel launches: launch_storm (metrics/launch_storm.py), launch_overhead
(metrics/launch_overhead.py) and cuda_graphs (metrics/cuda_graphs.py). report.json
`metrics.<id>` is each one's to_json(); schema/metrics/<id>.json documents it."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import ClassVar

from nsys_llm_explainer.frozen import frozen


@frozen
class LaunchRate:
    """How fast kernels were launched over a scope's window, and how short they ran."""

    kernels: int
    window_ns: int
    launches_per_s: float
    p50_ns: int
    p90_ns: int
    p99_ns: int
    pct_under_5us: float
    pct_under_10us: float
    pct_under_20us: float
    storm: bool


@frozen
class ProcessLaunchRate(LaunchRate):
    pid: int = 0

    def to_json(self) -> dict[str, object]:
        return {"pid": self.pid, **{f.name: getattr(self, f.name) for f in fields(LaunchRate)}}


@frozen
class TinyKernel:
    """A kernel name whose median call is under TINY_KERNEL_NS."""

    name: str
    calls: int
    total_ns: int
    p50_ns: int
    pct_of_launches: float


@frozen
class StormThresholds:
    storm_rate_per_s: int
    storm_p50_ns: int
    severe_rate_per_s: int
    severe_p50_ns: int


@frozen
class LaunchStorm:
    METRIC_ID: ClassVar[str] = "launch_storm"

    thresholds: StormThresholds
    global_: LaunchRate  # report.json "global"
    processes: tuple[ProcessLaunchRate, ...]  # most kernels first
    tiny_kernels: tuple[TinyKernel, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "thresholds": asdict(self.thresholds),
            "global": asdict(self.global_),
            "processes": [p.to_json() for p in self.processes],
            "tiny_kernels": [asdict(t) for t in self.tiny_kernels],
        }


@frozen
class LaunchTimes:
    """Per launch call: its API time, its queue time (call end to kernel start) and its
    launch-to-start latency; percentiles, max and total of each."""

    api_p50_ns: int
    api_p90_ns: int
    api_p99_ns: int
    api_max_ns: int
    api_total_ns: int
    queue_p50_ns: int
    queue_p90_ns: int
    queue_p99_ns: int
    queue_max_ns: int
    queue_total_ns: int
    latency_p50_ns: int
    latency_p90_ns: int
    latency_p99_ns: int
    latency_max_ns: int
    latency_total_ns: int


def _times(row: LaunchTimes) -> dict[str, object]:
    return {f.name: getattr(row, f.name) for f in fields(LaunchTimes)}


@frozen
class ProcessLaunches(LaunchTimes):
    pid: int = 0
    launch_calls: int = 0
    kernels: int = 0
    kernels_without_launch: int = 0
    kernel_ns: int = 0

    def to_json(self) -> dict[str, object]:
        return {"pid": self.pid, "launch_calls": self.launch_calls, "kernels": self.kernels,
                "kernels_without_launch": self.kernels_without_launch, "kernel_ns": self.kernel_ns,
                **_times(self)}


@frozen
class KernelLaunches(LaunchTimes):
    name: str = ""
    launch_calls: int = 0
    kernel_ns: int = 0

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "launch_calls": self.launch_calls, "kernel_ns": self.kernel_ns,
                **_times(self)}


@frozen
class ApiCalls:
    api: str
    calls: int


@frozen
class LaunchOverhead:
    METRIC_ID: ClassVar[str] = "launch_overhead"

    launch_apis: tuple[ApiCalls, ...]
    kernels: int
    kernels_with_launch: int
    kernels_without_launch: int
    kernels_without_launch_pct: float
    kernels_joined_to_other_api: int
    launch_calls: int
    graph_launch_calls: int
    skew_clamped: int  # kernels that start before their launch call (clock skew)
    started_before_call_returned: int
    tklqt_ns: int
    global_: LaunchTimes  # report.json "global"
    processes: tuple[ProcessLaunches, ...]  # by total latency, largest first
    top_kernels: tuple[KernelLaunches, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "launch_apis": [asdict(a) for a in self.launch_apis],
            "kernels": self.kernels,
            "kernels_with_launch": self.kernels_with_launch,
            "kernels_without_launch": self.kernels_without_launch,
            "kernels_without_launch_pct": self.kernels_without_launch_pct,
            "kernels_joined_to_other_api": self.kernels_joined_to_other_api,
            "launch_calls": self.launch_calls,
            "graph_launch_calls": self.graph_launch_calls,
            "skew_clamped": self.skew_clamped,
            "started_before_call_returned": self.started_before_call_returned,
            "tklqt_ns": self.tklqt_ns,
            "global": _times(self.global_),
            "processes": [p.to_json() for p in self.processes],
            "top_kernels": [k.to_json() for k in self.top_kernels],
        }


@frozen
class GraphRow:
    pid: int
    graph_id: int
    launches: int
    node_kernels: int
    kernels_per_launch: float
    kernel_ns: int


@frozen
class CudaGraphs:
    METRIC_ID: ClassVar[str] = "cuda_graphs"

    trace_mode: str | None  # how nsys traced graphs: "graph" (whole) or "node"
    graph_launches: int
    launching_processes: tuple[int, ...]
    node_kernels: int
    node_kernel_ns: int
    node_kernels_attributed: int
    kernels_per_launch_avg: float | None
    kernels_per_launch_max: int | None
    traced_whole: bool  # graphs ran and were traced as one range each
    fix_flag: str | None
    graphs: tuple[GraphRow, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "trace_mode": self.trace_mode,
            "graph_launches": self.graph_launches,
            "launching_processes": list(self.launching_processes),
            "node_kernels": self.node_kernels,
            "node_kernel_ns": self.node_kernel_ns,
            "node_kernels_attributed": self.node_kernels_attributed,
            "kernels_per_launch_avg": self.kernels_per_launch_avg,
            "kernels_per_launch_max": self.kernels_per_launch_max,
            "traced_whole": self.traced_whole,
            "fix_flag": self.fix_flag,
            "graphs": [asdict(g) for g in self.graphs],
        }
