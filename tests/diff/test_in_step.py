"""diff on planted pairs from the benchmark generator: the same workload with one known change
(GEMMs 30% slower, the all-reduce 40% slower, host gaps doubled), and pairs that cannot be
compared (other GPUs, an unrelated program, a different world size)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks.synth import SynthConfig, generate
from nsys_llm_explainer.api import explain
from nsys_llm_explainer.diff import compare, gate
from nsys_llm_explainer.diff.load import Side
from nsys_llm_explainer.diff.render import files, verdict
from nsys_llm_explainer.render.json_writer import report_dict
from tests.fixtures.diff_workloads import workload
from tests.fixtures.kineto import workload as kineto_workload

KERNELS = 8_000  # about 9 complete steps per process, 2 processes
PLANTS = {  # name -> (generator option, true change in percent, what the headline must name)
    "gemm": ({"gemm_scale": 1.3}, 30.0, "gemm kernels"),
    "comm": ({"comm_scale": 1.4}, 40.0, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"),
    "host": ({"host_scale": 2.0}, 100.0, "host time outside CUDA calls"),
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    d = tmp_path_factory.mktemp("planted")
    out = {}
    configs = {"base": SynthConfig(kernels=KERNELS, seed=11),
               "a100": SynthConfig(kernels=KERNELS // 2, processes=1, seed=12, gpu_name="NVIDIA A100-SXM4-80GB")}
    for name, (plant, _, _) in PLANTS.items():
        configs[name] = SynthConfig(kernels=KERNELS, seed=13, **plant)  # another seed: other noise
    for name, cfg in configs.items():
        generate(cfg, d / f"{name}.sqlite", sidecar=False)
        out[name] = report_dict(explain(d / f"{name}.sqlite"))
    out["other_program"] = report_dict(explain(workload(d / "small.sqlite", steps=8)))
    return out


def side(doc: dict[str, Any], role: str) -> Side:
    return Side(role.lower(), "trace", doc, role)


def diff_of(reports: dict[str, dict[str, Any]], base: str, new: str, *conds: str) -> Any:
    return compare(side(reports[base], "BASE"), side(reports[new], "NEW"), gate.parse(list(conds)))


@pytest.mark.parametrize("plant", list(PLANTS))
def test_headline_names_the_planted_change_with_its_size_and_interval(reports: Any, plant: str) -> None:
    _, truth, name = PLANTS[plant]
    result = diff_of(reports, "base", plant)
    doc = result.doc
    assert doc["comparability"]["comparable"] is True, doc["comparability"]["reasons"]
    lead = doc["headline"]["changes"][0]
    assert lead["label"] == name
    assert abs(lead["change_pct"] - truth) <= 2.0, lead
    assert lead["low_pct"] <= truth <= lead["high_pct"], lead
    first = files(result)["diff.md"].splitlines()[0]
    assert "largest change beyond the noise: " + name.replace("_", "\\_").lower() in first.lower()
    assert f"{lead['change_pct']:+.1f}%" in first and "95% CI" in first
    steps = doc["in_step"]["base_steps"], doc["in_step"]["new_steps"]
    assert min(steps) >= 12 and f"{steps[0]} vs {steps[1]} steps" in first


def test_host_gaps_move_step_time_and_nothing_on_the_gpu(reports: Any) -> None:
    rows = {r["id"]: r for r in diff_of(reports, "base", "host").doc["in_step"]["rows"]}
    assert rows["step_time"]["beyond_noise"] and rows["step_time"]["change_pct"] > 30
    assert not rows["kernel_time"]["beyond_noise"] and not rows["gpu_busy"]["beyond_noise"]


def test_kernel_time_gate_uses_in_step_time(reports: Any) -> None:
    doc = diff_of(reports, "base", "gemm", "kernel_time_pct>5").doc
    rows = {r["id"]: r for r in doc["in_step"]["rows"]}
    assert doc["gate_values"]["kernel_time_pct"]["value"] == rows["kernel_time"]["change_pct"] > 5
    assert doc["gate"]["tripped"] is True


def test_gpu_time_in_steps_is_per_step_not_per_step_and_device(reports: Any) -> None:
    """Each step is one process's step on its own GPU: its busy time is not divided again."""
    m = reports["base"]["metrics"]["step_work"]
    row = next(r for r in diff_of(reports, "base", "base").doc["in_step"]["rows"] if r["id"] == "gpu_busy")
    assert row["base_median"] == pytest.approx(float(np.median(m["per_step"]["busy_ns"])))
    assert m["processes"] == 2


@pytest.mark.parametrize(("new", "reason"), [
    ("a100", "different GPU models and 2 vs 1 GPUs"),
    ("other_program", "different programs: 0 of "),
])
def test_pairs_that_cannot_be_compared_say_so_first(reports: Any, new: str, reason: str) -> None:
    result = diff_of(reports, "base", new, "incomparable")
    doc = result.doc
    assert doc["comparability"]["comparable"] is False
    assert any(r.startswith(reason) for r in doc["comparability"]["reasons"]), doc["comparability"]["reasons"]
    assert files(result)["diff.md"].startswith("Not comparable: ")
    assert verdict(result).startswith("FAIL: incomparable (value 1.00); Not comparable: ")


def test_changes_that_came_with_the_gpu_are_labelled(reports: Any) -> None:
    doc = diff_of(reports, "base", "a100").doc
    assert doc["findings"]["hardware"].startswith("from 2 x NVIDIA H100")
    assert all(f["hardware_changed"] for f in doc["findings"]["appeared"] + doc["findings"]["disappeared"])
    # the pair is not comparable: its verdict stops there, naming no change "beyond the noise"
    assert doc["headline"]["text"].startswith("Not comparable: ")
    assert "beyond the noise" not in doc["headline"]["text"] and "with the GPU change" not in doc["headline"]["text"]


def test_a_different_world_size_is_a_different_job(tmp_path: Path) -> None:
    def kineto(name: str, rank: int, world: int) -> dict[str, Any]:
        path, _ = kineto_workload.write(tmp_path / name)
        doc = report_dict(explain(path))
        doc["trace"]["distributed"] = {"rank": rank, "world_size": world, "backend": "nccl"}
        return doc

    a, b = kineto("a.json", 3, 8), kineto("b.json", 1, 2)
    comp = compare(side(a, "BASE"), side(b, "NEW")).doc["comparability"]
    assert comp["comparable"] is False
    assert comp["reasons"] == ["different jobs: world size 8 vs 2 (rank 3 of 8 vs rank 1 of 2)"]
    same_job = copy.deepcopy(a)
    same_job["trace"]["distributed"]["rank"] = 5
    comp = compare(side(a, "BASE"), side(same_job, "NEW")).doc["comparability"]
    assert comp["comparable"] is True and comp["cautions"][0].startswith("different ranks of a job of 8")


def test_findings_not_measured_in_new_are_not_resolved(reports: Any) -> None:
    base, new = copy.deepcopy(reports["base"]), copy.deepcopy(reports["base"])
    fired = [f for f in base["findings"] if "idle_causes" in f["metric_ids"]]
    assert fired
    new["metrics"]["idle_causes"] = {"status": "skipped", "reason": "the CUDA API table is empty"}
    new["findings"] = [f for f in new["findings"] if "idle_causes" not in f["metric_ids"]]
    result = compare(side(base, "BASE"), side(new, "NEW"))
    f = result.doc["findings"]
    assert {x["rule_id"] for x in f["not_measured_new"]} == {x["rule_id"] for x in fired}
    assert not {x["rule_id"] for x in f["disappeared"]} & {x["rule_id"] for x in fired}
    assert "- Not measured in NEW: " in files(result)["diff.md"]


def test_an_impossible_figure_is_an_error_not_a_result(reports: Any) -> None:
    bad = copy.deepcopy(reports["base"])
    dev = bad["metrics"]["gpu_idle"]["devices"][0]
    dev["busy_ns"] = 10 * (dev["window_end_ns"] - dev["window_start_ns"])
    comp = compare(side(reports["base"], "BASE"), side(bad, "NEW")).doc["comparability"]
    assert comp["comparable"] is False and len(comp["errors"]) == 1
    assert comp["errors"][0].startswith("NEW GPU 0: busy ") and "cannot both be true" in comp["errors"][0]


def test_a_change_with_nothing_on_base_reads_as_new_not_as_a_missing_percentage() -> None:
    from nsys_llm_explainer.diff.comparability import item_text

    item = {"kind": "category", "label": "communication kernels", "measure": "time per step",
            "change_pct": None, "low_pct": None, "high_pct": None, "delta_ns": 36_404_000.0}
    assert item_text(item, None) == "communication kernels, none in BASE's steps, +36.4 ms per step in NEW's"
    item |= {"change_pct": 12.5, "low_pct": 10.0, "high_pct": 15.0, "delta_ns": 2_000_000.0}
    assert item_text(item, "from A to B") == ("communication kernels +12.5% time per step (95% CI +10.0% to "
                                              "+15.0%), +2.00 ms per step, with the GPU change (from A to B)")
