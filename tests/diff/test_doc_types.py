"""The types that describe the diff's documents hold on real ones: every diff.json written is a
DiffDoc (no key missing, none unknown, every value of its declared type), and every report.json
the diff reads matches load.ReportDoc in the keys it declares (a report has more)."""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path

import pytest

from nsys_llm_explainer import model
from nsys_llm_explainer.api import explain
from nsys_llm_explainer.diff import diff
from nsys_llm_explainer.diff.compare import DiffDoc
from nsys_llm_explainer.diff.load import ReportDoc
from nsys_llm_explainer.diff.render import render_json
from nsys_llm_explainer.diff.totals import TotalRow
from nsys_llm_explainer.render.json_writer import report_dict
from tests.conftest import SHARED_TRACES
from tests.fixtures.diff_workloads import GEMM_RENAMED, workload


def problems(value: object, tp: object, where: str = "$", partial: bool = False) -> list[str]:
    """Where `value` (plain JSON) is not of type `tp`; `partial`: a TypedDict may hold keys it
    does not declare, and lacks none it requires only when not partial either."""
    if isinstance(tp, typing.ForwardRef | str):  # JsonValue's recursion
        tp = getattr(model, tp if isinstance(tp, str) else tp.__forward_arg__)
    origin = typing.get_origin(tp)
    if tp is typing.Any or tp is object:
        return []
    if tp is None or tp is type(None):
        return [] if value is None else [f"{where}: {value!r} is not None"]
    if origin is typing.Literal:
        return [] if value in typing.get_args(tp) else [f"{where}: {value!r} not in {typing.get_args(tp)}"]
    if origin in (typing.Union, types.UnionType):
        found = [problems(value, arg, where, partial) for arg in typing.get_args(tp)]
        return [] if any(not f for f in found) else min(found, key=len)
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {type(value).__name__} is not a list"]
        (arg,) = typing.get_args(tp)
        return [p for i, v in enumerate(value) for p in problems(v, arg, f"{where}[{i}]", partial)]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__} is not an object"]
        key_type, arg = typing.get_args(tp)
        return [p for k, v in value.items()
                for p in (problems(k, key_type, f"{where} key", partial) + problems(v, arg, f"{where}.{k}", partial))]
    if typing.is_typeddict(tp):
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__} is not an object ({tp.__name__})"]  # type: ignore[attr-defined]
        hints = typing.get_type_hints(tp, localns=vars(model))
        marked = typing.get_type_hints(tp, localns=vars(model), include_extras=True)
        required = {k for k in tp.__required_keys__  # type: ignore[attr-defined]
                    if typing.get_origin(marked[k]) is not typing.NotRequired}  # (read from a string annotation)
        out = [] if partial else [f"{where}: lacks {k}" for k in sorted(required - set(value))]
        out += [] if partial else [f"{where}: {k} is not in {tp.__name__}" for k in value if k not in hints]  # type: ignore[attr-defined]
        return out + [p for k, v in value.items() if k in hints for p in problems(v, hints[k], f"{where}.{k}", partial)]
    if tp is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return [] if ok else [f"{where}: {value!r} is not a number"]
    if tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return [] if ok else [f"{where}: {value!r} is not an integer"]
    if isinstance(tp, type):
        return [] if isinstance(value, tp) else [f"{where}: {value!r} is not a {tp.__name__}"]
    raise AssertionError(f"{where}: no check for {tp!r}")


def check(base: Path, new: Path) -> dict[str, typing.Any]:
    """diff.json of diff(base, new) as written, asserted to be a DiffDoc."""
    doc: dict[str, typing.Any] = json.loads(render_json(diff(base, new)))
    assert problems(doc, DiffDoc) == []
    return doc


def report(trace: Path) -> dict[str, typing.Any]:
    """report.json of a trace, as written."""
    doc: dict[str, typing.Any] = json.loads(json.dumps(report_dict(explain(trace))))
    return doc


def test_the_check_fails_on_what_a_diff_doc_is_not() -> None:
    row = {"id": "kernel_time", "label": "Total kernel time", "unit": "ns", "status": "ok", "reason": None,
           "base": 10, "new": 12.5, "delta": 2.5, "delta_pct": 25.0}
    assert problems(row, TotalRow) == []
    assert problems({k: v for k, v in row.items() if k != "delta"}, TotalRow) == ["$: lacks delta"]
    assert problems({**row, "extra": 1}, TotalRow) == ["$: extra is not in TotalRow"]
    assert problems({**row, "status": "skipped"}, TotalRow) == [
        "$.status: 'skipped' not in ('ok', 'not_compared')"]
    assert problems({**row, "base": "10"}, TotalRow) == ["$.base: '10' is not a number"]
    assert problems({**row, "extra": 1}, TotalRow, partial=True) == []


@pytest.fixture(scope="module")
def changed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("types")
    base = workload(d / "base.sqlite", steps=6)
    new = workload(d / "new.sqlite", steps=6, gemm_ns=40_000, gemm_name=GEMM_RENAMED, drop_norm=True,
                   extra_kernel=True)
    return base, new


def test_a_diff_with_steps_is_a_diff_doc(changed: tuple[Path, Path]) -> None:
    doc = check(*changed)
    # the sections the types describe were filled in, not left empty
    assert doc["in_step"]["status"] == "ok" and doc["kernels"]["source"] == "in_step"
    assert len(doc["kernels"]["rows"]) == 4 and len(doc["in_step"]["rows"]) == 5


def test_reports_match_what_the_diff_reads(changed: tuple[Path, Path]) -> None:
    for trace in changed:
        doc = report(trace)
        assert problems(doc, ReportDoc, partial=True) == []
        assert doc["metrics"]["step_work"]["status"] == "ok"


def test_sections_a_report_lacks_fields_for_are_still_diff_docs(changed: tuple[Path, Path], tmp_path: Path) -> None:
    base, new = changed
    doc = report(new)
    for d in doc["metrics"]["gpu_idle"]["devices"]:
        del d["busy_ns"]
    del doc["metrics"]["critical_path"]["median_step"]["composition"][0]["ns"]
    del doc["metrics"]["step_work"]["kernel_ns"]
    (tmp_path / "report.json").write_text(json.dumps(doc))
    out = check(base, tmp_path / "report.json")
    assert [out[k]["status"] for k in ("devices", "critical_path", "in_step")] == ["not_compared"] * 3


@pytest.mark.parametrize("pair", [("kineto/hta_alexnet_a100.json.gz", "kineto/hf_qwen1.5_0.5b_h100.json.gz"),
                                  ("nsys/dynamicvit_nsys_profile.sqlite", "nsys/centerformer_baseline.sqlite")])
def test_diffs_of_real_traces_are_diff_docs(pair: tuple[str, str]) -> None:
    base, new = (SHARED_TRACES / p for p in pair)
    if not base.is_file() or not new.is_file():
        pytest.skip(f"shared traces {pair} not present")
    check(base, new)
    for trace in (base, new):
        assert problems(report(trace), ReportDoc, partial=True) == []
