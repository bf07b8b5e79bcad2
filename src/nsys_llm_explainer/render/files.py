"""The files of a report, per chosen format; each writer is imported only when chosen."""

from __future__ import annotations

from typing import Any

from nsys_llm_explainer.model import Report
from nsys_llm_explainer.render import MD_LAYOUTS, Format
from nsys_llm_explainer.render.shared import Shared, shared_for


def build(
    report: Report, formats: tuple[Format, ...], md: str = "compact", shared: Shared | None = None
) -> dict[str, str]:
    """Relative path -> text for every file of the chosen formats. `md`: the report.md
    layout, "compact" (closed sections, for pull requests) or "full" (everything open).
    `shared`: what the writers share (render/shared.py), when the caller has it already."""
    if md not in MD_LAYOUTS:
        raise ValueError(f"unknown report.md layout {md!r} (choose from {', '.join(MD_LAYOUTS)})")
    shared = shared_for(report, shared)
    files: dict[str, str] = {}
    plots: Any = None  # built once for report.md and report.html
    sections: Any = None  # the metric sections, rendered once for both
    for fmt in formats:
        if fmt in (Format.MD, Format.HTML) and plots is None:
            from nsys_llm_explainer.render import sections as sections_mod
            from nsys_llm_explainer.render.svg import build_plots

            plots = build_plots(report, shared)
            sections = sections_mod.render(report, shared)
        match fmt:
            case Format.MD:
                from nsys_llm_explainer.render import markdown
                from nsys_llm_explainer.render.svg import plot_files

                plots_md, missing = plots
                files.update(plot_files(plots_md))
                files["report.md"] = markdown.render(
                    report,
                    plots=[(p.title, f"plots/{p.id}.svg") for p in plots_md],
                    mode=md,
                    sections=sections,
                    missing=missing,
                    shared=shared,
                )
            case Format.JSON:
                from nsys_llm_explainer.render import json_writer

                files["report.json"] = json_writer.render(report, shared)
            case Format.CSV:
                from nsys_llm_explainer.render import csv_writer

                files.update(
                    {f"tables/{name}": text for name, text in csv_writer.render(report, shared).items()}
                )
            case Format.HTML:
                from nsys_llm_explainer.render import html

                files["report.html"] = html.render(report, plots, sections=sections, shared=shared)
            case Format.NCU:
                files.update(ncu_files(report))
    return files


def prepare(formats: tuple[Format, ...], md: str = "compact") -> None:
    """Import the writers of `formats` and compile (or load from the cache) the templates
    they will render, and only those (render/templates.py): what the first report of a
    process costs beyond rendering, for a caller that has time to spare now."""
    if Format.MD in formats or Format.HTML in formats:
        from nsys_llm_explainer.render import markdown, sections, svg  # noqa: F401

        markdown.prepare(md if Format.MD in formats else None)
    if Format.HTML in formats:
        from nsys_llm_explainer.render import html

        html.prepare()


def ncu_files(report: Report) -> dict[str, str]:
    """ncu_plan.sh and ncu_targets.json, when the plan has targets (none without kernels)."""
    from nsys_llm_explainer.model import MetricResult

    outcome = report.metrics.get("ncu_plan")
    if not isinstance(outcome, MetricResult) or not outcome.data.get("targets"):
        return {}
    from nsys_llm_explainer.compute import ncu_plan
    from nsys_llm_explainer.metrics.ncu_targets import plan_of

    plan = plan_of(outcome.data)
    return {"ncu_plan.sh": ncu_plan.plan_script(plan), "ncu_targets.json": ncu_plan.targets_json(plan)}
