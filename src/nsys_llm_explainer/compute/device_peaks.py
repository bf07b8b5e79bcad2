"""The peak figures of each GPU that ran kernels: by its name in the built-in table or the
--gpu-peaks file; when the trace names no GPU, a representative GPU of the architecture the
kernel names require, labelled assumed (compute/peaks.py). Shared by compute_efficiency and
model_utilization; a bad --gpu-peaks file is a one-line usage error, raised by the CLI
before any work.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.analysis.devices import described
from nsys_llm_explainer.analysis.groups import distinct_few
from nsys_llm_explainer.compute import peaks
from nsys_llm_explainer.compute.gpu_specs import DTYPE_CLASSES, GpuSpec
from nsys_llm_explainer.compute.roofline import Roof, roofs


@lru_cache(maxsize=8)
def peak_table(path: str | None) -> peaks.PeakTable:
    return peaks.load_gpu_peaks(path)


@dataclass(frozen=True)
class DevicePeaks:
    devices: list[int]  # devices that ran kernels, ascending
    resolved: dict[int, peaks.ResolvedPeaks]
    names: dict[int, str | None]  # device -> the name the trace gives it
    table_source: str
    notes: list[str] = field(default_factory=list)

    def spec(self, device: int) -> GpuSpec | None:
        r = self.resolved.get(device)
        return r.spec if r else None

    def peak_flops(self, device: int, dtype_class: str | None) -> float:
        """FLOP/s of a dtype class on a device, NaN when unknown."""
        spec = self.spec(device)
        value = spec.peak_tflops(dtype_class) if spec and dtype_class else None
        return value * 1e12 if value else float("nan")

    def bandwidth(self, device: int) -> float:
        spec = self.spec(device)
        return spec.hbm_gbps * 1e9 if spec else float("nan")

    def roofs(self, device: int, classes: list[str]) -> list[Roof]:
        spec = self.spec(device)
        wanted = tuple(c for c in DTYPE_CLASSES if c in classes)
        return list(roofs(spec, wanted).values()) if spec else []

    def describe(self, device: int) -> dict[str, Any]:
        r = self.resolved[device]
        spec = r.spec
        return {
            "device_id": device,
            "gpu": self.names.get(device),
            "model": spec.model if spec else None,
            "peaks_basis": r.basis,
            "peaks_note": r.note,
            "arch_evidence": list(r.arch.evidence) if r.arch else [],
            "peak_tflops": {d: spec.peak_tflops(d) for d in DTYPE_CLASSES} if spec else {},
            "hbm_gbps": spec.hbm_gbps if spec else None,
            "ridge_flop_per_byte": {
                d: round(spec.peak_tflops(d) * 1e3 / spec.hbm_gbps, 1)  # type: ignore[operator]
                for d in DTYPE_CLASSES
                if spec and spec.peak_tflops(d)
            },
        }


def device_peaks(ctx: Context) -> DevicePeaks:
    """Peaks per device that ran kernels (cached per --gpu-peaks file)."""
    path = ctx.options.gpu_peaks

    def build() -> DevicePeaks:
        table = peak_table(path)
        k = ctx.data.kernels()
        devices = sorted(int(d) for d in distinct_few(k.device).tolist())
        names: dict[int, str | None] = {g.device_id: g.name for g in described(ctx.data)[0]}
        kernel_names: list[str] = []
        if any(not names.get(d) for d in devices):
            uniq = np.unique(k.name_id)
            kernel_names = list(ctx.data.kernel_names(uniq).values())
        resolved = {
            d: peaks.resolve(names.get(d) or None, table, kernel_names if not names.get(d) else ())
            for d in devices
        }
        notes = sorted({r.note for r in resolved.values() if r.basis in ("assumed", "unknown")})
        return DevicePeaks(devices, resolved, {d: names.get(d) for d in devices}, table.source, notes)

    return ctx.data.cached(f"compute_peaks:{path}", build)
