"""The Kineto benchmark generator at a small size: the tool's totals equal its sidecar and
the raw-JSON reference, and the benchmark's own checks pass."""

from __future__ import annotations

import json

from benchmarks import kineto_bench, measure
from benchmarks.kineto_synth import KinetoConfig, generate, sidecar_path
from nsys_llm_explainer.render import json_writer
from tests import kineto_reference as ref
from tests.conftest import analyze, ok


def test_generated_trace_totals(tmp_path):
    path = tmp_path / "b.pt.trace.json"
    expected = generate(KinetoConfig(mb=2, layers=4, graph_launches=3, nodes_per_graph=5), path)
    assert json.loads(sidecar_path(path).read_text())["kernel_ns"] == expected["kernel_ns"]
    doc = ref.load(path)
    assert sum(ref.kernel_ns_per_device(doc).values()) == expected["kernel_ns"]
    assert {str(d): v for d, v in ref.busy_ns_per_device(doc).items()} == expected["busy_ns"]
    assert ref.count(doc, "kernel") == expected["counts"]["kernel"]
    report = analyze(path)
    out = tmp_path / "report.json"
    out.write_text(json_writer.render(report))
    assert measure.check_totals(out, expected) == []
    assert kineto_bench.check_operators(out, expected) == []
    assert ok(report, "steps")["step_count"] == expected["steps"]
