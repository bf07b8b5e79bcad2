"""fleet checks that the traces are one job from their contents, whatever their clocks say:
captures of different programs are refused even without clock origins, the clock trust is in
the headline and no rank is named at low trust, and the runs of a sweep state what makes them
comparable (the same model on the same GPU). Generated sets in both trace formats."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from nsys_llm_explainer import fleet
from nsys_llm_explainer.fleet import inputs
from nsys_llm_explainer.fleet.render_text import verdict
from tests.fixtures import diff_pairs as dp
from tests.fleet_support import make_set, schema_errors


def run_fleet(paths: list[Path], labels: list[str] | None = None) -> fleet.FleetResult:
    return fleet.run(inputs.collect([str(p) for p in paths], labels or [], None), jobs=1, use_cache=False)


def no_origin(path: Path) -> Path:
    """Remove a generated capture's recorded start time (our own fixture file)."""
    con = sqlite3.connect(path)
    con.execute("DELETE FROM TARGET_INFO_SESSION_START_TIME")
    con.commit()
    con.close()
    return path


def write(fmt: str, plan: dp.Plan, path: Path, gpu: str = "NVIDIA H100 80GB HBM3") -> Path:
    """A capture without a clock origin in either format."""
    return dp.write(plan, path, fmt, gpu, clock_origin=False)


@pytest.mark.parametrize("fmt", ["nsys", "kineto"])
def test_captures_of_different_programs_without_clock_origins_are_refused(fmt: str, tmp_path: Path) -> None:
    a = write(fmt, dp.loop_plan(10, 60_000, allreduce=True), tmp_path / "rank0")
    b = write(fmt, dp.oneshot_plan(91_100, 1_000_000, dp.OTHER_GEMM), tmp_path / "rank1")
    c = write(fmt, dp.loop_plan(10, 50_000, allreduce=True), tmp_path / "rank2")
    result = run_fleet([a, b, c])
    run = result.doc["runs"][0]
    comp = run["comparability"]
    assert comp["overlap_ns"] is None  # no clock origin: time cannot tell
    assert comp["refused"] is True
    rows = {r["id"]: r for r in comp["evidence"]}
    assert rows["kernel_names"]["blocking"] and rows["kernel_names"]["detail"].startswith(
        "captures of different programs: rank1")
    assert "share kernel names holding 0.0% and 0.0% of their kernel time" in rows["kernel_names"]["detail"]
    assert rows["collectives"]["blocking"] and rows["collectives"]["detail"].startswith(
        "captures of different programs: rank1")
    assert "ran no collective, while rank0" in rows["collectives"]["detail"]
    assert run["clock"]["trust_level"] == run["headline"]["trust"] == "none"
    assert run["headline"]["rank"] is None and run["headline"]["stragglers"] == []
    line = verdict(result.doc, plain=True)
    assert line.startswith("Not aligned, not compared: captures of different programs: ")
    assert line.endswith("Clock trust: none.")
    assert schema_errors(result.doc) == []


@pytest.mark.parametrize("fmt", ["nsys", "kineto"])
def test_a_rank_without_a_single_collective_is_another_program(fmt: str, tmp_path: Path) -> None:
    a = write(fmt, dp.loop_plan(10, 60_000, allreduce=True), tmp_path / "rank0")
    b = write(fmt, dp.loop_plan(10, 60_000), tmp_path / "rank1")
    comp = run_fleet([a, b]).doc["runs"][0]["comparability"]
    rows = {r["id"]: r for r in comp["evidence"]}
    assert rows["kernel_names"]["verdict"] != "differs" or not rows["kernel_names"]["blocking"]
    assert comp["refused"] and comp["reasons"] == [rows["collectives"]["detail"]]
    assert rows["collectives"]["detail"] == (
        f"captures of different programs: {b.name} ran no collective, while {a.name} ran 10; message sizes are "
        "not in kernel records, so not checked")


@pytest.mark.parametrize("fmt", ["nsys", "kineto"])
def test_ranks_of_one_job_without_clock_origins_name_no_rank_at_low_trust(fmt: str, tmp_path: Path) -> None:
    # 4 ranks, 6 steps: too few collectives to refine the clocks (align.MIN_MATCHED); rank 3's
    # GEMMs take 2x longer, a straggler by compute per step, that low trust must not name
    paths = [write(fmt, dp.loop_plan(6, 120_000 if r == 3 else 60_000 + 100 * r, allreduce=True),
                   tmp_path / f"rank{r}") for r in range(4)]
    result = run_fleet(paths)
    run = result.doc["runs"][0]
    assert len(run["ranks"]) == 4
    assert run["comparability"]["refused"] is False
    assert [r["verdict"] for r in run["comparability"]["evidence"]] == ["same", "same", "unknown"]
    assert run["clock"]["method"] == "first_kernel" and run["clock"]["refined_by_collectives"] is False
    assert run["clock"]["trust_level"] == run["headline"]["trust"] == "low"
    assert run["headline"]["rank"] is None and run["headline"]["stragglers"] == []
    assert not any(r["straggler"] for r in run["ranks"])
    for part in ("stragglers", "collectives"):
        assert run[part]["status"] == "skipped" and run[part]["reason"].startswith(
            "no rank is named at low clock trust (low: the traces do not record when they started")
    line = verdict(result.doc, plain=True)
    assert line.startswith("Clock trust: low. No rank is named: the clocks are low trust")
    assert "Straggler" not in line and "rank 3" not in line
    assert schema_errors(result.doc) == []


def test_ranks_of_one_job_without_clock_origins_refined_by_collectives_are_high_trust(tmp_path: Path) -> None:
    root, truth = make_set(tmp_path, ranks=4, steps=12, straggler=3)
    for p in root.glob("*.sqlite"):
        no_origin(p)
    run = run_fleet([root]).doc["runs"][0]
    assert run["clock"]["method"] == "first_kernel" and run["clock"]["refined_by_collectives"] is True
    assert run["clock"]["trust_level"] == "high"
    assert [r["verdict"] for r in run["comparability"]["evidence"]] == ["same", "same", "unknown"]
    assert run["headline"]["rank"] == truth["straggler"] == 3


def test_a_sweep_states_that_its_runs_are_one_model_on_one_gpu(tmp_path: Path) -> None:
    for bs, layers in ((8, 2), (16, 4)):
        make_set(tmp_path / f"bs{bs}", ranks=3, layers=layers, straggler=None, slow_collectives=())
    result = run_fleet([tmp_path / "bs8", tmp_path / "bs16"], [r"batch=bs(?P<batch>\d+)"])
    check = result.doc["sweep"]["check"]
    assert check["comparable"] is True
    assert check["gpu"] == {"verdict": "same", "detail": "every run ran on NVIDIA H100 80GB HBM3"}
    assert check["model"]["verdict"] == "same" and check["model"]["detail"].startswith(
        "the model is not recorded; the runs share kernel names holding at least ")
    assert verdict(result.doc, plain=True).startswith(
        "Sweep of 2 runs, compared as runs of one model on one GPU (every run ran on NVIDIA H100 80GB HBM3; ")


@pytest.mark.parametrize("fmt", ["nsys", "kineto"])
def test_a_sweep_over_other_gpus_or_programs_says_so(fmt: str, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "c").mkdir()
    dp.write(dp.loop_plan(8, 60_000), tmp_path / "a" / "run", fmt, "NVIDIA H100 80GB HBM3")
    dp.write(dp.loop_plan(8, 90_000), tmp_path / "b" / "run", fmt, "NVIDIA A100-SXM4-80GB")
    check: dict[str, Any] = run_fleet([tmp_path / "a", tmp_path / "b"], [r"run=/(?P<run>[ab])/"]).doc["sweep"]["check"]
    assert check["comparable"] is False and check["gpu"]["verdict"] == "differs"
    assert check["gpu"]["detail"] == ("the runs ran on different GPUs (a: NVIDIA H100 80GB HBM3; "
                                      "b: NVIDIA A100-SXM4-80GB)")
    dp.write(dp.oneshot_plan(91_100, 1_000_000, dp.OTHER_GEMM), tmp_path / "c" / "run", fmt, "NVIDIA H100 80GB HBM3")
    check = run_fleet([tmp_path / "a", tmp_path / "c"], [r"run=/(?P<run>[ac])/"]).doc["sweep"]["check"]
    assert check["comparable"] is False and check["model"]["verdict"] == "differs"
    assert "run c shares kernel names holding only 0.0% of the kernel time with run a" in check["model"]["detail"]
