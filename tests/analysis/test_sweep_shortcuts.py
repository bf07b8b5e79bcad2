"""The idle sweep's shortcuts give what the general computations give, on any input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.analysis import groups, intervals
from nsys_llm_explainer.analysis.idle_sweep import _by_start, _per_gap
from nsys_llm_explainer.trace.columns import Columns

small = st.integers(0, 6)


@st.composite
def gaps_and_pieces(draw: st.DrawFn) -> tuple[np.ndarray, ...]:
    """Gaps between merged busy intervals (zero-length busy time makes gaps touch), and
    pieces: either cut from the gaps (intersected with random intervals) or arbitrary."""
    busy = draw(st.lists(st.tuples(st.integers(0, 200), small), min_size=2, max_size=30))
    bs, be = intervals.merge(np.array([b[0] for b in busy]), np.array([b[0] + b[1] for b in busy]))
    g0, g1 = be[:-1], bs[1:]
    cuts = draw(st.lists(st.tuples(st.integers(0, 210), st.integers(0, 12)), max_size=30))
    us, ue = intervals.merge(np.array([c[0] for c in cuts], np.int64),
                             np.array([c[0] + c[1] for c in cuts], np.int64))
    if draw(st.booleans()):
        s, e = intervals.intersect(g0, g1, us, ue)
        if draw(st.booleans()):  # merged across gaps that touch: the general way must answer
            s, e = intervals.merge(s, e)
    else:
        s, e = us, ue
    return g0, g1, s, e


@settings(max_examples=400, deadline=None)
@given(gaps_and_pieces())
def test_per_gap_equals_overlap_with_union(case: tuple[np.ndarray, ...]) -> None:
    g0, g1, s, e = case
    np.testing.assert_array_equal(_per_gap(g0, g1, s, e), intervals.overlap_with_union(g0, g1, s, e))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 3), st.integers(0, 2), st.integers(0, 2),
                          st.integers(0, 3)), max_size=40), st.booleans())
def test_by_start_equals_the_full_lexsort(rows: list[tuple[int, ...]], subset: bool) -> None:
    cols = {k: np.array([r[i] for r in rows], np.int64)
            for i, k in enumerate(("start", "end", "source", "pid", "corr"))}
    cols["end"] = cols["end"] + cols["start"]
    w = Columns("w", cols)
    picked = np.arange(len(rows))[::2] if subset else np.arange(len(rows))
    want = picked[np.lexsort((w.corr[picked], w.pid[picked], w.source[picked], w.end[picked],
                              w.start[picked]))]
    got = _by_start(w, picked)
    # Rows equal in all five keys may come in either order: compare the keys in order.
    for k in cols:
        np.testing.assert_array_equal(cols[k][got], cols[k][want])
    assert sorted(got.tolist()) == sorted(picked.tolist())


def test_per_gap_sums_pieces_without_the_general_way(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    def general(*_a: object) -> None:
        raise AssertionError("pieces inside gaps must not need overlap_with_union")

    monkeypatch.setattr(intervals, "overlap_with_union", general)
    g0, g1 = np.array([0, 20, 30]), np.array([10, 30, 40])  # the last two touch at 30
    s, e = np.array([2, 6, 21, 30]), np.array([5, 8, 29, 31])
    np.testing.assert_array_equal(_per_gap(g0, g1, s, e), [5, 8, 1])


class _Runtime:
    """Just enough TraceData for the runtime sweeps: runtime() and nothing cached."""

    def __init__(self, cols: Columns) -> None:
        self.cols = cols

    def runtime(self) -> Columns:
        return self.cols


calls = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 60), st.integers(0, 20), st.integers(-1, 30),
                           st.booleans(), st.booleans()), max_size=40)


@settings(max_examples=300, deadline=None)
@given(calls)
def test_per_thread_sweeps_equal_the_sorted_sweeps(rows: list[tuple[int, ...]]) -> None:
    """_refill_end and _first_corr by thread (few threads or processes) give what one sort
    of every row gives (many)."""
    import pytest

    from nsys_llm_explainer.analysis import idle_sweep
    from nsys_llm_explainer.analysis.blocking import _refill_end

    rt = Columns("rt", {
        "tkey": np.array([r[0] for r in rows], np.int64),
        "pid": np.array([r[0] // 2 for r in rows], np.int64),
        "start": np.array([r[1] for r in rows], np.int64),
        "end": np.array([r[1] + r[2] for r in rows], np.int64),
        "corr": np.array([r[3] for r in rows], np.int64),
    })
    blocking = np.array([r[4] for r in rows], bool)
    launching = np.array([r[5] for r in rows], bool)
    data = _Runtime(rt)
    np.testing.assert_array_equal(_refill_end(data, blocking, launching),  # type: ignore[arg-type]
                                  _refill_reference(rt, blocking, launching))
    for many in (False, True):  # rows_by_value's split by comparison, or by one sort
        with pytest.MonkeyPatch.context() as mp:
            if many:
                mp.setattr(groups, "MASK_SPLIT_MAX", -1)
            np.testing.assert_array_equal(_refill_end(data, blocking, launching),  # type: ignore[arg-type]
                                          _refill_reference(rt, blocking, launching))
    fast = idle_sweep._first_corr(rt)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(idle_sweep, "MASK_SPLIT_MAX", -1)
        sorted_ = idle_sweep._first_corr(rt)
    for a, b in zip(fast, sorted_, strict=True):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype == np.int64


def _refill_reference(rt: Columns, blocking: np.ndarray, launching: np.ndarray) -> np.ndarray:
    """_refill_end as one lexsort of every row (the sweep before it went thread by thread)."""
    from nsys_llm_explainer.analysis.blocking import REFILL_GRACE_NS

    out = rt.end.copy()
    if len(rt) < 2 or not blocking.any():
        return out
    order = np.lexsort((rt.start, rt.tkey))
    cur, nxt = order[:-1], order[1:]
    ok = (blocking[cur] & (rt.tkey[cur] == rt.tkey[nxt]) & launching[nxt]
          & (rt.start[nxt] - rt.end[cur] <= REFILL_GRACE_NS))
    out[cur[ok]] = np.maximum(rt.end[cur[ok]], rt.end[nxt[ok]])
    return out


class _Host:
    """NVTX ranges on one thread, CUDA calls on another."""

    def __init__(self) -> None:
        self.nv = Columns("nvtx", {"start": np.array([0, 100]), "end": np.array([50, 200]),
                                   "tkey": np.array([7, 7]), "name": np.array([0, 1]),
                                   "pid": np.array([1, 1])})
        self.rt = Columns("rt", {"start": np.array([10, 120]), "end": np.array([20, 130]),
                                 "tkey": np.array([3, 3])})

    def nvtx(self) -> Columns:
        return self.nv

    def runtime(self) -> Columns:
        return self.rt

    def nvtx_names(self) -> list[str]:
        return ["step", "aten::item"]

    def cached_value(self, key: str) -> object:
        return self.cache[key]

    cache: dict[str, object] = {}


@pytest.mark.parametrize("cached", [False, True], ids=["own index", "the attribution's index"])
def test_calls_on_threads_without_ranges_have_no_origin(cached: bool) -> None:
    """Through an index of the calls' threads, or the kernel attribution's cached index of
    every thread (with a range on another thread, 9, that must not matter)."""
    from types import SimpleNamespace

    from nsys_llm_explainer.analysis import nvtx as nvtx_tree
    from nsys_llm_explainer.analysis.blocking import call_origins
    from nsys_llm_explainer.analysis.join import KEY

    data = _Host()
    data.nv = Columns("nvtx", {"start": np.array([0, 100, 5]), "end": np.array([50, 200, 500]),
                               "tkey": np.array([7, 7, 9]), "name": np.array([0, 1, 1]),
                               "pid": np.array([1, 1, 1])})
    data.cache = {KEY: SimpleNamespace(index=nvtx_tree.build(data.nv))} if cached else {}
    assert call_origins(data, np.array([0, 1]), set(), 1_000) == ([None, None], [None, None])  # type: ignore[arg-type]
    data.rt = data.rt.with_columns(tkey=np.array([7, 7]))  # the same calls on the ranges' thread
    assert call_origins(data, np.array([0, 1]), set(), 1_000) == (["step", "aten::item"], ["step", "aten::item"])  # type: ignore[arg-type]
