"""From a trace path to files on disk, for the CLI: explain, then Report.write."""

from __future__ import annotations

from pathlib import Path

from nsys_llm_explainer.api import explain
from nsys_llm_explainer.model import Report, Skipped
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.render import Format
from nsys_llm_explainer.render.writers import build as build_files
from nsys_llm_explainer.runtime.progress import make_progress

__all__ = ["build_files", "summary_lines", "write_report"]


def write_report(
    trace: Path,
    out: Path,
    options: Options,
    formats: tuple[Format, ...],
    force: bool = False,
    quiet: bool = False,
    jobs: int | None = None,
    md: str = "compact",
) -> Report:
    """explain() and Report.write()."""
    progress = make_progress(enabled=not quiet)
    try:
        report = explain(trace, options, progress=progress, jobs=jobs)
    finally:
        progress.close()
    report.write(out, formats, force=force, md=md)
    return report


def summary_lines(report: Report, out: Path) -> list[str]:
    lines = [f"wrote {out}/ ({len(report.findings)} findings)"]
    d = report.diagnosis
    if d is not None:
        lines.append(f"  verdict: {d.verdict} ({d.confidence.value}): {d.summary}")
    for f in report.findings[:5]:
        lines.append(f"  [{f.severity.value}] {f.rule_id} {f.title}")
    skipped = [m for m, o in report.metrics.items() if isinstance(o, Skipped)]
    if skipped:
        lines.append(f"  not measured: {', '.join(skipped)} (reasons in report.md)")
    if report.warnings:
        lines.append(f"  {len(report.warnings)} warning(s), see report.md")
    return lines

