"""A triggering and a non-triggering trace for the core rules NLE101 and NLE105-NLE108, run through
api.explain end to end. Numbers are chosen so each case sits clearly on one side of the
rule's named threshold; the comments give the arithmetic."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from nsys_llm_explainer.api import explain
from nsys_llm_explainer.model import Finding, Report
from nsys_llm_explainer.options import Options, PhaseMap
from tests.fixtures import variants
from tests.fixtures.builder import TraceBuilder
from tests.typed_results import result

Build = Callable[[TraceBuilder], Path]


def found(report: Report, rule_id: str) -> list[Finding]:
    return [f for f in report.findings if f.rule_id == rule_id]


def launched(
    b: TraceBuilder,
    spans: list[tuple[int, int]],
    names: list[str] | None = None,
    pid: int = 100,
    device: int = 0,
    corr0: int = 1,
) -> None:
    """One launch call 500 ns before each kernel; kernels get the given (start, end)."""
    for i, (s, e) in enumerate(spans):
        b.runtime(s - 500, s - 400, pid=pid, corr=corr0 + i)
        b.kernel(
            s, e, pid=pid, device=device, corr=corr0 + i, name=(names or ["k"] * len(spans))[i]
        )


def shares_trace(durations: list[int], reps: int = 40, pause: int = 1_000) -> TraceBuilder:
    """One kernel name per duration, 1 us apart, the pattern repeated `reps` times with `pause`
    ns after each repetition (enough kernels and kernel time to be judged)."""
    b = TraceBuilder("2024.6")
    b.process(100)
    t = 10_000
    spans, names = [], []
    for _ in range(reps):
        for i, d in enumerate(durations):
            spans.append((t, t + d))
            names.append(f"kernel_{i}")
            t += d + 1_000
        t += pause - 1_000
    launched(b, spans, names)
    return b


# ---- NLE101 dominant kernel ------------------------------------------------------------


def test_nle101_points_at_a_kernel_with_60_percent(build: Build) -> None:
    durations = [60_000, 20_000, 20_000]  # 60% of GPU 0's kernel time >= 25%
    report = explain(build(shares_trace(durations)))
    (f,) = found(report, "NLE101")
    assert "60.0%" in f.title and "GPU 0" in f.title
    # Its run time is the work, not time at stake: without a roof it is a pointer.
    assert (f.severity.value, f.impact_ns, f.affected) == ("info", None, ())
    assert f.evidence[0].endswith("60.0% of GPU 0's 4.00 ms of kernel time")
    assert any("roof is not known" in e for e in f.evidence)


def test_nle101_share_is_per_device(build: Build) -> None:
    # Device 1 runs 3x the kernel time of device 0; device 0's top kernel still takes 60% of it.
    b = shares_trace([60_000, 20_000, 20_000])
    launched(b, [(10_000 + i * 30_000, 10_000 + i * 30_000 + 29_000) for i in range(400)],
             [f"other_{i % 8}" for i in range(400)], pid=200, device=1, corr0=10_000)
    (f,) = found(explain(build(b)), "NLE101")
    assert "GPU 0" in f.title and not any("GPU 1" in e for e in f.evidence)


def devices_trace(per_device: dict[int, list[tuple[str, int]]], reps: int = 20) -> TraceBuilder:
    """Kernels (name, duration) back to back on each device, repeated, all launched by pid 100."""
    b = TraceBuilder("2024.6")
    b.process(100)
    corr = 1
    for device, kernels in per_device.items():
        t = 10_000
        spans, names = [], []
        for _ in range(reps):
            for name, d in kernels:
                spans.append((t, t + d))
                names.append(name)
                t += d + 1_000
        launched(b, spans, names, device=device, corr0=corr)
        corr += len(spans)
    return b


def test_nle101_divides_by_its_own_device(build: Build) -> None:
    # Eight GPUs. gemm holds 60% of devices 0, 1, 3..7 and 70% of device 2, but only about 7.7%
    # of all devices' kernel time together: the share of all devices could never reach 25%.
    per_device = {
        d: [("gemm", 70_000 if d == 2 else 60_000), ("norm", 30_000 if d == 2 else 40_000)]
        for d in range(8)
    }
    (f,) = found(explain(build(devices_trace(per_device))), "NLE101")
    assert f.title == "One kernel takes up to 70.0% of the kernel time of 8 GPUs (GPU 2: 70.0%)"
    assert sum(e.split(":")[0] == "gemm" for e in f.evidence) == 8  # one line per GPU
    assert f.severity.value == "info"


def test_nle101_skips_a_nearly_idle_device(build: Build) -> None:
    # Device 1 ran one warm-up kernel (100% of its own kernel time, under 10% of device 0's).
    per_device = {0: [(f"k{i}", 20_000) for i in range(5)], 1: [("warmup", 5_000)]}
    b = devices_trace(per_device)
    assert not found(explain(build(b)), "NLE101")


def test_nle101_quiet_when_time_is_spread(build: Build) -> None:
    report = explain(build(shares_trace([20_000] * 5)))  # 20% each < 25%
    assert not found(report, "NLE101")


# ---- NLE105 phase dominates ------------------------------------------------------------


def phase_trace(decode_ns: int, prefill_ns: int) -> TraceBuilder:
    """A prefill range then a decode range, each holding one kernel of the given length."""
    b = TraceBuilder("2024.6")
    b.process(100)
    b.nvtx(1_000, 3_000, text="prefill")
    b.nvtx(5_000, 7_000, text="decode")
    b.runtime(2_000, 2_100, corr=1)
    b.kernel(10_000, 10_000 + prefill_ns, corr=1, name="prefill_gemm")
    b.runtime(6_000, 6_100, corr=2)
    b.kernel(200_000, 200_000 + decode_ns, corr=2, name="decode_gemm")
    return b


PHASES = Options(phase_map=PhaseMap((("prefill", "prefill"), ("decode", "decode"))))


@pytest.mark.parametrize("options", [Options(), PHASES], ids=["top-level-ranges", "phase-map"])
def test_nle105_fires_when_one_phase_dominates(build: Build, options: Options) -> None:
    (f,) = found(explain(build(phase_trace(90_000, 10_000)), options), "NLE105")  # 90% >= 80%
    assert "decode" in f.title and "90.0%" in f.title


def test_nle105_quiet_when_balanced(build: Build) -> None:
    assert not found(explain(build(phase_trace(50_000, 50_000)), PHASES), "NLE105")  # 50%


# ---- NLE106 low NVTX coverage ----------------------------------------------------------


def coverage_trace(inside: int, outside: int) -> TraceBuilder:
    """`inside` 1 us kernels launched within a range, `outside` launched after it."""
    b = TraceBuilder("2024.6")
    b.process(100)
    b.nvtx(0, 1_000_000, text="step")
    spans = [(10_000 + i * 10_000, 11_000 + i * 10_000) for i in range(inside)]
    spans += [(2_000_000 + i * 10_000, 2_001_000 + i * 10_000) for i in range(outside)]
    launched(b, spans)
    return b


def test_nle106_fires_below_0_3(build: Build) -> None:
    (f,) = found(explain(build(coverage_trace(1, 9))), "NLE106")  # coverage 0.1 < 0.3
    assert f.severity.value == "info" and f.impact_ns is None  # a note: no GPU time at stake


def test_nle106_fires_below_threshold(build: Build) -> None:
    (f,) = found(explain(build(coverage_trace(5, 5))), "NLE106")  # 0.5 in [0.3, 0.7)
    assert f.severity.value == "info"


def test_nle106_respects_threshold_option(build: Build) -> None:
    trace = build(coverage_trace(5, 5))
    assert not found(explain(trace, Options(nvtx_coverage_warn_threshold=0.4)), "NLE106")


def test_nle106_quiet_when_covered(build: Build) -> None:
    assert not found(explain(build(coverage_trace(10, 0))), "NLE106")  # coverage 1.0


# ---- NLE107 no kernels / NLE108 no NVTX ------------------------------------------------


def test_nle107_fires_without_kernels(tmp_path: Path) -> None:
    report = explain(variants.no_kernels(tmp_path / "t.sqlite"))
    (f,) = found(report, "NLE107")
    assert f.severity.value == "info"
    assert any("nsys profile" in r for r in f.recommendation)
    assert not found(report, "NLE108"), "no NVTX advice when there is nothing to attribute"


def test_nle107_quiet_with_kernels(tmp_path: Path) -> None:
    assert not found(explain(variants.no_nvtx(tmp_path / "t.sqlite")), "NLE107")


def test_nle108_fires_without_nvtx(tmp_path: Path) -> None:
    (f,) = found(explain(variants.no_nvtx(tmp_path / "t.sqlite")), "NLE108")
    assert f.severity.value == "info"


def test_nle108_quiet_with_ranges(build: Build) -> None:
    assert not found(explain(build(coverage_trace(3, 0))), "NLE108")


# ---- --select / --ignore ---------------------------------------------------------------


def test_select_and_ignore_filter_rule_ids(build: Build) -> None:
    trace = build(coverage_trace(1, 9))
    assert {f.rule_id for f in explain(trace, Options(select=("NLE106",))).findings} == {"NLE106"}
    assert not found(explain(trace, Options(ignore=("NLE10",))), "NLE106")


def test_findings_rank_by_severity_band_then_estimated_gain() -> None:
    """A medium cause the replay gives no gain (a wait on other ranks it cannot model) stays
    above a low one with a small estimated gain; within a band the estimated gain decides,
    the time at stake where there is none; notes come last."""
    from nsys_llm_explainer.model import Confidence, Severity
    from nsys_llm_explainer.rules.engine import order

    def f(rule: str, sev: Severity, impact: int | None, gain: int | None) -> Finding:
        return Finding(rule_id=rule, title=rule, severity=sev, confidence=Confidence.HIGH,
                       evidence=(), recommendation=(), impact_ns=impact, estimated_gain_ns=gain)

    findings = [
        f("NLE108", Severity.INFO, None, None),
        f("NLE208", Severity.LOW, 17_900_000, 197_000),
        f("NLE210", Severity.LOW, 12_000_000, None),
        f("NLE307", Severity.MEDIUM, 272_881_000, 0),
        f("NLE214", Severity.MEDIUM, 80_000_000, 60_000_000),
        f("NLE209", Severity.MEDIUM, 90_000_000, 10_000_000),
    ]
    ranked = [x.rule_id for x in sorted(findings, key=order)]
    assert ranked == ["NLE214", "NLE209", "NLE307", "NLE210", "NLE208", "NLE108"]


def _wi_row(change: str, gain: int, changed: int) -> dict[str, object]:
    return {"change": change, "gain_window_ns": gain, "gain_step_ns": gain // 4, "changed_nodes": changed}


def _finding(rule: str, impact: int) -> Finding:
    from nsys_llm_explainer.model import Confidence, Severity

    return Finding(rule_id=rule, title=rule, severity=Severity.MEDIUM, confidence=Confidence.HIGH,
                   evidence=("e",), recommendation=(), impact_ns=impact)


def test_gain_is_estimated_only_where_the_replay_can_tell() -> None:
    """A change that touches no node of the graph, or a critical path held mostly by waits the
    replay keeps as measured, gives no estimate (None, with the reason in the evidence), never a
    confident 0; otherwise the gain is the replay's, capped at the time at stake."""
    from nsys_llm_explainer.rules import impact

    rows = [_wi_row("communication", 0, 0), _wi_row("copies", 8_000_000, 40), _wi_row("host", 3_000_000, 9)]
    cp = {"composition": [{"kind": "host", "pct": 30.0}, {"kind": "unexplained", "pct": 49.0}],
          "trust": {"kept_pct": 49.0}}
    metrics = {"what_if": result("what_if", {"rows": rows}), "critical_path": result("critical_path", cp)}
    out = {f.rule_id: f for f in impact.attach(
        [_finding("NLE307", 50_000_000), _finding("NLE208", 5_000_000), _finding("NLE210", 9_000_000)], metrics)}
    assert out["NLE307"].estimated_gain_ns is None
    assert "touches nothing" in out["NLE307"].evidence[-1]
    assert (out["NLE208"].estimated_gain_ns, out["NLE208"].estimated_gain_step_ns) == (5_000_000, 1_250_000)
    assert (out["NLE210"].estimated_gain_ns, out["NLE210"].estimated_gain_step_ns) == (3_000_000, 750_000)

    cp["trust"]["kept_pct"] = 51.0
    metrics["critical_path"] = result("critical_path", cp)
    out = {f.rule_id: f for f in impact.attach([_finding("NLE208", 5_000_000)], metrics)}
    assert out["NLE208"].estimated_gain_ns is None
    assert out["NLE208"].evidence[-1].startswith("estimated gain not given: 51% of the replayed steps'")


def test_no_gain_per_step_without_steps() -> None:
    """With no steps the replay runs whole processes: the gain over the capture stands, a gain
    "per step" is not given."""
    from nsys_llm_explainer.rules import impact

    metrics = {"what_if": result("what_if", {"rows": [_wi_row("copies", 8_000_000, 40)]}),
               "critical_path": result("critical_path", {"step_source": "whole_capture", "composition": []})}
    (f,) = impact.attach([_finding("NLE208", 9_000_000)], metrics)
    assert (f.estimated_gain_ns, f.estimated_gain_step_ns, f.what_if) == (8_000_000, None, "copies")


def test_a_finding_takes_the_gain_of_the_change_that_fixes_it() -> None:
    """Short unfused ops take the fusion row's gain, a straggling rank the slow rank's; a change
    that buys nothing gives 0 with its reason; from half of the path in waits the replay keeps
    as measured (critical_path trust: other ranks, no recorded dependency) on, none."""
    from nsys_llm_explainer.rules import impact

    rows = [_wi_row("fusion", 4_000_000, 30), _wi_row("slow_rank", 0, 12), _wi_row("kernel:gemm=2x", 9, 3)]
    rows[1]["note"] = "no gain: after the change the median step's critical path is 90% host work"
    for r in rows:
        r["source"] = "automatic"
    cp = {"composition": [{"kind": "unexplained", "pct": 10.0}], "trust": {"kept_pct": 49.0}}
    metrics = {"what_if": result("what_if", {"rows": rows}), "critical_path": result("critical_path", cp)}
    out = {f.rule_id: f for f in impact.attach(
        [_finding("NLE302", 3_000_000), _finding("NLE312", 9_000_000), _finding("NLE308", 7_000_000),
         _finding("NLE101", 5_000_000)], metrics)}
    assert (out["NLE302"].estimated_gain_ns, out["NLE302"].what_if) == (3_000_000, "fusion")
    assert (out["NLE312"].estimated_gain_ns, out["NLE312"].estimated_gain_step_ns) == (4_000_000, 1_000_000)
    assert out["NLE308"].estimated_gain_ns == 0
    # a finding about one kernel takes only a kernel row naming it: not fusion's
    assert (out["NLE101"].estimated_gain_ns, out["NLE101"].what_if) == (None, None)
    assert out["NLE308"].evidence[-1] == "estimated gain: " + rows[1]["note"]
    cp["trust"]["kept_pct"] = 50.0  # the composition's unexplained share alone would be 10%
    metrics["critical_path"] = result("critical_path", cp)
    (f,) = impact.attach([_finding("NLE302", 3_000_000)], metrics)
    assert f.estimated_gain_ns is None and f.evidence[-1].startswith("estimated gain not given: 50% of the replayed")
