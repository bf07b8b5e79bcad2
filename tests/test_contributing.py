"""docs/CONTRIBUTING.md lists the files each kind of addition takes; these tests keep those
lists true: every file it names exists, and every metric and trace format has each file its
list names."""

from __future__ import annotations

import ast
import importlib
import json
import re
from pathlib import Path

import pytest

from nsys_llm_explainer.metrics import ORDER
from nsys_llm_explainer.model import TraceFormat
from nsys_llm_explainer.trace import formats

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "nsys_llm_explainer"
GUIDE = ROOT / "docs" / "CONTRIBUTING.md"
SECTIONS = ("Add a metric", "Add a rule", "Add an output format", "Add a trace format")
PATH = re.compile(r"`((?:src/|docs/|tests/|render/|rules/|runtime/|trace/)[^`\s]*)`")


def _section(title: str) -> str:
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def _exists(path: str) -> bool:
    """A path as the guide writes it (from the repository root, or the package's), with
    placeholders (`<id>`, `NNN`) standing for any name."""
    pattern = re.sub(r"<[^>]+>|NNN", "*", path.rstrip("/"))
    return any(any(base.glob(pattern)) for base in (ROOT, PKG))


@pytest.mark.parametrize("title", SECTIONS)
def test_every_file_the_guide_names_exists(title: str) -> None:
    paths = PATH.findall(_section(title))
    assert paths, f"'{title}' names no file"
    missing = [p for p in paths if not _exists(p)]
    assert not missing, f"docs/CONTRIBUTING.md '{title}' names files that do not exist: {missing}"


@pytest.mark.parametrize("name", ORDER)
def test_every_metric_has_the_files_of_its_list(name: str) -> None:
    metric = importlib.import_module(f"nsys_llm_explainer.metrics.{name}").METRIC
    for path in (
        PKG / "metrics" / f"{name}.py",
        PKG / "schema" / "metrics" / f"{metric.id}.json",
        PKG / "templates" / "metrics" / f"{metric.id}.md.j2",
        ROOT / "docs" / "metrics" / f"{metric.id}.md",
    ):
        assert path.is_file(), f"{metric.id}: missing {path.relative_to(ROOT)}"


def _result_types() -> dict[str, tuple[str, str]]:
    """METRIC_ID -> (results module, class) of every typed result in results/."""
    out = {}
    for path in sorted((PKG / "results").glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(node, ast.ClassDef):
                continue
            for item in node.body:
                if (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                        and item.target.id == "METRIC_ID" and isinstance(item.value, ast.Constant)):
                    out[str(item.value.value)] = (path.stem, node.name)
    return out


def test_every_result_type_belongs_to_a_metric_that_returns_it() -> None:
    types = _result_types()
    assert types, "results/ holds no typed result"
    modules = {importlib.import_module(f"nsys_llm_explainer.metrics.{n}").METRIC.id: n for n in ORDER}
    for metric_id, (module, cls) in types.items():
        assert metric_id in modules, f"results/{module}.py {cls}: no metric {metric_id!r}"
        source = (PKG / "metrics" / f"{modules[metric_id]}.py").read_text(encoding="utf-8")
        assert f"results.{module} import" in source and cls in source and "typed=" in source, (
            f"{metric_id} does not return its typed result {cls} (MetricResult(..., typed=result))"
        )


@pytest.mark.parametrize("fmt", list(TraceFormat), ids=lambda f: f.word)
def test_every_trace_format_has_the_files_of_its_list(fmt: TraceFormat) -> None:
    assert fmt.label, fmt
    assert fmt in formats.READERS, f"{fmt}: no Reader in trace/formats.py READERS"
    load = (PKG / "trace" / fmt.word / "load.py")
    assert load.is_file(), f"{fmt}: no trace/{fmt.word}/load.py"
    assert re.search(r"^class \w+TraceData\(", load.read_text(encoding="utf-8"), re.M), f"{fmt}: no TraceData in {load}"
    schema = json.loads((PKG / "schema" / "report.schema.json").read_text(encoding="utf-8"))
    trace = schema["$defs"][schema["properties"]["trace"]["$ref"].rsplit("/", 1)[-1]]
    enum = trace["properties"]["format"]["enum"]
    assert fmt.value in enum, f"{fmt}: not in report.schema.json trace.format"
