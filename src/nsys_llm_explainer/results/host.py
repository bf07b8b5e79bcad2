"""The results about the host: sync (metrics/sync.py): blocking synchronize calls and
synchronous copies; host_patterns (metrics/host_patterns.py): scalar read-backs,
per-layer sync stalls, one synchronize per launch, synchronous copies, and each device's
sync_wait idle time cut by which of them covers it; boundness (metrics/boundness.py): queue
time and GPU busy share per process and per NVTX phase. report.json `metrics.<id>` is each
one's to_json(); schema/metrics/<id>.json documents it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import ClassVar

from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.model import JsonObject
from nsys_llm_explainer.results.launches import ApiCalls


@frozen
class SyncCall:
    """One synchronizing or waiting CUDA API: its calls and their durations."""

    api: str
    calls: int
    total_ns: int
    avg_ns: int
    p50_ns: int
    max_ns: int
    blocking: bool  # the host waits in it (a non-blocking wait is listed apart)


@frozen
class SyncProcess:
    """One process's blocking calls and the share of its API window they hold."""

    pid: int
    blocking_calls: int
    blocking_ns: int
    blocking_wall_ns: int  # their union (calls on different threads overlap)
    api_window_ns: int
    blocking_pct_of_window: float


@frozen
class Sync:
    METRIC_ID: ClassVar[str] = "sync"

    blocking_calls: int
    blocking_ns: int
    blocking_wall_ns: int
    api_window_ns: int
    blocking_pct_of_window: float
    calls: tuple[SyncCall, ...]  # blocking first, then by total time
    processes: tuple[SyncProcess, ...]  # most blocking time first

    def to_json(self) -> JsonObject:
        return {
            "blocking_calls": self.blocking_calls,
            "blocking_ns": self.blocking_ns,
            "blocking_wall_ns": self.blocking_wall_ns,
            "api_window_ns": self.api_window_ns,
            "blocking_pct_of_window": self.blocking_pct_of_window,
            "calls": [asdict(c) for c in self.calls],
            "processes": [asdict(p) for p in self.processes],
        }


@frozen
class StallDevice:
    """One device's cost of read-backs or per-layer sync stalls: its sync_wait idle time while
    the calls (and their refill) were in flight, and its host-late idle time after they returned
    having drained the queue, in all and by idle cause."""

    device_id: int
    idle_ns: int
    after_ns: int
    after_by_cause: Mapping[str, int]  # launch_bound / host_other -> ns; causes with time only

    @property
    def impact_ns(self) -> int:
        return self.idle_ns + self.after_ns

    def to_json(self) -> dict[str, object]:
        return {"device_id": self.device_id, "idle_ns": self.idle_ns, "after_ns": self.after_ns,
                "after_by_cause": dict(self.after_by_cause)}


@frozen
class RangeCount:
    """A normalized range name and how many calls it holds innermost."""

    range: str
    count: int


@frozen
class ReadbackGroup:
    """Read-backs from one place: outermost range below the step, operator, copy size."""

    region: str | None
    op: str | None
    bytes: int
    count: int
    pageable: int
    host_blocked_ns: int
    busy_ns: int
    idle_during_ns: int
    queued_during_ns: int
    idle_after_ns: int


@frozen
class PerStep:
    """How many calls each step holds: steps, steps with one or more, median, max."""

    steps: int
    with_readbacks: int
    median: float
    max: int


@frozen
class ScalarReadbacks:
    count: int
    d2h: int
    h2d: int  # always 0 (kept for readers of older reports)
    followed_by_sync: int
    pageable: int
    idle_ns: int
    idle_after_ns: int
    host_blocked_ns: int
    busy_ns: int
    queued_during_ns: int
    devices: tuple[StallDevice, ...]
    pids: tuple[int, ...]
    ranges: tuple[RangeCount, ...]  # most calls first
    groups: tuple[ReadbackGroup, ...]  # the longest host blocking first
    per_step: PerStep | None  # None without steps

    def to_json(self) -> dict[str, object]:
        return {
            "count": self.count,
            "d2h": self.d2h,
            "h2d": self.h2d,
            "followed_by_sync": self.followed_by_sync,
            "pageable": self.pageable,
            "idle_ns": self.idle_ns,
            "idle_after_ns": self.idle_after_ns,
            "host_blocked_ns": self.host_blocked_ns,
            "busy_ns": self.busy_ns,
            "queued_during_ns": self.queued_during_ns,
            "devices": [d.to_json() for d in self.devices],
            "pids": list(self.pids),
            "ranges": [asdict(r) for r in self.ranges],
            "groups": [asdict(g) for g in self.groups],
            "per_step": None if self.per_step is None else asdict(self.per_step),
        }


@frozen
class LayerSyncGroup:
    """Per-layer sync stalls of one kind: the repeated range around them (`layer_N`), the copy
    size and the synchronize's API."""

    unit: str | None
    bytes: int
    sync_api: str
    count: int
    layers: int  # distinct ranges (`layer_7`, ...) the stalls sit in
    host_blocked_ns: int
    sync_ns: int
    busy_ns: int
    idle_during_ns: int
    idle_after_ns: int


@frozen
class LayerSyncs:
    count: int
    host_blocked_ns: int
    idle_ns: int
    idle_after_ns: int
    busy_ns: int
    devices: tuple[StallDevice, ...]
    groups: tuple[LayerSyncGroup, ...]  # the longest host blocking first
    per_step: PerStep | None  # None without steps

    def to_json(self) -> dict[str, object]:
        return {
            "count": self.count,
            "host_blocked_ns": self.host_blocked_ns,
            "idle_ns": self.idle_ns,
            "idle_after_ns": self.idle_after_ns,
            "busy_ns": self.busy_ns,
            "devices": [d.to_json() for d in self.devices],
            "groups": [asdict(g) for g in self.groups],
            "per_step": None if self.per_step is None else asdict(self.per_step),
        }


@frozen
class DeviceIdle:
    device_id: int
    idle_ns: int


@frozen
class SyncPerLaunch:
    found: bool
    syncs: int
    launches: int
    threads: int
    idle_ns: int
    devices: tuple[DeviceIdle, ...]
    pids: tuple[int, ...]
    apis: tuple[ApiCalls, ...] = ()  # the syncs' APIs; report.json has them only when found

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"found": self.found, "syncs": self.syncs, "launches": self.launches,
                                  "threads": self.threads}
        if self.found:
            out["apis"] = [asdict(a) for a in self.apis]
        out.update({"idle_ns": self.idle_ns, "devices": [asdict(d) for d in self.devices], "pids": list(self.pids)})
        return out


@frozen
class CopyDevice:
    """One device's cost of synchronous copies: transfer idle time the copies cover, plus the
    sync_wait idle time while the calls (and their refill) were in flight (the stall)."""

    device_id: int
    transfer_ns: int
    stall_ns: int
    idle_ns: int


@frozen
class SyncCopies:
    count: int
    bytes: int
    copy_ns: int
    on_launch_threads: int  # calls made on a kernel-launching thread
    apis: tuple[ApiCalls, ...]
    idle_ns: int
    devices: tuple[CopyDevice, ...]
    pids: tuple[int, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "count": self.count,
            "bytes": self.bytes,
            "copy_ns": self.copy_ns,
            "on_launch_threads": self.on_launch_threads,
            "apis": [asdict(a) for a in self.apis],
            "idle_ns": self.idle_ns,
            "devices": [asdict(d) for d in self.devices],
            "pids": list(self.pids),
        }


@frozen
class SyncWaitPiece:
    """A device's sync_wait idle time covered by exactly `sources` (host_patterns section
    names: scalar_readbacks, layer_syncs, sync_per_launch, sync_copies) with `api` the blocking
    call in flight there (None: no blocking call of the device's processes)."""

    device_id: int
    sources: tuple[str, ...]
    api: str | None
    idle_ns: int

    def to_json(self) -> dict[str, object]:
        return {"device_id": self.device_id, "sources": list(self.sources), "api": self.api, "idle_ns": self.idle_ns}


@frozen
class HostPatterns:
    METRIC_ID: ClassVar[str] = "host_patterns"

    readback_bytes: int  # the largest copy counted as a read-back
    scalar_readbacks: ScalarReadbacks | None  # None without memcpy records
    layer_syncs: LayerSyncs | None  # None without memcpy records
    sync_per_launch: SyncPerLaunch
    sync_copies: SyncCopies | None  # None without memcpy records
    sync_wait_pieces: tuple[SyncWaitPiece, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "readback_bytes": self.readback_bytes,
            "scalar_readbacks": None if self.scalar_readbacks is None else self.scalar_readbacks.to_json(),
            "layer_syncs": None if self.layer_syncs is None else self.layer_syncs.to_json(),
            "sync_per_launch": self.sync_per_launch.to_json(),
            "sync_copies": None if self.sync_copies is None else self.sync_copies.to_json(),
            "sync_wait_pieces": [p.to_json() for p in self.sync_wait_pieces],
        }


@frozen
class BoundnessThresholds:
    host_queue_ns: int  # a kernel starting within this of its launch call found the GPU waiting


@frozen
class QueueBusy:
    """One process's (scope "process", `pid`) or NVTX phase's (scope "phase", `phase`) queue
    times and busy shares: its launch calls, their queue time percentiles, the share starting
    within the host-queue threshold, and the kernel and kernel+copy busy share of its window."""

    scope: str  # "process" or "phase"
    pid: int | None  # a process's; None for a phase, or when the export has no usable pid
    phase: str | None  # a phase's name; None for a process
    launch_calls: int
    queue_p50_ns: int
    queue_p90_ns: int
    immediate_start_pct: float
    kernel_busy_pct: float
    gpu_busy_pct: float


@frozen
class Boundness:
    METRIC_ID: ClassVar[str] = "boundness"

    thresholds: BoundnessThresholds
    processes: tuple[QueueBusy, ...]  # most launch calls first, then by pid
    phase_source: str | None  # phase_map, step_range or profiler_step; None without phases
    phases: tuple[QueueBusy, ...]  # in the phase scope's order

    def to_json(self) -> dict[str, object]:
        return {
            "thresholds": asdict(self.thresholds),
            "processes": [asdict(r) for r in self.processes],
            "phase_source": self.phase_source,
            "phases": [asdict(r) for r in self.phases],
        }
