"""First-screen rules checked on the shared real captures against their own rows: the iterations
judged, not a capture's lead-in; one finding per cause; gains inside their ceilings; a slice is
not a one-shot run; no latency on guessed steps; host-bound less sure under stack tracing."""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from nsys_llm_explainer.api import Report, explain
from tests.conftest import NSYS_TRACES, SHARED_TRACES, run_cli

KINETO = SHARED_TRACES / "kineto"


@cache
def _report(path: Path) -> Report:
    return explain(path)


def report(name: str) -> Report:
    path = KINETO / name if name.endswith(".json.gz") else NSYS_TRACES / f"{name}.sqlite"
    if not path.is_file():
        pytest.skip(f"shared real trace {path} not found (a clone outside /work)")
    return _report(path)


def events(name: str) -> list[dict[str, Any]]:
    with gzip.open(KINETO / name, "rt", encoding="utf-8") as fh:
        return list(json.load(fh)["traceEvents"])


def finding(r: Report, rule_id: str) -> Any:
    return next(f for f in r.findings if f.rule_id == rule_id)


def test_sglang_prefill_is_judged_not_its_lead_in() -> None:
    name = "sglang_qwen3_8b_extend_mi300x.json.gz"
    r = report(name)
    ev = events(name)
    kernels = sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in ev if e.get("cat") == "kernel")
    step = next(e for e in ev if str(e.get("name", "")).startswith("step[EXTEND"))
    inside = [k for k in kernels if k[0] >= float(step["ts"])]
    lead_in = inside[0][0] - kernels[0][1]  # the idle before the iteration's first kernel
    window = kernels[-1][1] - kernels[0][0]
    span = inside[-1][1] - inside[0][0]
    busy, end = 0.0, None
    for s, t in inside:  # the union of the iteration's kernels
        if end is None or s > end:
            busy, end = busy + (t - s), t
        elif t > end:
            busy, end = busy + (t - end), t
    # the capture: half of it a lead-in with work queued behind a stream wait, then one prefill
    # that keeps its GPU busy nearly all its span
    assert lead_in / window > 0.45 and busy / span > 0.99
    d = r.diagnosis
    assert (d.verdict, d.confidence.value) == ("gpu_bound", "medium")
    assert "Cannot judge" not in d.summary and "the prefill is GPU-bound, busy 99.8% of its span" in d.summary
    # its GEMMs are 15,360 rows deep: below their roof, but not for launch or occupancy reasons
    assert "most of it matrix math large on every side" in d.summary and "occupancy limit it" not in d.summary
    # the dominant GEMM kernel's time below its roof is NLE320's, once
    nle101, nle320 = finding(r, "NLE101"), finding(r, "NLE320")
    assert nle101.severity.value == "info" and nle101.impact_ns is None
    assert any("counted once, in NLE320" in e for e in nle101.evidence)
    assert nle320.severity.value == "high"
    assert not any("tiny M" in x for x in nle101.recommendation)


def test_gains_stay_inside_their_ceilings() -> None:
    r = report("vllm_moe_b200_tp8_eager.json.gz")
    timed = [f for f in r.findings if f.estimated_gain_ns is not None and f.impact_ns]
    assert timed
    for f in timed:
        assert f.estimated_gain_ns <= f.impact_ns
        if f.estimated_gain_step_ns is not None:
            assert f.estimated_gain_step_ns <= min(f.estimated_gain_ns, f.impact_ns)
    # one iteration: its gain is the capture's
    host = finding(r, "NLE210")
    assert host.estimated_gain_step_ns == host.estimated_gain_ns


def test_host_bound_is_less_sure_under_stack_tracing() -> None:
    name = "vllm_moe_b200_tp8_eager.json.gz"
    r = report(name)
    stacks = sum(1 for e in events(name) if e.get("cat") == "python_function")
    assert stacks == 15_230
    assert (r.diagnosis.verdict, r.diagnosis.confidence.value) == ("host_bound", "medium")


def test_one_high_finding_per_host_cause() -> None:
    r = report("flashinference_kvdecode_a10g")
    decode, host, launch = finding(r, "NLE401"), finding(r, "NLE210"), finding(r, "NLE209")
    assert decode.severity.value == "high"
    assert host.severity.value == "medium"  # its band alone is high: 76.2% of the window
    for f in (host, launch):
        assert any(e.startswith("overlaps NLE401's time at stake") for e in f.evidence)
    # the idle-cause rules split the idle time among themselves: no overlap between them
    vllm = report("vllm_moe_b200_tp8_eager.json.gz")
    assert not any("overlaps" in e for f in vllm.findings for e in f.evidence)


def test_a_slice_is_not_a_one_shot_run() -> None:
    r = report("nsysai_h100_2gpu_1s")
    captured = r.to_dict()["metrics"]["capture"]["captured"]
    assert captured["program"]["kind"] == "test" and captured["program"]["one_shot"] is False
    assert captured["slice"]["window_ns"] == 1_000_000_000


def test_guessed_steps_give_no_latency(tmp_path: Path) -> None:
    r = report("hta_alexnet_a100.json.gz")
    steps = r.to_dict()["metrics"]["steps"]
    assert (steps["method"], steps["confidence"], steps["step_count"]) == ("launch_sequence", "low", 5)
    md = (r.write(tmp_path / "out", formats="md") / "report.md").read_text(encoding="utf-8")
    assert "| Step latency | not measured: 5 repeats found with low confidence" in md
    assert "| Step latency | p50" not in md


def test_one_shot_start_up_gets_no_serving_advice() -> None:
    r = report("fuser_gemm_report1")
    f = finding(r, "NLE216")
    assert f.severity.value == "medium"
    assert not any("taking traffic" in x or "TORCHINDUCTOR" in x for x in f.recommendation)


def test_cuda_not_traced_says_so(tmp_path: Path) -> None:
    r = report("centerformer_baseline")
    md = (r.write(tmp_path / "out", formats="md") / "report.md").read_text(encoding="utf-8")
    assert "**Verdict:** GPU work not traced (`no_gpu_work`" in md


def test_two_captures_without_gpu_work_are_not_compared(tmp_path: Path) -> None:
    base, new = NSYS_TRACES / "centerformer_baseline.sqlite", NSYS_TRACES / "dynamicvit_nsys_profile.sqlite"
    if not (base.is_file() and new.is_file()):
        pytest.skip("shared real traces not found (a clone outside /work)")
    out = tmp_path / "d"
    assert run_cli("diff", base, new, "--out", out).exit_code == 0
    first = (out / "diff.md").read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("Not comparable: nothing to compare: BASE captured no GPU work: CUDA was not traced")
    assert "NEW captured no GPU work: the profiler failed to attach" in first
    # a gate on such a pair never passes
    assert run_cli("diff", base, new, "--out", tmp_path / "g", "--fail-on", "step_time_pct>5").exit_code == 5
