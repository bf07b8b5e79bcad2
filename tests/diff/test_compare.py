"""Diff deltas on fixtures whose answers are known exactly (tests/fixtures/diff_workloads.py)."""

from __future__ import annotations

import pytest

from nsys_llm_explainer.api import explain
from nsys_llm_explainer.diff import compare, diff
from nsys_llm_explainer.diff.load import Side
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.render.json_writer import report_dict
from tests.fixtures.diff_workloads import (
    ELEMENTWISE,
    ELEMENTWISE_NS,
    EXTRA,
    EXTRA_NS,
    GEMM_BASE,
    GEMM_RENAMED,
    NORM,
    NORM_NS,
    PERIOD_NS,
    SYNC_NS,
    workload,
)

STEPS = 4


def headline(doc, key):
    """A whole-capture totals row."""
    return next(r for r in doc["totals"] if r["id"] == key)


@pytest.fixture(scope="module")
def changed(tmp_path_factory):
    """gemm sped up 50 -> 40 us and renamed <128,64,2> -> <256,64,3>; norm removed; triton added."""
    d = tmp_path_factory.mktemp("changed")
    base = workload(d / "base.sqlite", steps=STEPS)
    new = workload(
        d / "new.sqlite",
        steps=STEPS,
        gemm_ns=40_000,
        gemm_name=GEMM_RENAMED,
        drop_norm=True,
        extra_kernel=True,
    )
    return diff(base, new).doc


def test_both_have_steps_so_the_basis_is_per_step_with_the_windows_stated(changed):
    assert changed["base"]["window_ns"] == changed["new"]["window_ns"] == STEPS * PERIOD_NS
    assert changed["basis"] == {
        "kind": "per_step", "base_window_ns": STEPS * PERIOD_NS, "new_window_ns": STEPS * PERIOD_NS,
        "reason": "both captures have complete steps: kernels and categories are compared per step; "
                  "whole-capture totals as measured (captured windows 400 µs vs 400 µs)"}


def test_kernel_rows_exact(changed):
    rows = {
        r["match"] + ":" + (r["new_name"] or r["base_name"]): r for r in changed["kernels"]["rows"]
    }
    assert set(rows) == {
        f"renamed:{GEMM_RENAMED}",
        f"vanished:{NORM}",
        f"new:{EXTRA}",
        f"same:{ELEMENTWISE}",
    }
    # per complete step, from the kernels inside steps (the four `step` ranges, found as the
    # outermost repeating NVTX range, are all complete)
    assert changed["kernels"]["source"] == "in_step"
    n = changed["in_step"]["base_steps"]
    assert n == changed["in_step"]["new_steps"] == STEPS
    gemm = rows[f"renamed:{GEMM_RENAMED}"]
    assert gemm["base_name"] == GEMM_BASE and gemm["key"] == "void gemm_kernel(float const*,float*)"
    assert (gemm["base_total_ns"], gemm["new_total_ns"]) == (n * 50_000, n * 40_000)
    assert (gemm["base_compared_ns"], gemm["new_compared_ns"]) == (50_000, 40_000)
    assert (gemm["base_calls"], gemm["new_calls"]) == (n, n)
    assert gemm["delta_ns"] == -10_000 and gemm["delta_pct"] == pytest.approx(-20.0)
    assert (gemm["base_per_call_ns"], gemm["new_per_call_ns"]) == (50_000, 40_000)
    assert gemm["per_call_pct"] == pytest.approx(-20.0)
    assert gemm["per_call_low_pct"] == pytest.approx(-20.0)  # 4 vs 4 alike steps: an interval of one point
    norm = rows[f"vanished:{NORM}"]
    assert (norm["base_total_ns"], norm["new_total_ns"], norm["new_name"]) == (n * NORM_NS, 0, None)
    extra = rows[f"new:{EXTRA}"]
    assert (extra["base_total_ns"], extra["new_total_ns"], extra["delta_pct"]) == (0, n * EXTRA_NS, None)
    assert rows[f"same:{ELEMENTWISE}"]["delta_ns"] == 0
    assert changed["kernels"]["counts"] == {"same": 1, "renamed": 1, "new": 1, "vanished": 1}


def test_kernel_rows_sorted_by_absolute_change(changed):
    order = [r["match"] for r in changed["kernels"]["rows"]]
    # gemm and norm both change by 10 us per step; the key breaks the tie
    assert order == ["renamed", "vanished", "new", "same"]


def test_headline_exact(changed):
    base_kernel = STEPS * (50_000 + NORM_NS + ELEMENTWISE_NS)
    new_kernel = STEPS * (40_000 + EXTRA_NS + ELEMENTWISE_NS)
    kt = headline(changed, "kernel_time")
    assert (kt["base"], kt["new"]) == (base_kernel, new_kernel)
    assert kt["delta_pct"] == round(100.0 * (new_kernel - base_kernel) / base_kernel, 4)
    launches = headline(changed, "launches")
    assert (launches["base"], launches["new"], launches["delta"]) == (3 * STEPS, 3 * STEPS, 0)
    calls = headline(changed, "launch_calls")
    assert (calls["base"], calls["new"]) == (3 * STEPS, 3 * STEPS)
    sync = headline(changed, "sync_time")
    assert (sync["base"], sync["new"], sync["delta_pct"]) == (STEPS * SYNC_NS, STEPS * SYNC_NS, 0.0)
    busy = headline(changed, "gpu_busy")  # kernels never overlap: busy time == kernel time
    assert (busy["base"], busy["new"]) == (base_kernel, new_kernel)
    # device window: first kernel start to last kernel end
    window = (STEPS - 1) * PERIOD_NS + 76_000 - 2_000
    idle = headline(changed, "gpu_idle")
    assert (idle["base"], idle["new"]) == (window - base_kernel, window - new_kernel)
    dev = changed["devices"]["rows"][0]
    assert dev["idle_pct_delta_pp"] == pytest.approx(
        round(100 * (window - new_kernel) / window, 2)
        - round(100 * (window - base_kernel) / window, 2)
    )


def test_gate_values(changed):
    gv = {k: v["value"] for k, v in changed["gate_values"].items()}
    assert gv["new_kernels"] == 1 and gv["vanished_kernels"] == 1
    assert gv["launches_pct"] == 0.0
    # kernel time per complete step (in-step): 61 us -> 44 us
    assert gv["kernel_time_pct"] == round(100.0 * (44_000 - 61_000) / 61_000, 4)
    assert gv["step_time_pct"] == 0.0 and gv["incomparable"] == 0.0


def test_trace_diffed_with_itself_is_all_zero(tmp_path):
    t = workload(tmp_path / "t.sqlite")
    doc = diff(t, t).doc
    assert doc["basis"]["base_window_ns"] == doc["basis"]["new_window_ns"]
    assert doc["comparability"]["comparable"] is True
    for row in doc["totals"]:
        assert row["status"] == "ok", row
        assert row["delta"] == 0 and row["delta_pct"] == 0.0, row
    assert {r["match"] for r in doc["kernels"]["rows"]} == {"same"}
    assert all(r["delta_ns"] == 0 and r["delta_pct"] == 0 for r in doc["kernels"]["rows"])
    assert doc["findings"]["appeared"] == doc["findings"]["disappeared"] == []
    assert doc["gate"]["conditions"] == [] and doc["gate"]["tripped"] is False
    assert all(r["change_pct"] == 0.0 for r in doc["in_step"]["rows"])


def test_longer_capture_is_compared_per_complete_step(tmp_path):
    base = workload(tmp_path / "short.sqlite", steps=4)
    new = workload(tmp_path / "long.sqlite", steps=8)
    doc = diff(base, new, Options(step_range="step")).doc
    assert doc["basis"]["kind"] == "per_step"  # never per second of captured window
    assert (doc["in_step"]["base_steps"], doc["in_step"]["new_steps"]) == (4, 8)
    rows = {r["id"]: r for r in doc["in_step"]["rows"]}
    assert rows["kernel_time"]["base_median"] == rows["kernel_time"]["new_median"] == 50_000 + NORM_NS + ELEMENTWISE_NS
    assert rows["step_time"]["base_median"] == PERIOD_NS
    for r in rows.values():
        assert r["change_pct"] == 0.0 and r["beyond_noise"] is False, r
    # 4 vs 8 identical steps: the interval is exactly [0, 0]
    assert rows["kernel_time"]["low_pct"] == rows["kernel_time"]["high_pct"] == 0.0
    assert all(r["delta_ns"] == 0 for r in doc["kernels"]["rows"])
    (p,) = doc["steps"]["phases"]
    assert (p["base_count"], p["new_count"], p["p50_delta_pct"]) == (4, 8, 0.0)
    assert p["noise"]["verdict"] == "within the noise"
    # launches and GPU busy gate per step; the whole-capture totals stay as measured (2x)
    gv = doc["gate_values"]
    assert (gv["launches_pct"]["value"], gv["launches_pct"]["basis"]) == (0.0, "per_step")
    assert (gv["gpu_busy_pct"]["value"], gv["gpu_busy_pct"]["basis"]) == (0.0, "per_step")
    assert (gv["launch_calls_pct"]["value"], gv["launch_calls_pct"]["basis"]) == (100.0, "whole_capture")
    launches = headline(doc, "launches")
    assert (launches["base"], launches["new"], launches["delta_pct"]) == (3 * 4, 3 * 8, 100.0)


def test_longer_capture_without_steps_compares_kernels_per_call_and_totals_as_measured(tmp_path):
    def side(path, role):  # a report of captures without steps
        doc = report_dict(explain(path))
        doc["metrics"].pop("steps", None)
        doc["metrics"].pop("step_work", None)
        return Side(str(path), "report", doc, role)

    base = side(workload(tmp_path / "short.sqlite", steps=4), "BASE")
    new = side(workload(tmp_path / "long.sqlite", steps=8), "NEW")
    doc = compare(base, new).doc
    assert (doc["base"]["window_ns"], doc["new"]["window_ns"]) == (4 * PERIOD_NS, 8 * PERIOD_NS)
    assert doc["basis"]["kind"] == "per_call"
    assert doc["basis"]["reason"] == (
        "a capture has no complete steps: kernels are compared per call and counts as counts; whole-capture "
        "totals as measured (captured windows 400 µs vs 800 µs)"
    )
    for key in ("kernel_time", "launches", "sync_time"):  # twice the work, as measured
        assert headline(doc, key)["delta_pct"] == pytest.approx(100.0), key
    assert doc["kernels"]["source"] == "totals"
    for r in doc["kernels"]["rows"]:  # each kernel's median per call did not move
        assert r["per_call_stat"] == "median" and r["per_call_pct"] == 0.0, r
        assert r["new_calls"] == 2 * r["base_calls"] and r["delta_pct"] == pytest.approx(100.0)
    gemm = next(r for r in doc["kernels"]["rows"] if r["base_name"] == GEMM_BASE)
    assert gemm["base_per_call_ns"] == gemm["new_per_call_ns"] == 50_000


def test_two_export_versions_of_the_same_workload_compare_equal(tmp_path):
    old = workload(tmp_path / "old.sqlite", version="2022.2")
    new = workload(tmp_path / "new.sqlite", version="2026.2")
    doc = diff(old, new).doc
    assert doc["base"]["nsys_version"] != doc["new"]["nsys_version"]
    assert doc["kernels"]["counts"] == {"same": 3, "renamed": 0, "new": 0, "vanished": 0}
    for key in ("kernel_time", "launches", "gpu_busy", "gpu_idle", "sync_time"):
        row = headline(doc, key)
        assert row["status"] == "ok" and row["delta"] == 0, row


def test_category_deltas_from_the_categories_metric(changed):
    cats = changed["categories"]
    assert cats["status"] == "ok", cats["reason"]
    rows = {r["category"]: r for r in cats["rows"]}
    assert (rows["gemm"]["base_ns"], rows["gemm"]["new_ns"]) == (STEPS * 50_000, STEPS * 40_000)
    assert (rows["norm"]["base_ns"], rows["norm"]["new_ns"]) == (STEPS * NORM_NS, 0)
    assert rows["gemm"]["delta_ns"] == STEPS * (40_000 - 50_000)  # as measured, never scaled
    assert (rows["gemm"]["base_kernels"], rows["gemm"]["new_kernels"]) == (STEPS, STEPS)
    assert sum(r["new_ns"] for r in cats["rows"]) == STEPS * (40_000 + EXTRA_NS + ELEMENTWISE_NS)


def test_cuda_graph_launches_show_as_fewer_launch_calls(tmp_path):
    eager = workload(tmp_path / "eager.sqlite")
    graph = workload(tmp_path / "graph.sqlite", graph=True)
    doc = diff(eager, graph, Options(step_range="step")).doc
    launches, calls = headline(doc, "launches"), headline(doc, "launch_calls")
    assert (launches["base"], launches["new"], launches["delta"]) == (3 * STEPS, 3 * STEPS, 0)
    assert (calls["base"], calls["new"]) == (3 * STEPS, STEPS)
    assert calls["delta_pct"] == round(100.0 * (1 - 3) / 3, 4)
    assert headline(doc, "kernel_time")["delta"] == 0
    assert doc["gate_values"]["launch_calls_pct"]["value"] == pytest.approx(-200.0 / 3)
