"""Where kernel names appear in a report, and the one set of labels every writer shows.

Labels come from analysis/kernel_labels over every kernel name of the report at once, so a
kernel reads the same in report.md, report.html, the plots and finding evidence, and two
different kernels never read the same. The CSV tables listed in KERNEL_TABLES get a `label`
column beside the full name, so a label with a ` #xxxx` suffix points to its row.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from nsys_llm_explainer.kernels.short_labels import LABEL_MAX as LABEL_MAX
from nsys_llm_explainer.kernels.short_labels import cut, digest, kernel_labels
from nsys_llm_explainer.model import MetricResult, Outcome

LABEL_COLUMN = "label"
# CSV stem -> the column holding a kernel name (the label column goes right after it).
KERNEL_TABLES: dict[str, str] = {
    "kernels": "name",
    "kernels_by_pid": "name",
    "tiny_kernels": "name",
    "launch_overhead_kernels": "name",
    "kernel_category_names": "name",
    "compute_kernels": "name",
    "gemm_precision": "name",
    "operator_kernels": "kernel",
    "step_work_kernels": "name",
    "ncu_kernels": "name",
    "ncu_launches": "kernel",
}
# metric id -> {list key in the metric's data: record key holding a kernel name, or a list of them}
KERNEL_FIELDS: dict[str, dict[str, str]] = {
    "top_kernels": {"kernels": "name"},
    "per_process": {"top_kernels": "name"},
    "launch_storm": {"tiny_kernels": "name"},
    "launch_overhead": {"top_kernels": "name"},
    "categories": {"top_uncategorized": "name"},
    "communication": {"top_kernels": "name"},
    "steps": {"outliers": "kernel_name"},
    "step_work": {"names": "name"},
    "fusion_candidates": {"candidates": "kernels"},
    "compute_efficiency": {"kernels": "name"},
    "gemm_precision": {"fp32_kernels": "name"},
    "ncu_plan": {"targets": "name"},
    "operators": {"operator_kernels": "kernel"},
    "ncu": {"kernels": "name", "launches": "kernel"},
}


def _names_in(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list | tuple):
        yield from (v for v in value if isinstance(v, str))


def kernel_names(metrics: Mapping[str, Outcome]) -> set[str]:
    """Every kernel name the metrics' data and CSV tables hold."""
    names: set[str] = set()
    for mid, outcome in metrics.items():
        if not isinstance(outcome, MetricResult):
            continue
        section = outcome.data  # what report.json shows of the metric: the names to label
        for key, field in KERNEL_FIELDS.get(mid, {}).items():
            rows = section.get(key)
            if isinstance(rows, list):
                for row in rows:
                    if isinstance(row, dict):
                        names.update(_names_in(row.get(field)))
        for table in outcome.tables:
            column = KERNEL_TABLES.get(table.name)
            if column is not None and table.frame is not None and column in table.frame:
                names.update(str(n) for n in table.frame[column].dropna().unique())
    return names


class Labels:
    """Full kernel name -> label, for the names of one report (see module docstring)."""

    def __init__(self, names: Iterable[str]) -> None:
        self._map = kernel_labels(names)

    def __call__(self, name: object) -> str:
        if not isinstance(name, str):
            return "" if name is None else str(name)
        found = self._map.get(name)
        if found is not None:
            return found
        # Not one of the report's names (a caller's own string): shortened, always suffixed,
        # so it cannot pass for one of them.
        suffix = " #" + digest(name)[:8]
        return cut(" ".join(name.split()), LABEL_MAX - len(suffix)) + suffix

    def __len__(self) -> int:
        return len(self._map)

    def items(self) -> Iterable[tuple[str, str]]:
        return self._map.items()


_last: tuple[tuple[Outcome, ...], Labels] | None = None  # rules and writers ask for the same report's


def labels_for(metrics: Mapping[str, Outcome]) -> Labels:
    """The labels of one report's kernel names, computed once when asked again for the same
    metric results (the same objects: a results dict and its copy in the Report)."""
    global _last
    outcomes = tuple(metrics.values())
    cached = _last
    if cached is not None and len(cached[0]) == len(outcomes) and all(
        a is b for a, b in zip(cached[0], outcomes, strict=True)
    ):
        return cached[1]
    labels = Labels(kernel_names(metrics))
    _last = (outcomes, labels)
    return labels


__all__ = ["KERNEL_FIELDS", "KERNEL_TABLES", "LABEL_COLUMN", "LABEL_MAX", "Labels", "kernel_names", "labels_for"]
