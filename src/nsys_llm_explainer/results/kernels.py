"""The results of the kernel tables: top_kernels (metrics/top_kernels.py), per_process
(metrics/per_process.py) and ncu_plan (metrics/ncu_targets.py). report.json
`metrics.<id>` is each one's to_json(); schema/metrics/<id>.json documents it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, fields
from typing import Any, ClassVar

from nsys_llm_explainer.frozen import frozen

# One duration mode of a multi-modal kernel (analysis/stats.py): p50_ns, min_ns, max_ns,
# calls, pct_of_calls.
Mode = Mapping[str, int | float]


@frozen
class KernelRow:
    """One (kernel name, device): its calls and durations."""

    name: str
    device_id: int
    calls: int
    total_ns: int
    avg_ns: int
    min_ns: int
    max_ns: int
    p50_ns: int
    p90_ns: int
    p99_ns: int
    pct_of_kernel_time: float
    multimodal: bool
    modes: list[Mode]

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> KernelRow:
        """A row of analysis/kernel_stats.kernel_table as a record."""
        return cls(**record)


@frozen
class TopKernels:
    METRIC_ID: ClassVar[str] = "top_kernels"

    name_mode: str
    total_kernel_ns: int
    kernel_count: int
    distinct_kernels: int
    devices: tuple[int, ...]  # every device that ran kernels
    kernels: tuple[KernelRow, ...]  # by total time, longest first

    def to_json(self) -> dict[str, object]:
        return {
            "name_mode": self.name_mode,
            "total_kernel_ns": self.total_kernel_ns,
            "kernel_count": self.kernel_count,
            "distinct_kernels": self.distinct_kernels,
            "devices": list(self.devices),
            "kernels": [asdict(k) for k in self.kernels],
        }


@frozen
class ProcessRow:
    pid: int
    kernel_count: int
    kernel_ns: int
    pct_of_kernel_time: float
    devices: tuple[int, ...]
    launches_per_s: float | None
    blocking_sync_ns: int | None
    nvtx_ranges: int

    def to_json(self) -> dict[str, object]:
        out = asdict(self)
        out["devices"] = list(self.devices)
        return out


@frozen
class ProcessKernel:
    """One of a process's top kernels."""

    pid: int
    kernel: KernelRow

    def to_json(self) -> dict[str, object]:
        return {"pid": self.pid, **asdict(self.kernel)}


@frozen
class PerProcess:
    METRIC_ID: ClassVar[str] = "per_process"

    processes: tuple[ProcessRow, ...]  # by kernel time, longest first
    top_kernels: tuple[ProcessKernel, ...]
    pid_warning: str | None

    def to_json(self) -> dict[str, object]:
        return {
            "processes": [p.to_json() for p in self.processes],
            "top_kernels": [k.to_json() for k in self.top_kernels],
            "pid_warning": self.pid_warning,
        }


@frozen
class NcuPlan:
    """An Nsight Compute plan for the top kernels (compute/ncu_plan.py)."""

    METRIC_ID: ClassVar[str] = "ncu_plan"

    steady_from_launch: int | None  # the first launch after the capture's steady start
    warmup: str
    launches: int
    counting: str
    files: tuple[str, ...]
    plan: Mapping[str, Any]  # ncu_targets.json's object: version, metrics, targets, skipped

    @property
    def targets(self) -> list[Any]:
        return list(self.plan["targets"])

    def to_json(self) -> dict[str, object]:
        return {
            "steady_from_launch": self.steady_from_launch,
            "warmup": self.warmup,
            "launches": self.launches,
            "counting": self.counting,
            "files": list(self.files),
            "metrics": self.plan["metrics"],
            "targets": self.plan["targets"],
            "skipped": self.plan["skipped"],
        }


@frozen
class CategoryShare:
    """A kernel category's share of a scope (the capture, a device, a process, a phase)."""

    category: str
    kernel_count: int
    total_ns: int
    pct_of_scope_time: float


@frozen
class CategoryTotal(CategoryShare):
    distinct_names: int = 0  # kernel names in the category


@frozen
class DeviceCategories:
    device_id: int
    total_ns: int
    categories: tuple[CategoryShare, ...]  # largest first


@frozen
class ProcessCategories:
    pid: int
    total_ns: int
    categories: tuple[CategoryShare, ...]


@frozen
class PhaseCategories:
    phase: str
    total_ns: int
    categories: tuple[CategoryShare, ...]


@frozen
class UncategorizedName:
    name: str
    matched_text: str
    calls: int
    total_ns: int
    pct_of_kernel_time: float


@frozen
class Categories:
    METRIC_ID: ClassVar[str] = "categories"

    table_source: str  # "built-in" or the --kernel-categories file
    rule_count: int
    name_mode: str
    kernel_count: int
    total_kernel_ns: int
    categorized_pct: float
    other_pct: float
    categories: tuple[CategoryTotal, ...]  # largest first
    by_device: tuple[DeviceCategories, ...]
    by_process: tuple[ProcessCategories, ...]
    by_phase: tuple[PhaseCategories, ...] | None  # with a phase map only
    top_uncategorized: tuple[UncategorizedName, ...]

    def category(self, name: str) -> CategoryTotal | None:
        return next((c for c in self.categories if c.category == name), None)

    def to_json(self) -> dict[str, object]:
        return {
            "table_source": self.table_source,
            "rule_count": self.rule_count,
            "name_mode": self.name_mode,
            "kernel_count": self.kernel_count,
            "total_kernel_ns": self.total_kernel_ns,
            "categorized_pct": self.categorized_pct,
            "other_pct": self.other_pct,
            "categories": [asdict(c) for c in self.categories],
            "by_device": [asdict(d) for d in self.by_device],
            "by_process": [asdict(p) for p in self.by_process],
            "by_phase": None if self.by_phase is None else [asdict(p) for p in self.by_phase],
            "top_uncategorized": [asdict(u) for u in self.top_uncategorized],
        }


@frozen
class CastDevice:
    device_id: int
    cast_ns: int


@frozen
class CastKernel:
    name: str
    calls: int
    total_ns: int


@frozen
class CastsPerStep:
    steps: int
    steps_with_casts: int
    casts_per_step_p50: int
    cast_ns_per_step_p50: int
    every_step: bool  # the same casts in (nearly) every step, in stable numbers


@frozen
class Casts:
    METRIC_ID: ClassVar[str] = "casts"

    cast_kernels: int
    cast_ns: int
    pct_of_kernel_time: float
    devices: tuple[CastDevice, ...]
    top: tuple[CastKernel, ...]
    per_step: CastsPerStep | None  # None with fewer than casts.MIN_STEPS steps
    fsdp_ns: int

    def to_json(self) -> dict[str, object]:
        return {
            "cast_kernels": self.cast_kernels,
            "cast_ns": self.cast_ns,
            "pct_of_kernel_time": self.pct_of_kernel_time,
            "devices": [asdict(d) for d in self.devices],
            "top": [asdict(t) for t in self.top],
            "per_step": None if self.per_step is None else asdict(self.per_step),
            "fsdp_ns": self.fsdp_ns,
        }


@frozen
class FusionCandidate:
    """A chain of short kernels that runs back to back on one stream, again and again."""

    rank: int
    length: int
    occurrences: int
    kernel_ns: int
    removable_gap_ns: int
    proximity: float
    first_kernel_count: int
    kernels: list[str]
    avg_gap_ns: int


@frozen
class FusionCandidates:
    METRIC_ID: ClassVar[str] = "fusion_candidates"

    short_kernel_ns: int
    max_link_gap_ns: int
    min_occurrences: int
    min_proximity: float
    short_kernels: int
    short_kernel_ns_total: int
    candidates_found: int
    candidates: tuple[FusionCandidate, ...]

    def to_json(self) -> dict[str, object]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "candidates"}
        out["candidates"] = [asdict(c) for c in self.candidates]
        return out


@frozen
class GemmMode:
    math_dtype: str
    tensor_cores: str  # yes, no, unknown
    kernels: int
    calls: int
    kernel_ns: int
    pct_of_gemm_time: float


@frozen
class GemmDevice:
    device_id: int
    gemm_ns: int
    fp32_cuda_core_ns: int
    fp32_cuda_core_pct: float


@frozen
class GemmKernel:
    """A GEMM or convolution kernel name on a device, with the math mode its name shows."""

    name: str
    device_id: int
    family: str
    math_dtype: str | None
    accumulator: str | None
    scaling: str | None
    tensor_cores: bool | None
    dtype_token: str | None
    calls: int
    kernel_ns: int
    pct_of_gemm_time: float


@frozen
class Arch:
    """compute/arch.GpuArch as report.json holds it."""

    vendor: str | None
    family: str | None
    exact: bool
    why: str


@frozen
class GemmPrecision:
    METRIC_ID: ClassVar[str] = "gemm_precision"

    gemm_ns: int
    kernel_names: int
    modes: tuple[GemmMode, ...]  # most time first
    by_device: tuple[GemmDevice, ...]
    fp32_kernels: tuple[GemmKernel, ...]  # float32 on CUDA cores, most time first
    arch: Arch

    def to_json(self) -> dict[str, object]:
        return {
            "gemm_ns": self.gemm_ns,
            "kernel_names": self.kernel_names,
            "modes": [asdict(m) for m in self.modes],
            "by_device": [asdict(d) for d in self.by_device],
            "fp32_kernels": [asdict(k) for k in self.fp32_kernels],
            "arch": asdict(self.arch),
        }
