"""The typed results of compute_efficiency, model_utilization and ncu (results/efficiency.py)
write their report.json sections and are built back from them (tests/test_typed_results.py),
and their table rows hold the columns of their CSV tables, in order."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from nsys_llm_explainer.compute.efficiency import KERNEL_COLUMNS, OPERATION_COLUMNS
from nsys_llm_explainer.metrics.model_utilization import STEP_COLUMNS
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.results.efficiency import ComputeKernel, Operation, UtilizationStep
from tests.conftest import SHARED_TRACES
from tests.ncu.test_report import FLASH, GEMM, NORM, RAW_FIXTURE, RAW_SHAPES, h100_trace
from tests.test_typed_results import _round_trip

# compute_efficiency and model_utilization need operator shapes: a PyTorch profiler trace with them
SHAPES_TRACE = "kineto/hf_qwen1.5_0.5b_h100.json.gz"


def test_round_trip_of_the_efficiency_results() -> None:
    path = SHARED_TRACES / SHAPES_TRACE
    if not path.is_file():
        pytest.skip(f"shared trace {SHAPES_TRACE} not present")
    assert {"compute_efficiency", "model_utilization", "serving"} <= _round_trip(path)


def test_round_trip_of_the_ncu_result(tmp_path: Path) -> None:
    trace = h100_trace(tmp_path / "t.sqlite", [(NORM, 1_000_000), (GEMM, 2_300_000), (FLASH, 400_000)],
                       shapes=RAW_SHAPES)
    assert "ncu" in _round_trip(trace, Options(extra={"ncu": (str(RAW_FIXTURE),)}))


def test_table_rows_hold_their_csv_columns_in_order() -> None:
    for cls, columns in ((Operation, OPERATION_COLUMNS), (ComputeKernel, KERNEL_COLUMNS),
                         (UtilizationStep, STEP_COLUMNS)):
        assert tuple(f.name for f in fields(cls)) == columns, cls.__name__
