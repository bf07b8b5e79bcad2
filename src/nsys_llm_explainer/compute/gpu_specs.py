"""Built-in peak figures of common data-center and workstation GPUs, for context only.

The table lives in data/gpu_specs.json, in the same format as a user's --gpu-peaks file
(parsed by `parse_table` below, so one validator covers both). Every number is the vendor's
published *dense* (no 2:4 sparsity) peak, taken from the document named in `source`; where a
datasheet prints only the sparse figure (marked "*" there), the dense figure is half of it.

Per-dtype peaks, in TFLOPS (INT8 in TOPS), None where the GPU has no such unit or the vendor
publishes no figure:

- fp64: FP64 on the CUDA cores; fp64_tensor: FP64 on Tensor Cores (A100, H100, B200).
- fp32: FP32 on the CUDA cores (non-tensor): what a float32 GEMM gets without TF32.
- tf32, bf16, fp16, fp8, int8: Tensor Core peaks. BF16/FP16 is with FP32 accumulation (what
  LLM frameworks use; GeForce cards run FP16-accumulate at twice that rate).

`hbm_gbps` is device memory bandwidth in GB/s (1e9 bytes/s; GDDR on the cards that have it).
`host_link_gbps` is the PCIe bandwidth per direction (datasheets print the bidirectional
figure; half of it) or None where the datasheet gives none.

Lookup is by the exact CUDA device name as TARGET_INFO_GPU (or Kineto's deviceProperties)
stores it, e.g. "NVIDIA H100 80GB HBM3". A name not in the table is reported as unknown: no
figure is ever guessed from a similar name.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, fields
from importlib import resources
from typing import Any

from nsys_llm_explainer.errors import UsageError

DATA_FILE = "data/gpu_specs.json"
# Peak columns per dtype class; "fp64" prefers the Tensor Core figure where there is one.
PEAK_FIELDS = {
    "fp64": ("fp64_tensor_tflops", "fp64_tflops"),
    "fp32": ("fp32_tflops",),
    "tf32": ("tf32_tflops",),
    "bf16": ("bf16_tflops",),
    "fp16": ("fp16_tflops",),
    "fp8": ("fp8_tflops",),
    "int8": ("int8_tops",),
}
DTYPE_CLASSES = tuple(PEAK_FIELDS)
ARCH_FAMILIES = ("volta", "turing", "ampere", "ada", "hopper", "blackwell", "cdna3", "")
MAX_ENTRIES = 500
MAX_PEAK = 1e6  # TFLOPS or GB/s: a thousand times today's largest GPU; above is a typo
_NUMBER_FIELDS = (
    "fp64_tflops",
    "fp64_tensor_tflops",
    "fp32_tflops",
    "tf32_tflops",
    "bf16_tflops",
    "fp16_tflops",
    "fp8_tflops",
    "int8_tops",
    "hbm_gbps",
    "host_link_gbps",
)
_ENTRY_KEYS = frozenset({"names", "model", "arch", "source", *_NUMBER_FIELDS})


@dataclass(frozen=True)
class GpuSpec:
    model: str
    tf32_tflops: float | None
    bf16_tflops: float | None
    fp8_tflops: float | None
    hbm_gbps: float
    host_link_gbps: float | None
    source: str
    fp64_tflops: float | None = None
    fp64_tensor_tflops: float | None = None
    fp32_tflops: float | None = None
    fp16_tflops: float | None = None
    int8_tops: float | None = None
    arch: str = ""

    def peak_tflops(self, dtype: str) -> float | None:
        """Dense peak for a dtype class (see DTYPE_CLASSES), or None when there is none."""
        for name in PEAK_FIELDS.get(dtype, ()):
            value = getattr(self, name)
            if value:
                return float(value)
        return None

    def peaks(self) -> dict[str, float | None]:
        return {d: self.peak_tflops(d) for d in DTYPE_CLASSES}


def _number(value: Any, where: str, required: bool) -> float | None:
    if value is None and not required:
        return None
    # bool is an int in Python; true/false in a peak table is a mistake, not 1 or 0.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UsageError(f"{where} must be a positive number{'' if required else ' or null'}")
    if not math.isfinite(value) or value <= 0 or value > MAX_PEAK:
        raise UsageError(f"{where} must be a positive number no larger than {MAX_PEAK:g}")
    return float(value)


def _entry(item: Any, n: int, source: str) -> tuple[tuple[str, ...], GpuSpec]:
    where = f"{source}: gpus[{n}]"
    if not isinstance(item, dict):
        raise UsageError(f"{where} must be an object with names, hbm_gbps and peak figures")
    unknown = sorted(set(item) - _ENTRY_KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}")
    names = item.get("names")
    if (
        not isinstance(names, list)
        or not names
        or not all(isinstance(x, str) and x.strip() and len(x) <= 200 for x in names)
    ):
        raise UsageError(f"{where}: names must be a non-empty list of device names")
    values = {
        f: _number(item.get(f), f"{where}.{f}", required=f == "hbm_gbps") for f in _NUMBER_FIELDS
    }
    model, arch = item.get("model", names[0]), item.get("arch", "")
    src = item.get("source", source)
    if not isinstance(model, str) or not isinstance(src, str):
        raise UsageError(f"{where}: model and source must be strings")
    if arch not in ARCH_FAMILIES:
        raise UsageError(f"{where}: arch must be one of {', '.join(a for a in ARCH_FAMILIES if a)}")
    hbm = values.pop("hbm_gbps")
    assert hbm is not None  # required above
    spec = GpuSpec(model=model, source=src, arch=arch, hbm_gbps=hbm, **values)
    return tuple(x.strip() for x in names), spec


def parse_table(obj: Any, source: str) -> dict[str, GpuSpec]:
    """Device name -> spec from a decoded peak-table document; UsageError (one line) if bad."""
    if not isinstance(obj, dict) or not isinstance(obj.get("gpus"), list):
        raise UsageError(f'{source}: expected a JSON object {{"gpus": [...]}}')
    unknown = sorted(set(obj) - {"gpus", "comment"})
    if unknown:
        raise UsageError(f"{source}: unknown key(s) {', '.join(map(repr, unknown))}")
    items = obj["gpus"]
    if not items or len(items) > MAX_ENTRIES:
        raise UsageError(f"{source}: gpus must hold 1 to {MAX_ENTRIES} entries")
    table: dict[str, GpuSpec] = {}
    for n, item in enumerate(items):
        names, spec = _entry(item, n, source)
        for name in names:
            if name in table:
                raise UsageError(f"{source}: device name {name!r} appears twice")
            table[name] = spec
    return table


@functools.cache
def builtin_table() -> dict[str, GpuSpec]:
    text = resources.files("nsys_llm_explainer").joinpath(DATA_FILE).read_text(encoding="utf-8")
    return parse_table(json.loads(text), DATA_FILE)


BY_NAME: dict[str, GpuSpec] = builtin_table()
SPEC_FIELDS = tuple(f.name for f in fields(GpuSpec))


def lookup(name: str | None, table: dict[str, GpuSpec] | None = None) -> GpuSpec | None:
    """The spec for an exact CUDA device name (surrounding spaces ignored), or None."""
    return (BY_NAME if table is None else table).get(name.strip()) if name else None


def ridge_points(spec: GpuSpec) -> dict[str, float | None]:
    """Arithmetic intensity (FLOP/byte) where peak compute meets peak memory bandwidth."""

    def ridge(tflops: float | None) -> float | None:
        return round(tflops * 1e12 / (spec.hbm_gbps * 1e9), 1) if tflops else None

    return {
        "tf32": ridge(spec.tf32_tflops),
        "bf16": ridge(spec.bf16_tflops),
        "fp8": ridge(spec.fp8_tflops),
    }
