"""A typed result writes its report.json section (to_json) and holds every field of it:
built back from the section, strictly, it is the same object."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsys_llm_explainer.api import explain
from nsys_llm_explainer.model import MetricResult
from nsys_llm_explainer.options import Options
from tests.conftest import SHARED_TRACES
from tests.fixtures import hostile as h
from tests.typed_results import result_types, typed

TRACES = ["nsys/flashinference_kvdecode_a10g.sqlite", "kineto/hta_alexnet_a100.json.gz"]
# compute_efficiency and model_utilization need operator shapes: a PyTorch profiler trace with them
SHAPES_TRACE = "kineto/hf_qwen1.5_0.5b_h100.json.gz"


def _round_trip(path: Path, options: Options | None = None) -> set[str]:
    report = explain(path, options or Options(), jobs=1)
    seen = set()
    for mid, out in report.metrics.items():
        if not isinstance(out, MetricResult) or out.typed is None:
            continue
        assert type(out.typed) is result_types()[mid]
        assert out.typed.to_json() == out.data, mid  # type: ignore[attr-defined]
        assert typed(mid, out.data, strict=True) == out.typed, mid
        seen.add(mid)
    return seen


def test_round_trip_on_a_small_export(tmp_path: Path) -> None:
    assert {"top_kernels", "per_process", "workload"} <= _round_trip(h.good(tmp_path))


@pytest.mark.parametrize("name", TRACES)
def test_round_trip_on_real_traces(name: str) -> None:
    path = SHARED_TRACES / name
    if not path.is_file():
        pytest.skip(f"shared trace {name} not present")
    assert {"top_kernels", "per_process", "workload", "steps"} <= _round_trip(path)


def test_round_trip_of_the_efficiency_results() -> None:
    path = SHARED_TRACES / SHAPES_TRACE
    if not path.is_file():
        pytest.skip(f"shared trace {SHAPES_TRACE} not present")
    assert {"compute_efficiency", "model_utilization", "serving"} <= _round_trip(path)


def test_round_trip_of_the_ncu_result(tmp_path: Path) -> None:
    from tests.ncu.test_report import FLASH, GEMM, NORM, RAW_FIXTURE, RAW_SHAPES, h100_trace

    trace = h100_trace(tmp_path / "t.sqlite", [(NORM, 1_000_000), (GEMM, 2_300_000), (FLASH, 400_000)],
                       shapes=RAW_SHAPES)
    assert "ncu" in _round_trip(trace, Options(extra={"ncu": (str(RAW_FIXTURE),)}))


def test_table_rows_hold_their_csv_columns_in_order() -> None:
    from dataclasses import fields

    from nsys_llm_explainer.compute.efficiency import KERNEL_COLUMNS, OPERATION_COLUMNS
    from nsys_llm_explainer.metrics.model_utilization import STEP_COLUMNS
    from nsys_llm_explainer.results.efficiency import ComputeKernel, Operation, UtilizationStep

    for cls, columns in ((Operation, OPERATION_COLUMNS), (ComputeKernel, KERNEL_COLUMNS),
                         (UtilizationStep, STEP_COLUMNS)):
        assert tuple(f.name for f in fields(cls)) == columns, cls.__name__
