"""One planted bottleneck per capture: the diagnosis names it, with the GPU time at stake the
scenario's arithmetic gives (tests/fixtures/planted.py), and the first finding is its cause."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from nsys_llm_explainer.api import explain
from nsys_llm_explainer.model import Report, Severity
from tests.fixtures import planted
from tests.fixtures.builder import TraceBuilder

MS, US = planted.MS, planted.US
Build = Callable[[TraceBuilder], Path]


def run(build: Build, scenario: Callable[[], TraceBuilder]) -> Report:
    report = explain(build(scenario()))
    assert report.diagnosis is not None
    return report


def first(report: Report) -> str:
    return report.findings[0].rule_id


def test_transfer_bound(build: Build) -> None:
    r = run(build, planted.transfer_bound)
    d = r.diagnosis
    assert (d.verdict, d.primary.kind, d.primary.devices) == ("transfer_bound", "transfer", (0,))
    # 40 copies of 2 ms at stake in a window of 40 x (2 ms + 10 x 20 us).
    assert d.primary.impact_ns == 40 * 2 * MS
    assert d.primary.impact_pct == round(100 * 80 / 88, 2)
    assert first(r) == "NLE208" and r.findings[0].severity is Severity.HIGH
    assert any("a copy on the kernel's own stream ran just ahead" in e for e in d.primary.evidence)
    assert not any(f.cause == "sync" and f.severity.rank < Severity.LOW.rank for f in r.findings)


def test_scalar_readbacks_make_it_sync_bound(build: Build) -> None:
    r = run(build, planted.scalar_readbacks)
    d = r.diagnosis
    assert (d.verdict, d.primary.kind) == ("sync_bound", "sync")
    ic = r.ok("idle_causes").data["devices"][0]
    causes = {c["cause"]: c["idle_ns"] for c in ic["causes"]}
    # 99 gaps between 100 steps (the last step's copy and sync lie after the last kernel).
    assert causes["sync_wait"] == 99 * 28 * US
    assert (causes["transfer"], causes["host_other"], causes["launch_bound"]) == (99 * 2 * US, 99 * 2 * US, 99 * 3 * US)
    assert first(r) == "NLE214"
    f = r.findings[0]
    assert f.impact_ns == causes["sync_wait"] and "100 scalar read-backs" in f.title
    assert "decode loop" not in " ".join(f.recommendation)  # advice for what ran, not for LLM serving


def test_host_bound_scheduler_gaps(build: Build) -> None:
    r = run(build, planted.host_bound)
    d = r.diagnosis
    assert (d.verdict, d.primary.kind) == ("host_bound", "host")
    causes = {c["cause"]: c["idle_ns"] for c in r.ok("idle_causes").data["devices"][0]["causes"]}
    assert causes["host_other"] == 39 * 1_542 * US  # 39 gaps between 40 steps
    assert causes["launch_bound"] == 39 * 8 * US
    assert first(r) == "NLE210" and r.findings[0].severity is Severity.HIGH


def test_exposed_nccl_on_the_compute_stream(build: Build) -> None:
    r = run(build, planted.nccl_shared_stream)
    d = r.diagnosis
    assert (d.verdict, d.primary.kind, d.primary.devices) == ("communication_bound", "communication", (0, 1))
    assert d.primary.impact_ns == 2 * 30 * 600 * US
    assert first(r) == "NLE307"
    (shared,) = [f for f in r.findings if f.rule_id == "NLE313"]
    assert shared.impact_ns == 2 * 30 * 600 * US
    assert sorted(a.device_id for a in shared.affected) == [0, 1]  # one finding, both GPUs


def test_compute_bound(build: Build) -> None:
    r = run(build, planted.compute_bound)
    d = r.diagnosis
    assert (d.verdict, d.primary.kind, d.confidence.value) == ("gpu_compute_bound", "compute", "high")
    assert first(r) == "NLE101" and "83.3%" in r.findings[0].title
    assert r.findings[0].impact_ns == 200 * 500 * US


def test_tiny_capture_is_insufficient_and_nothing_is_loud(build: Build) -> None:
    r = run(build, planted.tiny_capture)
    assert r.diagnosis.verdict == "insufficient_data" and r.diagnosis.primary is None
    assert all(f.severity.rank >= Severity.LOW.rank for f in r.findings)
    assert r.diagnosis.capture.recipe


def test_jit_startup_is_not_steady_state(build: Build) -> None:
    r = run(build, planted.jit_startup)
    d = r.diagnosis
    assert (d.verdict, d.primary.kind) == ("not_steady_state", "startup")
    assert "JIT compilation" in d.summary
    assert all(f.severity.rank >= Severity.LOW.rank for f in r.findings)
    assert any("capture-range=cudaProfilerApi" in line for line in d.capture.recipe)


@pytest.mark.parametrize("scenario", [planted.transfer_bound, planted.host_bound, planted.compute_bound])
def test_buckets_sum_to_each_device_window(build: Build, scenario: Callable[[], TraceBuilder]) -> None:
    r = run(build, scenario)
    for dev in r.diagnosis.devices:
        assert sum(b["ns"] for b in dev["buckets"]) == dev["window_ns"]
