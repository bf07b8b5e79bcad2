"""Built-in peak figures of common data-center and workstation GPUs, for context only.

Every number is the vendor's published *dense* (no 2:4 sparsity) Tensor Core peak, taken
from the datasheet named in `source`; where a datasheet prints only the sparse figure
(marked "*" there), the dense figure is half of it. BF16/FP16 is with FP32 accumulation
(what LLM frameworks use; GeForce cards run FP16-accumulate at twice that rate). `fp8_tflops`
is None on GPUs without FP8 Tensor Cores. `hbm_gbps` is device memory bandwidth in GB/s
(1e9 bytes/s). `host_link_gbps` is the PCIe bandwidth per direction (datasheets print the
bidirectional figure; half of it) or None where the datasheet gives none.

Lookup is by the exact CUDA device name as TARGET_INFO_GPU stores it (cudaGetDeviceProperties
`name`), e.g. "NVIDIA H100 80GB HBM3". A name not in the table is reported as unknown: no
figure is ever guessed from a similar name.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuSpec:
    model: str
    tf32_tflops: float
    bf16_tflops: float
    fp8_tflops: float | None
    hbm_gbps: float
    host_link_gbps: float | None
    source: str


_A100_SRC = "NVIDIA A100 Tensor Core GPU datasheet (TF32 156, BF16/FP16 312 TFLOPS dense)"
_H100_SRC = "NVIDIA H100 Tensor Core GPU datasheet (sparse figures halved)"
_H200_SRC = "NVIDIA H200 Tensor Core GPU datasheet (sparse figures halved)"
_PCIE4 = 32.0  # PCIe Gen4 x16: 64 GB/s bidirectional
_PCIE5 = 64.0  # PCIe Gen5 x16: 128 GB/s bidirectional

_SPECS = (
    (
        ("NVIDIA A100-SXM4-40GB",),
        GpuSpec("A100 SXM4 40GB", 156, 312, None, 1555, _PCIE4, _A100_SRC),
    ),
    (
        ("NVIDIA A100-SXM4-80GB",),
        GpuSpec("A100 SXM4 80GB", 156, 312, None, 2039, _PCIE4, _A100_SRC),
    ),
    (
        ("NVIDIA A100-PCIE-40GB",),
        GpuSpec("A100 PCIe 40GB", 156, 312, None, 1555, _PCIE4, _A100_SRC),
    ),
    (
        ("NVIDIA A100 80GB PCIe",),
        GpuSpec("A100 PCIe 80GB", 156, 312, None, 1935, _PCIE4, _A100_SRC),
    ),
    (
        ("NVIDIA H100 80GB HBM3",),
        GpuSpec("H100 SXM5 80GB", 494.5, 989.5, 1979, 3350, _PCIE5, _H100_SRC),
    ),
    (("NVIDIA H100 PCIe",), GpuSpec("H100 PCIe 80GB", 378, 756.5, 1513, 2000, _PCIE5, _H100_SRC)),
    (("NVIDIA H100 NVL",), GpuSpec("H100 NVL 94GB", 417.5, 835.5, 1670.5, 3900, _PCIE5, _H100_SRC)),
    (("NVIDIA H200",), GpuSpec("H200 SXM 141GB", 494.5, 989.5, 1979, 4800, _PCIE5, _H200_SRC)),
    (
        ("NVIDIA H200 NVL",),
        GpuSpec("H200 NVL 141GB", 417.5, 835.5, 1670.5, 4800, _PCIE5, _H200_SRC),
    ),
    (
        ("NVIDIA L4",),
        GpuSpec(
            "L4",
            60,
            121,
            242.5,
            300,
            _PCIE4,
            "NVIDIA L4 Tensor Core GPU datasheet (sparse figures halved)",
        ),
    ),
    (
        ("NVIDIA L40S",),
        GpuSpec(
            "L40S",
            183,
            366.5,
            733,
            864,
            _PCIE4,
            "NVIDIA L40S GPU datasheet (sparse figures halved)",
        ),
    ),
    (
        ("NVIDIA A10",),
        GpuSpec("A10", 62.5, 125, None, 600, _PCIE4, "NVIDIA A10 Tensor Core GPU datasheet"),
    ),
    (
        ("NVIDIA GeForce RTX 4090",),
        GpuSpec(
            "GeForce RTX 4090",
            82.6,
            165.2,
            330.3,
            1008,
            _PCIE4,
            "NVIDIA Ada Lovelace GPU architecture whitepaper, RTX 4090 (FP32 accumulate, dense)",
        ),
    ),
    (
        ("NVIDIA B200",),
        GpuSpec(
            "B200 180GB",
            1125,
            2250,
            4500,
            8000,
            None,
            "NVIDIA HGX B200 specifications (8-GPU sparse figures / 8 / 2)",
        ),
    ),
)

BY_NAME: dict[str, GpuSpec] = {name: spec for names, spec in _SPECS for name in names}


def lookup(name: str | None) -> GpuSpec | None:
    """The spec for an exact CUDA device name (surrounding spaces ignored), or None."""
    return BY_NAME.get(name.strip()) if name else None


def ridge_points(spec: GpuSpec) -> dict[str, float | None]:
    """Arithmetic intensity (FLOP/byte) where peak compute meets peak memory bandwidth."""

    def ridge(tflops: float | None) -> float | None:
        return round(tflops * 1e12 / (spec.hbm_gbps * 1e9), 1) if tflops else None

    return {
        "tf32": ridge(spec.tf32_tflops),
        "bf16": ridge(spec.bf16_tflops),
        "fp8": ridge(spec.fp8_tflops),
    }
