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
