"""The JSON shapes the trace and analysis layers hand upwards are declared as TypedDicts; each
must say what its reader takes: the capture facts and step outliers are turned into result
dataclasses field by field (results/run.py), trace.distributed is fixed by the schema."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from nsys_llm_explainer.analysis import capture as facts
from nsys_llm_explainer.analysis.steps import Outlier
from nsys_llm_explainer.model import Distributed
from nsys_llm_explainer.results import run
from nsys_llm_explainer.schema import load_report_schema


@pytest.mark.parametrize(("shape", "result"), [
    (facts.SliceFact, run.CaptureSlice),
    (facts.CarriedFactRow, run.CarriedFact),
    (facts.MissingFact, run.MissingEvents),
    (Outlier, run.StepOutlier),
])
def test_fact_keys_and_types_are_the_result_fields(shape: type, result: type) -> None:
    fields = typing.get_type_hints(result)
    declared = {f.name for f in dataclasses.fields(result)}
    assert set(typing.get_type_hints(shape)) == declared
    assert typing.get_type_hints(shape) == {k: v for k, v in fields.items() if k in declared}
    # Keys the result may go without are the ones it has a default for.
    defaults = {f.name for f in dataclasses.fields(result)
                if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING}
    assert shape.__optional_keys__ <= defaults


def test_distributed_is_the_schema_object() -> None:
    spec = load_report_schema()["$defs"]["trace"]["properties"]["distributed"]
    assert list(Distributed.__annotations__) == list(spec["properties"])
    assert set(spec["required"]) == Distributed.__required_keys__
