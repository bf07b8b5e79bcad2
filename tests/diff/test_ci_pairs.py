"""diff as a CI gate, on generated pairs in both trace formats whose true differences are known:
a gate never passes on a pair that is not comparable (both orders), comparability says what it
does not know, nothing is scaled per second of captured window (per step, per call, counts as
counts), a kernel that changed its tile is one row, carried work is counted apart, and per-call
figures are the medians their change is about (tests/fixtures/diff_pairs.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nsys_llm_explainer.api import explain
from nsys_llm_explainer.cli import run
from nsys_llm_explainer.diff import compare, gate
from nsys_llm_explainer.diff.load import Side
from nsys_llm_explainer.diff.render import files, verdict
from nsys_llm_explainer.render.json_writer import report_dict
from tests.fixtures import diff_pairs as dp

A100, V100 = "NVIDIA A100-SXM4-80GB", "Tesla V100-SXM2-16GB"
STEPS = 12
FAST_GEMM = 23_750  # (2 x 23.75 + 25) / (2 x 60 + 25) = 1/2: GPU busy per step halves
PLANS: dict[str, tuple[Any, str | None]] = {
    "a100": (lambda: dp.loop_plan(STEPS, 60_000), A100),
    "v100": (lambda: dp.loop_plan(STEPS, 150_000), V100),
    "unknown": (lambda: dp.loop_plan(STEPS, 60_000), None),
    "fast": (lambda: dp.loop_plan(STEPS, FAST_GEMM), A100),
    "tile": (lambda: dp.loop_plan(STEPS, 60_000, gemm_name=dp.GEMM_OTHER_TILE), A100),
    "carried": (lambda: dp.loop_plan(STEPS, 60_000, carried=40), A100),
    "varied": (lambda: dp.loop_plan(STEPS, [60_000] * (STEPS - 1) + [600_000]), A100),
    "oneshot_base": (lambda: dp.oneshot_plan(91_100, 50_000_000), A100),
    "oneshot_new": (lambda: dp.oneshot_plan(87_700, 47_000_000), A100),
}


@pytest.fixture(autouse=True)
def no_step_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


@pytest.fixture(scope="module", params=["nsys", "kineto"])
def pairs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """name -> report.json dict, and the report.json paths under "paths"."""
    d = tmp_path_factory.mktemp(f"pairs_{request.param}")
    out: dict[str, Any] = {"fmt": request.param, "paths": {}, "plans": {}}
    for name, (make, gpu) in PLANS.items():
        plan = make()
        doc = report_dict(explain(dp.write(plan, d / name, request.param, gpu)))
        path = d / f"{name}.report.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        out[name], out["paths"][name], out["plans"][name] = doc, path, plan
    return out


def diff_of(pairs: dict[str, Any], base: str, new: str, *conds: str, allow_incomparable: bool = False) -> Any:
    return compare(Side(base, "report", pairs[base], "BASE"), Side(new, "report", pairs[new], "NEW"),
                   gate.parse(list(conds)), allow_incomparable=allow_incomparable)


def cli(pairs: dict[str, Any], tmp_path: Path, base: str, new: str, *args: str) -> tuple[int, str]:
    out = tmp_path / f"{base}-{new}-{len(args)}"
    code = run(["diff", str(pairs["paths"][base]), str(pairs["paths"][new]), "--out", str(out), "--quiet", *args])
    return code, (out / "diff.md").read_text(encoding="utf-8")


def step_latency(plan: dp.Plan) -> float:
    return float(np.median([e - s for s, e in plan.steps]))


# -- 1. a gate never passes on a pair the tool calls not comparable -------------------------------

@pytest.mark.parametrize(("base", "new"), [("a100", "v100"), ("v100", "a100")])
def test_a_gate_on_gpus_that_differ_fails_in_both_orders(pairs: Any, tmp_path: Path, base: str, new: str) -> None:
    rise = 100 * (step_latency(pairs["plans"][new]) / step_latency(pairs["plans"][base]) - 1)
    doc = diff_of(pairs, base, new, "step_time_pct>5").doc
    cond = doc["gate"]["conditions"][0]
    # the condition itself is evaluated as before: it trips only where step time rose
    assert cond["value"] == pytest.approx(rise, abs=0.01)
    assert cond["status"] == ("tripped" if rise > 5 else "passed")
    # but the gate fails either way, and says why
    assert doc["comparability"]["comparable"] is False
    assert doc["gate"]["incomparable"] is True and doc["gate"]["tripped"] is True
    assert doc["gate"]["incomparable_reasons"][0].startswith("different GPU models: BASE ran on 1 x ")
    code, md = cli(pairs, tmp_path, base, new, "--fail-on", "step_time_pct>5")
    assert code == 5
    assert md.startswith("Not comparable: different GPU models: ")
    assert "**The captures are not comparable: the gate fails**" in md
    line = verdict(diff_of(pairs, base, new, "step_time_pct>5"))
    assert line.startswith("FAIL: ") and "not comparable, so no gate passes (--allow-incomparable" in line
    # --allow-incomparable evaluates the condition as it reads; --fail-on incomparable still fails
    assert cli(pairs, tmp_path, base, new, "--fail-on", "step_time_pct>5", "--allow-incomparable")[0] == (
        5 if rise > 5 else 0)
    assert cli(pairs, tmp_path, base, new, "--fail-on", "incomparable", "--allow-incomparable")[0] == 5
    # without a gate: exit 0, and diff.md leads with "not comparable" and the reasons
    code, md = cli(pairs, tmp_path, base, new)
    assert code == 0 and md.splitlines()[0].startswith("Not comparable: different GPU models: BASE ran on ")


def test_a_gate_on_a_comparable_pair_is_unchanged(pairs: Any) -> None:
    doc = diff_of(pairs, "a100", "fast", "step_time_pct>5").doc
    assert doc["comparability"]["comparable"] is True
    assert doc["gate"]["incomparable"] is False and doc["gate"]["tripped"] is False
    assert doc["gate"]["incomparable_reasons"] == []


def test_gpus_no_capture_records_are_unknown_with_a_caution(pairs: Any) -> None:
    result = diff_of(pairs, "unknown", "unknown", "kernel_time_pct>1")
    comp = result.doc["comparability"]
    gpus = next(c for c in comp["checks"] if c["id"] == "gpus")
    assert (gpus["verdict"], gpus["blocking"], gpus["caution"]) == ("unknown", False, True)
    assert comp["comparable"] is True
    assert comp["cautions"][0] == ("neither capture records its GPU model: whether both ran on the same GPU "
                                   "cannot be checked (1 GPU on each side)")
    assert "| GPU models and count | 1 x unknown model | 1 x unknown model | unknown (caution) |" in files(
        result)["diff.md"]
    assert result.doc["gate"]["tripped"] is False
    # one side recorded, the other not: unknown too, never "same"
    gpus = next(c for c in diff_of(pairs, "a100", "unknown").doc["comparability"]["checks"] if c["id"] == "gpus")
    assert gpus["verdict"] == "unknown" and gpus["detail"].startswith("a capture does not record its GPU model")


def test_kernels_on_other_gpus_show_their_share_of_each_gpus_peak(pairs: Any) -> None:
    if pairs["fmt"] == "nsys":
        pytest.skip("an Nsight Systems export without NVTX shapes counts no FLOPs (compute_efficiency skipped)")
    result = diff_of(pairs, "a100", "v100")
    gemm = next(r for r in result.doc["kernels"]["rows"] if r["base_name"] == dp.GEMM)
    ce = {side: {d["device_id"]: d for d in pairs[side]["metrics"]["compute_efficiency"]["devices"]}
          for side in ("a100", "v100")}
    for side, row_key, ns in (("a100", "base", 60_000), ("v100", "new", 150_000)):
        peak = ce[side][0]["peak_tflops"]["fp16"]
        expected = 100 * dp.GEMM_FLOPS / (ns * 1e-9) / 1e12 / peak
        assert gemm[f"{row_key}_peak_of"] == "FLOP/s"
        assert gemm[f"{row_key}_peak_pct"] == pytest.approx(expected, rel=0.01)
    md = files(result)["diff.md"]
    assert f"({gemm['base_peak_pct']:.1f}% of peak FLOP/s)" in md and f"({gemm['new_peak_pct']:.1f}% of peak" in md
    # the same GPU on both sides: diff.md does not show them
    assert "of peak" not in files(diff_of(pairs, "a100", "fast"))["diff.md"]


# -- 2. no per-second scaling of whole-capture totals ----------------------------------------------

def test_only_gemms_changed_so_nothing_else_reads_as_changed(pairs: Any) -> None:
    base, new = pairs["plans"]["a100"], pairs["plans"]["fast"]
    doc = diff_of(pairs, "a100", "fast", "launches_pct>5", "gpu_busy_pct<-40").doc
    assert base.launches == new.launches == STEPS * (dp.GEMMS + 2)
    gv = doc["gate_values"]
    assert (gv["launches_pct"]["value"], gv["launches_pct"]["basis"]) == (0.0, "per_step")
    # GPU busy per step: 2 x 60 + 25 us -> 2 x 23.75 + 25 us, exactly half
    assert (gv["gpu_busy_pct"]["value"], gv["gpu_busy_pct"]["basis"]) == (pytest.approx(-50.0), "per_step")
    assert [c["status"] for c in doc["gate"]["conditions"]] == ["passed", "tripped"]
    totals = {r["id"]: r for r in doc["totals"]}
    assert (totals["launches"]["base"], totals["launches"]["new"], totals["launches"]["delta_pct"]) == (
        base.launches, new.launches, 0.0)
    busy_b = sum(k.end - k.start for k in base.kernels)
    busy_n = sum(k.end - k.start for k in new.kernels)
    assert (totals["gpu_busy"]["base"], totals["gpu_busy"]["new"]) == (busy_b, busy_n)
    assert totals["gpu_busy"]["delta_pct"] == pytest.approx(100 * (busy_n - busy_b) / busy_b, abs=1e-3)
    rows = {r["base_name"]: r for r in doc["kernels"]["rows"]}
    for unchanged in (dp.ATTN, dp.NORM):
        assert rows[unchanged]["per_call_pct"] == 0.0 and rows[unchanged]["time_pct"] == 0.0
    assert rows[dp.GEMM]["per_call_pct"] == pytest.approx(100 * (FAST_GEMM / 60_000 - 1), abs=1e-3)
    assert doc["basis"]["kind"] == "per_step"
    assert (doc["basis"]["base_window_ns"], doc["basis"]["new_window_ns"]) == (
        doc["base"]["window_ns"], doc["new"]["window_ns"])


def test_a_one_shot_pair_compares_each_kernel_per_call_and_counts_as_counts(pairs: Any, tmp_path: Path) -> None:
    result = diff_of(pairs, "oneshot_base", "oneshot_new", "launches_pct>5", "launch_calls_pct>5")
    doc = result.doc
    assert doc["basis"]["kind"] == "per_call" and doc["kernels"]["source"] == "totals"
    wb, wn = doc["base"]["window_ns"], doc["new"]["window_ns"]
    assert abs(wn - wb) / wb > 0.05  # windows 6% apart: the old per-second basis invented +6%
    rows = {r["base_name"]: r for r in doc["kernels"]["rows"]}
    gemm = rows[dp.GEMM]
    assert (gemm["base_per_call_ns"], gemm["new_per_call_ns"]) == (91_100, 87_700)
    assert gemm["per_call_pct"] == pytest.approx(100 * (87_700 - 91_100) / 91_100, abs=1e-3)  # -3.7%
    others = [r for n, r in rows.items() if n != dp.GEMM]
    assert len(others) == dp.ONESHOT_KERNELS - 1
    assert all(r["per_call_pct"] == 0.0 and r["delta_pct"] == 0.0 for r in others)
    cats = {r["category"]: r for r in doc["categories"]["rows"]}
    assert cats["gemm"]["delta_pct"] == pytest.approx(-3.7322, abs=1e-3)
    assert doc["gate"]["tripped"] is False
    assert {k: doc["gate_values"][k]["value"] for k in ("launches_pct", "launch_calls_pct")} == {
        "launches_pct": 0.0, "launch_calls_pct": 0.0}
    md = files(result)["diff.md"]
    assert f"| Metric | Base (window {_dur(wb)}) | New (window {_dur(wn)}) | Change |" in md
    assert "| Kernels launched | 14 | 14 | +0 (+0.0%) |" in md


def _dur(ns: int) -> str:
    from nsys_llm_explainer import fmt

    return fmt.dur(ns)


# -- 3. matching like with like --------------------------------------------------------------------

def test_a_gemm_that_changed_its_tile_is_one_renamed_row(pairs: Any) -> None:
    doc = diff_of(pairs, "a100", "tile", "new_kernels>0", "vanished_kernels>0").doc
    k = doc["kernels"]
    assert k["counts"] == {"same": 2, "renamed": 1, "new": 0, "vanished": 0}
    row = next(r for r in k["rows"] if r["match"] == "renamed")
    assert (row["base_name"], row["new_name"]) == (dp.GEMM, dp.GEMM_OTHER_TILE)
    assert (row["base_calls"], row["new_calls"]) == (STEPS * dp.GEMMS, STEPS * dp.GEMMS)
    if pairs["fmt"] == "kineto":  # the operator is recorded: matched by operation, shapes included
        assert row["matched_by"] == "operator"
        assert row["operation"].startswith(f"aten::mm (gemm, {dp.GEMM_FLOPS:.3g} FLOP, ")
    else:  # no operator in the export: the same library kernel at another tile
        assert (row["matched_by"], row["operation"]) == ("tile", "gemm kernels nvjet_hsh_* at another tile")
    assert row["per_call_pct"] == 0.0
    assert doc["gate"]["tripped"] is False


def test_a_gemm_no_operator_launched_is_matched_by_its_tile_family(tmp_path: Path) -> None:
    """A PyTorch profiler pair whose GEMMs no operator launched (the attention and norm have
    theirs): the GEMMs fall back to the library family at another tile."""
    docs = [report_dict(explain(dp.write(dp.loop_plan(6, 60_000, gemm_name=name, gemm_op=None),
                                         tmp_path / f"g{i}", "kineto", A100)))
            for i, name in enumerate((dp.GEMM, dp.GEMM_OTHER_TILE))]
    out = compare(Side("a", "report", docs[0], "BASE"), Side("b", "report", docs[1], "NEW")).doc
    row = next(r for r in out["kernels"]["rows"] if r["match"] == "renamed")
    assert (row["base_name"], row["new_name"], row["matched_by"]) == (dp.GEMM, dp.GEMM_OTHER_TILE, "tile")
    assert out["kernels"]["counts"] == {"same": 2, "renamed": 1, "new": 0, "vanished": 0}


def test_another_kernel_of_the_same_category_is_not_the_same_operation(tmp_path: Path) -> None:
    """An RMS norm replaced by a layer norm (both "norm"), under its own operator (PyTorch
    profiler) or with no tile shape in its name (Nsight Systems): new and vanished, not renamed."""
    for fmt in ("nsys", "kineto"):
        docs = [report_dict(explain(dp.write(dp.loop_plan(6, 60_000, norm=norm), tmp_path / f"{fmt}{i}", fmt, A100)))
                for i, norm in enumerate(((dp.NORM, "aten::rms_norm"), (dp.LAYER_NORM, "aten::layer_norm")))]
        out = compare(Side("a", "report", docs[0], "BASE"), Side("b", "report", docs[1], "NEW")).doc
        assert out["kernels"]["counts"] == {"same": 2, "renamed": 0, "new": 1, "vanished": 1}, fmt


def test_carried_work_is_counted_apart_not_in_the_first_step(pairs: Any) -> None:
    result = diff_of(pairs, "a100", "carried")
    doc = result.doc
    assert doc["new"]["carried"] == {"kernels": 40, "kernel_ns": 40 * dp.CARRIED_NS, "busy_ns": 40 * dp.CARRIED_NS}
    assert doc["base"]["carried"]["kernels"] == 0
    assert (doc["in_step"]["new_carried_kernels"], doc["in_step"]["new_carried_ns"]) == (40, 40 * dp.CARRIED_NS)
    kernels = next(r for r in doc["in_step"]["rows"] if r["id"] == "kernels")
    assert (kernels["base_median"], kernels["new_median"]) == (dp.GEMMS + 2, dp.GEMMS + 2)
    assert kernels["change_pct"] == kernels["low_pct"] == kernels["high_pct"] == 0.0
    steps = next(c for c in doc["comparability"]["checks"] if c["id"] == "steps")
    assert f"{dp.GEMMS + 2:,.1f} kernels per step" in steps["base"] and steps["verdict"] == "same"
    assert doc["new"]["kernels_per_step"] == kernels["new_median"]
    md = files(result)["diff.md"]
    assert "| Queued before the capture (in no step) | 0 kernels, 0 ns | 40 kernels, 120 µs |" in md
    assert "counted apart and never folded into a step" in md


def test_per_call_figures_are_the_medians_their_change_is_about(pairs: Any) -> None:
    doc = diff_of(pairs, "a100", "varied").doc
    gemm = next(r for r in doc["kernels"]["rows"] if r["base_name"] == dp.GEMM)
    per_step = [60_000] * (STEPS - 1) + [600_000]  # the new side's GEMM time per call, step by step
    assert gemm["per_call_stat"] == "median"
    assert (gemm["base_per_call_ns"], gemm["new_per_call_ns"]) == (60_000, float(np.median(per_step)))
    assert gemm["new_total_ns"] / gemm["new_calls"] == pytest.approx(np.mean(per_step))  # not what is shown
    assert gemm["per_call_pct"] == 0.0


@pytest.mark.slow
def test_hta_trace_carried_work_is_counted_apart() -> None:
    from tests.conftest import SHARED_TRACES

    path = SHARED_TRACES / "kineto" / "hta_a100_80gb_rank0.json.gz"
    if not path.is_file():
        pytest.skip(f"shared real trace not found at {path}")
    doc = report_dict(explain(path))
    s = Side("hta", "report", doc, "BASE")
    out = compare(s, Side("hta", "report", doc, "NEW")).doc
    carried = doc["metrics"]["steps"]["carried"]
    assert carried["kernels"] == 705
    assert out["in_step"]["base_carried_kernels"] == out["in_step"]["new_carried_kernels"] == 705
    kernels = next(r for r in out["in_step"]["rows"] if r["id"] == "kernels")
    assert kernels["change_pct"] == kernels["low_pct"] == kernels["high_pct"] == 0.0
    per = doc["metrics"]["step_work"]["per_step"]["kernels"]
    assert kernels["base_median"] == float(np.median(per)) == out["base"]["kernels_per_step"]


def _shared_traces() -> list[Path]:
    from tests.conftest import SHARED_TRACES

    return sorted([*SHARED_TRACES.glob("nsys/*.sqlite"), *SHARED_TRACES.glob("kineto/*.json.gz")])


@pytest.mark.slow
@pytest.mark.parametrize("path", _shared_traces() or [None], ids=lambda p: p.name if p else "absent")
def test_every_shared_trace_diffed_with_itself_shows_no_change_and_passes_every_gate(path: Path | None) -> None:
    if path is None:
        pytest.skip("shared real traces not found beside the project")
    doc = report_dict(explain(path))
    conds = ["incomparable"] + [f"{m}{op}0" for m in gate.GATE_METRICS if m != "incomparable" for op in (">", "<")]
    out = compare(Side("a", "report", doc, "BASE"), Side("a", "report", doc, "NEW"), gate.parse(conds)).doc
    if doc["diagnosis"]["verdict"] == "no_gpu_work":
        # nothing to compare, even with itself: every gate fails rather than pass on nothing
        assert out["comparability"]["reasons"][0].startswith("nothing to compare: BASE captured no GPU work: ")
        assert out["gate"]["tripped"] is True
        return
    assert out["comparability"]["comparable"] is True, out["comparability"]["reasons"]
    assert out["gate"]["tripped"] is False
    evaluated = [c for c in out["gate"]["conditions"] if c["status"] != "not_evaluated"]
    assert evaluated and all(c["status"] == "passed" and c["value"] == 0 for c in evaluated), evaluated
    assert all(r["delta"] in (0, None) for r in out["totals"])
    assert all(r["match"] == "same" and r["delta_ns"] == 0 for r in out["kernels"]["rows"])
    assert all(r["per_call_pct"] in (0.0, None) for r in out["kernels"]["rows"])
    assert out["findings"]["appeared"] == out["findings"]["disappeared"] == []
