"""Phase maps: NVTX range name -> phase (prefill, decode, ...).

A phase map is a JSON object {"phase": ["pattern", ...]} (or a list of [phase, pattern]
pairs, which keeps order explicit). A pattern matches a range name by case-insensitive
substring, or by regular expression when written "re:<regex>". The first match wins, in
the file's order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nsys_llm_explainer.errors import UsageError
from nsys_llm_explainer.options.files import read_json_file


@dataclass(frozen=True)
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
