"""Every writer on a full report, an empty one (no kernels) and one where every metric was
skipped: nothing raises, skipped metrics say why, CSV tables keep their header."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from nsys_llm_explainer.api import explain
from nsys_llm_explainer.metrics import REGISTRY, Metric
from nsys_llm_explainer.model import MetricResult, Report, Skipped, TraceInfo
from nsys_llm_explainer.render import ALL_FORMATS, Format, csv_writer, escape, json_writer, markdown, rich
from nsys_llm_explainer.render.shared import Shared
from nsys_llm_explainer.render.writers import WRITERS
from nsys_llm_explainer.render.writers import build as build_files
from nsys_llm_explainer.schema import errors
from tests.fixtures import variants
from tests.schema.test_report_schema import full_trace

SKIP_REASON = "this test skipped every metric"
RENDER_FAILED = "could not be rendered"


def all_skipped_report() -> Report:
    info = TraceInfo(
        path="t.sqlite",
        size_bytes=0,
        nsys_version=None,
        export_schema_version=None,
        gpus=(),
        processes=(),
        window_start_ns=None,
        window_end_ns=None,
        tables={},
    )
    return Report(
        trace=info,
        metrics={m.id: Skipped(m.id, SKIP_REASON) for m in REGISTRY},
        findings=(),
        warnings=(),
        limitations=tuple(f"{m.id}: not measured, because {SKIP_REASON}." for m in REGISTRY),
        options={
            "kernel_name": "demangled",
            "min_gap_us": 10.0,
            "max_gaps": 50,
            "top_n": 20,
            "phase_map": [],
            "nvtx_coverage_warn_threshold": 0.7,
            "nvtx_kernel_map": True,
            "select": [],
            "ignore": [],
        },
    )


@pytest.fixture(scope="module", params=["full", "empty", "all_skipped"])
def report(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Report:
    folder = tmp_path_factory.mktemp(request.param)
    if request.param == "full":
        return explain(full_trace(folder / "t.sqlite", "2024.6"))
    if request.param == "empty":
        return explain(variants.no_kernels(folder / "t.sqlite"))
    return all_skipped_report()


def shown(report: Report) -> list[Metric]:
    """The metrics a report shows: every one that runs without an option, and those an
    option ran (ncu with --ncu)."""
    return [m for m in REGISTRY if m.option is None or m.id in report.metrics]


def test_every_format_renders(report: Report) -> None:
    files = build_files(report, tuple(Format))
    assert {"report.md", "report.json"} <= set(files)
    assert all(isinstance(text, str) for text in files.values())
    assert all(text for name, text in files.items() if not name.startswith("tables/"))


def test_every_format_has_one_writer() -> None:
    assert list(WRITERS) == list(Format)
    assert all(writer.format is fmt for fmt, writer in WRITERS.items())
    assert ALL_FORMATS.split(",") == [f.value for f in Format]


def test_each_writer_writes_what_build_writes_for_it(report: Report) -> None:
    """writers.build is the writers' union: each writer alone gives its own files, the same
    texts, and no two writers write one path."""
    together = build_files(report, tuple(Format))
    alone = {fmt: dict(writer.render(report, Shared(report))) for fmt, writer in WRITERS.items()}
    paths = [p for files in alone.values() for p in files]
    assert len(paths) == len(set(paths))
    assert {p: t for files in alone.values() for p, t in files.items()} == together
    assert set(alone[Format.JSON]) == {"report.json"}
    assert all(p.startswith("tables/") and p.endswith(".csv") for p in alone[Format.CSV])
    assert all(p == "report.md" or (p.startswith("plots/") and p.endswith(".svg")) for p in alone[Format.MD])


def test_markdown_sections(report: Report) -> None:
    text = markdown.render(report)
    assert text.startswith("# ")
    assert "## Findings" in text and "## Coverage and limitations" in text
    assert RENDER_FAILED not in text, "a metric template failed on this report"
    for metric in shown(report):
        assert f"## {escape.md(metric.title)}" in text, metric.id
        outcome = report.metrics[metric.id]
        if isinstance(outcome, Skipped):
            assert f"_Not measured, because {rich.md(outcome.reason)}._" in text, (
                metric.id
            )


def test_markdown_findings_or_none(report: Report) -> None:
    text = markdown.render(report)
    if report.findings:
        for f in report.findings:
            assert f.rule_id in text
    else:
        assert "No rule fired" in text


def test_json_matches_report_and_schema(report: Report) -> None:
    doc: dict[str, Any] = json.loads(json_writer.render(report))
    assert errors(doc) == []
    assert list(doc["metrics"]) == [m.id for m in shown(report)]
    for mid, outcome in report.metrics.items():
        entry = doc["metrics"][mid]
        if isinstance(outcome, Skipped):
            assert entry == {"status": "skipped", "reason": outcome.reason}
        else:
            assert entry["status"] == "ok" and entry["notes"] == list(outcome.notes)
    assert [f["rule_id"] for f in doc["findings"]] == [f.rule_id for f in report.findings]


def _rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_csv_every_declared_table_with_header(report: Report) -> None:
    files = csv_writer.render(report)
    declared = {f"{stem}.csv": (m.id, cols) for m in shown(report) for stem, cols in m.tables.items()}
    assert set(files) == set(declared)
    for name, (mid, columns) in declared.items():
        rows = _rows(files[name])
        assert rows and rows[0] == list(csv_writer.columns(name[:-4], columns)), name
        if isinstance(report.metrics[mid], Skipped):
            assert rows[1:] == [], f"{name}: a skipped metric writes only the header"


def test_csv_rows_match_json(report: Report) -> None:
    tk = report.metrics["top_kernels"]
    if not isinstance(tk, MetricResult):
        pytest.skip("top_kernels skipped on this report")
    rows = _rows(csv_writer.render(report)["kernels.csv"])
    assert len(rows) - 1 == len(tk.data["kernels"])
    assert sum(int(r[rows[0].index("total_ns")]) for r in rows[1:]) == tk.data["total_kernel_ns"]


def test_all_skipped_report_has_no_findings_and_says_why() -> None:
    report = all_skipped_report()
    text = markdown.render(report)
    assert text.count("_Not measured, because") == len(REGISTRY)


def test_empty_report_is_honest(tmp_path: Path) -> None:
    report = explain(variants.no_kernels(tmp_path / "t.sqlite"))
    assert isinstance(report.metrics["top_kernels"], Skipped)
    assert "NLE107" in [f.rule_id for f in report.findings]
    text = markdown.render(report)
    assert "0.000 ms of kernel time" not in text, "a skipped metric must not print a confident zero"
