"""One story per screen, planted with known answers (tests/fixtures/planted_story.py): the
verdict agrees with the findings that name where the idle time went; one denominator for each
kind of figure; time at stake and gain that make sense together; communication counted once;
advice that fits what ran; a host wait traced to what the device waited on; a per-layer sync
stall named. Each case checks the verdict, the named source, the severity and the advice."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from nsys_llm_explainer import fmt
from nsys_llm_explainer.api import Report, explain
from nsys_llm_explainer.model import Finding, Severity
from nsys_llm_explainer.options import Options, PhaseMap
from nsys_llm_explainer.render.overview import key_numbers
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.kernels import FSDP_ADVICE
from tests.fixtures import planted
from tests.fixtures import planted_story as ps
from tests.fixtures.builder import TraceBuilder

MS, US = ps.MS, ps.US
Build = Callable[[TraceBuilder], Path]


def run(build: Build, scenario: Callable[[], TraceBuilder]) -> Report:
    report = explain(build(scenario()))
    assert report.diagnosis is not None
    return report


def finding(report: Report, rule_id: str) -> Finding:
    (f,) = [f for f in report.findings if f.rule_id == rule_id]
    return f


def buckets(r: Report, device: int = 0) -> dict[str, int]:
    dev = next(x for x in r.diagnosis.devices if x["device_id"] == device)
    return {b["bucket"]: b["ns"] for b in dev["buckets"]}


def first_screen(r: Report, tmp_path: Path) -> str:
    """report.md up to its details: the verdict, the key numbers, the top findings."""
    md = (r.write(tmp_path / "out", formats="md") / "report.md").read_text(encoding="utf-8")
    return md.split("## Details", 1)[0]


# -- the verdict agrees with its findings ----------------------------------------------------------
def test_work_queued_behind_a_pending_collective_is_communication(build: Build, tmp_path: Path) -> None:
    r = run(build, ps.behind_collectives)
    d = r.diagnosis
    ic = r.ok("idle_causes").data["devices"][0]
    # 10 steps; the gap before each all-reduce (4,000 us) has its next work queued while that
    # collective waits on its peers: 10 x 4 ms behind a collective, none left unexplained.
    assert ic["behind_collective_ns"] == 10 * WAIT
    b = buckets(r)
    assert b["device_wait"] == 0 and b["communication_wait"] >= 10 * WAIT
    assert b["exposed_communication"] == 10 * 1_000 * US  # the all-reduce with nothing beside it
    comm = b["communication_wait"] + b["exposed_communication"]
    window = sum(b.values())
    # The verdict names the cause the finding names, one step less sure (what the collective
    # waited on is outside this rank's trace), and the read-back second.
    assert (d.verdict, d.primary.kind, d.confidence.value) == ("communication_bound", "communication", "medium")
    assert d.primary.impact_ns == comm and comm > 0.75 * window
    assert d.summary.startswith(f"Communication-bound: GPU 0 spends {100 * comm / window:.1f}% of its time")
    assert "Meanwhile the launching thread was blocked in a read-back, a 4 B device-to-host copy into pageable " \
           "memory in `aten::item`, 1 per step" in d.summary
    assert "insufficient" not in d.summary and "unknown" not in d.summary
    f = finding(r, "NLE307")
    assert (f.severity, f.confidence.value, f.impact_ns) == (Severity.HIGH, "medium", comm)
    assert any(e.startswith(f"GPU 0: {fmt.dur(10 * WAIT)} idle with its next work queued while a collective")
               for e in f.evidence)
    # The wait is on the peers: checking the ranks comes first; the all-reduce already runs on
    # its own stream (13, compute on 7), so that is not the advice.
    assert "`nsys-llm-explain fleet`" in f.recommendation[0]
    assert not any("on their own stream and" in x or "Run collectives on their own stream" in x
                   for x in f.recommendation)
    assert any("already run on their own streams" in x for x in f.recommendation)


WAIT = ps.WAIT_NS


def test_a_dataloader_before_the_first_cuda_call_is_host_work(build: Build) -> None:
    r = run(build, ps.dataloader_before_the_steps)
    d = r.diagnosis
    b = buckets(r)
    # The GPU ran the carried 500 us, then idled until the first step's first kernel: the host
    # made no CUDA call then, but it was in `DataLoader.__next__` all along: host work the trace
    # names, not a capture edge.
    ic = r.ok("idle_causes").data["devices"][0]
    causes = {c["cause"]: c["idle_ns"] for c in ic["causes"]}
    assert causes["capture_edge"] == 0 and b["capture_edge"] == 0
    # the first step's first kernel starts after 60.5 ms + 2 ms of DataLoader and its launch
    assert 62_000 * US <= causes["host_other"] <= 62_100 * US
    assert (d.verdict, d.primary.kind) == ("host_bound", "host")
    assert "`DataLoader.__next__`" in d.summary and "(data loading)" in d.summary
    assert "unknown" not in d.summary and "Cannot judge" not in d.summary
    f = finding(r, "NLE210")
    assert f.severity is Severity.HIGH
    assert f.recommendation[0] == advice("host_data_loading", d.workload.kind)[0]


# -- one denominator per kind of figure -------------------------------------------------------------
def test_kernel_shares_are_of_the_kernel_time_the_key_numbers_show(build: Build, tmp_path: Path) -> None:
    r = run(build, planted.overlapped_nccl)
    d = r.diagnosis
    assert (d.verdict, d.primary.kind) == ("gpu_bound", "compute")
    total = r.ok("top_kernels").data["total_kernel_ns"]
    # Per step and GPU: 100 GEMMs and 100 elementwise kernels of 10 us, and a 1 ms all-reduce:
    # the GEMMs are a third of all kernel time, collectives included (half of the rest).
    assert d.kernels["kernel_ns"] == total
    screen = first_screen(r, tmp_path)
    shown = [float(x) for x in re.findall(r"([\d.]+)% of kernel time", d.summary)]
    assert shown and all(abs(x - 100 / 3) < 0.1 for x in shown), d.summary
    assert "33.3% communication" in d.summary
    # One busy figure per GPU on the first screen: the key numbers' one.
    for what, value in key_numbers(r.to_dict()):
        if what.endswith(" busy"):
            gpu = what.split()[1]
            share = value.split("%")[0]
            for m in re.finditer(rf"GPUs? [\d\-, ]*{gpu}[\d\-, ]* (?:is|are) busy ([\d.]+)%", screen):
                assert m.group(1) == share


def test_a_host_bound_phase_line_adds_no_second_busy_figure(build: Build, tmp_path: Path) -> None:
    # Phases named by a phase map: the boundness section has each phase's busy share over its
    # ranges; the first screen keeps the one busy figure of the key numbers.
    r = explain(build(ps.checkpointed_layers()), Options(phase_map=PhaseMap((("layers", "checkpoint"),))))
    f = finding(r, "NLE210")
    (line,) = [e for e in f.evidence if e.startswith("phase layers: ")]
    assert "start within" in line and "busy" not in line
    (busy,) = [v for what, v in key_numbers(r.to_dict()) if what == "GPU 0 busy"]
    assert re.findall(r"busy ([\d.]+)%", first_screen(r, tmp_path)) == [busy.split("%")[0]]


# -- time at stake and gain ---------------------------------------------------------------------
def test_time_at_stake_is_one_gpus_never_a_sum_over_gpus(build: Build, tmp_path: Path) -> None:
    r = run(build, ps.transfer_bound_two_gpus)
    d = r.diagnosis
    assert (d.verdict, d.primary.kind, d.primary.devices) == ("transfer_bound", "transfer", (0, 1))
    # Each GPU copies 40 x 2 ms of its 40 x 2.2 ms window: 80 ms at stake, not 160 ms.
    assert (d.primary.impact_ns, d.primary.impact_pct) == (80 * MS, round(100 * 80 / 88, 2))
    f = finding(r, "NLE208")
    assert (f.impact_ns, f.severity) == (80 * MS, Severity.HIGH)
    assert [(a.device_id, a.impact_ns) for a in f.affected] == [(0, 80 * MS), (1, 80 * MS)]
    assert sum(e.startswith("GPU ") and "80.0 ms idle while copies ran" in e for e in f.evidence) == 2
    window = max(dev["window_ns"] for dev in d.devices)
    assert f.impact_ns <= window and d.primary.impact_ns <= window
    screen = first_screen(r, tmp_path)
    assert "transfer on GPUs 0-1: 80.0 ms of GPU time at stake on the GPU with the most" in screen
    assert "GPU time at stake: 80.0 ms, 90.9% of the time of GPU 0 with the most of GPUs 0-1" in screen
    assert not re.search(r"160 ms (of GPU time )?at stake|at stake: 160 ms", screen)


def test_a_gain_far_below_its_time_at_stake_says_why(build: Build, tmp_path: Path) -> None:
    r = run(build, ps.fp32_gemms_host_bound)
    assert r.diagnosis.verdict == "host_bound"
    f = finding(r, "NLE323")
    # 20 x 10 GEMMs of 100 us at stake; 2x faster GEMMs buy at most half of it, and the host
    # holds every step, so the replay finds almost nothing: the line says why.
    assert f.impact_ns == 20 * 10 * 100 * US and f.severity is Severity.HIGH
    assert f.estimated_gain_ns is not None and f.estimated_gain_ns < 0.25 * f.impact_ns
    (why,) = [e for e in f.evidence if e.startswith("estimated gain far below the time at stake: ")]
    assert "a 2x faster kernel saves at most 50% of its time" in why
    assert re.search(r"kernels make up \d+% of the replayed critical path, which waits mostly on host work", why)
    screen = first_screen(r, tmp_path)
    line = next(x for x in screen.splitlines() if x.startswith("GPU time at stake: ") and "kernel:gemm=2x" in x)
    assert ", far below the time at stake: a 2x faster kernel" in line and "waits mostly on host work" in line
    # and only there: the evidence list does not repeat it
    assert screen.count("saves at most 50% of its time") == 1


# -- advice fits what ran -------------------------------------------------------------------------
def test_no_cudnn_advice_without_convolutions(build: Build) -> None:
    f = finding(run(build, planted.fp32_gemm), "NLE323")
    text = " ".join(f.recommendation)
    assert "set_float32_matmul_precision" in text
    assert "cudnn" not in text.lower() and "channels_last" not in text
    conv = finding(run(build, planted.fp32_conv_volta), "NLE323")
    assert "channels_last" in conv.recommendation[0]  # convolutions ran: cuDNN's layout is advice


def test_activation_checkpointing_is_framework_work_not_a_checkpoint_save(build: Build) -> None:
    r = run(build, ps.checkpointed_layers)
    d = r.diagnosis
    assert (d.verdict, d.primary.kind) == ("host_bound", "host")
    assert "`checkpoint`" in d.summary and "(framework operators" in d.summary
    assert "logging or checkpointing" not in d.summary
    f = finding(r, "NLE210")
    assert f.recommendation[0] == advice("host_framework", d.workload.kind)[0]
    assert not any("checkpoint" in x for x in f.recommendation)
    saving = run(build, lambda: ps.checkpointed_layers(saving=True))
    assert "(logging or checkpointing)" in saving.diagnosis.summary
    assert finding(saving, "NLE210").recommendation[0] == advice("host_logging", d.workload.kind)[0]


def test_fsdp_mixed_precision_casts_are_one_finding(build: Build) -> None:
    r = run(build, ps.fsdp_mixed_precision)
    casts = r.ok("casts").data
    assert casts["fsdp_ns"] == casts["cast_ns"] == 8 * 20 * 20 * US
    f = finding(r, "NLE315")
    assert f.impact_ns == 8 * 20 * 20 * US and f.severity.rank <= Severity.MEDIUM.rank
    assert f.recommendation == FSDP_ADVICE
    assert any("inside FSDP's ranges" in e for e in f.evidence)
    # the same cast kernels are not a second finding
    for other in ("NLE302", "NLE312", "NLE101"):
        assert not [x for x in r.findings if x.rule_id == other and x.impact_ns]


# -- a host wait traced to what the device waited on ------------------------------------------------
def test_a_sync_behind_a_stream_wait_is_a_device_dependency(build: Build) -> None:
    r = run(build, ps.sync_behind_stream_wait)
    d = r.diagnosis
    ic = r.ok("idle_causes").data["devices"][0]
    b = buckets(r)
    # 19 gaps between 20 steps each hold about 1,490 us after the kernel's launch returned
    # (1,500 us less the 10 us margin): the kernel waited on the event, the synchronize on it.
    assert abs(ic["stream_wait_ns"] - 20 * 1_490 * US) <= 20 * 10 * US
    assert b["sync_wait"] < 20 * 20 * US and b["device_wait"] >= ic["stream_wait_ns"]
    assert not [f for f in r.findings if f.rule_id == "NLE103"]
    assert (d.verdict, d.primary.kind) == ("gpu_bound", "compute")
    assert "queued behind a stream wait on an event" in d.summary
    assert any("behind a stream wait on an event (`cudaStreamWaitEvent` before its launch)" in e
               for e in d.primary.evidence)


# -- a per-layer sync stall named ---------------------------------------------------------------------
def test_a_per_layer_sync_stall_is_named_with_its_count_and_host_time(build: Build, tmp_path: Path) -> None:
    r = run(build, ps.layer_sync_stalls)
    st = r.ok("host_patterns").data["layer_syncs"]
    assert st["count"] == 4 * 32
    (g,) = st["groups"]
    assert (g["unit"], g["layers"], g["bytes"], g["sync_api"]) == ("layer_N", 32, 8, "cudaStreamSynchronize")
    # per layer the host is blocked from the copy call to the synchronize's return: the four
    # GEMMs' 2.4 ms less the host's 20 us ahead of them, plus the copy and the wake-up
    per = g["host_blocked_ns"] / g["count"]
    assert 2_380 * US <= per <= 2_420 * US
    f = finding(r, "NLE217")
    assert f.severity in (Severity.MEDIUM, Severity.HIGH) and f.cause == "sync"
    assert ("a 8 B host-to-device copy from pageable memory, then cudaStreamSynchronize in `layer_N` "
            "(32 layers), 32 per step: 128 stalls, the host blocked") in " ".join(f.evidence)
    assert f"({fmt.dur(g['host_blocked_ns'] // 128)} each)" in " ".join(f.evidence)
    assert "non_blocking=True" in f.recommendation[0]
    # one cause, one finding: the copies are not synchronous copies too, nor the syncs NLE103's
    assert not [x for x in r.findings if x.rule_id in ("NLE305", "NLE103") and x.impact_ns]
    # the idle time after each stall until the next layer's launch is the stall's, not NLE210's
    assert not [x for x in r.findings if x.rule_id == "NLE210" and x.severity.rank <= Severity.MEDIUM.rank]
    md = (r.write(tmp_path / "out", formats="md") / "report.md").read_text(encoding="utf-8")
    assert (f"| layer\\_N | 32 | 8 | cudaStreamSynchronize | 128 | {fmt.dur(g['host_blocked_ns'])} |"
            in md.splitlines())
