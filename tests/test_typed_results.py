"""A typed result writes its report.json section (to_json) and holds every field of it:
built back from the section, strictly, it is the same object."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from nsys_llm_explainer.api import explain
from nsys_llm_explainer.model import MetricResult, typed_result
from nsys_llm_explainer.options import Options, PhaseMap
from nsys_llm_explainer.results.host import Boundness, HostPatterns, QueueBusy
from tests.conftest import SHARED_TRACES
from tests.fixtures import hostile as h
from tests.fixtures import planted
from tests.fixtures import planted_story as ps
from tests.fixtures.builder import TraceBuilder
from tests.typed_results import result_types, typed

TRACES = ["nsys/flashinference_kvdecode_a10g.sqlite", "kineto/hta_alexnet_a100.json.gz"]


def _round_trip(path: Path, options: Options | None = None) -> set[str]:
    report = explain(path, options or Options(), jobs=1)
    seen = set()
    for mid, out in report.metrics.items():
        if not isinstance(out, MetricResult) or out.typed is None:
            continue
        assert type(out.typed) is result_types()[mid]
        assert out.typed.to_json() == out.data, mid  # type: ignore[attr-defined]
        assert typed(mid, out.data, strict=True) == out.typed, mid
        seen.add(mid)
    return seen


def test_round_trip_on_a_small_export(tmp_path: Path) -> None:
    assert {"top_kernels", "per_process", "workload", "boundness", "idle_causes", "gpu_idle", "sync"} <= _round_trip(
        h.good(tmp_path))


@pytest.mark.parametrize("name", TRACES)
def test_round_trip_on_real_traces(name: str) -> None:
    path = SHARED_TRACES / name
    if not path.is_file():
        pytest.skip(f"shared trace {name} not present")
    assert {"top_kernels", "per_process", "workload", "steps", "boundness", "capture", "critical_path", "what_if",
            "communication", "idle_causes", "gpu_idle", "sync"} <= _round_trip(path)


def test_round_trip_of_read_backs_and_per_layer_sync_stalls(build: Callable[[TraceBuilder], Path]) -> None:
    # planted.scalar_readbacks: one read-back per step, 100 steps; ps.layer_sync_stalls: a copy
    # and a synchronize in each of 32 layers, 4 steps. Both sections hold groups, devices with
    # their idle time after the return, and per-step counts.
    for scenario, section, count in ((planted.scalar_readbacks, "scalar_readbacks", 100),
                                     (ps.layer_sync_stalls, "layer_syncs", 4 * 32)):
        path = build(scenario())
        assert "host_patterns" in _round_trip(path)
        out = explain(path, Options(), jobs=1).metrics["host_patterns"]
        assert isinstance(out, MetricResult) and isinstance(out.typed, HostPatterns)
        src = getattr(out.typed, section)
        assert src is not None and src.count == count
        assert src.groups and src.devices and src.per_step is not None


def test_round_trip_of_queue_times_per_process_and_phase(build: Callable[[TraceBuilder], Path]) -> None:
    # Process 200 (device 1): 2 launches; process 100 (device 0): 3 launches. Each runs a
    # "prefill" range [0, 10 us) with one kernel starting 10 ns after its call returns, then a
    # "decode" range [20, 30 us) whose kernels start 30 us after their calls return.
    b = TraceBuilder("2024.6")
    corr = 1
    for dev, (pid, decode) in enumerate(((200, 1), (100, 2))):
        b.nvtx(0, 10_000, text="prefill", pid=pid)
        b.runtime(100, 200, corr=corr, pid=pid)
        b.kernel(210, 9_000, corr=corr, name="prefill_gemm", pid=pid, device=dev)
        b.nvtx(20_000, 30_000, text="decode", pid=pid)
        for j in range(decode):
            corr += 1
            b.runtime(20_000 + j * 100, 20_050 + j * 100, corr=corr, pid=pid)
            b.kernel(50_050 + j * 100, 50_080 + j * 100, corr=corr, name="tiny", pid=pid, device=dev)
        corr += 1
    options = Options(phase_map=PhaseMap.from_json({"prefill": ["prefill"], "decode": ["decode"]}))
    path = build(b)
    assert "boundness" in _round_trip(path, options)
    bound = typed_result(explain(path, options, jobs=1).metrics, Boundness)
    assert bound is not None and bound.thresholds.host_queue_ns == 20_000
    assert bound.phase_source == "phase_map"
    assert [(p.scope, p.pid, p.phase, p.launch_calls) for p in bound.processes] == [
        ("process", 100, None, 3), ("process", 200, None, 2)]
    phases = {p.phase: p for p in bound.phases}
    assert set(phases) == {"prefill", "decode"}
    assert all(isinstance(p, QueueBusy) and p.scope == "phase" and p.pid is None for p in bound.phases)
    # prefill: 2 launches, queue 10 ns each, all within 20 us; decode: 3 launches of 30 us
    assert (phases["prefill"].launch_calls, phases["prefill"].queue_p50_ns) == (2, 10)
    assert phases["prefill"].immediate_start_pct == 100.0
    assert (phases["decode"].launch_calls, phases["decode"].queue_p50_ns) == (3, 30_000)
    assert phases["decode"].immediate_start_pct == 0.0
