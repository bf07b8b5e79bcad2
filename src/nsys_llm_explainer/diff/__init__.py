"""Compare two captures: `diff(base, new)` -> Diff (diff.json content and kernel rows).

Each side is a trace (analyzed with api.explain) or a report.json written earlier; every
delta is computed from the two report.json dicts, so both kinds of input compare alike.
"""

from __future__ import annotations

from pathlib import Path

from nsys_llm_explainer.diff.compare import Diff, compare
from nsys_llm_explainer.diff.gate import Condition
from nsys_llm_explainer.diff.load import Side, load_side
from nsys_llm_explainer.options import Options


def diff(
    base: Path | str,
    new: Path | str,
    options: Options | None = None,
    conditions: tuple[Condition, ...] = (),
    allow_unevaluated: bool = False,
    allow_incomparable: bool = False,
) -> Diff:
    options = options or Options()
    sides = load_side(Path(base), options, "BASE"), load_side(Path(new), options, "NEW")
    return compare(*sides, conditions, allow_unevaluated, allow_incomparable)


__all__ = ["Diff", "Side", "compare", "diff", "load_side"]
