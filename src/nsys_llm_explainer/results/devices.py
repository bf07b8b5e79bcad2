"""The results about the GPUs and the data moved to and from them: gpu_context
(metrics/gpu_context.py), memory_transfers (metrics/memory_transfers.py) and communication
(metrics/communication.py); when the GPUs were idle, gpu_idle (metrics/gpu_idle.py), and why,
idle_causes (metrics/idle_causes.py). report.json
`metrics.<id>` is each one's to_json(); schema/metrics/<id>.json documents it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, fields
from typing import ClassVar

from nsys_llm_explainer.analysis.host_sources import Source
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.model import IdleCause


@frozen
class GpuRow:
    """A GPU the trace describes, with the peak figures of its model where known."""

    device_id: int
    name: str | None
    active: bool  # ran work in the capture
    known: bool  # its model has peak figures
    model: str | None
    sm_count: int | None
    total_memory_bytes: int | None
    trace_memory_bandwidth_gbps: float | None
    clock_hz: int | None
    tf32_tflops: float | None
    bf16_tflops: float | None
    fp8_tflops: float | None
    hbm_gbps: float | None
    host_link_gbps: float | None
    ridge_flop_per_byte: dict[str, float | None] | None
    source: str | None
    described_as: int | None = None  # the listed device whose model this one is (absent: itself)

    def to_json(self) -> dict[str, object]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "described_as"}
        if self.described_as is not None:
            out["described_as"] = self.described_as
        return out


@frozen
class CopyBandwidth:
    """A device's copies of one kind against the link they cross."""

    device_id: int
    kind: str
    count: int
    bytes: int
    time_ns: int
    achieved_gbps: float | None  # None when no time was recorded
    reference_gbps: float | None
    pct_of_reference: float | None


@frozen
class GpuContext:
    METRIC_ID: ClassVar[str] = "gpu_context"

    gpus: tuple[GpuRow, ...]
    unknown_models: tuple[str, ...]
    devices_without_info: tuple[int, ...]
    large_copy_bytes: int
    copy_bandwidth: tuple[CopyBandwidth, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "gpus": [g.to_json() for g in self.gpus],
            "unknown_models": list(self.unknown_models),
            "devices_without_info": list(self.devices_without_info),
            "large_copy_bytes": self.large_copy_bytes,
            "copy_bandwidth": [asdict(c) for c in self.copy_bandwidth],
        }


@frozen
class KindTransfers:
    kind: str  # Host-to-Device, Device-to-Host, ...
    count: int
    bytes: int
    time_ns: int
    tiny_count: int
    achieved_gbps: float  # NaN when no time was recorded


@frozen
class DeviceTransfers:
    device_id: int
    kind: str
    count: int
    bytes: int
    time_ns: int
    tiny_count: int
    achieved_gbps: float


@frozen
class SizeBucket:
    label: str
    count: int


@frozen
class TinyTransfers:
    count: int
    time_ns: int
    bytes: int
    per_s: float | None


@frozen
class CopySummary:
    count: int
    bytes: int
    time_ns: int


@frozen
class LaunchThreadCopies(CopySummary):
    """Synchronous copies on a thread that launches kernels."""

    scope: str = ""
    launch_threads: int = 0


@frozen
class TransferIssue:
    issue: str  # pageable_async, sync_on_launch_thread, ...
    pid: int
    device_id: int
    kind: str
    start_ns: int
    duration_ns: int
    bytes: int
    api: str


@frozen
class MemoryTransfers:
    METRIC_ID: ClassVar[str] = "memory_transfers"

    kinds_from_enum: bool
    transfer_count: int
    total_bytes: int
    total_time_ns: int
    by_kind: tuple[KindTransfers, ...]
    by_device: tuple[DeviceTransfers, ...]
    size_buckets: tuple[SizeBucket, ...]
    tiny_bytes: int  # a transfer of at most this many bytes is tiny
    tiny: TinyTransfers
    pageable_async: CopySummary  # asynchronous copies from or to pageable memory
    sync_on_launch_thread: LaunchThreadCopies
    issues: tuple[TransferIssue, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "kinds_from_enum": self.kinds_from_enum,
            "transfer_count": self.transfer_count,
            "total_bytes": self.total_bytes,
            "total_time_ns": self.total_time_ns,
            "by_kind": [asdict(k) for k in self.by_kind],
            "by_device": [asdict(d) for d in self.by_device],
            "size_buckets": [asdict(b) for b in self.size_buckets],
            "tiny_bytes": self.tiny_bytes,
            "tiny": asdict(self.tiny),
            "pageable_async": asdict(self.pageable_async),
            "sync_on_launch_thread": asdict(self.sync_on_launch_thread),
            "issues": [asdict(i) for i in self.issues],
        }


@frozen
class CauseShare:
    """One cause's share of a device's idle time."""

    cause: IdleCause
    idle_ns: int
    pct_of_idle: float
    pct_of_window: float
    gaps: int


@frozen
class Refill:
    """The delay from the return of a blocking call to the device's next work."""

    gaps: int
    total_ns: int
    p50_ns: int
    p90_ns: int
    max_ns: int


@frozen
class HostBlocked:
    """The time the launching threads were blocked, and what the device did meanwhile
    (analysis/idle_sweep.py host_blocked)."""

    ns: int
    busy_ns: int
    transfer_ns: int
    sync_wait_ns: int
    other_idle_ns: int


@frozen
class FamilyTime:
    family: str
    ns: int


@frozen
class SampleCount:
    symbol: str
    count: int


@frozen
class HostSources:
    """What the launching thread did during the device's host-caused idle time
    (analysis/host_sources.py): the top sources, the families, the CPU samples."""

    idle_ns: int
    unnamed_ns: int
    sources: tuple[Source, ...]
    families: tuple[FamilyTime, ...]
    samples: tuple[SampleCount, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "idle_ns": self.idle_ns,
            "unnamed_ns": self.unnamed_ns,
            "sources": [asdict(x) for x in self.sources],
            "families": [asdict(f) for f in self.families],
            "samples": [asdict(x) for x in self.samples],
        }


@frozen
class IdleTransfer:
    """A device's transfers of one kind and the idle time they cover."""

    kind: str
    direction: str  # host_to_device, device_to_host, peer or other
    count: int
    bytes: int
    copy_ns: int
    idle_ns: int


@frozen
class SteadyPart:
    """The idle split from the steady start on (the capture metric's steady part)."""

    start_ns: int
    idle_ns: int
    causes: Mapping[IdleCause, int]

    def to_json(self) -> dict[str, object]:
        return {"start_ns": self.start_ns, "idle_ns": self.idle_ns, "causes": dict(self.causes)}


@frozen
class IdleDevice:
    """One device's idle time split by cause, with the detail rules and the diagnosis read."""

    device_id: int
    owner_pids: tuple[int, ...]
    window_ns: int
    idle_ns: int
    gap_count: int
    dominant_cause: IdleCause | None
    causes: tuple[CauseShare, ...]
    launch_known_gaps: int
    queued_gaps: int
    queued_ns: int
    copy_ahead_gaps: int
    copy_ahead_ns: int
    dependency_ns: int
    behind_collective_ns: int
    stream_wait_ns: int
    refill: Refill
    activity_start_ns: int
    activity_end_ns: int
    edge_transfer_ns: int
    host_blocked: HostBlocked
    host_sources: HostSources
    transfers: tuple[IdleTransfer, ...]
    steady: SteadyPart | None

    def to_json(self) -> dict[str, object]:
        return {
            "device_id": self.device_id,
            "owner_pids": list(self.owner_pids),
            "window_ns": self.window_ns,
            "idle_ns": self.idle_ns,
            "gap_count": self.gap_count,
            "dominant_cause": self.dominant_cause,
            "causes": [asdict(c) for c in self.causes],
            "launch_known_gaps": self.launch_known_gaps,
            "queued_gaps": self.queued_gaps,
            "queued_ns": self.queued_ns,
            "copy_ahead_gaps": self.copy_ahead_gaps,
            "copy_ahead_ns": self.copy_ahead_ns,
            "dependency_ns": self.dependency_ns,
            "behind_collective_ns": self.behind_collective_ns,
            "stream_wait_ns": self.stream_wait_ns,
            "refill": asdict(self.refill),
            "activity_start_ns": self.activity_start_ns,
            "activity_end_ns": self.activity_end_ns,
            "edge_transfer_ns": self.edge_transfer_ns,
            "host_blocked": asdict(self.host_blocked),
            "host_sources": self.host_sources.to_json(),
            "transfers": [asdict(t) for t in self.transfers],
            "steady": self.steady.to_json() if self.steady is not None else None,
        }


@frozen
class IdleCauses:
    METRIC_ID: ClassVar[str] = "idle_causes"

    causes: tuple[IdleCause, ...]
    min_gap_ns: int
    devices: tuple[IdleDevice, ...]
    gaps_listed: int
    top_gaps: tuple[Mapping[str, object], ...]  # the longest gaps, as the idle_causes_gaps table's rows

    def of(self, devices: list[int]) -> list[IdleDevice]:
        """The rows of `devices`, in device order."""
        return [d for d in self.devices if d.device_id in devices]

    def to_json(self) -> dict[str, object]:
        return {
            "causes": list(self.causes),
            "min_gap_ns": self.min_gap_ns,
            "devices": [d.to_json() for d in self.devices],
            "gaps_listed": self.gaps_listed,
            "top_gaps": [dict(g) for g in self.top_gaps],
        }


@frozen
class GpuIdleDevice:
    """One device's busy and idle time over its window (first to last work)."""

    device_id: int
    window_start_ns: int
    window_end_ns: int
    busy_ns: int
    idle_ns: int
    idle_pct: float
    gap_count: int
    idle_covered_by_copies_ns: int
    idle_covered_by_copies_pct: float
    kernel_busy_ns: int
    graph_busy_ns: int
    device_copy_busy_ns: int


@frozen
class GapBucket:
    label: str  # <10us, 10-100us, ...
    count: int
    total_ns: int


@frozen
class GapHistogram:
    device_id: int
    buckets: tuple[GapBucket, ...]

    def to_json(self) -> dict[str, object]:
        return {"device_id": self.device_id, "buckets": [asdict(b) for b in self.buckets]}


@frozen
class GpuIdle:
    METRIC_ID: ClassVar[str] = "gpu_idle"

    min_gap_ns: int
    graph_launches: int
    unplaced_graph_launches: int  # graph launches no device work joins
    devices: tuple[GpuIdleDevice, ...]
    histograms: tuple[GapHistogram, ...]
    gaps_listed: int
    gaps: tuple[Mapping[str, object], ...]  # the longest gaps, as the gpu_idle_gaps table's rows

    def to_json(self) -> dict[str, object]:
        return {
            "min_gap_ns": self.min_gap_ns,
            "graph_launches": self.graph_launches,
            "unplaced_graph_launches": self.unplaced_graph_launches,
            "devices": [asdict(d) for d in self.devices],
            "histograms": [h.to_json() for h in self.histograms],
            "gaps_listed": self.gaps_listed,
            "gaps": list(self.gaps),
        }


@frozen
class CommDevice:
    """One device's communication kernels, and how much of them compute on the device overlaps."""

    device_id: int
    comm_kernels: int
    comm_kernel_ns: int
    comm_union_ns: int
    overlapped_ns: int
    exposed_ns: int
    overlap_pct: float | None
    window_ns: int
    exposed_pct_of_window: float | None
    shared_streams: tuple[int, ...]  # streams that run both communication and compute kernels
    shared_stream_comm_ns: int

    def to_json(self) -> dict[str, object]:
        return {**{f.name: getattr(self, f.name) for f in fields(self)}, "shared_streams": list(self.shared_streams)}


@frozen
class CommProcess:
    pid: int
    device_id: int
    comm_kernels: int
    comm_kernel_ns: int


@frozen
class CommSkew:
    """(max - min) / max of communication kernel time across devices or processes."""

    max_ns: int
    min_ns: int
    skew_pct: float


@frozen
class CommKernel:
    name: str
    calls: int
    total_ns: int


@frozen
class Communication:
    METRIC_ID: ClassVar[str] = "communication"

    comm_pattern: str
    comm_kernels: int
    comm_kernel_ns: int
    pct_of_kernel_time: float
    exposed_ns: int
    devices: tuple[CommDevice, ...]
    processes: tuple[CommProcess, ...]
    device_skew: CommSkew | None  # None: fewer than two devices ran communication
    process_skew: CommSkew | None
    top_kernels: tuple[CommKernel, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "comm_pattern": self.comm_pattern,
            "comm_kernels": self.comm_kernels,
            "comm_kernel_ns": self.comm_kernel_ns,
            "pct_of_kernel_time": self.pct_of_kernel_time,
            "exposed_ns": self.exposed_ns,
            "devices": [d.to_json() for d in self.devices],
            "processes": [asdict(p) for p in self.processes],
            "device_skew": None if self.device_skew is None else asdict(self.device_skew),
            "process_skew": None if self.process_skew is None else asdict(self.process_skew),
            "top_kernels": [asdict(k) for k in self.top_kernels],
        }
