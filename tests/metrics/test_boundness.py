"""boundness: queue time and GPU busy share per process, the evidence under the one verdict
(the metric gives no verdict of its own)."""

from __future__ import annotations

import jsonschema
import pytest

from nsys_llm_explainer.schema import load_fragment
from tests.conftest import GENERATIONS, analyze, ok
from tests.fixtures.builder import TraceBuilder


def two_processes(version: str) -> TraceBuilder:
    b = TraceBuilder(version)
    # pid 100 (device 0): 150 tiny kernels starting 5 ns after their launch returns, 1 us apart:
    # busy 100 ns of every 1000 -> host-bound.
    for i in range(150):
        t = i * 1_000
        b.runtime(t, t + 50, pid=100, corr=i + 1)
        b.kernel(t + 55, t + 155, pid=100, corr=i + 1, device=0, name="tiny")
    # pid 200 (device 1): 150 launches up front, kernels back to back: queue grows, busy 100%.
    for i in range(150):
        b.runtime(i * 100, i * 100 + 50, pid=200, corr=i + 1)
        b.kernel(
            300_000 + i * 10_000,
            300_000 + (i + 1) * 10_000,
            pid=200,
            corr=i + 1,
            device=1,
            name="big",
        )
    return b


@pytest.mark.parametrize("version", GENERATIONS)
def test_host_and_gpu_bound_processes(version, build):
    report = analyze(build(two_processes(version)))
    d = ok(report, "boundness")
    jsonschema.validate(d, load_fragment("boundness"))
    procs = {p["pid"]: p for p in d["processes"]}
    host = procs[100]
    assert "verdict" not in host and host["queue_p50_ns"] == 5
    assert host["immediate_start_pct"] == 100.0
    assert host["gpu_busy_pct"] == pytest.approx(round(100 * 150 * 100 / (149 * 1_000 + 100), 2))
    gpu = procs[200]
    assert gpu["gpu_busy_pct"] == 100.0
    assert gpu["queue_p50_ns"] > 1_000_000
    assert d["phases"] == [] and d["phase_source"] is None
    host_findings = [f for f in report.findings if f.cause == "host"]
    assert host_findings and all(f.affected for f in host_findings)
