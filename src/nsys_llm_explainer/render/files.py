"""The files of a report: every chosen format's writer (render/writers.py) over one Shared."""

from __future__ import annotations

from nsys_llm_explainer.model import Report
from nsys_llm_explainer.render import MD_LAYOUTS, Format
from nsys_llm_explainer.render.shared import Shared
from nsys_llm_explainer.render.writers import WRITERS


def build(
    report: Report, formats: tuple[Format, ...], md: str = "compact", shared: Shared | None = None
) -> dict[str, str]:
    """Relative path -> text for every file of the chosen formats. `md`: the report.md
    layout, "compact" (closed sections, for pull requests) or "full" (everything open).
    `shared`: what the writers share (render/shared.py), when the caller has it already."""
    if md not in MD_LAYOUTS:
        raise ValueError(f"unknown report.md layout {md!r} (choose from {', '.join(MD_LAYOUTS)})")
    shared = Shared(report, md) if shared is None else shared.with_layout(md)
    files: dict[str, str] = {}
    for fmt in formats:
        files.update(WRITERS[fmt].render(report, shared))
    return files


def prepare(formats: tuple[Format, ...], md: str = "compact") -> None:
    """Import the writers of `formats` and compile (or load from the cache) the templates
    they will render, and only those (render/templates.py): what the first report of a
    process costs beyond rendering, for a caller that has time to spare now."""
    for fmt in formats:
        WRITERS[fmt].prepare(md)
