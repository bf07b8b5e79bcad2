"""How the run ended, read exactly, and what was captured, on the first screen: planted cases
with their verdict, named source, severity and advice (tests/fixtures/planted_runs.py), and
the shared captures that show each rule. Expected figures are worked out by hand from the
scenarios' docstrings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nsys_llm_explainer.analysis.program import StreamText, ending
from nsys_llm_explainer.api import Report, explain
from nsys_llm_explainer.model import Severity
from nsys_llm_explainer.rules.advice import CONFLICT_ADVICE, FAILED_ADVICE, for_amd
from nsys_llm_explainer.rules.capture import INTERRUPTED_ADVICE
from tests.conftest import SHARED_TRACES
from tests.fixtures import planted_runs as pr
from tests.fixtures.planted_capture import SECRET_HOME

MI300X_BLANK = {"id": 0, "name": "", "totalGlobalMem": 206_141_652_992, "computeMajor": 9, "computeMinor": 4,
                "warpSize": 64, "numSms": 304}


def nsys(tmp_path: Path, builder: Any, name: str = "t") -> Report:
    return explain(builder.write(tmp_path / f"{name}.sqlite"))


def kineto(tmp_path: Path, builder: Any, name: str = "t") -> Report:
    return explain(builder.write(tmp_path / f"{name}.json"))


def files(report: Report, tmp_path: Path) -> dict[str, str]:
    out = report.write(tmp_path / "out", formats="md,json,html,csv")
    return {p.name: p.read_text(encoding="utf-8") for p in out.rglob("*") if p.is_file()}


def finding(report: Report, rule_id: str):  # type: ignore[no-untyped-def]
    (f,) = [f for f in report.findings if f.rule_id == rule_id]
    return f


def first_lines(md: str) -> list[str]:
    return [line for line in md.splitlines()[:8] if line]


def key_rows(md: str) -> dict[str, str]:
    rows = {}
    for line in md.splitlines():
        if line.startswith("| ") and not line.startswith("| Key number") and line.count("|") >= 3:
            what, value = line[2:].split(" | ", 1)
            rows.setdefault(what, value.rstrip(" |"))
        if line.startswith("## Findings"):
            break
    return rows


BUSY_PCT = 100.0 * 20 * 1_000 / (20 * 1_000 + 19 * 210)  # planted_runs.steps(): 83.4%


# -- 1. how the run ended ------------------------------------------------------------------------
def test_warnings_alone_are_a_completed_run(tmp_path: Path) -> None:
    """Only warnings on stderr (NumPy RuntimeWarnings, NumPy's 1.x/2.x traceback, a
    UserWarning, a FutureWarning that says "error"): completed, judged on its figures."""
    assert ending([StreamText(1, "stderr", pr.NUMPY_STDERR)]) is None
    r = nsys(tmp_path, pr.warned_run())
    cap = r.ok("capture").data
    assert (cap["run"]["outcome"], cap["run"]["ending"], cap["steady_state"]) == ("completed", None, True)
    (check,) = [c for c in cap["checks"] if c["id"] == "program_failed"]
    assert (check["found"], check["summary"]) == (False, "no error in the program's captured output")
    d = r.diagnosis
    assert (d.verdict, d.confidence) == ("gpu_bound", "high")
    assert d.summary.startswith(f"GPU-bound: GPU 0 is busy {BUSY_PCT:.1f}% of its window (20.0 ms of 24.0 ms)")
    assert not any(f.severity == Severity.HIGH for f in r.findings)
    assert not any(FAILED_ADVICE[0] in f.recommendation for f in r.findings)
    assert SECRET_HOME not in "".join(files(r, tmp_path).values())


def test_a_hung_download_stopped_with_ctrl_c_is_interrupted_not_failed(tmp_path: Path) -> None:
    r = nsys(tmp_path, pr.interrupted_download())
    d = r.diagnosis
    assert (d.verdict, d.primary.kind) == ("no_gpu_work", "interrupted")
    where = ("in read (ssl.py:1130), called from `from_pretrained` > `cached_file` > `hf_hub_download` > "
             "`http_get`")
    assert d.summary == (
        "No GPU work: the run was interrupted before launching a kernel (Ctrl-C, SIGTERM or the profiler's duration "
        "limit), not failed. It made 8 CUDA calls (context creation in cudaFree (120 ms), 4 stream creations, 2 "
        f"allocations, 1 device query); its standard error says `KeyboardInterrupt`, {where}. Capture again long "
        "enough to reach the GPU work, or find why it stopped where it did.")
    f = finding(r, "NLE107")
    assert f.severity == Severity.INFO and f.recommendation[0] == INTERRUPTED_ADVICE[0]
    assert f"where it was: {where}" in f.evidence
    text = "".join(files(r, tmp_path).values())
    assert SECRET_HOME not in text and "alice" not in text


def test_an_interrupted_run_keeps_its_verdict(tmp_path: Path) -> None:
    r = nsys(tmp_path, pr.interrupted_after_work())
    d = r.diagnosis
    assert (d.verdict, d.confidence) == ("gpu_bound", "high")
    assert r.ok("capture").data["steady_state"] is True
    assert d.capture.captured == ("The run was interrupted, not failed: its standard error says `Terminated`: the "
                                  "figures up to the interrupt stand.",)
    md = files(r, tmp_path)["report.md"]
    lines = first_lines(md)
    assert lines[1].startswith("**Captured:** The run was interrupted") and lines[2].startswith("**Verdict:** GPU")


def test_a_failure_the_profiling_caused_is_named_with_its_own_advice(tmp_path: Path) -> None:
    r = nsys(tmp_path, pr.profiler_conflict())
    d = r.diagnosis
    assert (d.verdict, d.primary.kind) == ("not_steady_state", "profiler_conflict")
    conflict = pr.KINETO_CUPTI
    assert d.primary.evidence[0] == f"the program's own profiler under Nsight Systems: {conflict}"
    assert d.summary.startswith(
        "Not steady state: the program failed because of the profiling: its own profiler or timer found nothing "
        f"while Nsight Systems held CUPTI (`{conflict}`), then its standard error says `IndexError: list index out "
        "of range`; the capture ends in that failure, not in the steady loop. Run the program's own profiler or "
        "timer outside Nsight Systems (or turn it off while capturing), then capture again: Nsight Systems holds "
        "CUPTI, so under it that profiler records nothing. Until it failed: GPU-bound: GPU 0 is busy "
        f"{BUSY_PCT:.1f}% of its window")
    timed = [f for f in r.findings if f.impact_ns is not None]
    assert timed and all(f.recommendation == CONFLICT_ADVICE for f in timed)
    assert all(f.severity == Severity.LOW for f in timed)


@pytest.mark.parametrize(("line", "kind"), [
    ("ERROR: Failed to load injection library libToolsInjection64.so", "profiler"),
    ("python: symbol lookup error: libcupti.so.12: undefined symbol: cuptiActivityEnable", "profiler"),
])
def test_the_profilers_own_injection_failing_is_the_profilers(line: str, kind: str) -> None:
    e = ending([StreamText(1, "stderr", line + "\n")])
    assert e is not None and e.kind == kind


def test_a_one_shot_unit_test_is_named_and_its_start_up_is_at_most_medium(tmp_path: Path) -> None:
    r = nsys(tmp_path, pr.gtest_one_shot())
    control = nsys(tmp_path, pr.gtest_one_shot(command=False), "control")
    # the same capture without its command line is a start-up capture of a loop: HIGH
    assert finding(control, "NLE216").severity == Severity.HIGH
    assert control.diagnosis.workload.kind == "pytorch_inference"
    f = finding(r, "NLE216")
    assert f.severity == Severity.MEDIUM and f.impact_pct == finding(control, "NLE216").impact_pct
    assert f.recommendation[0].startswith("Repeat the work inside one run (`--gtest_repeat=N`)")
    assert f.evidence[0] == ("a one-shot run: `test_gemm --gtest_filter=GemmTest.Bf16Tn`, a unit test, runs its work "
                             "once, so its start-up is part of every run, and a rerun repeats it (at most medium)")
    d = r.diagnosis
    assert d.verdict == "not_steady_state"
    assert d.summary.endswith("The program, `test_gemm --gtest_filter=GemmTest.Bf16Tn`, a unit test, runs its work "
                              "once: start-up is part of every run, and there is no steady loop to capture. Repeat "
                              "the work inside one run to see past it.")
    assert (d.workload.kind, d.workload.confidence) == ("generic_cuda", "high")
    assert d.workload.evidence[0].startswith("the program is 'test_gemm --gtest_filter=GemmTest.Bf16Tn', a native "
                                             "unit test (Google Test)")
    assert d.capture.recipe[0].startswith("Repeat the work inside one run (`--gtest_repeat=N`)")
    out = files(r, tmp_path)
    rows = key_rows(out["report.md"])
    assert rows["Program"] == ("test\\_gemm --gtest\\_filter=GemmTest.Bf16Tn (a test, Google Test; runs its work "
                               "once)")
    assert rows["Workload"] == "plain CUDA program (confidence high)"
    text = "".join(out.values())
    assert pr.TOKEN not in text and SECRET_HOME not in text and "HF_TOKEN" not in text


# -- 2. what was captured --------------------------------------------------------------------------
def test_a_window_cut_from_a_longer_capture_is_judged_as_a_slice(tmp_path: Path) -> None:
    r = nsys(tmp_path, pr.window_cut())
    whole = nsys(tmp_path, pr.window_cut(cut=False), "whole")
    # as a whole capture the 9 ms module load is start-up, 27.3% of the 33.0 ms window
    assert whole.diagnosis.verdict == "not_steady_state" and finding(whole, "NLE216")
    cap = r.ok("capture").data
    (jit,) = [c for c in cap["checks"] if c["id"] == "jit_compile"]
    assert jit["found"] and jit["time_ns"] == 9 * pr.MS  # still listed ...
    assert (cap["startup_ns"], cap["steady_state"]) == (0, True)  # ... not counted
    assert not [f for f in r.findings if f.rule_id == "NLE216"]
    # no step is cut at the window's edges: the carried kernels and the last step's tail are in
    # none; 20 step starts bound 19 complete steps
    assert r.ok("steps").data["step_count"] == 19
    assert cap["captured"]["slice"] == {
        "how": "cut", "start_ns": pr.CUT[0], "end_ns": pr.CUT[1], "window_ns": 10**9,
        "offset_ns": pr.CUT[0] - pr.CAPTURE_START, "capture_ns": pr.CAPTURE_NS,
        "source": "META_DATA_EXPORT.DERIVED_WINDOW_NS"}
    d = r.diagnosis
    # the 5 ms of carried kernels count in the window's busy time: 25 ms of the window from
    # the first kernel to the last (9.008 ms, then 20 steps: 20 x 1,000 + 19 x 210 us)
    window_us = 9_008 + 20 * 1_000 + 19 * 210
    assert d.verdict == "gpu_bound"
    assert d.summary.startswith(f"GPU-bound: GPU 0 is busy {100 * 25_000 / window_us:.1f}% of its window "
                                "(25.0 ms of 33.0 ms)")
    assert d.capture.captured == (
        "A 1.00 s window cut from a 300 s capture, starting 120 s in (recorded in "
        "META_DATA_EXPORT.DERIVED_WINDOW_NS): judged as a slice (no start-up is counted, no step is cut at its "
        "edges; work running in it counts whenever it was launched).",
        "5 kernels (5.00 ms) queued before the capture ran at its start: counted in GPU busy time, in no step.")


def test_work_queued_before_the_capture_is_on_the_first_screen(tmp_path: Path) -> None:
    from tests.analysis.test_carried import plant

    r = explain(plant(tmp_path, unlaunched_late=True))
    # 5 + 7 + 9 + 4 us carried, drained by the leading cudaDeviceSynchronize [0, 26 us]; one
    # more kernel lost its launch record mid-capture (not carried)
    assert r.diagnosis.capture.captured == (
        "4 kernels (25.0 µs) queued before the capture ran at its start, drained by `cudaDeviceSynchronize`: "
        "counted in GPU busy time, in no step.",
        "Events are missing: 1 of 9 kernels has no launch call although their process's launches were traced (a "
        "filtered or sampled trace): host and launch figures leave them out.")
    steps = r.ok("steps").data
    assert steps["carried"]["kernels"] == 4


def test_lost_launch_records_are_named_before_the_verdict(tmp_path: Path) -> None:
    r = nsys(tmp_path, pr.lost_launches())
    missing = r.ok("capture").data["captured"]["missing"]
    assert (missing["launches"], missing["kernels"]) == (20, 200)
    assert r.diagnosis.capture.captured == (
        "Events are missing: 20 of 200 kernels have no launch call although their process's launches were traced "
        "(a filtered or sampled trace): host and launch figures leave them out.",)
    lines = first_lines(files(r, tmp_path)["report.md"])
    assert lines[1].startswith("**Captured:** Events are missing: 20 of 200") and lines[2].startswith("**Verdict:**")


def test_stream_waits_without_records_and_a_sampled_trace(tmp_path: Path) -> None:
    r = kineto(tmp_path, pr.kineto_host_bound(waits=40, metadata={"trace_sampling": True}))
    missing = r.ok("capture").data["captured"]["missing"]
    assert (missing["wait_calls"], missing["sync_records"], missing["waits_unseen"]) == (40, 0, True)
    assert r.diagnosis.capture.captured == (
        "Events are missing: 40 stream waits (cudaStreamWaitEvent) but no synchronization records, so what queued "
        "work waited on cannot be seen.",
        "The trace says it was sampled or filtered (trace_sampling): events may be missing.")
    few = kineto(tmp_path, pr.kineto_host_bound(waits=8), "few")  # 8 waits: below MIN_WAIT_CALLS
    assert few.diagnosis.capture.captured == ()


def test_profiler_overhead_is_named_before_a_host_bound_verdict(tmp_path: Path) -> None:
    r = kineto(tmp_path, pr.kineto_host_bound(python_events=400, with_stack=1, record_shapes=1, profile_memory=0))
    d = r.diagnosis
    assert d.verdict == "host_bound"
    assert d.capture.captured == (
        "Python stack tracing (400 python_function events) and shape recording were on: they inflate the host's "
        "time between launches, so host-bound figures are partly the profiler's.",)
    lines = first_lines(files(r, tmp_path)["report.md"])
    assert lines[1].startswith("**Captured:** Python stack tracing (400 python\\_function events)")
    assert lines[2].startswith("**Verdict:** Host-bound")
    plain = kineto(tmp_path, pr.kineto_host_bound(record_shapes=0), "plain")
    assert plain.diagnosis.verdict == "host_bound" and plain.diagnosis.capture.captured == ()


def test_the_gpu_the_kernels_ran_on_is_identified_with_its_peaks(tmp_path: Path) -> None:
    """deviceProperties lists device 0 with a blank name (gfx 9.4, 304 CUs, 192 GB: an MI300X);
    the kernels run on device 9."""
    r = kineto(tmp_path, pr.kineto_host_bound(gpu=MI300X_BLANK, device=9, roctracer_version="4.1",
                                              hip_runtime_version=60131199))
    gc = r.ok("gpu_context").data
    assert [(g["device_id"], g["name"], g["active"], g.get("described_as")) for g in gc["gpus"]] == [
        (0, "AMD Instinct MI300X", False, None), (9, "AMD Instinct MI300X", True, 0)]
    assert gc["devices_without_info"] == [] and gc["gpus"][1]["bf16_tflops"] == 1307.4
    rows = key_rows(files(r, tmp_path)["report.md"])
    assert rows["GPU"] == "GPU 9: AMD Instinct MI300X (dense BF16 1,307 TFLOPS, 5,300 GB/s)"
    advice = " ".join(x for f in r.findings for x in f.recommendation)
    assert "Nsight Compute" not in advice and "rocprof" in advice
    assert for_amd(("Profile the GEMM with Nsight Compute (ncu_plan.sh in the report directory) for its tile shape "
                    "cuBLAS picked.",)) == (
        "Profile the GEMM with the ROCm profilers (rocprofv3 `--kernel-include-regex NAME --pmc ...`, or ROCm "
        "Compute Profiler, formerly Omniperf: `rocprof-compute profile -k NAME -- <command>`) for its tile shape "
        "hipBLASLt picked.",)


def test_a_model_named_in_metadata_beside_a_token(tmp_path: Path) -> None:
    meta = {"experiment": {"repo_id": "Qwen/Qwen2-7B-Instruct", "hf_token": pr.TOKEN},
            "argv": ["serve.py", "--model", "/models/Qwen/Qwen2-7B-Instruct", "--token", pr.TOKEN]}
    r = kineto(tmp_path, pr.kineto_host_bound(metadata=meta))
    program = r.ok("capture").data["captured"]["program"]
    assert (program["shown"], program["model"], program["source"]) == ("serve.py Qwen2-7B-Instruct",
                                                                         "Qwen2-7B-Instruct", "metadata")
    text = "".join(files(r, tmp_path).values())
    assert pr.TOKEN not in text and "/models/" not in text


# -- the shared captures ---------------------------------------------------------------------------
def shared(kind: str, name: str) -> Report:
    path = SHARED_TRACES / kind / name
    if not path.is_file():
        pytest.skip(f"shared real trace {path} not found (a clone outside /work)")
    return explain(path)


def test_fuser_gemm_is_a_cpp_test_of_one_gemm(tmp_path: Path) -> None:
    r = shared("nsys", "fuser_gemm_report1.sqlite")
    program = r.ok("capture").data["captured"]["program"]
    assert program["shown"] == "test_matmul --gtest_filter=HopperMatmulTest.HSH_NT_128BSwizzle"
    assert (program["kind"], program["runner"], program["one_shot"]) == ("test", "gtest", True)
    assert r.diagnosis.workload.kind == "generic_cuda"
    f = finding(r, "NLE216")
    assert f.severity == Severity.MEDIUM
    assert r.diagnosis.verdict == "not_steady_state"


def test_nsysai_is_a_one_second_slice_120_s_into_the_capture() -> None:
    r = shared("nsys", "nsysai_h100_2gpu_1s.sqlite")
    sl = r.ok("capture").data["captured"]["slice"]
    # ANALYSIS_DETAILS: startTime 35,255,823,190, duration 295,658,072,752; DERIVED_WINDOW_NS
    # 155,330,248,986-156,330,248,986
    assert (sl["offset_ns"], sl["window_ns"], sl["capture_ns"]) == (
        155_330_248_986 - 35_255_823_190, 10**9, 295_658_072_752)
    assert r.diagnosis.verdict == "transfer_bound"
    assert r.diagnosis.capture.captured[0].startswith("A 1.00 s window cut from a 296 s capture, starting 120 s in")
    assert not [f for f in r.findings if f.rule_id == "NLE216"]


def test_qwen_step_drains_the_previous_one() -> None:
    r = shared("kineto", "hf_qwen1.5_0.5b_h100.json.gz")
    carried = r.ok("capture").data["captured"]["carried"]
    assert (carried["kernels"], carried["kernel_ns"], carried["drained_by"]) == (436, 13_672_640,
                                                                                 "cudaDeviceSynchronize")
    assert r.diagnosis.capture.captured[0] == (
        "436 kernels (13.7 ms) queued before the capture ran at its start, drained by `cudaDeviceSynchronize`: "
        "counted in GPU busy time, in no step.")


def test_vllm_host_bound_verdict_comes_after_its_stack_tracing() -> None:
    r = shared("kineto", "vllm_moe_b200_tp8_eager.json.gz")
    assert r.diagnosis.verdict == "host_bound"
    assert r.diagnosis.capture.captured == (
        "Python stack tracing (15,230 python_function events) and shape recording were on: they inflate the host's "
        "time between launches, so host-bound figures are partly the profiler's.",)


def test_sglang_kernels_on_device_9_run_on_the_listed_mi300x(tmp_path: Path) -> None:
    r = shared("kineto", "sglang_qwen3_8b_extend_mi300x.json.gz")
    gc = r.ok("gpu_context").data
    assert gc["devices_without_info"] == []
    doc = json.loads((r.write(tmp_path / "o", formats="json") / "report.json").read_text())
    (dev,) = [d for d in doc["metrics"]["compute_efficiency"]["devices"] if d["device_id"] == 9]
    assert (dev["gpu"], dev["peaks_basis"]) == ("AMD Instinct MI300X", "table")
