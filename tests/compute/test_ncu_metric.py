"""The ncu_plan metric and its files: targets by GPU time, mangled names from the export,
launch skip from the call order, NCCL left out, and the files recognised as the report's own."""

from __future__ import annotations

import json
import re
from pathlib import Path

from nsys_llm_explainer.compute import ncu_plan
from nsys_llm_explainer.compute.ncu_plan import WARMUP_SHARE
from nsys_llm_explainer.metrics.ncu_targets import WARMUP_PCT
from tests.compute.test_kineto_metric import decode_trace
from tests.compute.test_nvtx_metric import GEMM_KERNEL, nvtx_trace
from tests.conftest import analyze, ok, run_cli
from tests.fixtures.builder import TraceBuilder

GEMM = "void gemm_kernel<float>(float const*, float*)"
GEMM_MANGLED = "_Z11gemm_kernelIfEvPKfPf"
NORM = "void rms_norm_kernel<c10::BFloat16>(int)"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*)"


def plan_trace() -> TraceBuilder:
    """20 launches of a GEMM (40 us), 20 of a norm (10 us), 2 NCCL kernels (500 us)."""
    b = TraceBuilder("2024.6")
    b.process(100)
    t, corr = 1_000, 0
    for i in range(20):
        for name, dur, mangled in ((GEMM, 40_000, GEMM_MANGLED), (NORM, 10_000, None)):
            corr += 1
            b.runtime(t, t + 1_000, corr=corr)
            b.kernel(t + 2_000, t + 2_000 + dur, corr=corr, name=name, mangled=mangled)
            t += dur + 5_000
        if i % 10 == 0:
            corr += 1
            b.runtime(t, t + 1_000, corr=corr)
            b.kernel(t + 2_000, t + 502_000, corr=corr, name=NCCL)
            t += 505_000
    return b


def test_plan_targets_use_mangled_names_and_skip_the_warmup(build) -> None:
    report = analyze(build(plan_trace()))
    d = ok(report, "ncu_plan")
    assert [t["name"] for t in d["targets"]] == [GEMM, NORM]
    assert [s["name"] for s in d["skipped"]] == [NCCL]
    gemm, norm = d["targets"]
    assert (gemm["kernel_name_base"], gemm["mangled_name"]) == ("mangled", GEMM_MANGLED)
    assert re.fullmatch(gemm["regex"], GEMM_MANGLED) and not re.fullmatch(gemm["regex"], GEMM)
    assert (norm["kernel_name_base"], norm["mangled_name"]) == ("demangled", None)
    assert re.fullmatch(norm["regex"], NORM)
    # 42 launches in start order GEMM, norm, NCCL, GEMM, norm, ...: the first 10% (ordinals
    # 0-4) are warm-up, which holds GEMM launches 0 and 3 and norm launches 1 and 4.
    assert d["steady_from_launch"] is None and d["launches"] == 42
    assert gemm["launch_skip"] == 2 and norm["launch_skip"] == 2
    assert gemm["sections"][0] == "SpeedOfLight" and "MemoryWorkloadAnalysis" in norm["sections"]


def test_plan_files_are_written_and_replaced_on_rerun(build, tmp_path: Path) -> None:
    trace = build(plan_trace())
    out = tmp_path / "out"
    for _ in range(2):  # the second run must recognise the directory as a report of ours
        res = run_cli(trace, "--out", out, "-q", "--format", "csv,ncu")
        assert res.exit_code == 0, res.stderr
    assert sorted(p.name for p in out.iterdir()) == ["ncu_plan.sh", "ncu_targets.json", "tables"]
    plan = json.loads((out / "ncu_targets.json").read_text(encoding="utf-8"))
    script = (out / "ncu_plan.sh").read_text(encoding="utf-8")
    assert plan["version"] == 1 and len(plan["targets"]) == 2
    assert f"--kernel-name 'regex:^{GEMM_MANGLED}$'" in script and "--kernel-name-base mangled" in script
    assert "# left out: ncclDevKernel_AllReduce" in script
    res = run_cli(trace, "--out", out, "-q", "--format", "json")
    assert res.exit_code == 0, res.stderr
    assert "report.json" in {p.name for p in out.iterdir()}


def test_the_stated_warmup_share_is_the_plan_s() -> None:
    assert WARMUP_PCT == round(100 * WARMUP_SHARE)


def test_profiler_steps_before_the_capture_are_added_to_the_skip(tmp_path: Path) -> None:
    # The capture is ProfilerStep#7: steps 0-6 ran before it, each launching both kernels
    # once (as the captured step does), so ncu sees 7 launches of each before the captured one.
    report = analyze(decode_trace(tmp_path / "t.json"))
    d = ok(report, "ncu_plan")
    assert "7 profiler steps ran before the first captured one" in d["counting"]
    for t in d["targets"]:
        assert (t["calls"], t["launch_skip"], t["launches_before_capture"]) == (1, 0, 7)
        assert t["counting"].startswith("7 profiler steps ran before the captured ones")
        assert t["counting"].endswith("add about 7, i.e. --launch-skip 7")
        assert t["nvtx_include"] is None  # ProfilerStep ranges are no NVTX ranges under ncu


def test_nvtx_step_ranges_give_a_filter_counted_inside_them(build) -> None:
    # 20 GEMM launches outside any range (ordinals 0-19), then the three 'step' ranges with a
    # GEMM, a mul and a silu each (ordinals 20-28). The first 10% of 29 launches (0-2) are
    # warm-up: the plain count skips 3 GEMM launches; inside the ranges (ordinals 20, 23, 26)
    # none is warm-up, so the filtered count skips only the first.
    b = nvtx_trace()
    for i in range(20):
        t = 100_000 + i * 20_000
        b.runtime(t, t + 1_000, corr=900 + i)
        b.kernel(t + 2_000, t + 12_000, corr=900 + i, name=GEMM_KERNEL)
    trace = build(b)
    d = ok(analyze(trace, step_range="step"), "ncu_plan")
    gemm = next(t for t in d["targets"] if t["name"] == GEMM_KERNEL)
    assert (d["launches"], gemm["calls"]) == (29, 23)
    assert (gemm["launch_skip"], gemm["nvtx_include"], gemm["nvtx_launch_skip"]) == (3, "step/", 1)
    assert gemm["counting"].endswith("--nvtx --nvtx-include 'step/' --launch-skip 1")
    plan = {"version": 1, **{key: d[key] for key in ("metrics", "targets", "skipped")}}
    script = ncu_plan.plan_script(plan)
    assert "# from the start of the process" in script
    assert "# launch counting: add the launches that ran before the capture" in script
    # steps found another way: no filter to offer
    undetected = ok(analyze(trace), "ncu_plan")
    assert all(t["nvtx_include"] is None for t in undetected["targets"])
