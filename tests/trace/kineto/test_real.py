"""The shared real PyTorch profiler traces end to end: totals equal the raw-JSON reference to
the nanosecond, report.json validates, nothing is written beside the inputs, and diff works
between two Kineto traces and between report.json files of either kind."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from nsys_llm_explainer.cli import run
from nsys_llm_explainer.render import json_writer
from nsys_llm_explainer.schema import errors
from tests import kineto_reference as ref
from tests.conftest import SHARED_TRACES, analyze, ok, run_cli
from tests.fixtures.kineto import workload as wl

KINETO_TRACES = SHARED_TRACES / "kineto"


def kineto_files() -> list[Path]:
    return sorted(KINETO_TRACES.glob("*.json.gz")) if KINETO_TRACES.is_dir() else []


FILES = kineto_files()
needs_traces = pytest.mark.skipif(
    not FILES, reason=f"shared real traces not found at {KINETO_TRACES} (a clone outside /work)"
)


@pytest.fixture(scope="module")
def reports():
    return {p.name: (p, analyze(p)) for p in FILES}


@needs_traces
@pytest.mark.parametrize("name", [p.name for p in FILES])
def test_totals_equal_the_raw_json(reports, name):
    path, report = reports[name]
    doc = ref.load(path)
    per_device = ref.kernel_ns_per_device(doc)
    tk = ok(report, "top_kernels")
    assert tk["total_kernel_ns"] == sum(per_device.values())
    assert tk["kernel_count"] == ref.count(doc, *ref.KERNEL_CATEGORIES)
    by_dev: dict[int, int] = {}
    for row in tk["kernels"]:
        by_dev[row["device_id"]] = by_dev.get(row["device_id"], 0) + row["total_ns"]
    assert by_dev == per_device
    busy = {d["device_id"]: d["kernel_busy_ns"] for d in ok(report, "gpu_idle")["devices"]}
    assert busy == ref.busy_ns_per_device(doc)
    ops = ok(report, "operators")
    assert ops["operator_count"] == ref.count(doc, "cpu_op")
    assert ops["total_kernel_ns"] == tk["total_kernel_ns"]
    # every kernel's time lands in exactly one operator row or "(no operator)"
    assert sum(p["kernel_ns"] for p in ops["operator_kernels"]) <= ops["total_kernel_ns"]
    assert ops["attributed_kernel_ns"] + sum(
        p["kernel_ns"] for p in ops["operator_kernels"] if p["operator"] == "(no operator)"
    ) == ops["total_kernel_ns"] or len(ops["operator_kernels"]) == 200


@needs_traces
@pytest.mark.parametrize("name", [p.name for p in FILES])
def test_report_validates_and_skips_say_why(reports, name):
    _, report = reports[name]
    doc = json_writer.report_dict(report)
    assert errors(doc) == []
    assert doc["trace"]["format"] == "kineto-json"
    for mid, m in doc["metrics"].items():
        if m["status"] == "skipped":
            assert m["reason"] and "internal error" not in m["reason"], (mid, m["reason"])
    assert not any("internal error" in w for w in doc["warnings"])


@needs_traces
def test_known_facts_of_the_shared_traces(reports):
    _, qwen = reports["hf_qwen1.5_0.5b_h100.json.gz"]
    assert [g.name for g in qwen.trace.gpus] == ["NVIDIA H100 80GB HBM3"]
    assert ok(qwen, "operators")["shapes_recorded"] is True
    sites = ok(qwen, "operators")["call_sites"]
    assert sites and all(not s["frame"].startswith("<") for c in sites for s in c["sites"])
    _, hta = reports["hta_a100_80gb_rank0.json.gz"]
    assert hta.trace.distributed == {"rank": 0, "world_size": 16, "backend": "nccl"}
    st = ok(hta, "steps")
    assert st["method"] == "profiler_step" and st["step_count"] == 5
    _, alex = reports["hta_alexnet_a100.json.gz"]
    assert ok(alex, "memory_transfers")["pageable_async"]["count"] == 16


@needs_traces
def test_cli_leaves_inputs_untouched(tmp_path):
    for path in FILES:
        before = hashlib.sha256(path.read_bytes()).hexdigest()
        listing = sorted(p.name for p in path.parent.iterdir())
        result = run_cli(path, "--out", tmp_path / path.name, "--quiet")
        assert result.exit_code == 0, result.stderr
        assert hashlib.sha256(path.read_bytes()).hexdigest() == before
        assert sorted(p.name for p in path.parent.iterdir()) == listing


def diff(capsys, *args):
    code = run(["diff", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def test_diff_between_two_kineto_traces(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    base, _ = wl.write(tmp_path / "base.json")
    b, _ = wl.build()
    for e in b.events:  # the new run's GEMMs take twice as long
        if e["name"] == wl.GEMM and e["cat"] == "kernel":
            e["dur"] = "\u0000num:" + str(2 * float(e["dur"][len("\u0000num:"):]))
    new = b.write(tmp_path / "new.json")
    code, out, err = diff(capsys, base, new, "--out", tmp_path / "d")
    assert code == 0, err
    doc = json.loads((tmp_path / "d" / "diff.json").read_text())
    assert out.startswith("DIFF: ")
    rows = {r["base_name"]: r for r in doc["kernels"]["rows"]}
    gemm = rows[wl.GEMM]
    assert (gemm["match"], gemm["base_total_ns"], gemm["new_total_ns"]) == ("same", 38_000, 76_000)
    assert rows[wl.NODE]["delta_ns"] == 0


def test_diff_between_reports_of_either_kind(tmp_path, capsys, monkeypatch):
    from tests.fixtures.builder import TraceBuilder

    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    kin, _ = wl.write(tmp_path / "k.json")
    b = TraceBuilder("2024.6")
    b.process(100)
    b.runtime(1_000, 1_500, corr=1)
    b.kernel(2_000, 5_000, corr=1, name=wl.GEMM)
    nsys = b.write(tmp_path / "n.sqlite")
    for src, out in ((kin, "rk"), (nsys, "rn")):
        result = run_cli(src, "--out", tmp_path / out, "--quiet")
        assert result.exit_code == 0, result.stderr
    for a, c in (("rk", "rn"), ("rn", "rk"), ("rk", "rk")):
        code, _, err = diff(capsys, tmp_path / a / "report.json", tmp_path / c / "report.json",
                            "--out", tmp_path / f"d_{a}_{c}")
        assert code == 0, err
        doc = json.loads((tmp_path / f"d_{a}_{c}" / "diff.json").read_text())
        assert doc["schema_version"]
