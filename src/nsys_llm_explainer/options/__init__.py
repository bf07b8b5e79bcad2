"""Options that change what is measured. The CLI builds one; scripts can too."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from nsys_llm_explainer.options.phases import PhaseMap


class KernelNameMode(StrEnum):
    """How kernel names are shown (--kernel-name)."""

    DEMANGLED = "demangled"
    SHORT = "short"
    MANGLED = "mangled"


KERNEL_NAME_MODES = tuple(m.value for m in KernelNameMode)


@dataclass(frozen=True)
class Options:
    kernel_name: str = "demangled"
    min_gap_us: float = 10.0
    max_gaps: int = 50
    top_n: int = 20
    phase_map: PhaseMap = field(default_factory=PhaseMap)
    nvtx_coverage_warn_threshold: float = 0.7
    nvtx_kernel_map: bool = True
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    include_capture_info: bool = False
    timeout_s: float | None = None
    step_range: str | None = None  # NVTX range name that delimits one serving step
    kernel_categories: str | None = None  # path of a JSON file extending/overriding categories
    gpu_peaks: str | None = None  # path of a --gpu-peaks JSON file (peak figures per GPU)
    model_config: str | None = None  # path of a Hugging Face config.json (--model)
    model_flops_per_token: float | None = None  # --model-flops-per-token
    tokens_per_step: int | None = None  # --tokens-per-step
    what_if: tuple[str, ...] = ()  # --what-if changes replayed besides the built-in ones ("kernel:gemm=2x")
    extra: dict[str, Any] = field(default_factory=dict)  # options added by later metrics

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["phase_map"] = self.phase_map.to_json()
        return out
