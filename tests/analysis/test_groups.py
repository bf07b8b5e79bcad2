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


def _first_appearance_reference(rows: list[tuple[int, ...]]) -> tuple[list[int], list[int]]:
    """Per row its tuple's number in order of first appearance; per number its first row."""
    number: dict[tuple[int, ...], int] = {}
    first: list[int] = []
    for i, row in enumerate(rows):
        if row not in number:
            number[row] = len(number)
            first.append(i)
    return [number[r] for r in rows], first


_COLUMN = st.sampled_from([np.int8, np.int32, np.int64, np.uint16, np.uint32])


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 3).flatmap(lambda k: st.tuples(
    st.lists(_COLUMN, min_size=k, max_size=k),
    st.lists(st.tuples(*[st.integers(0, 3) | st.integers(0, 120) for _ in range(k)]), max_size=80),
    st.sampled_from([0, -50, 100_000]),
)))
def test_group_rows_and_codes_match_a_first_appearance_reference(case) -> None:
    """The packed-key paths (table lookup for dense keys, hash for sparse ones, the
    factorize fallback past PACK_LIMIT) give the reference's codes and first rows, for
    signed and unsigned columns of several widths."""
    dtypes, rows, shift = case
    def shifted(dt: type) -> int:  # negative and large values where the type holds them
        return shift if dt in (np.int32, np.int64) else min(shift, 0) if dt is np.int8 else 0

    cols = [np.array([r[j] + shifted(dt) for r in rows], dtype=dt) for j, dt in enumerate(dtypes)]
    codes_ref, first_ref = _first_appearance_reference([tuple(int(c[i]) for c in cols) for i in range(len(rows))])
    codes, first = groups.group_rows(*cols)
    assert codes.tolist() == codes_ref and first.tolist() == first_ref
    codes2, values = group_codes(*cols)
    assert codes2.tolist() == codes_ref
    assert [v.tolist() for v in values] == [c[first_ref].tolist() for c in cols]


def test_group_rows_with_keys_past_the_pack_limit_and_sparse_keys(monkeypatch) -> None:
    a = np.array([5, 2**40, 5, 7, 2**40], dtype=np.int64)
    b = np.array([1, 1, 1, 1, 2], dtype=np.int64)
    assert [x.tolist() for x in groups.group_rows(a, b)] == [[0, 1, 0, 2, 3], [0, 1, 3, 4]]  # sparse: hashed
    monkeypatch.setattr(groups, "PACK_LIMIT", 4)  # the factorize fallback
    assert [x.tolist() for x in groups.group_rows(a, b)] == [[0, 1, 0, 2, 3], [0, 1, 3, 4]]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 6) | st.integers(-(2**40), 2**40), max_size=60))
def test_distinct_with_runs_is_np_unique(values: list[int]) -> None:
    a = np.array(values, dtype=np.int64)
    assert groups.distinct(a, runs=True).tolist() == np.unique(a).tolist() == groups.distinct(a).tolist()


def test_group_rows_packs_values_near_the_int64_limits() -> None:
    """Columns whose values lie next to the int64 limits (ids with high bits set) pack to
    the right keys: the packing's partial sums may wrap, its results never do."""
    big = np.array([2**63 - 1, 2**63 - 3, 2**63 - 1, 2**63 - 2], dtype=np.int64)
    neg = -big
    a = np.array([1, 0, 1, 0], dtype=np.int64)
    for col in (big, neg):
        codes, first = groups.group_rows(a, col)
        assert codes.tolist() == [0, 1, 0, 2] and first.tolist() == [0, 1, 3]
        codes, first = groups.group_rows(a, col, a)
        assert codes.tolist() == [0, 1, 0, 2] and first.tolist() == [0, 1, 3]
