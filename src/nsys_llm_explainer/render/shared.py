"""What every writer of one report reads, computed once per report and shared by the writers:
report.json's dict, the kernel labels and the trace strings that hold a backtick.

The Report (model.py) is data only; the writers take it with its Shared. A writer called
without one builds its own (tests, a single format)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from nsys_llm_explainer.model import Report

if TYPE_CHECKING:
    from nsys_llm_explainer.kernels.labels import Labels


@dataclass
class Shared:
    report: Report

    @cached_property
    def document(self) -> dict[str, Any]:
        """report.json as a dict: read it, do not change it."""
        from nsys_llm_explainer.render.json_writer import report_dict

        return report_dict(self.report)

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


def shared_for(report: Report, shared: Shared | None) -> Shared:
    """`shared` when the caller has one for this report, else a new one."""
    return shared if shared is not None else Shared(report)
