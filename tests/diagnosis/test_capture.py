"""Capture sanity (metrics/capture.py): steady captures are not called start-up, real start-up
is, and the numbers are the intervals the scenario planted."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from nsys_llm_explainer import fmt
from nsys_llm_explainer.analysis import capture as autotune
from nsys_llm_explainer.analysis.capture import kind_of
from nsys_llm_explainer.api import explain
from nsys_llm_explainer.metrics.capture import COMPILE_RANGE
from nsys_llm_explainer.model import Report
from nsys_llm_explainer.trace.formats import open_trace
from tests.conftest import NSYS_TRACES, require_nsys_traces
from tests.fixtures import planted
from tests.fixtures.builder import TraceBuilder

MS, US = planted.MS, planted.US
Build = Callable[[TraceBuilder], Path]


def check(report: Report, cid: str) -> dict:
    return next(c for c in report.ok("capture").data["checks"] if c["id"] == cid)


@pytest.mark.parametrize("name", [
    "CompiledFunction", "CompiledFunctionBackward", "Torch-Compiled Region: 0/0", "## Call CompiledFxGraph f3ab ##",
    "TorchDynamo Cache Lookup", "aten::mm", "lower_bound_search", "slower_path", "ExecutionContext::enqueueV3",
    "fbgemm::split_embedding_codegen_lookup_rowwise_adagrad_function", "<built-in method lower of str object>",
])
def test_compiled_code_is_not_compiling(name: str) -> None:
    assert not COMPILE_RANGE.search(name)


@pytest.mark.parametrize("name", [
    "executor_utils::Nvrtc::CompileProgram", "KernelExecutor::compileFusion",
    "torch._inductor.compile_fx.compile_fx_inner",
    "OutputGraph.call_user_compiler", "GpuLower::lower", "GraphLowering.run", "nvJitLinkComplete", "cuModuleLoadData",
    "triton autotune", "Building TensorRT engine", "async_compile.wait", "Scheduler.codegen",
    "inductor lowering",
])
def test_compiler_steps_are_compiling(name: str) -> None:
    assert COMPILE_RANGE.search(name)


def test_steady_compiled_training_is_steady_state(build: Build) -> None:
    """50 steps of torch.compile training, each forward and backward wrapped in PyTorch's
    CompiledFunction / CompiledFunctionBackward ranges: nothing is compiling."""
    r = explain(build(planted.compiled_steady()))
    assert check(r, "jit_compile")["found"] is False and check(r, "jit_compile")["time_ns"] == 0
    cap = r.ok("capture").data
    assert cap["steady_state"] and cap["startup_ns"] == 0
    assert r.diagnosis.verdict == "host_bound"


def test_compile_ranges_count_with_their_own_longest_duration(build: Build) -> None:
    """jit_startup plants a 300 ms compile range with a 50 ms cuModuleLoadData call inside."""
    r = explain(build(planted.jit_startup()))
    jit = check(r, "jit_compile")
    # The range runs [t, t + 300 ms] with t the end of the first launch call (10 us + 5 us); the
    # GPU window starts at the first kernel (t + 3 us) and ends at the last one.
    assert jit["time_ns"] == 300 * MS - 3 * US
    assert "the longest 'torch._inductor.compile_fx' lasting 300 ms" in jit["summary"]
    assert "1 code-loading calls (cuModuleLoadData)" in jit["summary"]


def _trt(inferences: int) -> TraceBuilder:
    """A TensorRT engine: 60 layers, each its own conv tactic (150 us) plus a reformat (20 us)."""
    b = TraceBuilder("2024.6")
    b.process(100)
    s = planted.Sim(b)
    for _ in range(inferences):
        for i in range(60):
            s.launch(150 * US, planted.trt_tactic(i))
            s.launch(20 * US, "void genericReformat::copyPackedKernel<float, __half, true>(unsigned int)")
    s.sync()
    return b


@pytest.mark.parametrize("inferences", [1, 2])
def test_tensorrt_tactics_are_not_autotuning(build: Build, inferences: int) -> None:
    r = explain(build(_trt(inferences)))
    assert r.diagnosis.workload.kind == "tensorrt_inference"
    assert check(r, "autotuning")["found"] is False
    assert r.ok("capture").data["startup_ns"] == 0
    assert r.diagnosis.verdict == "gpu_bound"


def test_layers_with_their_own_tiles_are_not_a_search(build: Build) -> None:
    """Without TensorRT names: 12 GEMMs with 12 different tiles per pass, 2 passes. Each runs
    once per pass and every one of them repeats: a loop, not a search (no single winner)."""
    b = TraceBuilder("2024.6")
    b.process(100)
    s = planted.Sim(b)
    for _ in range(2):
        for i in range(12):
            s.launch(100 * US, planted.tile_gemm(i))
    s.sync()
    r = explain(build(b))
    assert check(r, "autotuning")["found"] is False


def test_a_search_counts_its_variants_own_intervals(build: Build) -> None:
    """planted.autotune_then_steady: 6 variants of 2 ms each, 1 ms of host timing between
    trials, then the winner (variant 3) runs 200 times back to back. Start-up is the variants'
    own 12 ms, not the 17 ms from the first to the last."""
    r = explain(build(planted.autotune_then_steady()))
    at = check(r, "autotuning")
    assert at["found"] and at["variants"] == 6
    assert at["time_ns"] == 6 * 2 * MS
    assert "winner" in at["summary"] and planted.tile_gemm(3) in at["summary"]


def _reference_searches(seq: list[int]) -> int:
    """Bursts of distinct names (a repeat starts a new one), searched when >= VARIANTS names,
    some winner runs >= WINNER_RUNS more times, winners < half, and at least half of them run
    at most RARE_RUNS times in all: a plain loop."""
    found, first = 0, 0
    while first < len(seq):
        seen: set[int] = set()
        i = first
        while i < len(seq) and seq[i] not in seen:
            seen.add(seq[i])
            i += 1
        rest = seq[i:]
        winners = [n for n in seen if rest.count(n) >= autotune.WINNER_RUNS]
        rare = [n for n in seen if seq.count(n) <= autotune.RARE_RUNS]
        if (len(seen) >= autotune.VARIANTS and winners and 2 * len(winners) < len(seen)
                and 2 * len(rare) >= len(seen)):
            found += 1
        first = i
    return found


@pytest.mark.parametrize("seed", range(8))
def test_burst_search_matches_a_plain_loop(build: Build, seed: int) -> None:
    rng = random.Random(seed)
    seq = []
    for _ in range(rng.randint(3, 8)):
        if rng.random() < 0.5:  # a search: distinct variants, then a winner repeating
            tried = rng.sample(range(40), rng.randint(3, 7))
            seq += tried + [tried[0]] * rng.randint(0, 5)
        else:  # steady work over a few tiles
            seq += [rng.randrange(6) for _ in range(rng.randint(1, 12))]
    b = TraceBuilder("2024.6")
    b.process(100)
    t = 0
    for n in seq:  # back to back on one stream, kernels without API rows
        b.kernel(t, t + 10 * US, name=planted.tile_gemm(n))
        t += 12 * US
    data = open_trace(build(b))
    try:
        got = autotune.find(data).searches
    finally:
        data.close()
    assert got == _reference_searches(seq)


@pytest.mark.parametrize(("kernels", "dur_ms", "period_ms", "little"), [
    (50, 20, 20, False),  # 1 s of kernel time: a few long kernels are enough
    (10, 5, 20, False),  # 50 ms of kernel time
    (9, 10, 10, True),  # fewer than 10 long kernels
    (20, 1, 1, False),  # 20 ms, but the GPU is busy the whole window
    (20, 1, 5, True),  # 20 ms in a 100 ms window: 20% busy, under 50 ms
    (150, 0.005, 0.01, True),  # 150 kernels but 0.75 ms of kernel time
])
def test_too_little_data_weighs_kernel_time_and_window(
    build: Build, kernels: int, dur_ms: float, period_ms: float, little: bool
) -> None:
    b = TraceBuilder("2024.6")
    b.process(100)
    for i in range(kernels):
        t = int(i * period_ms * MS)
        b.runtime(t, t + 2 * US, corr=i + 1)
        b.kernel(t + 3 * US, t + 3 * US + int(dur_ms * MS), corr=i + 1, name=planted.GEMM_BF16)
    r = explain(build(b))
    c = check(r, "too_little_data")
    assert c["found"] is little
    assert c["kernel_ns"] == kernels * int(dur_ms * MS)
    assert (r.diagnosis.verdict == "insufficient_data") is little


@pytest.mark.parametrize(("text", "kind"), [
    ("Unable to collect CPU kernel IP samples and backtraces. perf event paranoid level is 2.", "cpu_sampling"),
    ("Unable to collect CPU kernel IP/backtrace samples. perf event paranoid level is 2.", "cpu_sampling"),
    ("Installed CUDA driver version (12.0) is not supported by this build of Nsight Systems. CUDA trace will be "
     "collected using libraries for driver version 11.7", "version"),
    ("CUDA profiling might have not been started correctly.", "events_missing"),
    ("Some CUPTI events were dropped because the buffer was full.", "events_missing"),
    ("No CUDA events collected. Does the process use CUDA?", "events_missing"),
    ("No NVTX events collected. Does the process use NVTX?", "no_events"),
    ("No OpenGL events collected. Does the process use OpenGL?", "no_events"),
    ("Process was launched by the profiler", "other"),
])
def test_profiler_messages_are_classified(text: str, kind: str) -> None:
    assert kind_of(text) == kind


def test_only_cuda_messages_flag_the_capture(build: Build) -> None:
    path = build(planted.compute_bound())
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE DIAGNOSTIC_EVENT (timestamp INTEGER NOT NULL, timestampType INTEGER NOT NULL, "
                "source INTEGER NOT NULL, severity INTEGER NOT NULL, text TEXT NOT NULL, globalPid INTEGER)")
    rows = [
        (1, 1, 2, 2, "Unable to collect CPU kernel IP samples and backtraces. perf event paranoid level is 2."),
        (2, 1, 3, 2, "No NVTX events collected. Does the process use NVTX?"),
    ]
    con.executemany("INSERT INTO DIAGNOSTIC_EVENT VALUES (?, ?, ?, ?, ?, NULL)", rows)
    con.commit()
    r = explain(path)
    assert check(r, "diagnostics")["found"] is False
    assert [d["events_may_be_missing"] for d in r.ok("capture").data["diagnostics"]] == [False, False]
    con.execute("INSERT INTO DIAGNOSTIC_EVENT VALUES (3, 1, 1, 2, 'CUDA profiling might have not been started "
                "correctly.', NULL)")
    con.commit()
    con.close()
    r = explain(path)
    diag = check(r, "diagnostics")
    assert diag["found"] and "1 concerns the CUDA trace (events may be missing)" in diag["summary"]
    assert "2 about CPU sampling" in diag["summary"]
    assert any("events may be missing" in f for f in r.diagnosis.capture.facts)


def test_burst_starts_follow_the_chain() -> None:
    """A 4-tile loop of 20,000 kernels: every burst ends 4 positions on; the doubling walk
    visits all 5,000 starts."""
    n = 20_000
    stop = np.r_[(np.arange(n) // 4 + 1) * 4, n]
    assert autotune._burst_starts(stop).tolist() == list(range(0, n, 4))


def _shared(name: str) -> Path:
    require_nsys_traces()
    path = NSYS_TRACES / f"{name}.sqlite"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    return path


def _sql(path: Path, query: str) -> list[tuple]:
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def test_fuser_names_nvrtc_and_the_longest_range_with_its_own_duration() -> None:
    path = _shared("fuser_gemm_report1")
    r = explain(path)
    ((longest,),) = _sql(path, "SELECT max(n.end - n.start) FROM NVTX_EVENTS n LEFT JOIN StringIds s "
                               "ON s.id = n.textId WHERE coalesce(s.value, n.text) = 'KernelExecutor::compileFusion'")
    jit = check(r, "jit_compile")
    assert f"the longest 'KernelExecutor::compileFusion' lasting {fmt.dur(longest)}" in jit["summary"]
    assert jit["compilers"] == ["NVRTC"] and "JIT compilation (NVRTC)" in r.diagnosis.summary
    # The check's own time is the union of every range and call, said as such where it is shown.
    assert jit["time_ns"] > longest
    assert any(e.startswith("JIT compilation and module loading:") and f"{fmt.dur(jit['time_ns'])} in all" in e
               for e in r.diagnosis.primary.evidence)


def test_cloverleaf_messages_flag_the_driver_version_not_cpu_sampling() -> None:
    path = _shared("pipit_cloverleaf")
    r = explain(path)
    kinds = {d["text"][:40]: d["kind"] for d in r.ok("capture").data["diagnostics"]}
    assert kinds["Unable to collect CPU kernel IP samples "] == "cpu_sampling"
    assert kinds["Installed CUDA driver version (12.0) is "] == "version"
    assert not any(d["events_may_be_missing"] for d in r.ok("capture").data["diagnostics"])
    diag = check(r, "diagnostics")
    assert diag["found"] and "1 concerns the CUDA trace: Installed CUDA driver version" in diag["summary"]
