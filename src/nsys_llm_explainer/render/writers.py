"""One writer per output format, WRITERS, the one mapping from Format to writer that every
loop over formats reads, and the files of a report: every chosen format's writer over one
Shared (build, prepare).

A writer turns the Report, with what writers share (render/shared.py: report.json's dict,
the kernel labels, the plots and metric sections of report.md and report.html), into
files: (relative path, text) pairs, made one at a time. Each imports its module only when it runs, so choosing
`--format json` loads no Jinja and no plot code. To add a format: a Format member
(render/__init__.py) and a writer here; tests/render/test_writer_registry.py checks
that every Format has one."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import ClassVar, Protocol

from nsys_llm_explainer.model import Report
from nsys_llm_explainer.render import MD_LAYOUTS, Format
from nsys_llm_explainer.render.shared import Shared


class Writer(Protocol):
    format: ClassVar[Format]

    def render(self, report: Report, shared: Shared) -> Iterable[tuple[str, str]]:
        """(relative path, text) of this format's files: a writer whose files are many
        makes each when the previous one is taken (output.write puts it on disk first)."""
        ...

    def prepare(self, md: str) -> None:
        """Import what render() needs and compile its templates (`md`: report.md's layout)."""
        ...


class MarkdownWriter:
    format: ClassVar[Format] = Format.MD

    def render(self, report: Report, shared: Shared) -> Iterable[tuple[str, str]]:
        from nsys_llm_explainer.render import markdown
        from nsys_llm_explainer.render.svg import plot_files

        plots, missing = shared.plots
        files = plot_files(plots)
        files["report.md"] = markdown.render(
            report,
            plots=[(p.title, f"plots/{p.id}.svg") for p in plots],
            mode=shared.md,
            sections=shared.sections,
            missing=missing,
            shared=shared,
        )
        return files.items()

    def prepare(self, md: str) -> None:
        from nsys_llm_explainer.render import markdown, sections, svg  # noqa: F401

        markdown.prepare(md)


class JsonWriter:
    format: ClassVar[Format] = Format.JSON

    def render(self, report: Report, shared: Shared) -> Iterable[tuple[str, str]]:
        from nsys_llm_explainer.render import json_writer

        return [("report.json", json_writer.dumps(shared.document))]

    def prepare(self, md: str) -> None:
        from nsys_llm_explainer.render import json_writer  # noqa: F401


class CsvWriter:
    format: ClassVar[Format] = Format.CSV

    def render(self, report: Report, shared: Shared) -> Iterable[tuple[str, str]]:
        from nsys_llm_explainer.render import csv_writer

        return ((f"tables/{name}", text) for name, text in csv_writer.files(report, shared))

    def prepare(self, md: str) -> None:
        from nsys_llm_explainer.render import csv_writer  # noqa: F401


class HtmlWriter:
    format: ClassVar[Format] = Format.HTML

    def render(self, report: Report, shared: Shared) -> Iterable[tuple[str, str]]:
        from nsys_llm_explainer.render import html

        return [("report.html", html.render(report, shared.plots, sections=shared.sections, shared=shared))]

    def prepare(self, md: str) -> None:
        from nsys_llm_explainer.render import html, markdown, sections, svg  # noqa: F401

        markdown.prepare(None)  # the metric sections report.html shows
        html.prepare()


class NcuWriter:
    """ncu_plan.sh and ncu_targets.json, when the plan has targets (none without kernels)."""

    format: ClassVar[Format] = Format.NCU

    def render(self, report: Report, shared: Shared) -> Iterable[tuple[str, str]]:
        from nsys_llm_explainer.model import typed_result
        from nsys_llm_explainer.results.kernels import NcuPlan

        result = typed_result(report.metrics, NcuPlan)
        if result is None or not result.targets:
            return []
        from nsys_llm_explainer.compute import ncu_plan

        plan = dict(result.plan)
        return [("ncu_plan.sh", ncu_plan.plan_script(plan)), ("ncu_targets.json", ncu_plan.targets_json(plan))]

    def prepare(self, md: str) -> None:
        pass


WRITERS: dict[Format, Writer] = {
    w.format: w for w in (MarkdownWriter(), JsonWriter(), CsvWriter(), HtmlWriter(), NcuWriter())
}


def build(
    report: Report, formats: tuple[Format, ...], md: str = "compact", shared: Shared | None = None
) -> dict[str, str]:
    """Relative path -> text for every file of the chosen formats. `md`: the report.md
    layout, "compact" (closed sections, for pull requests) or "full" (everything open).
    `shared`: what the writers share (render/shared.py), when the caller has it already."""
    return dict(files(report, formats, md, shared))


def files(
    report: Report, formats: tuple[Format, ...], md: str = "compact", shared: Shared | None = None
) -> Iterator[tuple[str, str]]:
    """build()'s files one at a time, each format's rendered when the previous format's have
    been taken: output.write puts each on disk before the next format is rendered, so a run
    never holds every file's text at once."""
    if md not in MD_LAYOUTS:
        raise ValueError(f"unknown report.md layout {md!r} (choose from {', '.join(MD_LAYOUTS)})")
    shared = Shared(report, md) if shared is None else shared.with_layout(md)
    for fmt in formats:
        yield from WRITERS[fmt].render(report, shared)


def prepare(formats: tuple[Format, ...], md: str = "compact") -> None:
    """Import the writers of `formats` and compile (or load from the cache) the templates
    they will render, and only those (render/templates.py): what the first report of a
    process costs beyond rendering, for a caller that has time to spare now."""
    for fmt in formats:
        WRITERS[fmt].prepare(md)
