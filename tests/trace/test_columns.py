"""The column store: narrowed id columns, columns derived or computed when read."""

from __future__ import annotations

import numpy as np
import pytest

from nsys_llm_explainer.trace.columns import Columns, narrow


def test_narrow_keeps_values_and_halves_what_fits() -> None:
    fits = np.array([-1, 0, 2**31 - 1, -(2**31)], dtype=np.int64)
    got = narrow(fits)
    assert got.dtype == np.int32 and got.tolist() == fits.tolist()
    wide = np.array([0, 2**31], dtype=np.int64)
    assert narrow(wide) is wide
    assert narrow(np.empty(0, np.int64)).dtype == np.int32


def test_a_derived_column_is_computed_not_stored() -> None:
    c = Columns("t", {"start": np.array([1, 5, 9]), "end": np.array([4, 5, 20])}, derived=("dur",))
    assert "dur" in c and "dur" not in c.cols and "dur" in c.names
    assert c.dur.tolist() == [3, 0, 11] and c["dur"].tolist() == [3, 0, 11]
    taken = c.take(np.array([2, 0]))
    assert taken.dur.tolist() == [11, 3] and "dur" not in taken.cols
    assert c.without("end").names == ("start",)  # a formula without its inputs is gone too...
    with pytest.raises(KeyError):
        c.without("end")["dur"]  # ...and says so by name


def test_rows_of_computes_a_derived_column_over_the_rows_asked_for() -> None:
    start, end = np.array([1, 5, 9, 2]), np.array([4, 5, 20, 7])
    c = Columns("t", {"start": start, "end": end, "id": np.array([7, 8, 9, 10])}, derived=("dur",))
    rows = np.array([3, 0, 3])
    assert c.rows_of("dur", rows).tolist() == [5, 3, 5]  # end - start, by hand
    assert c.rows_of("id", rows).tolist() == [10, 7, 10]
    mask = np.array([True, False, True, False])
    assert c.rows_of("dur", mask).tolist() == [3, 11]
    with pytest.raises(KeyError):
        c.rows_of("nope", rows)


def test_a_computed_column_is_built_on_each_read_and_stored_by_take() -> None:
    calls = []

    def build() -> np.ndarray:
        calls.append(1)
        return np.array([10, 20, 30])

    c = Columns("t", {}, computed={"x": build}, size=3)
    assert len(c) == 3 and "x" in c and c.names == ("x",)
    assert c.x.tolist() == [10, 20, 30] and c["x"].tolist() == [10, 20, 30] and len(calls) == 2
    taken = c.take(np.array([True, False, True]))
    assert taken.cols["x"].tolist() == [10, 30] and len(taken) == 2
    with pytest.raises(ValueError, match="different lengths"):
        Columns("t", {"a": np.zeros(2)}, computed={"x": build}, size=3)
