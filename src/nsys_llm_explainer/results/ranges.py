"""The results about NVTX ranges: nvtx_attribution (metrics/nvtx_attribution.py).
report.json `metrics.<id>` is each one's to_json(); schema/metrics/<id>.json documents it."""

from __future__ import annotations

from dataclasses import asdict
from typing import ClassVar

from nsys_llm_explainer.frozen import frozen


@frozen
class RangeRow:
    """A (normalized) range name and the kernel time launched inside it."""

    name: str
    phase: str | None
    kernel_count: int
    kernel_ns: int
    inclusive_kernel_ns: int  # its own and every nested range's
    pct_of_kernel_time: float


@frozen
class PhaseShare:
    """The kernels launched inside a phase's ranges (the phase map)."""

    phase: str
    kernel_count: int
    kernel_ns: int
    pct_of_kernel_time: float


@frozen
class TopLevelRange:
    name: str
    inclusive_kernel_ns: int


@frozen
class NvtxAttribution:
    METRIC_ID: ClassVar[str] = "nvtx_attribution"

    total_kernel_ns: int
    attributed_ns: int  # kernel time launched inside some range
    coverage: float
    kernels_without_launch: int
    kernels_without_launch_ns: int
    kernels_outside_ranges: int  # launched, but outside every range
    coverage_warn_threshold: float
    ranges: tuple[RangeRow, ...]
    phases: tuple[PhaseShare, ...]  # only with a phase map
    top_level: tuple[TopLevelRange, ...]  # outermost ranges by inclusive time

    def to_json(self) -> dict[str, object]:
        return {
            "total_kernel_ns": self.total_kernel_ns,
            "attributed_ns": self.attributed_ns,
            "coverage": self.coverage,
            "kernels_without_launch": self.kernels_without_launch,
            "kernels_without_launch_ns": self.kernels_without_launch_ns,
            "kernels_outside_ranges": self.kernels_outside_ranges,
            "coverage_warn_threshold": self.coverage_warn_threshold,
            "ranges": [asdict(r) for r in self.ranges],
            "phases": [asdict(p) for p in self.phases],
            "top_level": [asdict(t) for t in self.top_level],
        }
