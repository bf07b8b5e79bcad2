"""Steps, noise, categories and writers, on report.json dicts with hand-written metrics.

The fixture report carries no step_work (as a report of an older version): these tests cover
the whole-capture and legacy step paths; the per-step path is in test_diff_in_step.py."""

from __future__ import annotations

import copy
import json

import pytest

from nsys_llm_explainer.api import explain
from nsys_llm_explainer.diff import compare, gate
from nsys_llm_explainer.diff.load import Side
from nsys_llm_explainer.diff.render import files, verdict
from nsys_llm_explainer.render.json_writer import report_dict
from tests.fixtures.diff_workloads import workload


@pytest.fixture(scope="module")
def doc(tmp_path_factory):
    d = report_dict(explain(workload(tmp_path_factory.mktemp("w") / "t.sqlite")))
    for mid in ("steps", "categories", "step_work"):
        d["metrics"].pop(mid, None)
    return d


def side(doc, role="BASE", **metrics):
    d = copy.deepcopy(doc)
    for mid, data in metrics.items():
        d["metrics"][mid] = data if "status" in data else {"status": "ok", **data}
    return Side(f"{role.lower()}.json", "report", d, role)


def phase(name, count, p50, p90, p25=None, p75=None):
    row = {"phase": name, "step_count": count, "p50_ns": p50, "p90_ns": p90}
    if p25 is not None:
        row |= {"p25_ns": p25, "p75_ns": p75}
    return row


def test_totals_are_never_divided_by_steps_and_old_reports_check_noise_by_iqr(doc):
    base = side(doc, steps={"phases": [phase("decode", 4, 100_000, 120_000, 95_000, 105_000)]})
    new = side(doc, "NEW", steps={"phases": [phase("decode", 4, 103_000, 150_000)]})
    out = compare(base, new).doc
    assert out["basis"]["kind"] == "per_call"
    (p,) = out["steps"]["phases"]
    assert (p["p50_delta_pct"], p["p90_delta_pct"]) == (3.0, 25.0)
    assert p["noise"]["base_iqr_ns"] == 10_000 and p["noise"]["median_change_ns"] == 3_000
    assert p["noise"]["exceeds_spread"] is False and p["noise"]["verdict"].startswith("within")
    kt = next(r for r in out["totals"] if r["id"] == "kernel_time")
    assert kt["base"] == kt["new"] == doc["metrics"]["top_kernels"]["total_kernel_ns"]
    assert out["in_step"]["status"] == "not_compared"
    assert out["in_step"]["reason"] == "the BASE report has no step_work metric"
    assert out["gate_values"]["kernel_time_pct"]["value"] is None


def test_change_beyond_baseline_iqr_from_per_step_durations(doc):
    steps = [{"phase": "decode", "duration_ns": d} for d in (90_000, 100_000, 110_000, 200_000)]
    base = side(doc, steps={"phases": [phase("decode", 4, 105_000, 170_000)], "steps": steps})
    new = side(doc, "NEW", steps={"phases": [phase("decode", 4, 145_000, 170_000)]})
    noise = compare(base, new).doc["steps"]["phases"][0]["noise"]
    # numpy linear percentiles of the four durations: q25 97,500, q75 132,500
    assert noise["base_iqr_ns"] == 35_000 and noise["median_change_ns"] == 40_000
    assert noise["exceeds_spread"] is True and noise["verdict"].startswith("slower beyond")


def test_noise_not_assessed_without_distribution(doc):
    base = side(doc, steps={"phases": [phase("decode", 4, 100_000, 120_000)]})
    noise = compare(base, side(doc, "NEW", steps=base.doc["metrics"]["steps"])).doc["steps"][
        "phases"
    ][0]["noise"]
    assert noise["status"] == "not_assessed" and "no per-step distribution" in noise["verdict"]


def test_step_gate_takes_the_worst_phase_and_unmatched_phases_are_listed(doc):
    base = side(
        doc,
        steps={
            "phases": [
                phase("prefill", 2, 1_000, 1_000),
                phase("decode", 10, 100, 100),
                phase("spec", 1, 5, 5),
            ]
        },
    )
    new = side(
        doc,
        "NEW",
        steps={
            "phases": {
                "prefill": {"steps": 2, "p50_ns": 900, "p90_ns": 1_000},
                "decode": {"steps": 10, "p50_ns": 110, "p90_ns": 100},
            }
        },
    )
    cond = gate.parse(["step_p50_pct>5"])
    out = compare(base, new, cond).doc
    assert [p["phase"] for p in out["steps"]["phases"]] == ["prefill", "decode"]
    assert out["steps"]["unmatched_phases"] == ["spec"]
    assert out["gate_values"]["step_p50_pct"]["value"] == 10.0
    assert out["gate"]["tripped"] is True


def test_steps_on_one_side_only(doc):
    base = side(doc, steps={"phases": [phase("decode", 4, 100, 120)]})
    new = side(doc, "NEW", steps={"status": "skipped", "reason": "no step ranges were found"})
    out = compare(base, new, gate.parse(["step_p90_pct>1"])).doc
    assert out["steps"]["status"] == "not_compared"
    assert out["steps"]["reason"] == "steps was not measured on NEW (no step ranges were found)"
    assert out["basis"]["kind"] != "per_step"
    assert out["gate"]["conditions"][0]["status"] == "not_evaluated"
    assert "not evaluated: step_p90_pct>1" in verdict_of(base, new, "step_p90_pct>1")


def verdict_of(base, new, expr):
    return verdict(compare(base, new, gate.parse([expr])))


@pytest.mark.parametrize(
    ("base_cat", "new_cat"),
    [
        (
            {
                "global": [
                    {"category": "gemm", "total_ns": 1_000},
                    {"category": "norm", "total_ns": 200},
                ]
            },
            {
                "global": [
                    {"category": "gemm", "total_ns": 800},
                    {"category": "attention", "total_ns": 50},
                ]
            },
        ),
        (
            {"categories": {"gemm": {"kernel_ns": 1_000}, "norm": {"kernel_ns": 200}}},
            {"categories": {"gemm": 800, "attention": 50}},
        ),
    ],
)
def test_category_deltas(doc, base_cat, new_cat):
    out = compare(side(doc, categories=base_cat), side(doc, "NEW", categories=new_cat)).doc[
        "categories"
    ]
    assert out["status"] == "ok"
    rows = {r["category"]: r for r in out["rows"]}
    assert [r["category"] for r in out["rows"]] == ["gemm", "norm", "attention"]  # by |change|
    assert (rows["gemm"]["delta_ns"], rows["gemm"]["delta_pct"]) == (-200.0, -20.0)
    assert (rows["norm"]["new_ns"], rows["norm"]["delta_pct"]) == (0.0, -100.0)
    assert (rows["attention"]["base_ns"], rows["attention"]["delta_pct"]) == (0.0, None)


def test_categories_absent_or_unreadable(doc):
    out = compare(side(doc), side(doc, "NEW")).doc["categories"]
    assert out == {
        "status": "not_compared",
        "reason": "the BASE report has no categories metric",
        "rows": [],
    }
    odd = compare(side(doc, categories={"x": "y"}), side(doc, "NEW", categories={"x": "y"})).doc[
        "categories"
    ]
    assert (
        odd["reason"] == "BASE: metrics.categories has no global table of kernel time per category"
    )


def test_findings_are_judged_by_time_at_stake_not_bands(doc):
    base = side(doc)
    base.doc["findings"] = [
        {"rule_id": "NLE101", "severity": "medium", "title": "a", "impact_pct": 24.0},
        {"rule_id": "NLE103", "severity": "low", "title": "b", "impact_pct": 4.0},
        {"rule_id": "NLE208", "severity": "high", "title": "d", "impact_pct": 40.0},
        {"rule_id": "NLE106", "severity": "info", "title": "note", "impact_pct": None},
    ]
    new = side(doc, "NEW")
    new.doc["findings"] = [
        # 24% -> 26%: crosses the high band but moves less than max(1 pp, 25% of 26) = 6.5 pp.
        {"rule_id": "NLE101", "severity": "high", "title": "a", "impact_pct": 26.0},
        # absent on BASE, 10% + 3% on NEW: beyond the 3.25 pp band.
        {"rule_id": "NLE209", "severity": "high", "title": "c", "impact_pct": 10.0},
        {"rule_id": "NLE209", "severity": "low", "title": "c2", "impact_pct": 3.0},
        # 40% -> 35%: within max(1, 10) pp.
        {"rule_id": "NLE208", "severity": "high", "title": "d", "impact_pct": 35.0},
        # 0.5% on NEW only: within the 1 pp floor, so not "appeared".
        {"rule_id": "NLE210", "severity": "low", "title": "e", "impact_pct": 0.5},
    ]
    out = compare(base, new, gate.parse(["new_high_findings>0"])).doc
    f = out["findings"]
    assert [x["rule_id"] for x in f["appeared"]] == ["NLE209"] and f["appeared"][0]["count"] == 2
    assert f["appeared"][0]["new_impact_pct"] == 13.0 and f["appeared"][0]["base_impact_pct"] is None
    assert sorted(x["rule_id"] for x in f["disappeared"]) == ["NLE103", "NLE106"]
    persisting = {x["rule_id"]: x for x in f["persisting"]}
    assert set(persisting) == {"NLE101", "NLE208"}
    assert (persisting["NLE101"]["base_severity"], persisting["NLE101"]["new_severity"]) == ("medium", "high")
    assert f["new_high"] == ["NLE209"]
    assert out["gate_values"]["new_findings"]["value"] == 1
    assert out["gate"]["tripped"] is True


def test_untrusted_kernel_names_are_escaped_in_markdown(doc):
    evil = copy.deepcopy(doc)
    evil["metrics"]["top_kernels"]["kernels"][0]["name"] = (
        "<script>x</script> | ## [a](http://e.vil)"
    )
    md = files(compare(side(doc), side(evil, "NEW")), top_n=5)["diff.md"]
    assert "<script>" not in md and "\\<script\\>" in md
    assert "\\| \\#\\# \\[a\\]" in md and "http://e" not in md


def test_writers_on_reports_with_nothing_measured(doc):
    empty = copy.deepcopy(doc)
    empty["findings"] = []
    for mid in list(empty["metrics"]):
        empty["metrics"][mid] = {"status": "skipped", "reason": "the kernel table is empty"}
    out = files(compare(side(empty), side(empty, "NEW"), gate.parse(["kernel_time_pct>1"])))
    md = out["diff.md"]
    assert md.splitlines()[0].startswith("Step time not compared")
    assert md.count("not compared, because") + md.count("Not compared, because") >= 8
    assert "No rule fired on either side." in md
    assert (
        out["tables/diff_kernels.csv"].startswith("key,match,")
        and out["tables/diff_kernels.csv"].count("\n") == 1
    )
    parsed = json.loads(out["diff.json"])
    assert parsed["gate"]["conditions"][0]["status"] == "not_evaluated"
    # a gate that evaluated nothing fails, unless allowed
    assert parsed["gate"]["unevaluated"] is True and parsed["gate"]["tripped"] is True
    allowed = compare(side(empty), side(empty, "NEW"), gate.parse(["kernel_time_pct>1"]), True)
    assert allowed.doc["gate"]["tripped"] is False
    assert verdict(allowed).startswith("PASS: no condition could be evaluated (--allow-unevaluated)")
    assert all(r["status"] == "not_compared" for r in parsed["totals"])


def test_reports_missing_fields_are_not_compared_rather_than_crashing(doc):
    broken = copy.deepcopy(doc)
    del broken["metrics"]["gpu_idle"]["devices"][0]["busy_ns"]
    broken["metrics"]["top_kernels"]["kernels"] = 5
    out = compare(side(doc), side(broken, "NEW")).doc
    assert out["devices"]["status"] == out["kernels"]["status"] == "not_compared"
    assert "lacks fields the GPU comparison reads (KeyError: 'busy_ns')" in out["devices"]["reason"]
    busy = next(r for r in out["totals"] if r["id"] == "gpu_busy")
    assert busy["reason"] == "NEW: gpu_idle lacks the fields this figure needs"
    assert (
        files(compare(side(doc), side(broken, "NEW")))["diff.md"].count(
            "ot compared, because a report"
        )
        == 2
    )
