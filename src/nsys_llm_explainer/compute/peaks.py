"""Which peaks apply to a device: the built-in table (gpu_specs), a user's --gpu-peaks file,
or, when the export names no GPU, a representative GPU of the architecture family the
kernel names require, labelled assumed.

--gpu-peaks FILE.json has the format of the built-in table (docs/compute.md):

    {"gpus": [{"names": ["NVIDIA H100 80GB HBM3"], "bf16_tflops": 900, "hbm_gbps": 3000},
              {"names": ["My Lab GPU"], "model": "X1", "arch": "hopper",
               "fp8_tflops": 1500, "bf16_tflops": 750, "hbm_gbps": 2500}]}

An entry whose name is in the built-in table replaces that entry (all of it: figures it
omits become unknown); other names are added. The name "*" applies to every device the
table has no entry for, including an export that names no GPU. Errors are one-line
UsageErrors.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from nsys_llm_explainer.compute import gpu_specs
from nsys_llm_explainer.compute.arch import REPRESENTATIVE, ArchInference, infer_from_kernels
from nsys_llm_explainer.compute.gpu_specs import GpuSpec
from nsys_llm_explainer.options.files import read_json_file

MAX_FILE_BYTES = 1 << 20
ANY_DEVICE = "*"


@dataclass(frozen=True)
class PeakTable:
    by_name: dict[str, GpuSpec]
    source: str  # "built-in" or "built-in, with N entries from FILE"
    user_names: frozenset[str] = frozenset()


def builtin() -> PeakTable:
    return PeakTable(dict(gpu_specs.BY_NAME), "built-in")


def load_gpu_peaks(path: str | Path | None) -> PeakTable:
    """The built-in table, overridden and extended by the entries of `path` (--gpu-peaks)."""
    if path is None:
        return builtin()
    p = Path(path)
    obj = read_json_file(p, "GPU peak file", MAX_FILE_BYTES)
    user = gpu_specs.parse_table(obj, p.name)
    merged = {**gpu_specs.BY_NAME, **user}
    return PeakTable(merged, f"built-in, with {len(user)} names from {p.name}", frozenset(user))


@dataclass(frozen=True)
class ResolvedPeaks:
    spec: GpuSpec | None
    basis: Literal["table", "user file", "assumed", "unknown"]
    note: str  # one sentence for the report
    arch: ArchInference | None = None

    @property
    def assumed(self) -> bool:
        return self.basis == "assumed"


def resolve(
    device_name: str | None,
    table: PeakTable | None = None,
    kernel_names: Iterable[str] = (),
) -> ResolvedPeaks:
    """Peaks for a device: by exact name; else, from kernel names, a representative GPU of
    the inferred family (assumed); else unknown, with the reason."""
    t = table or builtin()
    spec = gpu_specs.lookup(device_name, t.by_name)
    if spec is not None and device_name is not None:
        user = device_name.strip() in t.user_names
        return ResolvedPeaks(
            spec,
            "user file" if user else "table",
            f"{spec.model}: {'figures from the --gpu-peaks file' if user else spec.source}",
        )
    fallback = t.by_name.get(ANY_DEVICE) if ANY_DEVICE in t.user_names else None
    if fallback is not None:
        what = repr(device_name) if device_name else "this export's GPU"
        return ResolvedPeaks(
            fallback, "user file", f"{what}: the '*' entry of the --gpu-peaks file"
        )
    if device_name:
        return ResolvedPeaks(
            None, "unknown", f"no peak figures for {device_name!r}: add it with --gpu-peaks"
        )
    arch = infer_from_kernels(kernel_names)
    if arch is None:
        return ResolvedPeaks(
            None, "unknown", "the export names no GPU and no kernel name shows its architecture"
        )
    rep = gpu_specs.lookup(REPRESENTATIVE[arch.family], t.by_name)
    if rep is None:
        return ResolvedPeaks(None, "unknown", f"{arch.note}; no representative GPU", arch)
    note = (
        f"assumed: peaks of {rep.model}, a representative {arch.family} GPU ({arch.note}); "
        "name the GPU with --gpu-peaks for real figures"
    )
    return ResolvedPeaks(rep, "assumed", note, arch)
