"""Degraded exports: each metric that cannot run says why, in report.md and report.json."""

from __future__ import annotations

import json

import pytest

from nsys_llm_explainer.metrics import ALWAYS
from nsys_llm_explainer.model import Report, Skipped
from nsys_llm_explainer.render import Format, csv_writer, rich
from nsys_llm_explainer.render.writers import build as build_files
from tests.conftest import CORE_METRICS, GENERATIONS, analyze, ok
from tests.fixtures import variants
from tests.fixtures.builder import TraceBuilder

KERNEL_METRICS = ("top_kernels", "launch_storm", "gpu_idle", "nvtx_attribution", "per_process")
ALL_FORMATS = (Format.MD, Format.JSON, Format.CSV)


def assert_reasons_rendered(report: Report) -> dict[str, str]:
    """Every skipped metric's reason is in report.md and report.json; returns the reasons."""
    files = build_files(report, ALL_FORMATS)
    doc = json.loads(files["report.json"])
    reasons = {}
    for mid, outcome in report.metrics.items():
        if isinstance(outcome, Skipped):
            assert outcome.reason
            assert doc["metrics"][mid] == {"status": "skipped", "reason": outcome.reason}
            assert f"_Not measured, because {rich.md(outcome.reason)}._" in files["report.md"]
            reasons[mid] = outcome.reason
        else:
            assert doc["metrics"][mid]["status"] == "ok"
    for metric in ALWAYS:
        for stem, columns in metric.tables.items():
            assert files[f"tables/{stem}.csv"].splitlines()[0] == ",".join(csv_writer.columns(stem, columns))
    return reasons


@pytest.mark.parametrize("version", GENERATIONS)
def test_no_nvtx(version, tmp_path):
    report = analyze(variants.no_nvtx(tmp_path / "t.sqlite", version))
    reasons = assert_reasons_rendered(report)
    assert set(reasons) & set(CORE_METRICS) == {"nvtx_ranges", "nvtx_attribution"}
    assert "NVTX_EVENTS" in reasons["nvtx_ranges"]
    assert "NVTX" in reasons["nvtx_attribution"]
    # The rest is still measured; the device window runs from the first kernel, not the API.
    assert ok(report, "top_kernels")["total_kernel_ns"] == 1_200
    dev = ok(report, "gpu_idle")["devices"][0]
    assert (dev["window_start_ns"], dev["window_end_ns"], dev["busy_ns"]) == (1_500, 2_800, 1_200)


@pytest.mark.parametrize("version", GENERATIONS)
@pytest.mark.parametrize("kernel_table", [False, True])
def test_no_kernels(version, kernel_table, tmp_path):
    path = variants.no_kernels(tmp_path / "t.sqlite", version, kernel_table=kernel_table)
    report = analyze(path)
    reasons = assert_reasons_rendered(report)
    assert set(KERNEL_METRICS) <= set(reasons)
    expected = "kernel table is empty" if kernel_table else "no kernel table"
    assert expected in reasons["top_kernels"]
    sync = ok(report, "sync")  # API rows exist: sync is measured
    assert (sync["blocking_calls"], sync["blocking_ns"]) == (1, 3_000)
    assert any(f.rule_id == "NLE107" for f in report.findings)


@pytest.mark.parametrize("version", GENERATIONS)
def test_empty_export_skips_everything(version, tmp_path):
    report = analyze(variants.empty_export(tmp_path / "t.sqlite", version))
    reasons = assert_reasons_rendered(report)
    assert set(CORE_METRICS) <= set(reasons)
    assert report.trace.window_start_ns is None
    assert "not measured, because the export has no CUDA activity" in build_files(
        report, (Format.MD,))["report.md"]


@pytest.mark.parametrize("version", GENERATIONS)
def test_null_ends_are_reported_not_measured_as_zero(version, tmp_path):
    report = analyze(variants.null_ends(tmp_path / "t.sqlite", version))
    assert_reasons_rendered(report)
    text = build_files(report, (Format.MD,))["report.md"]
    assert "1 without an end are excluded" in text


def test_missing_string_ids_are_named_and_warned(build):
    b = TraceBuilder("2024.6")
    b.kernel(0, 100, demangledName=9_001, shortName=9_001)
    b.nvtx(0, 1_000, textId=9_002)
    b.runtime(10, 20, corr=5, nameId=9_003)
    b.kernel(200, 250, corr=5, name="named")
    report = analyze(build(b))
    names = {r["name"] for r in ok(report, "top_kernels")["kernels"]}
    assert names == {"(unknown name) #9001", "named"}
    assert [r["name"] for r in ok(report, "nvtx_ranges")["ranges"]] == ["(unknown name) #9002"]
    assert any(w.startswith("StringIds: 3 referenced ids are missing") for w in report.warnings)
    assert_reasons_rendered(report)


def test_unusable_rows_are_counted_in_a_warning(build):
    b = TraceBuilder("2024.6")
    b.kernel(0, 100, name="good")
    b.kernel(500, 400, name="ends_before_start")
    report = analyze(build(b))
    assert ok(report, "top_kernels")["kernel_count"] == 1
    assert any("1 of 2 rows ignored" in w for w in report.warnings)
