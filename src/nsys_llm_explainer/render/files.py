"""The files of a report, per chosen format; each writer is imported only when chosen."""

from __future__ import annotations

from nsys_llm_explainer.model import Report
from nsys_llm_explainer.render import Format


def build(report: Report, formats: tuple[Format, ...]) -> dict[str, str]:
    """Relative path -> text for every file of the chosen formats."""
    files: dict[str, str] = {}
    for fmt in formats:
        match fmt:
            case Format.MD:
                from nsys_llm_explainer.render import markdown
                from nsys_llm_explainer.render.svg import build_plots, plot_files

                plots, _ = build_plots(report)
                files.update(plot_files(plots))
                files["report.md"] = markdown.render(
                    report, plots=[(p.title, f"plots/{p.id}.svg") for p in plots]
                )
            case Format.JSON:
                from nsys_llm_explainer.render import json_writer

                files["report.json"] = json_writer.render(report)
            case Format.CSV:
                from nsys_llm_explainer.render import csv_writer

                files.update(
                    {f"tables/{name}": text for name, text in csv_writer.render(report).items()}
                )
            case Format.HTML:
                from nsys_llm_explainer.render import html

                files["report.html"] = html.render(report)
    return files
