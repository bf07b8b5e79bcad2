"""Options that change what is measured. The CLI builds one; scripts can too.

Phase maps: NVTX range name -> phase (prefill, decode, ...).

A phase map is a JSON object {"phase": ["pattern", ...]} (or a list of [phase, pattern]
pairs, which keeps order explicit). A pattern matches a range name by case-insensitive
substring, or by regular expression when written "re:<regex>". The first match wins, in
the file's order.

Small JSON files named by options (--phase-map, --kernel-categories, --gpu-peaks, --model)."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from nsys_llm_explainer.errors import UsageError
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.model import JsonObject, JsonValue


def read_json_file(path: str | Path, what: str, max_bytes: int | None = None) -> Any:
    """The parsed JSON of `path`; a one-line UsageError naming `what` when it cannot be used."""
    p = Path(path)
    try:
        if max_bytes is not None and p.stat().st_size > max_bytes:
            raise UsageError(f"{p}: {what} is larger than {max_bytes} bytes")
        return json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{p}: cannot read {what} ({exc.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{p}: {what} is not valid JSON ({exc})") from None


@frozen
class PhaseMap:
    rules: tuple[tuple[str, str], ...] = field(default=())  # (phase, pattern) in order

    def __bool__(self) -> bool:
        return bool(self.rules)

    def phase_of(self, name: str) -> str | None:
        lowered = name.lower()
        for phase, pattern in self.rules:
            if pattern.startswith("re:"):
                if re.search(pattern[3:], name, flags=re.IGNORECASE):
                    return phase
            elif pattern.lower() in lowered:
                return phase
        return None

    def phases(self) -> list[str]:
        return list(dict.fromkeys(p for p, _ in self.rules))

    def to_json(self) -> list[list[str]]:
        return [[p, pat] for p, pat in self.rules]

    @staticmethod
    def from_json(obj: Any, source: str = "phase map") -> PhaseMap:
        pairs: list[tuple[str, str]] = []
        if isinstance(obj, dict):
            for phase, pats in obj.items():
                items = [pats] if isinstance(pats, str) else pats
                if not isinstance(items, list) or not all(isinstance(p, str) for p in items):
                    raise UsageError(
                        f"{source}: phase {phase!r} must map to a string or list of strings"
                    )
                pairs += [(str(phase), p) for p in items]
        elif isinstance(obj, list):
            for item in obj:
                if not (
                    isinstance(item, list)
                    and len(item) == 2
                    and all(isinstance(x, str) for x in item)
                ):
                    raise UsageError(f"{source}: expected [phase, pattern] pairs")
                pairs.append((item[0], item[1]))
        else:
            raise UsageError(f"{source}: expected a JSON object {{phase: [patterns]}}")
        for _, pat in pairs:
            if pat.startswith("re:"):
                try:
                    re.compile(pat[3:])
                except re.error as exc:
                    raise UsageError(f"{source}: bad regular expression {pat!r}: {exc}") from None
            elif not pat:
                raise UsageError(f"{source}: empty pattern")
        return PhaseMap(tuple(pairs))

    @staticmethod
    def load(path: Path) -> PhaseMap:
        obj = read_json_file(path, "phase map")
        return PhaseMap.from_json(obj, str(path))


class KernelNameMode(StrEnum):
    """How kernel names are shown (--kernel-name)."""

    DEMANGLED = "demangled"
    SHORT = "short"
    MANGLED = "mangled"


KERNEL_NAME_MODES = tuple(m.value for m in KernelNameMode)


@frozen
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
    # options a metric needs (Metric.option): --ncu's paths under "ncu"
    extra: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def to_json(self) -> JsonObject:
        """report.json's options: every field, its tuples as lists."""
        out: JsonObject = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}
        out["phase_map"] = [list[JsonValue](rule) for rule in self.phase_map.to_json()]
        out["extra"] = {k: list[JsonValue](v) for k, v in self.extra.items()}
        return out
