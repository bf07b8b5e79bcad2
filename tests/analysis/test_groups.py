"""Group codes and per-group distinct counts against plain Python references."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.analysis import groups
from nsys_llm_explainer.analysis.groups import distinct_per_group, group_codes


def _reference(codes: list[int], values: list[int], ngroups: int) -> list[int]:
    seen: list[set[int]] = [set() for _ in range(ngroups)]
    for c, v in zip(codes, values, strict=True):
        seen[c].add(v)
    return [len(s) for s in seen]


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 6).flatmap(lambda g: st.tuples(
        st.just(g),
        st.lists(st.tuples(st.integers(0, g - 1), st.integers(-(2**40), 2**40) | st.integers(0, 5)), max_size=60),
    ))
)
def test_distinct_per_group_counts_each_groups_distinct_values(case: tuple[int, list[tuple[int, int]]]) -> None:
    ngroups, pairs = case
    codes = np.array([c for c, _ in pairs], dtype=np.int64)
    values = np.array([v for _, v in pairs], dtype=np.int64)
    got = distinct_per_group(codes, values, ngroups)
    assert got.tolist() == _reference(codes.tolist(), values.tolist(), ngroups)


def test_distinct_per_group_falls_back_when_the_packed_key_would_overflow(monkeypatch) -> None:
    codes = np.array([0, 1, 1, 0, 1])
    values = np.array([5, 5, 9, 5, 5])
    monkeypatch.setattr(groups, "PACK_LIMIT", 4)  # forces the group_codes path
    assert distinct_per_group(codes, values, 3).tolist() == [1, 2, 0]


def test_group_codes_numbers_tuples_by_first_appearance() -> None:
    codes, (a, b) = group_codes(np.array([3, 1, 3, 1, 3]), np.array([7, 7, 7, 8, 7]))
    assert codes.tolist() == [0, 1, 0, 2, 0]
    assert a.tolist() == [3, 1, 1] and b.tolist() == [7, 7, 8]
