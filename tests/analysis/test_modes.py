"""Multi-modal durations (analysis/stats.py): the documented criterion by hand, against a
plain reference, and end to end in top_kernels and steps."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.analysis.stats import group_modes, modes_text, sort_within_groups
from tests import reference
from tests.conftest import analyze, ok, table
from tests.fixtures.builder import TraceBuilder


def modes_of(values: list[int]) -> list[dict]:
    v = np.array(values, dtype=np.int64)
    return group_modes(sort_within_groups(v, np.zeros(len(v), dtype=np.int64), 1))[0]


def test_alternating_kernel_has_two_modes():
    got = modes_of([7_900_000, 160_000] * 20)
    assert got == [
        {"p50_ns": 7_900_000, "min_ns": 7_900_000, "max_ns": 7_900_000, "calls": 20,
         "pct_of_calls": 50.0},
        {"p50_ns": 160_000, "min_ns": 160_000, "max_ns": 160_000, "calls": 20,
         "pct_of_calls": 50.0},
    ]
    assert modes_text(got) == "7900000:50;160000:50"


def test_noisy_unimodal_kernel_is_not_flagged():
    rng = np.random.default_rng(3)
    # Log-normal noise of sigma 0.3 (p90/p10 ~ 2.2) and 2% of calls 10x slower: no mode.
    lat = rng.lognormal(np.log(200_000), 0.3, 1_000).astype(np.int64)
    lat[:20] *= 10
    assert modes_of(lat.tolist()) == []
    # Uniform +-50% noise: 3x between fastest and slowest, no gap.
    assert modes_of(rng.integers(50_000, 150_000, 500).tolist()) == []


def test_a_slow_tail_of_15_percent_is_a_mode():
    values = [100_000] * 85 + [1_000_000] * 15
    got = modes_of(values)
    assert [(m["p50_ns"], m["calls"], m["pct_of_calls"]) for m in got] == [
        (100_000, 85, 85.0), (1_000_000, 15, 15.0)]


@pytest.mark.parametrize(
    "values, n_modes",
    [
        ([100] * 5 + [200] * 5, 2),  # exactly a factor of 2
        ([100] * 5 + [199] * 5, 0),  # just under
        ([1] * 4 + [100] * 4, 0),  # 8 samples: under the 10 needed
        ([1] * 8 + [100] * 2, 0),  # 20% but only 2 calls (3 needed)
        ([1] * 7 + [100] * 3, 2),
        ([0] * 5 + [2] * 5, 2),  # 0 ns counts as 1 ns
        ([10] * 10 + [100] * 10 + [1_000] * 10, 3),
        ([10] * 10 + [100] * 2 + [1_000] * 10, 2),  # the middle cluster is too small
    ],
)
def test_criterion_edges(values, n_modes):
    got = modes_of(values)
    assert len(got) == n_modes
    assert [(m["p50_ns"], m["calls"]) for m in got] == reference.modes(values)


@settings(max_examples=150)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 3),
            st.sampled_from([0, 1, 5, 9, 10, 11, 40, 100, 1_000, 10**6, 3 * 10**6]),
        ),
        max_size=120,
    )
)
def test_grouped_modes_equal_reference(rows):
    groups = np.array([g for g, _ in rows], dtype=np.int64)
    values = np.array([v for _, v in rows], dtype=np.int64)
    got = group_modes(sort_within_groups(values, groups, 4))
    for g in range(4):
        mine = [v for gg, v in rows if gg == g]
        assert [(m["p50_ns"], m["calls"]) for m in got[g]] == reference.modes(mine)
        assert sum(m["calls"] for m in got[g]) in (0, len(mine))


def test_top_kernels_and_csv_flag_the_bimodal_kernel(build):
    b = TraceBuilder("2024.6")
    b.process(100)
    t = 10_000
    for i in range(40):
        b.kernel(t, t + 160_000, name="steady")
        t += 161_000
        d = 7_900_000 if i % 2 else 160_000
        b.kernel(t, t + d, name="alternating")
        t += d + 1_000
    report = analyze(build(b))
    rows = {r["name"]: r for r in ok(report, "top_kernels")["kernels"]}
    alt, steady = rows["alternating"], rows["steady"]
    assert alt["multimodal"] is True and steady["multimodal"] is False
    assert [(m["p50_ns"], m["pct_of_calls"]) for m in alt["modes"]] == [
        (7_900_000, 50.0), (160_000, 50.0)]
    assert alt["p50_ns"] == 160_000 and steady["modes"] == []
    csv = table(report, "top_kernels", "kernels")
    got = dict(zip(csv["name"], zip(csv["multimodal"], csv["modes"].fillna(""), strict=True),
                   strict=True))
    assert got == {"alternating": (True, "7900000:50;160000:50"), "steady": (False, "")}
    by_pid = ok(report, "per_process")["top_kernels"]
    assert {r["name"]: r["multimodal"] for r in by_pid} == {"alternating": True, "steady": False}


def test_steps_phase_flags_two_kinds_of_step(build):
    # 12 'step' NVTX ranges, alternately 1 ms and 10 ms long, one kernel each.
    b = TraceBuilder("2024.6")
    t, corr = 0, 1
    for i in range(12):
        length = 10_000_000 if i % 2 else 1_000_000
        b.runtime(t + 10, t + 20, corr=corr)
        b.kernel(t + 30, t + 130, corr=corr, name="k")
        b.nvtx(t, t + length, text="step")
        t, corr = t + length + 100, corr + 1
    report = analyze(build(b), step_range="step")
    (p,) = ok(report, "steps")["phases"]
    assert p["multimodal"] is True
    assert [(m["p50_ns"], m["calls"]) for m in p["modes"]] == [(10_000_000, 6), (1_000_000, 6)]
    phases = table(report, "steps", "steps_phases")
    assert list(phases["modes"]) == ["10000000:50;1000000:50"]
