"""steps: automatic detection (launch sequence, blocking sync), NVTX step ranges and phase maps,
outliers with their cause, and the 'cannot be found' case."""

from __future__ import annotations

import jsonschema
import pytest

from nsys_llm_explainer.options import PhaseMap
from nsys_llm_explainer.schema import load_fragment
from tests.conftest import GENERATIONS, analyze, ok, skipped, table
from tests.fixtures.builder import TraceBuilder

STEP_KERNELS = ("embed", "gemm", "attn", "gemm", "sample")


def sequence_trace(version: str, steps: int = 6, period: int = 1_000) -> TraceBuilder:
    """No NVTX, no sync: each step launches the same 5 kernels 20 ns apart, then the host pauses."""
    b = TraceBuilder(version, omit=("NVTX_EVENTS",))
    corr = 1
    for i in range(steps):
        for j, name in enumerate(STEP_KERNELS):
            t = i * period + j * 20
            b.runtime(t, t + 5, corr=corr)
            b.kernel(t + 8, t + 15, corr=corr, name=name)
            corr += 1
    return b


@pytest.mark.parametrize("version", GENERATIONS)
def test_steps_found_from_repeating_launch_sequence(version, build):
    report = analyze(build(sequence_trace(version)))
    d = ok(report, "steps")
    jsonschema.validate(d, load_fragment("steps"))
    assert d["method"] == "launch_sequence"
    assert d["confidence"] == "medium"  # identical steps, but fewer than 10 of them
    (p,) = d["phases"]
    # 6 occurrences of the first kernel bound 5 complete steps of exactly one period each.
    assert (p["steps"], p["p50_ns"], p["max_ns"]) == (5, 1_000, 1_000)
    assert p["kernels_per_step"] == 5 and p["launches_per_step"] == 5
    assert p["steps_per_s"] == pytest.approx(5 / 5_000e-9)
    assert p["gpu_busy_pct"] == pytest.approx(100 * 5 * 7 / 1_000)
    steps = table(report, "steps", "steps")
    assert list(steps["start_ns"]) == [0, 1_000, 2_000, 3_000, 4_000]


def test_many_identical_steps_are_high_confidence(build):
    d = ok(analyze(build(sequence_trace("2024.6", steps=12))), "steps")
    assert (d["method"], d["confidence"], d["step_count"]) == ("launch_sequence", "high", 11)


def sync_trace(version: str) -> TraceBuilder:
    """One kernel name, a varying number of launches per step, each step closed by a sync."""
    b = TraceBuilder(version, omit=("NVTX_EVENTS",))
    corr, t, ends = 1, 0, []
    for n in (3, 5, 4, 3, 5, 4):
        for _ in range(n):
            b.runtime(t, t + 5, corr=corr)
            b.kernel(t + 10, t + 30, corr=corr, name="k")
            corr, t = corr + 1, t + 40
        b.runtime(t, t + 100, corr=corr, name="cudaStreamSynchronize_v3020")
        ends.append(t + 100)
        corr, t = corr + 1, t + 300
    return b, ends


def test_steps_found_from_blocking_syncs(build):
    b, ends = sync_trace("2024.6")
    d = ok(analyze(build(b)), "steps")
    assert d["method"] == "blocking_sync"
    (p,) = d["phases"]
    lat = sorted(e - s for s, e in zip(ends, ends[1:], strict=False))
    assert p["steps"] == 5 and p["max_ns"] == lat[-1]
    assert p["kernels_per_step"] == pytest.approx((5 + 4 + 3 + 5 + 4) / 5)


def test_no_pattern_skips_with_reason(build):
    b = TraceBuilder("2024.6", omit=("NVTX_EVENTS",))
    for i in range(12):
        b.runtime(i * 100, i * 100 + 5, corr=i + 1)
        b.kernel(i * 100 + 10, i * 100 + 20, corr=i + 1, name=f"k{i}")
    report = analyze(build(b))
    assert skipped(report, "steps").startswith("no steps found")
    assert any(f.rule_id == "NLE213" for f in report.findings)


def nvtx_trace(version: str) -> TraceBuilder:
    """8 'step' ranges of 1000 ns with 3 kernels; step 5 has a 5000 ns host pause before its "
    "last."""
    b = TraceBuilder(version)
    corr, t = 1, 0
    for i in range(8):
        start = t
        for j in range(3):
            if i == 5 and j == 2:
                t += 5_000
            b.runtime(t, t + 10, corr=corr)
            b.kernel(t + 20, t + 120, corr=corr, name=f"k{j}")
            corr, t = corr + 1, t + 300
        t = start + (1_000 if i != 5 else 6_000)
        b.nvtx(start, t - 50, text="step")
        t += 100
    return b


def test_step_range_with_outlier_explained(build):
    report = analyze(build(nvtx_trace("2024.6")), step_range="step")
    d = ok(report, "steps")
    assert (d["method"], d["confidence"], d["step_count"]) == ("nvtx_step_range", "high", 8)
    (p,) = d["phases"]
    assert p["p50_ns"] == 950 and p["max_ns"] == 5_950 and p["outliers"] == 1
    assert p["between_p50_ns"] == 150 and p["between_total_ns"] == 7 * 150
    (o,) = d["outliers"]
    assert o["reason"] == "idle_gap" and o["gap_cause"] == "host_other"
    assert o["gap_ns"] == 5_000 + 300 - 100  # from the 2nd kernel's end to the 3rd's start
    assert any(f.rule_id == "NLE212" for f in report.findings)


def test_unknown_step_range_is_skipped(build):
    reason = skipped(analyze(build(nvtx_trace("2024.6")), step_range="decode_step"), "steps")
    assert "decode_step" in reason


def phase_trace(version: str, pids: tuple[int, ...] = (100,)) -> TraceBuilder:
    """One prefill range with long kernels, then 30 decode ranges of 5 tiny kernels each,
    the same in every process (replicas stepping at the same time on their own GPU)."""
    b = TraceBuilder(version)
    for dev, pid in enumerate(pids):
        b.nvtx(0, 10_000, text="prefill", pid=pid)
        b.runtime(10, 20, corr=1, pid=pid)
        b.kernel(30, 9_900, corr=1, name="prefill_gemm", pid=pid, device=dev)
        corr, t = 2, 20_000
        for _ in range(30):
            b.nvtx(t, t + 2_000, text="decode_step", pid=pid)
            for j in range(5):
                s = t + 100 + j * 300
                b.runtime(s, s + 50, corr=corr, pid=pid)
                b.kernel(s + 55, s + 85, corr=corr, name=f"tiny{j}", pid=pid, device=dev)
                corr += 1
            t += 2_500
    return b


def test_phase_map_steps_and_host_bound_decode(build):
    pm = PhaseMap.from_json({"prefill": ["prefill"], "decode": ["decode"]})
    report = analyze(build(phase_trace("2024.6")), phase_map=pm)
    d = ok(report, "steps")
    assert d["method"] == "nvtx_phase_map"
    phases = {p["phase"]: p for p in d["phases"]}
    assert phases["prefill"]["steps"] == 1 and phases["decode"]["steps"] == 30
    assert phases["decode"]["p50_ns"] == 2_000 and phases["decode"]["launches_per_step"] == 5
    assert phases["decode"]["gpu_busy_pct"] == pytest.approx(100 * 5 * 30 / 2_000)
    bound = {r["phase"]: r for r in ok(report, "boundness")["phases"]}
    assert "verdict" not in bound["decode"] and bound["decode"]["immediate_start_pct"] == 100.0
    assert bound["decode"]["queue_p50_ns"] == 5 and bound["decode"]["launch_calls"] == 150
    host = [f for f in report.findings if f.rule_id in ("NLE209", "NLE210")]
    assert host and any(e.startswith("phase decode: 100% of its kernels start within 20.0 µs of their launch")
                        for f in host for e in f.evidence)


def test_replicas_do_not_inflate_busy_share(build):
    pm = PhaseMap.from_json({"prefill": ["prefill"], "decode": ["decode"]})
    report = analyze(build(phase_trace("2024.6", pids=(100, 200))), phase_map=pm)
    decode = next(p for p in ok(report, "steps")["phases"] if p["phase"] == "decode")
    assert decode["steps"] == 60
    assert decode["gpu_busy_pct"] == pytest.approx(100 * 5 * 30 / 2_000)


def two_process_trace() -> TraceBuilder:
    """Process 100 (GPU 0): 12 steps of the 5 STEP_KERNELS every 1000 ns. Process 200 (GPU 1):
    9 steps of 3 other kernels every 1500 ns, starting 300 ns later. Process 300: 4 kernels of
    4 different names, no steps."""
    b = TraceBuilder("2024.6", omit=("NVTX_EVENTS",))
    corr = 1
    for pid, dev, names, n, period, t0 in ((100, 0, STEP_KERNELS, 12, 1_000, 0),
                                           (200, 1, ("a", "b", "c"), 9, 1_500, 300)):
        for i in range(n):
            for j, name in enumerate(names):
                t = t0 + i * period + j * 20
                b.runtime(t, t + 5, corr=corr, pid=pid)
                b.kernel(t + 8, t + 15, corr=corr, name=name, pid=pid, device=dev)
                corr += 1
    for j in range(4):
        b.runtime(50 + j * 400, 55 + j * 400, corr=corr, pid=300)
        b.kernel(60 + j * 400, 70 + j * 400, corr=corr, name=f"helper{j}", pid=300, device=2)
        corr += 1
    return b


def test_every_process_gets_its_own_steps(build):
    report = analyze(build(two_process_trace()))
    d = ok(report, "steps")
    jsonschema.validate(d, load_fragment("steps"))
    # 12 and 9 occurrences of each process's first kernel bound 11 and 8 complete steps; the
    # process with the most kernels comes first. 8 steps of process 200 cap the confidence.
    assert (d["method"], d["confidence"], d["step_count"]) == ("launch_sequence", "medium", 11 + 8)
    assert d["detail"].startswith("found in each of 2 processes on its own; pid 100: 11 steps, ")
    steps = table(report, "steps", "steps")
    assert list(steps["step"]) == list(range(19))
    assert list(steps["pid"]) == [100] * 11 + [200] * 8
    assert list(steps["start_ns"]) == [i * 1_000 for i in range(11)] + [300 + i * 1_500 for i in range(8)]
    assert list(steps["latency_ns"]) == [1_000] * 11 + [1_500] * 8
    assert list(steps["kernels"]) == [5] * 11 + [3] * 8
    assert list(steps["gpu_busy_ns"]) == [5 * 7] * 11 + [3 * 7] * 8
    (p,) = d["phases"]
    # Nearest-rank p50 of eleven 1000s and eight 1500s; steps/s over both processes (replicas add up).
    assert (p["steps"], p["p50_ns"], p["max_ns"]) == (19, 1_000, 1_500)
    assert p["steps_per_s"] == pytest.approx(19 / ((300 + 8 * 1_500 - 0) * 1e-9), rel=1e-3)


def test_a_single_process_keeps_its_detection_text(build):
    d = ok(analyze(build(sequence_trace("2024.6", steps=12))), "steps")
    # embed, attn and sample recur every 5 launches; gemm alternates distances 2 and 3.
    assert d["detail"] == ("a sequence of 5 kernels repeats (3 kernel names recur every 5 launches); "
                           "100% of steps are exactly that long; the host pauses before each repeat (median "
                           "launch gap 920 ns there, 20 ns inside); timed by launch call start")
