"""Hypothesis properties of the interval, percentile and NVTX machinery, and of whole reports."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.analysis import intervals
from nsys_llm_explainer.analysis import nvtx as nvtx_tree
from nsys_llm_explainer.analysis.groups import as_mask, marked_at, sparse_rows
from nsys_llm_explainer.analysis.stats import group_percentiles, sort_within_groups
from nsys_llm_explainer.graph.analyze import _busiest_lane
from nsys_llm_explainer.model import Report
from nsys_llm_explainer.render import json_writer
from nsys_llm_explainer.trace.columns import Columns
from tests import reference
from tests.conftest import CORE_METRICS, analyze
from tests.fixtures.builder import TraceBuilder

FAST = settings(max_examples=150)
# Each example writes and analyzes a SQLite file (~0.1 s), so these run fewer examples.
SLOW = settings(max_examples=25,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

interval = st.tuples(st.integers(0, 10_000), st.integers(0, 2_000)).map(
    lambda t: (t[0], t[0] + t[1])
)
interval_lists = st.lists(interval, min_size=1, max_size=40)


def arrays(spans: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    return (np.array([s for s, _ in spans], dtype=np.int64),
            np.array([e for _, e in spans], dtype=np.int64))


@FAST
@given(interval_lists)
def test_merge_equals_reference_and_busy_within_window(spans):
    s, e = arrays(spans)
    ms, me = intervals.merge(s, e)
    assert list(zip(ms.tolist(), me.tolist(), strict=True)) == reference.merged(spans)
    busy = intervals.union_length(s, e)
    window = int(e.max() - s.min())
    assert 0 <= busy <= window
    gs, ge = intervals.gaps(s, e)
    assert busy + int((ge - gs).sum()) == window


@FAST
@given(st.lists(st.tuples(st.integers(0, 6), interval), min_size=1, max_size=60), st.booleans(),
       st.integers(1, 8))
def test_grouped_union_equals_a_per_group_reference(rows, time_sorted, part_rows):
    """Per group, the union length of its intervals, computed a part of `part_rows` rows at a
    time (each part whole groups), equals the merged reference's; rows in time order take the
    sort-by-group path."""
    if time_sorted:
        rows = sorted(rows, key=lambda r: r[1][0])
    group = np.array([g for g, _ in rows], dtype=np.int64)
    s, e = arrays([span for _, span in rows])
    expected = [sum(b - a for a, b in reference.merged([span for g, span in rows if g == k])) for k in range(8)]
    old = intervals.UNION_PART_ROWS
    try:
        intervals.UNION_PART_ROWS = part_rows
        got = intervals.grouped_union(group, s, e, 8)
    finally:
        intervals.UNION_PART_ROWS = old
    assert got.dtype == np.int64 and got.tolist() == expected


@FAST
@given(interval_lists, interval_lists)
def test_union_of_unions(a, b):
    ua, ub = reference.merged(a), reference.merged(b)
    s, e = arrays(a + b)
    ms, me = intervals.merge(s, e)
    s2, e2 = arrays(ua + ub)
    ms2, me2 = intervals.merge(s2, e2)
    assert (ms.tolist(), me.tolist()) == (ms2.tolist(), me2.tolist())


@FAST
@given(interval_lists, interval_lists)
def test_overlap_with_union_equals_reference(queries, cover):
    qs, qe = arrays(queries)
    us, ue = intervals.merge(*arrays(cover))
    got = intervals.overlap_with_union(qs, qe, us, ue).tolist()
    assert got == [reference.covered(q, cover) for q in queries]


small_interval_lists = st.lists(
    st.tuples(st.integers(0, 40), st.integers(0, 6)).map(lambda t: (t[0], t[0] + t[1])), max_size=12
)


def _units(spans: list[tuple[int, int]]) -> set[int]:
    """The unit time steps [t, t + 1) the intervals cover: a brute-force set reference."""
    return {t for s, e in spans for t in range(s, e)}


@FAST
@given(small_interval_lists, small_interval_lists)
def test_intersect_and_subtract_equal_a_set_reference(a, b):
    """Small integer times with many shared, touching and empty boundaries (ties)."""
    (as_, ae), (bs, be) = intervals.merge(*arrays(a or [(0, 0)])), intervals.merge(*arrays(b or [(0, 0)]))
    ua, ub = _units(a), _units(b)
    for (s, e), want in ((intervals.intersect(as_, ae, bs, be), ua & ub),
                         (intervals.subtract(as_, ae, bs, be), ua - ub)):
        assert _units(list(zip(s.tolist(), e.tolist(), strict=True))) == want
        assert (e > s).all() and (s[1:] > e[:-1]).all()  # non-empty, disjoint, not touching


@FAST
@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 10**12)), min_size=1, max_size=60),
    st.sampled_from([(50, 90, 99), (0, 25, 75, 100), (33.3, 99.9, 10)]),
)
def test_group_percentiles_equal_reference(rows, ps):
    groups = np.array([g for g, _ in rows], dtype=np.int64)
    values = np.array([v for _, v in rows], dtype=np.int64)
    got = group_percentiles(values, groups, 5, ps)
    for g in range(5):
        mine = [v for gg, v in rows if gg == g]
        for p in ps:
            assert got[p][g] == (reference.percentile(mine, p) if mine else 0)
            assert not mine or got[p][g] in mine  # nearest rank: always a value that occurred


@FAST
@given(st.lists(st.tuples(st.integers(0, 4), st.one_of(st.integers(-50, 50), st.integers(0, 10**13))),
                min_size=1, max_size=60),
       st.sampled_from([0.0, 0.1, 0.25, 0.333, 0.5, 0.9, 1.0]))
def test_group_median_and_quantile_equal_pandas(rows, q):
    # pandas' groupby is the independent implementation the critical path's medians and the
    # dispatch percentile used before; the reports must not move by a nanosecond.
    groups = np.array([g for g, _ in rows], dtype=np.int64)
    values = np.array([v for _, v in rows], dtype=np.int64)
    sg = sort_within_groups(values, groups, 5)
    by = pd.Series(values).groupby(groups)
    np.testing.assert_array_equal(sg.median(), by.median().reindex(range(5)).to_numpy())
    np.testing.assert_array_equal(sg.quantile(q), by.quantile(q).reindex(range(5)).to_numpy())
    for g in range(5):  # and by hand: the middle value, or the mean of the two middle ones
        mine = sorted(v for gg, v in rows if gg == g)
        if mine:
            n = len(mine)
            assert sg.median()[g] == (mine[n // 2] + mine[(n - 1) // 2]) / 2


@FAST
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3), st.integers(0, 100)), min_size=1, max_size=40))
def test_busiest_lane_is_the_first_largest_in_lane_order(rows):
    dev, stream, ns = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
    totals: dict[tuple[int, int], int] = {}
    for d, s, v in rows:
        totals[(d, s)] = totals.get((d, s), 0) + v
    best = max(totals.values())
    assert _busiest_lane(ns, dev, stream) == min(k for k, v in totals.items() if v == best)


@pytest.mark.parametrize("ngroups", [1, 2])
@pytest.mark.parametrize("spread", [1, 10**15])  # packed (group, value) keys, then lexsort
def test_nearest_rank_boundaries(ngroups, spread):
    # Ten values 1..10 (scaled): p90 is the 9th (0.9 * 10 is 9.000000000000002 in floats,
    # whose ceiling would wrongly be the 10th), p91 the 10th, p50 the 5th, p10 the 1st,
    # p0 the smallest. Four values: p50 is the 2nd, p75 the 3rd, p76 the 4th.
    ten = [v * spread for v in range(10, 0, -1)]
    four = [40 * spread, 10 * spread, 30 * spread, 20 * spread]
    values = np.array(ten + (four if ngroups == 2 else []), dtype=np.int64)
    groups = np.array([0] * 10 + ([1] * 4 if ngroups == 2 else []), dtype=np.int64)
    ps = (0, 10, 50, 75, 76, 90, 91, 100)
    got = group_percentiles(values, groups, ngroups, ps)
    assert [int(got[p][0]) // spread for p in ps] == [1, 1, 5, 8, 8, 9, 10, 10]
    if ngroups == 2:
        assert [int(got[p][1]) // spread for p in ps] == [10, 10, 20, 30, 40, 40, 40, 40]
    assert reference.percentile(list(range(1, 11)), 90) == 9
    assert reference.percentile([10, 20, 30, 40], 76) == 40


ranges_strategy = st.lists(
    st.tuples(st.integers(0, 1), st.integers(0, 200), st.integers(1, 200), st.sampled_from("abc")),
    min_size=0, max_size=25,
)
queries_strategy = st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, 400), st.integers(1, 20)), min_size=1, max_size=25,
)


@pytest.mark.parametrize("packed", [True, False])  # one binary search, or one per thread
@FAST
@given(ranges_strategy, queries_strategy)
def test_innermost_equals_brute_force(packed, raw_ranges, raw_queries):
    ranges = [reference.Range(n, s, s + d, 1, tid) for tid, s, d, n in raw_ranges]
    nvtx = Columns("nvtx", {
        "start": np.array([r.start for r in ranges], dtype=np.int64),
        "end": np.array([r.end for r in ranges], dtype=np.int64),
        "tkey": np.array([r.tid for r in ranges], dtype=np.int64),
    })
    with pytest.MonkeyPatch.context() as mp:
        if not packed:
            mp.setattr(nvtx_tree, "PACK_LIMIT", 0)
        index = nvtx_tree.build(nvtx)
    assert (index.packed is not None) == (packed and len(ranges) > 0)
    tk, t0, t1 = (np.array(c, dtype=np.int64) for c in zip(*raw_queries, strict=True))
    pos = nvtx_tree.innermost(index, tk, t0, t0 + t1)
    for i, (tid, start, dur) in enumerate(raw_queries):
        best = reference.innermost(ranges, 1, tid, start, start + dur)
        if best is None:
            assert pos[i] == -1
        else:
            assert pos[i] >= 0
            row = int(index.order[pos[i]])
            assert (ranges[row].start, ranges[row].end) == (best.start, best.end)


@FAST
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 100), st.integers(0, 100)),
                max_size=30, unique=True))
def test_containers_equal_brute_force_containment(raw):
    ranges = [reference.Range("r", s, s + d, 1, tid) for tid, s, d in raw]
    nvtx = Columns("nvtx", {
        "start": np.array([r.start for r in ranges], dtype=np.int64),
        "end": np.array([r.end for r in ranges], dtype=np.int64),
        "tkey": np.array([r.tid for r in ranges], dtype=np.int64),
    })
    index = nvtx_tree.build(nvtx)
    rr, cc = nvtx_tree.containers(index, np.arange(len(ranges)))
    got = {(int(index.order[r]), int(index.order[c])) for r, c in zip(rr, cc, strict=True)}
    assert len(got) == len(rr)  # each pair found once
    want = {(i, j) for i, a in enumerate(ranges) for j, b in enumerate(ranges)
            if reference.contains(b, a)}
    assert got == want


def write_shuffled(b_rows: list[tuple[str, dict]], path: Path, seed: int | None) -> Path:
    rows = list(b_rows)
    if seed is not None:
        random.Random(seed).shuffle(rows)
    b = TraceBuilder("2024.6")
    for method, kwargs in rows:
        getattr(b, method)(**kwargs)
    return b.write(path)


trace_rows = st.fixed_dictionaries({
    "kernels": st.lists(st.tuples(st.integers(0, 1), st.integers(0, 50_000), st.integers(1, 3_000),
                                  st.integers(0, 2), st.sampled_from(["k1", "k2", "k3"])),
                        min_size=1, max_size=30),
    "ranges": st.lists(st.tuples(st.integers(0, 50_000), st.integers(1, 20_000),
                                 st.sampled_from(["fwd", "bwd", "step"])),
                       max_size=12, unique_by=lambda r: (r[0], r[1])),
    "launch_offsets": st.lists(st.integers(0, 60_000), min_size=30, max_size=30),
})


def rows_of(spec: dict) -> tuple[list[tuple[str, dict]], dict]:
    """Builder calls, plus the same trace as reference objects."""
    calls: list[tuple[str, dict]] = []
    kernels, launches, ranges = [], [], []
    for i, (dev, start, dur, pid_i, name) in enumerate(spec["kernels"]):
        pid, corr = 100 + pid_i, i + 1
        t = spec["launch_offsets"][i]
        calls.append(("runtime", {"start": t, "end": t + 5, "pid": pid, "corr": corr}))
        calls.append(("kernel", {"start": start, "end": start + dur, "device": dev, "pid": pid,
                                 "corr": corr, "name": name}))
        kernels.append(reference.Kernel(start, start + dur, pid, corr, dev))
        launches.append(reference.Launch(t, t + 5, pid, pid, corr))
    for i, (start, dur, name) in enumerate(spec["ranges"]):
        pid = 100 + i % 3
        calls.append(("nvtx", {"start": start, "end": start + dur, "text": name, "pid": pid}))
        ranges.append(reference.Range(name, start, start + dur, pid, pid))
    ref = reference.attribution(kernels, launches, ranges)
    ref["busy"] = {d: reference.union_length([(k.start, k.end) for k in kernels if k.device == d])
                   for d in {k.device for k in kernels}}
    return calls, ref


_counter = itertools.count()
CORE_RULES = tuple(f"NLE10{i}" for i in range(1, 9))


def core_part(report: Report) -> dict[str, Any]:
    """report.json restricted to the core metrics, idle causes and core rules, without the file's path and size."""
    doc = json_writer.report_dict(report)
    trace = {k: v for k, v in doc["trace"].items() if k not in ("path", "size_bytes")}
    return {
        "trace": trace,
        "metrics": {m: doc["metrics"][m] for m in (*CORE_METRICS, "idle_causes")},
        "findings": [f for f in doc["findings"] if f["rule_id"] in CORE_RULES],
    }


@SLOW
@given(trace_rows, st.integers(0, 2**32))
def test_report_is_invariant_to_row_order_and_matches_reference(tmp_path, spec, seed):
    calls, ref = rows_of(spec)
    n = next(_counter)
    a = analyze(write_shuffled(calls, tmp_path / f"a{n}.sqlite", None))
    b = analyze(write_shuffled(calls, tmp_path / f"b{n}.sqlite", seed))
    da, db = core_part(a), core_part(b)
    assert json.dumps(da, sort_keys=True) == json.dumps(db, sort_keys=True)

    devices = {d["device_id"]: d for d in da["metrics"]["gpu_idle"]["devices"]}
    for dev, busy in ref["busy"].items():
        d = devices[dev]
        assert d["busy_ns"] == busy
        assert d["busy_ns"] <= d["window_end_ns"] - d["window_start_ns"]
        assert d["busy_ns"] + d["idle_ns"] == d["window_end_ns"] - d["window_start_ns"]
    att = da["metrics"]["nvtx_attribution"]
    if att["status"] == "ok":
        assert att["total_kernel_ns"] == ref["total"]
        assert att["attributed_ns"] == ref["attributed"] <= ref["total"]
        rows = att["ranges"]
        own = {r["name"]: (r["kernel_count"], r["kernel_ns"]) for r in rows if r["kernel_count"]}
        assert own == ref["own"]
        incl = {r["name"]: r["inclusive_kernel_ns"] for r in rows if r["inclusive_kernel_ns"]}
        assert incl == ref["inclusive"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.booleans(), max_size=200), st.data())
def test_sparse_rows_reads_back_as_the_mask(bits, data):
    """A mask kept as its rows (when sparse) or as itself reads back, per row and whole, as
    the mask: against plain indexing."""
    mask = np.array(bits, dtype=bool)
    kept = sparse_rows(mask)
    assert kept.nbytes <= mask.nbytes
    assert as_mask(kept, len(mask)).tolist() == bits
    if bits:
        rows = np.array(data.draw(st.lists(st.integers(0, len(bits) - 1), max_size=50)), dtype=np.int64)
        assert marked_at(kept, rows).tolist() == [bits[r] for r in rows.tolist()]
