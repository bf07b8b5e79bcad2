"""Every metric on a synthetic PyTorch profiler trace, against the workload's own plan and
the raw-JSON reference; report.json of Kineto inputs validates against the schema."""

from __future__ import annotations

import json

import pytest

from nsys_llm_explainer.model import TraceFormat
from nsys_llm_explainer.render import Format, json_writer
from nsys_llm_explainer.render.writers import build as build_files
from nsys_llm_explainer.schema import errors
from tests import kineto_reference as ref
from tests.conftest import analyze, md_section, ok, skipped
from tests.fixtures.builder import TraceBuilder
from tests.fixtures.kineto import workload as wl


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path, plan = wl.write(tmp_path_factory.mktemp("k") / "w.pt.trace.json")
    return path, plan, analyze(path)


def test_kernel_totals_match_the_raw_json(trace):
    path, plan, report = trace
    doc = ref.load(path)
    tk = ok(report, "top_kernels")
    assert tk["total_kernel_ns"] == sum(ref.kernel_ns_per_device(doc).values())
    assert tk["total_kernel_ns"] == sum(plan.gemm_ns) + sum(plan.relu_ns) + sum(plan.node_ns) + 1_000
    assert tk["kernel_count"] == 4 * 6 + 1
    busy = {d["device_id"]: d["busy_ns"] for d in ok(report, "gpu_idle")["devices"]}
    assert busy == ref.busy_ns_per_device(doc)


def test_trace_facts(trace):
    _, _, report = trace
    t = report.trace
    assert t.format is TraceFormat.KINETO
    assert t.nsys_version is None
    assert t.distributed == {"rank": 0, "world_size": 2, "backend": "nccl"}
    assert t.format_details == {"schemaVersion": 1, "cuda_runtime_version": 12040, "cupti_version": 22}
    assert [(g.device_id, g.name, g.sm_count) for g in t.gpus] == [
        (0, "NVIDIA H100 80GB HBM3", 132), (1, "NVIDIA H100 80GB HBM3", 132)]
    assert t.window_start_ns == 1_700_000_000_000_000_500
    assert t.tables["kernel"] == 25 and t.tables["cpu_op"] == 12
    assert [p.pid for p in t.processes] == [4242]


def test_profiler_steps_are_the_steps(trace):
    _, plan, report = trace
    st = ok(report, "steps")
    assert (st["method"], st["confidence"], st["step_count"]) == ("profiler_step", "high", wl.STEPS)
    rows = next(t.frame for t in report.metrics["steps"].tables if t.name == "steps")
    base = 1_700_000_000_000_000_000
    assert list(zip(rows["start_ns"] - base, rows["end_ns"] - base, strict=True)) == plan.step_bounds
    # launches inside each step: GEMM, relu, graph launch (the copy is no kernel launch)
    assert rows["launches"].tolist() == [3] * wl.STEPS
    assert rows["kernels"].tolist() == [5] * wl.STEPS  # the External-id-only relu has no call


def test_sync_copies_and_graphs(trace):
    _, plan, report = trace
    sync = ok(report, "sync")
    assert sync["blocking_ns"] == sum(plan.sync_ns)
    mt = ok(report, "memory_transfers")
    assert mt["pageable_async"] == {"count": wl.STEPS, "bytes": wl.STEPS << 20, "time_ns": 1_000 * wl.STEPS}
    assert [(r["device_id"], r["kind"], r["count"]) for r in mt["by_device"]] == [(0, "Host-to-Device", wl.STEPS)]
    assert {i["api"] for i in mt["issues"]} == {"cudaMemcpyAsync"}
    g = ok(report, "cuda_graphs")
    assert (g["graph_launches"], g["node_kernels"], g["trace_mode"], g["traced_whole"]) == (
        wl.STEPS, 3 * wl.STEPS, "node", False)


def test_nvtx_ranges_are_annotations_and_operators(trace):
    _, plan, report = trace
    att = ok(report, "nvtx_attribution")
    by = {r["name"]: r for r in att["ranges"]}
    assert by["aten::addmm"]["kernel_ns"] == sum(plan.gemm_ns)
    assert by["aten::linear"]["inclusive_kernel_ns"] == sum(plan.gemm_ns)
    assert by["aten::relu"]["kernel_ns"] == sum(plan.relu_ns[0::2])
    names = {r["name"] for r in ok(report, "nvtx_ranges")["ranges"]}
    assert {"ProfilerStep#1", "aten::linear", "aten::addmm", "aten::relu"} <= names


def test_operators_numbers(trace):
    _, plan, report = trace
    m = ok(report, "operators")
    assert m["operator_count"] == 3 * wl.STEPS and m["distinct_operators"] == 3
    assert m["kernels_via_external_id"] == wl.STEPS
    assert m["kernels_without_operator"] == 1 + 3 * wl.STEPS  # the orphan and the graph nodes
    by = {o["name"]: o for o in m["operators"]}
    addmm, linear, relu = by["aten::addmm"], by["aten::linear"], by["aten::relu"]
    assert (addmm["calls"], addmm["kernel_ns"], addmm["kernel_count"]) == (wl.STEPS, sum(plan.gemm_ns), wl.STEPS)
    assert addmm["cpu_inclusive_ns"] == addmm["cpu_self_ns"] == sum(plan.addmm_ns)
    assert linear["cpu_inclusive_ns"] == sum(plan.linear_ns)
    assert linear["cpu_self_ns"] == sum(plan.linear_ns) - sum(plan.addmm_ns)
    assert (linear["kernel_ns"], linear["kernel_inclusive_ns"]) == (0, sum(plan.gemm_ns))
    assert relu["kernel_ns"] == sum(plan.relu_ns) and relu["kernels_per_call"] == 2.0
    assert relu["launches_per_call"] == 1.0
    assert addmm["launch_overhead_per_call_ns"] == 2_000 and relu["launch_overhead_per_call_ns"] == 1_500
    assert addmm["launch_queue_avg_ns"] == 3_000  # call start t0+3000 -> kernel start t0+6000
    assert addmm["top_shapes"][0]["input_dims"] == [[256], [64, 128], [128, 256]]
    assert addmm["top_shapes"][0]["calls"] == wl.STEPS
    assert relu["shapes"] == 0 and relu["top_shapes"] == []
    assert [s["step"] for s in m["steps"]] == [1, 2, 3, 4]
    assert [s["kernel_ns"] for s in m["steps"]] == [g + 2_500 for g in plan.gemm_ns]
    assert m["steps"][0]["top_operators"][0] == {"name": "aten::addmm", "kernel_ns": plan.gemm_ns[0]}
    pairs = {(p["operator"], p["kernel"]): p["kernel_ns"] for p in m["operator_kernels"]}
    assert pairs[("aten::relu", wl.RELU)] == sum(plan.relu_ns)
    assert pairs[("(no operator)", wl.NODE)] == sum(plan.node_ns)
    assert m["call_sites"] == []
    assert any("Python call sites are not shown" in n for n in report.metrics["operators"].notes)


def test_report_json_validates_and_every_file_renders(trace):
    _, _, report = trace
    doc = json_writer.report_dict(report)
    assert errors(doc) == []
    assert doc["schema_version"] == "3.1" and doc["trace"]["format"] == "kineto-json"
    files = build_files(report, (Format.MD, Format.JSON, Format.CSV, Format.HTML))
    assert "tables/operators.csv" in files and "tables/operator_kernels.csv" in files
    md = files["report.md"]
    assert "| Source | PyTorch profiler trace (Kineto JSON)" in md
    assert "PyTorch profiler trace (Kineto JSON)) |" in md  # the key numbers' trace row
    assert not any("Not measured, because" in line for line in md_section(md, "PyTorch operators"))
    full = build_files(report, (Format.MD,), md="full")["report.md"]
    assert full.count("_Source: PyTorch profiler trace (Kineto JSON)._") == len(report.metrics)
    assert json.loads(files["report.json"])["metrics"]["operators"]["status"] == "ok"


def test_operators_skipped_on_nsys_exports(tmp_path):
    b = TraceBuilder("2024.6")
    b.process(100)
    b.runtime(1_000, 1_500, corr=1)
    b.kernel(2_000, 5_000, corr=1, name="k")
    path = b.write(tmp_path / "t.sqlite")
    report = analyze(path)
    assert "only in PyTorch profiler traces" in skipped(report, "operators")
    assert report.trace.format is TraceFormat.NSYS and report.trace.format_details is None
    assert errors(json_writer.report_dict(report)) == []


def test_hundreds_of_kernels_under_one_graph_launch(tmp_path):
    from tests.fixtures.kineto.builder import KinetoBuilder

    b = KinetoBuilder()
    b.user("ProfilerStep#0", 0, 2_000_000)
    b.runtime("cudaGraphLaunch", 1_000, 11_000, corr=7)
    t = 20_000
    for i in range(300):
        b.kernel(f"node_{i % 4}", t, t + 1_000 + i, corr=7, device=2)
        t += 1_000 + i + 100
    b.launch("eager", 12_000, 14_000, t + 500, t + 1_500, corr=8, device=2)
    report = analyze(b.write(tmp_path / "g.json"))
    g = ok(report, "cuda_graphs")
    assert (g["graph_launches"], g["node_kernels"], g["kernels_per_launch_max"]) == (1, 300, 300)
    assert ok(report, "top_kernels")["total_kernel_ns"] == 300 * 1_000 + sum(range(300)) + 1_000
    lo = ok(report, "launch_overhead")
    assert sum(p["launch_calls"] for p in lo["processes"]) == 2
    assert [d["device_id"] for d in ok(report, "gpu_idle")["devices"]] == [2]
