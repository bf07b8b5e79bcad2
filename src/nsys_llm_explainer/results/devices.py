"""The results about the GPUs and the data moved to and from them: gpu_context
(metrics/gpu_context.py), memory_transfers (metrics/memory_transfers.py) and communication
(metrics/communication.py). report.json
`metrics.<id>` is each one's to_json(); schema/metrics/<id>.json documents it."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import ClassVar

from nsys_llm_explainer.frozen import frozen


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
    achieved_gbps: float
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
