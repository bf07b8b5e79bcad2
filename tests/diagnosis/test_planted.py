"""One planted bottleneck per capture: the diagnosis names it, with the GPU time at stake the
scenario's arithmetic gives (tests/fixtures/planted.py), and the first finding is its cause."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from nsys_llm_explainer import fmt
from nsys_llm_explainer.api import explain
from nsys_llm_explainer.model import Report, Severity
from nsys_llm_explainer.rules.advice import TOO_LITTLE_ADVICE, UNSTEADY_ADVICE
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
    # 39 gaps between 40 steps, each a 2 ms copy with the next kernel queued behind it.
    assert any(e.startswith("39 of the 39 idle gaps") and "for 39 of them (78.0 ms) a copy on the work's own "
               "stream ran just ahead" in e for e in d.primary.evidence)
    (wait,) = [e for e in d.primary.evidence if e.startswith("GPU 0: the processes driving it were blocked")]
    assert wait.endswith("the host simply waited for the copies")
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
    # The sync_wait time around them, and the second launch of each next step (the GPU had
    # drained during the read-back and waited for the host's launches).
    assert f.impact_ns == causes["sync_wait"] + causes["launch_bound"] and "100 read-backs" in f.title
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
    # Per GPU, collectives alone 30 x 600 us = 18 ms (54.5%) against compute 30 x 500 us = 15 ms
    # (45.5%). Communication counts once: the collectives are busy time too, so with more than
    # half of the window in collectives alone the verdict is communication-bound (within 1.25x of
    # the GPU's own work: low confidence), not "busy 100%, with matrix-math kernels".
    assert (d.verdict, d.primary.kind, d.primary.devices) == ("communication_bound", "communication", (0, 1))
    assert d.primary.impact_ns == 30 * 600 * US  # one GPU's time at stake, never the two GPUs' sum
    assert d.primary.impact_pct == round(100 * 600 / 1100, 2)
    assert d.second["kind"] == "compute" and d.confidence.value == "low"
    assert d.summary.startswith("Communication-bound: GPUs 0-1 spend 54.5% of their time in collectives")
    assert d.summary.endswith("GPUs 0-1 are busy 100% of their time, collectives included (54.5% with nothing "
                              "beside them).")
    assert "matrix-math" not in d.summary
    assert first(r) == "NLE307" and r.findings[0].impact_ns == 30 * 600 * US
    assert sum(f.severity is Severity.HIGH for f in r.findings) == 1  # one cause, one loud finding
    assert sum("18.0 ms of communication on its compute stream" in e for e in r.findings[0].evidence) == 2
    (shared,) = [f for f in r.findings if f.rule_id == "NLE313"]
    assert (shared.severity, shared.impact_ns) == (Severity.INFO, None)  # its GPU time is NLE307's
    assert "2 GPUs" in shared.title


def test_compute_bound(build: Build) -> None:
    r = run(build, planted.compute_bound)
    d = r.diagnosis
    assert (d.verdict, d.primary.kind, d.confidence.value) == ("gpu_bound", "compute", "high")
    # The GEMM's run time is the work, not time at stake: a pointer, with no impact.
    assert first(r) == "NLE101" and "83.3%" in r.findings[0].title
    assert (r.findings[0].severity, r.findings[0].impact_ns) == (Severity.INFO, None)


def test_fp32_gemms(build: Build) -> None:
    r = run(build, planted.fp32_gemm)
    d = r.diagnosis
    assert (d.verdict, d.primary.kind, d.confidence.value) == ("gpu_bound", "compute", "high")
    assert d.primary.impact_ns == 200 * 450 * US
    f = r.findings[0]
    # 200 FP32 GEMMs of 400 us in a window of 200 x 450 us: 88.9%, all of the GEMM time.
    assert (f.rule_id, f.severity, f.impact_ns) == ("NLE323", Severity.HIGH, 200 * 400 * US)
    assert f.impact_pct == round(100 * 400 / 450, 2) and "100% of GPU 0's GEMM time" in f.title
    assert "'...gemm_f32f32_f32f32...' (float32 operands)" in f.evidence[0]
    assert "'...warpsize1x4x1_ffma_aligna4...' (no tensor cores)" in f.evidence[0]
    assert not [x for x in r.findings if x.rule_id == "NLE101"]  # NLE323 reports that kernel


def test_fp32_convolutions_on_a_volta_gpu(build: Build) -> None:
    r = run(build, planted.fp32_conv_volta)
    f = next(x for x in r.findings if x.rule_id == "NLE323")
    # 200 x (300 + 100) us of cuDNN's templated FP32 kernels, all of the convolution time.
    assert (f.severity, f.impact_ns) == (Severity.HIGH, 200 * 400 * US)
    assert "100% of GPU 0's convolution time" in f.title and f.title.startswith("Float32 convolutions")
    assert any("Tesla V100-SXM2-32GB (Volta)" in e for e in f.evidence)
    # Volta has no TF32 or BF16: FP16 autocast with a gradient scaler, nothing else.
    assert "torch.float16" in f.recommendation[0] and "GradScaler" in f.recommendation[0]
    assert len(f.recommendation) == 1
    assert not any(w in f.recommendation[0] for w in ("bfloat16", "allow_tf32", "set_float32_matmul_precision", "FP8"))


def test_tiny_capture_is_insufficient_and_nothing_is_loud(build: Build) -> None:
    r = run(build, planted.tiny_capture)
    assert r.diagnosis.verdict == "insufficient_data" and r.diagnosis.primary is None
    assert all(f.severity.rank >= Severity.LOW.rank for f in r.findings)
    assert r.diagnosis.capture.recipe
    f = r.findings[0]
    assert (f.rule_id, f.severity) == ("NLE215", Severity.LOW) and "10 syncs for 10 launches" in f.title
    assert f.recommendation == TOO_LITTLE_ADVICE  # not "the time is start-up": it is not


def test_jit_startup_is_not_steady_state(build: Build) -> None:
    r = run(build, planted.jit_startup)
    d = r.diagnosis
    assert (d.verdict, d.primary.kind) == ("not_steady_state", "startup")
    assert "JIT compilation" in d.summary
    assert any("capture-range=cudaProfilerApi" in line for line in d.capture.recipe)
    # Start-up is one finding: its GPU time is the idle time before the steady part, the same
    # figure as the primary bottleneck; no host or launch finding restates it.
    f = r.findings[0]
    (dev,) = d.devices
    idle = sum(b["ns"] for b in dev["buckets"] if b["bucket"] not in ("compute", "exposed_communication"))
    assert (f.rule_id, f.cause, f.impact_ns) == ("NLE216", "startup", d.primary.impact_ns)
    assert idle - 10 * US <= f.impact_ns <= idle  # all idle time but the few us after the compile range
    assert f.recommendation[0].startswith("Capture a short steady window after the warm-up")
    assert not [x for x in r.findings if x.cause == "host"]


def test_a_cause_that_holds_after_start_up_keeps_its_advice(build: Build) -> None:
    """jit_then_host_bound: 300 ms of compilation, then 200 host-bound steps of 2,050 us."""
    r = run(build, planted.jit_then_host_bound)
    assert r.diagnosis.verdict == "not_steady_state"
    (startup,) = [x for x in r.findings if x.rule_id == "NLE216"]
    f = next(x for x in r.findings if x.rule_id == "NLE210")
    assert f.severity is Severity.HIGH
    assert f.recommendation != UNSTEADY_ADVICE and "Profile the host side" in f.recommendation[0]
    # Only the steady part counts: the steady part runs from the compile range's end to the
    # last kernel end (199 periods of 2,050 us and the last step's 508 us); its host work is
    # what the device's steady split says, and start-up's finding holds the rest.
    acct_dev = r.diagnosis.devices[0]
    whole = next(b["ns"] for b in acct_dev["buckets"] if b["bucket"] == "host_other")
    window = 199 * 2_050 * US + 508 * US
    assert 0 < f.impact_ns < whole and f.evidence[0].startswith("the steady part only: ")
    assert f.evidence[-1] == (f"it holds in the steady part after start-up: {fmt.dur(f.impact_ns)} of the "
                              f"{fmt.dur(window)} from the steady start on ({100 * f.impact_ns / window:.1f}%)")
    assert startup.impact_ns > 0


def test_a_sliver_of_steady_state_does_not_hold(build: Build) -> None:
    """Five host-bound steps (10 ms) after 300 ms of compilation: too short a steady part."""
    r = run(build, lambda: planted.jit_then_host_bound(steps=5))
    (f,) = [x for x in r.findings if x.rule_id == "NLE210"]
    assert f.severity is Severity.LOW and f.recommendation == UNSTEADY_ADVICE


def buckets(r: Report, device: int = 0) -> dict[str, int]:
    dev = next(x for x in r.diagnosis.devices if x["device_id"] == device)
    return {b["bucket"]: b["ns"] for b in dev["buckets"]}


def test_graphs_traced_whole_are_busy_time(build: Build) -> None:
    r = run(build, planted.graph_replay)
    d = r.diagnosis
    assert (d.verdict, d.primary.kind, d.confidence.value) == ("gpu_bound", "compute", "high")
    # 50 graph executions of 9 ms and 150 kernels of 20 us in a 502,490 us window.
    assert (d.primary.impact_ns, d.primary.impact_pct) == (453_000 * US, round(100 * 453_000 / 502_490, 2))
    idle = {k: ns for k, ns in buckets(r).items() if ns and k != "compute"}
    assert idle == {"sync_wait": 49 * 2 * US, "host_other": 49 * 1_000 * US, "launch_bound": 49 * 8 * US}
    assert first(r) == "NLE210" and r.findings[0].severity is Severity.MEDIUM
    assert not [f for f in r.findings if f.rule_id == "NLE103"]


def test_graph_launches_without_execution_rows_are_not_called_idle(build: Build) -> None:
    r = run(build, lambda: planted.graph_replay(recorded=False))
    d = r.diagnosis
    assert (d.verdict, d.primary) == ("insufficient_data", None)
    assert "50 of 50 CUDA graph launches have no execution record" in d.summary
    # The idle split still says the host synchronized, but no finding claims it above low.
    assert first(r) == "NLE103" and r.findings[0].severity is Severity.LOW
    assert r.findings[0].confidence.value == "low"
    assert all(f.severity.rank >= Severity.LOW.rank for f in r.findings)


def test_overlapped_nccl_gaps_are_not_communication(build: Build) -> None:
    r = run(build, planted.overlapped_nccl)
    d = r.diagnosis
    assert (d.verdict, d.primary.kind, d.primary.devices) == ("gpu_bound", "compute", (0, 1))
    for gpu in (0, 1):
        b = buckets(r, gpu)
        # 10 steps: 116 idle gaps of 2 us per step, less the one before the window.
        assert b["device_wait"] == 10 * 232 * US - 2 * US
        assert b["communication_wait"] == b["exposed_communication"] == 0
        assert b["compute"] == 10 * 2_400 * US - 2 * US - b["device_wait"]
        assert b["sync_wait"] == b["launch_bound"] == b["host_other"] == 0
    assert not [f for f in r.findings if f.rule_id == "NLE307" or f.cause in ("communication", "host", "sync")]
    # Nothing is at stake on the idle side; the compute side leads with its pointer (a note).
    assert first(r) == "NLE101" and r.findings[0].severity is Severity.INFO


def test_device_to_device_copies_are_busy_not_transfer(build: Build) -> None:
    r = run(build, planted.d2d_heavy)
    d = r.diagnosis
    assert (d.verdict, d.primary.kind, d.confidence.value) == ("gpu_bound", "compute", "high")
    assert d.primary.impact_ns == 100 * 900 * US and d.primary.impact_pct == 100.0
    assert buckets(r)["transfer"] == 0
    gi = r.ok("gpu_idle").data["devices"][0]
    assert (gi["kernel_busy_ns"], gi["device_copy_busy_ns"]) == (100 * 500 * US, 100 * 400 * US)
    assert not [f for f in r.findings if f.rule_id == "NLE208"]
    assert first(r) == "NLE101" and r.findings[0].severity is Severity.INFO  # the compute pointer, a note


def test_host_gaps_beside_a_busy_gpu_are_mixed(build: Build) -> None:
    r = run(build, planted.mixed_host)
    d = r.diagnosis
    # Busy 59.4%, host 40.6%: the GPU works most of the window but under twice the host's time:
    # mixed, both named, the GPU's work first.
    assert (d.verdict, d.primary.kind, d.confidence.value) == ("mixed", "compute", "medium")
    assert d.second is not None and d.second["kind"] == "host"
    assert (d.second["impact_ns"], d.second["impact_pct"]) == (39 * 350 * US, round(100 * 13_650 / 33_650, 2))
    assert "59.4%" in d.summary and "40.6%" in d.summary
    assert first(r) == "NLE210" and r.findings[0].impact_ns == 39 * 342 * US
    assert r.findings[0].severity is Severity.HIGH


def test_without_the_api_table_idle_is_not_explained(build: Build) -> None:
    r = run(build, planted.no_api)
    d = r.diagnosis
    assert (d.verdict, d.primary) == ("insufficient_data", None)
    assert "no CUDA API rows" in d.summary and "95.0%" in d.summary
    assert buckets(r)["capture_edge"] == 499 * 950 * US
    assert not [f for f in r.findings if f.cause in ("transfer", "communication", "sync", "host")]
    assert first(r) == "NLE101" and r.findings[0].severity is Severity.INFO  # the compute pointer, a note


@pytest.mark.parametrize("scenario", [planted.transfer_bound, planted.host_bound, planted.compute_bound,
                                      planted.graph_replay, planted.overlapped_nccl, planted.d2d_heavy,
                                      planted.mixed_host])
def test_buckets_sum_to_each_device_window(build: Build, scenario: Callable[[], TraceBuilder]) -> None:
    r = run(build, scenario)
    for dev in r.diagnosis.devices:
        assert sum(b["ns"] for b in dev["buckets"]) == dev["window_ns"]


@pytest.mark.parametrize(("compute_us", "transfer_us", "leads"), [
    # Copies 3.95x the GPU's own work: overlap can hide at most the 200 us of work per step, so
    # moving fewer bytes leads, with the ratio (790 / 200, rounded).
    (200, 790, "The copies outlast the GPU's own work (4x its busy time)"),
    # Copies shorter than the work: overlapping them hides them.
    (600, 300, "Overlap copies with compute"),
])
def test_the_main_fix_for_copies_is_the_one_that_can_hide_them(build: Build, compute_us, transfer_us, leads) -> None:
    r = explain(build(planted.balance(compute_us=compute_us, transfer_us=transfer_us)))
    f = next(x for x in r.findings if x.rule_id == "NLE208")
    assert f.recommendation[0].startswith(leads), f.recommendation[0]
    # The other line stays, after it: one list, reordered.
    assert len(f.recommendation) >= 2 and len(set(f.recommendation)) == len(f.recommendation)


def test_copies_that_only_coincide_with_queued_waits_are_low_confidence(build: Build) -> None:
    """Per step a 200 us kernel on stream 7, then the next kernel, launched at once, starts 300 us
    after it (a wait the trace does not name) while a 250 us pinned copy runs on stream 9 inside
    the gap. The idle time is counted as the copies' by precedence, but no work waited behind a
    copy on its own stream: the finding says so at low confidence (coincident is not causal)."""
    b = TraceBuilder("2024.6")
    b.process(100)
    host, gpu, corr = 10 * US, 100 * US, 1
    for _ in range(60):
        b.runtime(host, host + 5 * US, pid=100, corr=corr, name="cudaLaunchKernel_v7000")
        b.kernel(gpu, gpu + 200 * US, stream=7, corr=corr, name=planted.GEMM_BF16)
        corr += 1
        b.runtime(host + 5 * US, host + 15 * US, pid=100, corr=corr, name="cudaMemcpyAsync_v3020")
        b.memcpy(gpu + 220 * US, gpu + 470 * US, bytes=8 << 20, copy_kind=planted.H2D, src_kind=planted.PINNED,
                 dst_kind=planted.DEVICE, stream=9, corr=corr)
        corr += 1
        host += 15 * US
        gpu += 500 * US
    b.runtime(host, gpu + 2 * US, pid=100, corr=corr, name="cudaStreamSynchronize_v3020")
    r = explain(build(b))
    f = next(x for x in r.findings if x.rule_id == "NLE208")
    assert f.confidence.value == "low"
    assert any("for 0 of them (0 ns) a copy on the work's own stream" in e for e in f.evidence)
    # The planted copy-bound capture, where each kernel waits behind its copy, stays high.
    g = next(x for x in run(build, planted.transfer_bound).findings if x.rule_id == "NLE208")
    assert g.confidence.value == "high"
