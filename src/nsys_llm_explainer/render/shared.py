"""What every writer of one report reads, computed once per report and shared by the writers:
report.json's dict, the kernel labels, the trace strings that hold a backtick, the plots and
the metric sections (report.md and report.html show both), and report.md's layout.

The Report (model.py) is data only; the writers take it with its Shared. A writer called
without one builds its own (tests, a single format). Shared builds each value with a builder
that takes plain inputs and knows no Shared (json_writer.report_doc, svg.build_plots,
sections.render), so the builders sit below it and the writers above."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nsys_llm_explainer.kernels.labels import Labels
    from nsys_llm_explainer.model import Report
    from nsys_llm_explainer.render.report_types import ReportDoc
    from nsys_llm_explainer.render.sections import Section
    from nsys_llm_explainer.render.svg import Missing, Plot


@dataclass
class Shared:
    report: Report
    md: str = "compact"  # report.md's layout: "compact" (closed sections) or "full"

    def with_layout(self, md: str) -> Shared:
        """The same shared values for a report.md in layout `md` (none of them depends on it)."""
        if md == self.md:
            return self
        other = Shared(self.report, md)
        other.__dict__.update({k: v for k, v in self.__dict__.items() if k not in ("report", "md")})
        return other

    @cached_property
    def document(self) -> ReportDoc:
        """report.json as a dict: read it, do not change it."""
        from nsys_llm_explainer.render.json_writer import report_doc

        return report_doc(self.report)

    @cached_property
    def labels(self) -> Labels:
        """Full kernel name -> the short label every writer shows (kernels/labels.py)."""
        from nsys_llm_explainer.kernels.labels import labels_for

        return labels_for(self.report.metrics)

    @cached_property
    def tainted(self) -> frozenset[str]:
        """The report's trace strings holding a backtick (render/rich.taint)."""
        from nsys_llm_explainer.render import rich

        return rich.taint(self.report, self.labels)

    @cached_property
    def plots(self) -> tuple[list[Plot], list[Missing]]:
        """The plots drawn, and why the others are not (render/svg)."""
        from nsys_llm_explainer.render.svg import PlotInput, build_plots

        return build_plots(PlotInput(self.document, self.report, self.labels))

    @cached_property
    def sections(self) -> list[Section]:
        """Every metric's section (render/sections.py)."""
        from nsys_llm_explainer.render import sections

        return sections.render(self.report, self.document)


def shared_for(report: Report, shared: Shared | None) -> Shared:
    """`shared` when the caller has one for this report, else a new one."""
    return shared if shared is not None else Shared(report)
