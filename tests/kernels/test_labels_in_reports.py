"""On every shared real trace and the synthetic example: kernel labels tell kernels apart in
every report.md table and plot, report.json stays a summary, and what it leaves out is in the
CSV it names."""

from __future__ import annotations

import csv
import html
import importlib.util
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from nsys_llm_explainer.api import explain
from nsys_llm_explainer.kernels.labels import LABEL_MAX, kernel_names
from nsys_llm_explainer.metrics import REGISTRY
from nsys_llm_explainer.render import Format, writers
from nsys_llm_explainer.render.escape import md
from nsys_llm_explainer.render.json_writer import CUTS
from nsys_llm_explainer.schema import errors
from tests.conftest import NSYS_TRACES, nsys_trace_files

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = "example"
CASES = [p.stem for p in nsys_trace_files()] + [EXAMPLE]
JSON_LIMIT = 1_000_000
# Metrics whose report.md section has a table column naming kernels (a cell may chain
# several with " → "); the section is titled by the metric's title.
KERNEL_COLUMNS = {
    "top_kernels": "Kernel",
    "launch_storm": "Kernel",
    "launch_overhead": "Kernel",
    "categories": "Kernel",
    "communication": "Communication kernel",
    "fusion_candidates": "Kernels",
}
TITLES = {m.id: m.title for m in REGISTRY}


def example_trace(folder: Path) -> Path:
    spec = importlib.util.spec_from_file_location("make_trace", ROOT / "examples" / "a100_vllm" / "make_trace.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from benchmarks.synth import generate

    path = folder / "example.sqlite"
    generate(module.CONFIG, path, sidecar=False)
    return path


@pytest.fixture(scope="module", params=CASES)
def built(request, tmp_path_factory) -> dict[str, Any]:
    if request.param == EXAMPLE:
        trace = example_trace(tmp_path_factory.mktemp("example"))
    else:
        trace = NSYS_TRACES / f"{request.param}.sqlite"
    report = explain(trace)
    return {"report": report, "files": writers.build(report, tuple(Format))}


def md_tables(text: str) -> dict[str, list[list[dict[str, str]]]]:
    """Section title -> its tables, each a list of {header: cell} rows."""
    out: dict[str, list[list[dict[str, str]]]] = {}
    section = ""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        heading = re.match(r"#{2,3} (.*)", lines[i])
        if heading:
            section = heading.group(1).strip().replace("\\", "")
        if lines[i].startswith("|") and i + 1 < len(lines) and set(lines[i + 1]) <= set("|-: "):
            header = _cells(lines[i])
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(dict(zip(header, _cells(lines[i]), strict=False)))
                i += 1
            out.setdefault(section, []).append(rows)
            continue
        i += 1
    return out


def _cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def test_labels_are_distinct_and_short(built):
    report = built["report"]
    names = kernel_names(report.metrics)
    labels = {n: report.kernel_labels(n) for n in names}
    assert len(set(labels.values())) == len(names)
    assert all(0 < len(v) <= LABEL_MAX for v in labels.values())
    # A shortened label keeps its brackets balanced (it drops whole arguments and words).
    for name, label in labels.items():
        if name.count("<") == name.count(">") and name.count("(") == name.count(")"):
            assert label.count("<") == label.count(">") and label.count("(") == label.count(")"), label


def test_md_tables_name_kernels_by_distinct_labels(built):
    report = built["report"]
    shown = {md(report.kernel_labels(n)): n for n in kernel_names(report.metrics)}
    tables = md_tables(built["files"]["report.md"])
    checked = 0
    for metric_id, column in KERNEL_COLUMNS.items():
        section = TITLES[metric_id]
        for rows in tables.get(section, []):
            if not rows or column not in rows[0]:
                continue
            for row in rows:
                for cell in row[column].split(" → "):
                    assert cell in shown, f"{section}: {cell!r} is not a kernel label"
                    checked += 1
            if metric_id == "top_kernels":  # row by row: the label of that row's kernel
                kernels = report.document["metrics"]["top_kernels"]["kernels"]
                assert [r[column] for r in rows] == [md(report.kernel_labels(k["name"])) for k in kernels[: len(rows)]]
    if report.ok("top_kernels"):
        assert checked > 0


def test_plot_bars_carry_distinct_labels(built):
    report = built["report"]
    svg = built["files"].get("plots/top_kernels.svg")
    if svg is None:
        assert not report.ok("top_kernels")
        return
    # Bar labels: right-aligned <text> whose tooltip is the kernel's full name.
    found = re.findall(r'<text[^>]*text-anchor="end"[^>]*><title>([^<]*)</title>([^<]*)</text>', svg)
    assert found
    names = [html.unescape(full) for full, _ in found]
    texts = [html.unescape(label) for _, label in found]
    assert len(set(names)) == len(names)  # one bar per kernel name
    assert len(set(texts)) == len(texts)
    assert texts == [report.kernel_labels(n) for n in names]


def test_report_json_is_a_valid_summary(built):
    doc = json.loads(built["files"]["report.json"])
    assert len(built["files"]["report.json"].encode()) < JSON_LIMIT
    assert errors(doc) == []
    assert doc == built["report"].to_dict()


def test_left_out_rows_are_in_the_named_csv(built):
    report, out = built["report"], built["files"]
    doc = json.loads(out["report.json"])
    for cut in CUTS:
        m = doc["metrics"].get(cut.metric_id)
        if m is None or m["status"] != "ok":  # absent: a metric only an option runs (ncu)
            continue
        kept = m[cut.key]
        table = list(csv.DictReader(io.StringIO(out[f"tables/{cut.csv}.csv"])))
        full = report.metrics[cut.metric_id].data[cut.key]  # type: ignore[union-attr]
        left = m["left_out"].get(cut.key)
        assert len(kept) + (left["rows"] if left else 0) == len(full)
        assert kept == json.loads(json.dumps(full[: len(kept)]))
        if left:
            assert left["csv"] == f"tables/{cut.csv}.csv"
            if "normalized_name" in table[0]:  # NVTX: raw rows, grouped by normalized name
                assert len({r["normalized_name"] for r in table}) == len(full)
            else:
                assert len(table) == len(full)
