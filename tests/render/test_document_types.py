"""The writers read report.json and ncu.json through TypedDicts (render/report_types.py,
ncu/results.py): each declared key a real document holds has the declared type, and each
required key is there. A key renamed or retyped in a metric without its type here fails."""

from __future__ import annotations

import ast
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, is_typeddict

from nsys_llm_explainer.api import explain
from nsys_llm_explainer.model import JsonObject, JsonValue
from nsys_llm_explainer.ncu import results as ncu_results
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.render import report_types
from nsys_llm_explainer.render.shared import Shared
from tests.ncu.test_report import FLASH, GEMM, NORM, RAW_FIXTURE, RAW_SHAPES, h100_trace
from tests.render.test_writers import full_trace

NAMES = {**vars(report_types), **vars(ncu_results), "JsonValue": JsonValue}


def problems(value: object, tp: Any, where: str) -> list[str]:
    """Where `value` is not of the declared type `tp` (JSON values: int for a float is fine)."""
    if tp is Any or tp == JsonValue or isinstance(tp, typing.ForwardRef):  # the forward ref: JsonValue
        return []
    if tp == JsonObject:
        return [] if isinstance(value, dict) else [f"{where}: {type(value).__name__}, not an object"]
    if is_typeddict(tp):
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not an object"]
        hints = typing.get_type_hints(tp, localns=NAMES)
        out = [f"{where}.{k}: missing" for k in sorted(tp.__required_keys__) if k not in value]
        for key, hint in hints.items():
            if key in value:
                out += problems(value[key], hint, f"{where}.{key}")
        return out
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        tries = [problems(value, arm, where) for arm in args]
        return [] if any(not t for t in tries) else min(tries, key=len)
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {type(value).__name__}, not a list"]
        return [p for i, v in enumerate(value) for p in problems(v, args[0], f"{where}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not an object"]
        return [p for k, v in value.items() for p in problems(v, args[1], f"{where}.{k}")]
    if tp is type(None):
        return [] if value is None else [f"{where}: {value!r}, not null"]
    if tp is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, tp)
    return [] if ok else [f"{where}: {value!r}, not {tp.__name__}"]


def test_the_checker_finds_a_wrong_type_and_a_missing_key() -> None:
    good = {"bucket": "compute", "ns": 5, "pct_of_window": 50}
    assert problems(good, report_types.BucketDoc, "b") == []
    assert problems({**good, "ns": "5"}, report_types.BucketDoc, "b") == ["b.ns: '5', not int"]
    assert problems({"bucket": "compute", "ns": 5}, report_types.BucketDoc, "b") == ["b.pct_of_window: missing"]
    assert problems({"device_id": 0, "busy_pct": [1.0, None, "x"]}, report_types.TimelineDeviceDoc, "d") == [
        "d.busy_pct[2]: 'x', not float"]


def read(report: Any) -> report_types.ReportDoc:
    return Shared(report.data()).document


def test_report_json_matches_its_types(tmp_path: Path) -> None:
    doc = read(explain(full_trace(tmp_path / "t.sqlite")))
    assert doc["findings"] and doc["diagnosis"]["devices"]  # the types are checked on real content
    read_by_writers = set(report_types.MetricsDoc.__annotations__)
    assert {m for m in read_by_writers if doc["metrics"].get(m, {}).get("status") == "ok"} >= {
        "top_kernels", "timeline", "gpu_idle", "per_process", "categories", "workload", "capture", "serving"}
    assert problems(doc, report_types.ReportDoc, "report") == []


def test_ncu_documents_match_their_types(tmp_path: Path) -> None:
    trace = h100_trace(tmp_path / "t.sqlite", [(NORM, 1_000_000), (GEMM, 2_300_000), (FLASH, 400_000)],
                       shapes=RAW_SHAPES)
    doc = read(explain(trace, Options(extra={"ncu": (str(RAW_FIXTURE),)})))
    launches = doc["metrics"]["ncu"]["launches"]
    assert len(launches) == 3 and all(d.get("matched_kernel") for d in launches)
    assert problems(doc, report_types.ReportDoc, "report") == []
    ncu = ncu_results.document(ncu_results.assess(ncu_results.load([RAW_FIXTURE]), None, None),
                               {"name": "x", "version": "0"})
    assert [d["roofline"] is not None for d in ncu["launches"]] == [True, True, True]
    assert problems(ncu, ncu_results.NcuDocument, "ncu") == []


def test_ncu_rows_keep_every_column() -> None:
    ncu = ncu_results.document(ncu_results.assess(ncu_results.load([RAW_FIXTURE]), None, None),
                               {"name": "x", "version": "0"})
    rows = ncu_results.launch_rows(ncu["launches"])
    first = ncu["launches"][0]
    assert list(rows[0]) == list(ncu_results.LAUNCH_COLUMNS)
    assert rows[0]["kernel"] == first["kernel"] and rows[0]["class"] == first["class"]
    assert rows[0]["files"] == "; ".join(first["files"]) and rows[0]["matched_kernel"] is None
    point = first["roofline"]
    assert point is not None and rows[0]["roofline_pct_of_roof"] == point["pct_of_roof"]
    assert rows[0]["flops_fp32"] == first["flops"].get("fp32")


def _runtime_imports(tree: ast.Module) -> Iterator[str]:
    """The modules a module imports when it runs: all but those under `if TYPE_CHECKING:`."""
    def walk(node: ast.AST) -> Iterator[str]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and ast.unparse(child.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
                yield from (m for c in child.orelse for m in walk(ast.Module(body=[c], type_ignores=[])))
                continue
            if isinstance(child, ast.ImportFrom) and child.module:
                yield child.module
                yield from (f"{child.module}.{a.name}" for a in child.names)
            elif isinstance(child, ast.Import):
                yield from (a.name for a in child.names)
            yield from walk(child)
    return walk(tree)


def test_the_document_types_cost_a_run_nothing() -> None:
    """render/report_types.py is for the type checker: no module of the package imports it
    when it runs (making its classes would cost every run start-up time and memory)."""
    package = Path(report_types.__file__).parents[1]
    found = {p.relative_to(package).as_posix() for p in package.rglob("*.py")
             if "nsys_llm_explainer.render.report_types" in set(_runtime_imports(ast.parse(p.read_text())))}
    assert found == set()
    code = "from nsys_llm_explainer.render import report_types\n"
    assert set(_runtime_imports(ast.parse(code))) == {"nsys_llm_explainer.render",
                                                       "nsys_llm_explainer.render.report_types"}
    assert set(_runtime_imports(ast.parse(f"if TYPE_CHECKING:\n    {code}"))) == set()
