"""A triggering and a non-triggering trace for each core rule (NLE101-NLE108), run through
api.explain end to end. Numbers are chosen so each case sits clearly on one side of the
rule's named threshold; the comments give the arithmetic."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from nsys_llm_explainer.api import explain
from nsys_llm_explainer.model import Finding, Report
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.phases import PhaseMap
from tests.fixtures import variants
from tests.fixtures.builder import TraceBuilder

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


def shares_trace(durations: list[int]) -> TraceBuilder:
    """One kernel name per duration, back to back with 1 us between kernels."""
    b = TraceBuilder("2024.6")
    b.process(100)
    t = 10_000
    spans = []
    for d in durations:
        spans.append((t, t + d))
        t += d + 1_000
    launched(b, spans, [f"kernel_{i}" for i in range(len(durations))])
    return b


# ---- NLE101 dominant kernel ------------------------------------------------------------


def test_nle101_fires_high_at_60_percent(build: Build) -> None:
    report = explain(build(shares_trace([60_000, 20_000, 20_000])))  # 60% >= 50%
    (f,) = found(report, "NLE101")
    assert f.severity.value == "high" and "60.0%" in f.title


def test_nle101_fires_medium_at_30_percent(build: Build) -> None:
    report = explain(build(shares_trace([30_000, 25_000, 25_000, 20_000])))  # 30% in [25, 50)
    assert [f.severity.value for f in found(report, "NLE101")] == ["medium"]


def test_nle101_quiet_when_time_is_spread(build: Build) -> None:
    report = explain(build(shares_trace([20_000] * 5)))  # 20% each < 25%
    assert not found(report, "NLE101")


def devices_trace(per_device: dict[int, list[tuple[str, int]]]) -> TraceBuilder:
    """Kernels (name, duration) back to back on each device, all launched by pid 100."""
    b = TraceBuilder("2024.6")
    b.process(100)
    corr = 1
    for device, kernels in per_device.items():
        t = 10_000
        spans, names = [], []
        for name, d in kernels:
            spans.append((t, t + d))
            names.append(name)
            t += d + 1_000
        launched(b, spans, names, device=device, corr0=corr)
        corr += len(kernels)
    return b


def test_nle101_divides_by_its_own_device(build: Build) -> None:
    # Eight GPUs. gemm holds 60% of devices 0, 1, 3..7 and 70% of device 2, but only
    # (7 * 60 + 70) / 800 = 61.25 / 8 ~ 7.7% of all devices' kernel time together: the share
    # of all devices could never reach 25%; per device it is high.
    per_device = {
        d: [("gemm", 70_000 if d == 2 else 60_000), ("norm", 30_000 if d == 2 else 40_000)]
        for d in range(8)
    }
    report = explain(build(devices_trace(per_device)))
    (f,) = found(report, "NLE101")
    assert f.severity.value == "high"
    assert f.title == "One kernel takes 70.0% of GPU kernel time on device 2"
    assert f.evidence[0] == "gemm on device 2: 70.0% of device 2's 0.100 ms kernel time"
    assert f.evidence[2] == "the same kernel takes >= 25% on devices 0, 1, 3, 4, 5, 6, 7"


def test_nle101_medium_per_device_and_no_other_devices_line(build: Build) -> None:
    # Device 0: a 40% kernel (medium); device 1: time spread over five names (20% each).
    per_device = {
        0: [("attn", 40_000), ("a", 30_000), ("b", 30_000)],
        1: [(f"k{i}", 20_000) for i in range(5)],
    }
    (f,) = found(explain(build(devices_trace(per_device))), "NLE101")
    assert f.severity.value == "medium"
    assert f.evidence[0] == "attn on device 0: 40.0% of device 0's 0.100 ms kernel time"
    assert len(f.evidence) == 2


def test_nle101_ignores_a_nearly_idle_device(build: Build) -> None:
    # Device 1 ran one 5 us kernel (100% of its time) but 5 us is under 10% of device 0's
    # 100 us, so it is not judged; device 0's kernels hold 20% each.
    per_device = {0: [(f"k{i}", 20_000) for i in range(5)], 1: [("warmup", 5_000)]}
    assert not found(explain(build(devices_trace(per_device))), "NLE101")
    # At 10 us (exactly 10% of device 0) it is judged.
    per_device[1] = [("warmup", 10_000)]
    (f,) = found(explain(build(devices_trace(per_device))), "NLE101")
    assert f.title == "One kernel takes 100.0% of GPU kernel time on device 1"


# ---- NLE102 launch storm ---------------------------------------------------------------


def storm_trace(period_ns: int, dur_ns: int = 2_000, n: int = 200) -> TraceBuilder:
    b = TraceBuilder("2024.6")
    b.process(100)
    launched(b, [(10_000 + i * period_ns, 10_000 + i * period_ns + dur_ns) for i in range(n)])
    return b


def test_nle102_fires_on_storm(build: Build) -> None:
    # 200 kernels of 2 us every 5 us: window 199*5,000+2,000 ns -> ~200,600/s, p50 2 us.
    (f,) = found(explain(build(storm_trace(5_000))), "NLE102")
    assert f.severity.value == "high"


def test_nle102_quiet_at_low_rate(build: Build) -> None:
    # Same kernels every 1 ms: ~1,000 launches/s.
    assert not found(explain(build(storm_trace(1_000_000))), "NLE102")


def test_nle102_quiet_for_long_kernels(build: Build) -> None:
    # 30 us kernels back to back: ~33,000/s with p50 30 us, under both rate thresholds.
    assert not found(explain(build(storm_trace(30_100, dur_ns=30_000))), "NLE102")


# ---- NLE103 blocking sync --------------------------------------------------------------


def sync_trace(sync_ns: int, calls: int = 2) -> TraceBuilder:
    """A 100 us API window (0 .. 100,000) with `calls` blocking syncs of sync_ns each."""
    b = TraceBuilder("2024.6")
    b.process(100)
    b.runtime(0, 100, corr=1)
    b.kernel(200, 1_200, corr=1)
    for i in range(calls):
        b.runtime(
            10_000 + i * 40_000,
            10_000 + i * 40_000 + sync_ns,
            corr=10 + i,
            name="cudaStreamSynchronize_v3020",
        )
    b.runtime(99_900, 100_000, corr=99, name="cudaEventQuery_v3020")
    return b


def test_nle103_fires_high(build: Build) -> None:
    (f,) = found(explain(build(sync_trace(20_000))), "NLE103")  # 40,000 / 100,000 = 40% >= 30%
    assert f.severity.value == "high"


def test_nle103_fires_medium(build: Build) -> None:
    (f,) = found(explain(build(sync_trace(7_500))), "NLE103")  # 15% in [10, 30)
    assert f.severity.value == "medium"


def test_nle103_quiet_below_threshold_or_single_call(build: Build) -> None:
    assert not found(explain(build(sync_trace(2_000))), "NLE103")  # 4% < 10%
    assert not found(explain(build(sync_trace(50_000, calls=1))), "NLE103")  # one call < MIN_CALLS


# ---- NLE104 GPU idle -------------------------------------------------------------------


def idle_trace(gap_ns: int, copy: bool = False) -> TraceBuilder:
    """Two 10 us kernels on device 0 separated by gap_ns; optionally a copy over the gap."""
    b = TraceBuilder("2024.6")
    b.process(100)
    launched(b, [(10_000, 20_000), (20_000 + gap_ns, 30_000 + gap_ns)])
    if copy:
        b.memcpy(20_000, 20_000 + gap_ns, bytes=1 << 30, copy_kind=1, device=0)
    return b


def test_nle104_fires_high(build: Build) -> None:
    (f,) = found(explain(build(idle_trace(80_000))), "NLE104")  # 80,000 / 100,000 = 80% >= 40%
    assert f.severity.value == "high" and "GPU 0" in f.title


def test_nle104_copies_lower_severity(build: Build) -> None:
    (f,) = found(explain(build(idle_trace(80_000, copy=True))), "NLE104")  # copies cover 100%
    assert f.severity.value == "medium"
    assert any("data transfer" in e for e in f.evidence)


def test_nle104_quiet_when_busy(build: Build) -> None:
    assert not found(explain(build(idle_trace(2_000))), "NLE104")  # 2,000 / 22,000 = 9% < 20%


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


def test_nle106_fires_medium_below_0_3(build: Build) -> None:
    (f,) = found(explain(build(coverage_trace(1, 9))), "NLE106")  # coverage 0.1 < 0.3
    assert f.severity.value == "medium"


def test_nle106_fires_low_below_threshold(build: Build) -> None:
    (f,) = found(explain(build(coverage_trace(5, 5))), "NLE106")  # 0.5 in [0.3, 0.7)
    assert f.severity.value == "low"


def test_nle106_respects_threshold_option(build: Build) -> None:
    trace = build(coverage_trace(5, 5))
    assert not found(explain(trace, Options(nvtx_coverage_warn_threshold=0.4)), "NLE106")


def test_nle106_quiet_when_covered(build: Build) -> None:
    assert not found(explain(build(coverage_trace(10, 0))), "NLE106")  # coverage 1.0


# ---- NLE107 no kernels / NLE108 no NVTX ------------------------------------------------


def test_nle107_fires_without_kernels(tmp_path: Path) -> None:
    report = explain(variants.no_kernels(tmp_path / "t.sqlite"))
    (f,) = found(report, "NLE107")
    assert f.severity.value == "high"
    assert any("nsys profile" in r for r in f.recommendation)
    assert not found(report, "NLE108"), "no NVTX advice when there is nothing to attribute"


def test_nle107_quiet_with_kernels(tmp_path: Path) -> None:
    assert not found(explain(variants.no_nvtx(tmp_path / "t.sqlite")), "NLE107")


def test_nle108_fires_without_nvtx(tmp_path: Path) -> None:
    (f,) = found(explain(variants.no_nvtx(tmp_path / "t.sqlite")), "NLE108")
    assert f.severity.value == "low"


def test_nle108_quiet_with_ranges(build: Build) -> None:
    assert not found(explain(build(coverage_trace(3, 0))), "NLE108")


# ---- --select / --ignore ---------------------------------------------------------------


def test_select_and_ignore_filter_rule_ids(build: Build) -> None:
    trace = build(idle_trace(80_000))
    assert {f.rule_id for f in explain(trace, Options(select=("NLE104",))).findings} == {"NLE104"}
    assert not found(explain(trace, Options(ignore=("NLE10",))), "NLE104")
