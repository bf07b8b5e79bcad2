"""The kernel -> launch call join on (pid, correlationId): both strategies against a dict."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.analysis import join
from nsys_llm_explainer.trace.columns import Columns

FAST = settings(max_examples=200)

call = st.tuples(
    st.sampled_from([-1, 7, 8, 300]),  # pid (-1: unknown)
    st.one_of(st.integers(-2, 40), st.integers(1 << 38, (1 << 39) + 5)),  # corr, some huge
    st.integers(0, 50),  # start
)
item = st.tuples(st.sampled_from([-1, 7, 8, 9, 300]), st.integers(-2, 45))


def reference_match(items: list[tuple[int, int]], calls: list[tuple[int, int, int]],
                    allowed: list[bool]) -> list[int]:
    """Per item: the call with its (pid, corr), valid keys only, latest start (then the
    later row) winning; -1 when none."""
    best: dict[tuple[int, int], tuple[int, int]] = {}
    for i, (pid, corr, start) in enumerate(calls):
        if not allowed[i] or pid < 0 or corr <= 0 or corr >= 1 << 39:
            continue
        key = (pid, corr)
        if key not in best or (start, i) > best[key]:
            best[key] = (start, i)
    return [best[(p, c)][1] if (p, c) in best else -1 for p, c in items]


def columns(calls: list[tuple[int, int, int]]) -> Columns:
    return Columns("RUNTIME", {
        "pid": np.array([c[0] for c in calls], dtype=np.int64),
        "corr": np.array([c[1] for c in calls], dtype=np.int64),
        "start": np.array([c[2] for c in calls], dtype=np.int64),
    })


@pytest.mark.parametrize("few", [False, True])
@pytest.mark.parametrize("dense", [True, False])
@FAST
@given(calls=st.lists(call, max_size=40), items=st.lists(item, max_size=40),
       mask_seed=st.integers(0, 2**32 - 1), use_mask=st.booleans())
def test_match_calls_equals_reference(
    calls: list[tuple[int, int, int]], items: list[tuple[int, int]], mask_seed: int,
    use_mask: bool, dense: bool, few: bool,
) -> None:
    allowed = (
        list(np.random.default_rng(mask_seed).random(len(calls)) < 0.7)
        if use_mask else [True] * len(calls)
    )
    with pytest.MonkeyPatch.context() as mp:
        if not dense:  # no table is ever small enough: the sorted join answers
            mp.setattr(join, "DENSE_FACTOR", -1)
            mp.setattr(join, "DENSE_SLACK", 0)
        # few: every call list counts as many times longer than the items, so only the calls
        # with an item's correlation id are joined (_may_match); else never
        mp.setattr(join, "FEW_ITEMS", 0 if few else 1 << 40)
        mp.setattr(join, "MAY_MATCH_PART", 3)  # the calls' correlation ids looked up in parts
        got = join.match_calls(
            np.array([i[0] for i in items], dtype=np.int64),
            np.array([i[1] for i in items], dtype=np.int64),
            columns(calls),
            np.array(allowed, dtype=bool) if use_mask else None,
        )
    assert got.tolist() == reference_match(items, calls, allowed)


def test_dense_join_is_used_for_dense_ids_and_not_for_sparse_ones() -> None:
    dense = columns([(7, c, c) for c in range(1, 1001)])
    table_path = join._match_dense(
        np.array([7, 7, 8]), np.array([5, 1000, 5]), np.arange(1000), dense.pid, dense.corr
    )
    assert table_path is not None and table_path.tolist() == [4, 999, -1]
    sparse = columns([(7, 1, 0), (7, 1 << 30, 0)])
    assert join._match_dense(np.array([7]), np.array([1]), np.arange(2), sparse.pid,
                             sparse.corr) is None
    shared = columns([(7, 3, 0), (7, 3, 1)])  # the same key twice: the sorted join decides
    assert join._match_dense(np.array([7]), np.array([3]), np.arange(2), shared.pid,
                             shared.corr) is None
    assert join.match_calls(np.array([7]), np.array([3]), shared).tolist() == [1]

