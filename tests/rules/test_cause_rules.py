"""The cause findings (NLE103, NLE208-NLE215, NLE307) and the NLE2xx notes: each fires on data
that should trigger it and stays quiet otherwise; impact and severity follow the bands."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from nsys_llm_explainer.diagnosis import accounting
from nsys_llm_explainer.model import Severity
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.rules import RETIRED, RULES, RuleInput
from nsys_llm_explainer.rules.impact import band
from tests.rule_inputs import SCHEMA, WINDOW, device_metrics, fire, outcomes

MY_RULES = {r.id: r for r in RULES if r.id.startswith("NLE2") or r.id in ("NLE103", "NLE307")}


def stats(**over: int) -> dict[str, int]:
    base = {f"{m}_{s}_ns": 0 for m in ("api", "queue", "latency") for s in ("p50", "p90", "p99", "max", "total")}
    return base | over


LAUNCH = {
    "kernels": 1_000, "kernels_with_launch": 1_000, "kernels_without_launch": 0,
    "kernels_without_launch_pct": 0.0, "launch_calls": 1_000, "skew_clamped": 0,
    "processes": [{"pid": 7, "launch_calls": 1_000, "kernel_ns": 10_000_000, **stats(api_p50_ns=4_000)}],
}
STEPS = {
    "method": "nvtx_step_range", "confidence": "high", "detail": "x",
    "phases": [{"phase": "decode", "steps": 20, "outliers": 0, "p50_ns": 1_000, "max_ns": 1_500}],
    "outliers": [],
}
OUTLIER = {
    "step": 3, "phase": "decode", "latency_ns": 101_000, "ratio_to_median": 101.0, "gap_ns": 3_000,
    "gap_cause": "host_other", "kernel_name": "k", "kernel_ns": 100, "kernel_median_ns": 90,
    "host_call": None, "host_call_ns": 0, "reason": "slow_kernel",
}
PATTERNS = {
    "readback_bytes": 1024,
    "scalar_readbacks": {"count": 0, "d2h": 0, "h2d": 0, "followed_by_sync": 0, "idle_ns": 0, "devices": [],
                         "ranges": []},
    "sync_per_launch": {"found": False, "syncs": 0, "launches": 0, "threads": 0, "idle_ns": 0, "devices": [],
                        "pids": []},
}
QUIET_BUCKETS = {0: {c: 5_000 for c in ("transfer", "communication", "sync_wait", "launch_bound",
                                         "capture_edge", "host_other")}}


def quiet_inputs() -> dict[str, Any]:
    """0.5% of the window per cause: below the low band, so no cause finding."""
    return copy.deepcopy({**device_metrics(QUIET_BUCKETS), "launch_overhead": LAUNCH, "steps": STEPS,
                          "host_patterns": PATTERNS})


def with_buckets(**ns: int) -> dict[str, Any]:
    return {**quiet_inputs(), **device_metrics({0: ns})}


def with_change(path: str, value: Any) -> dict[str, Any]:
    data = quiet_inputs()
    node: Any = data
    keys = path.split(".")
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node[k]
    node[keys[-1]] = value
    return data


def readbacks(idle: int) -> dict[str, Any]:
    return {"count": 40, "d2h": 40, "h2d": 0, "followed_by_sync": 40, "idle_ns": idle,
            "devices": [{"device_id": 0, "idle_ns": idle}], "pids": [7],
            "ranges": [{"range": "aten::_local_scalar_dense", "count": 40}]}


def layer_syncs(idle: int, after: int = 0, count: int = 64) -> dict[str, Any]:
    """`count` stalls in `layer_N` (32 layers, 2 steps), 2 ms of host time each."""
    return {"count": count, "host_blocked_ns": count * 2_000_000, "idle_ns": idle, "idle_after_ns": after,
            "busy_ns": 0,
            "devices": [{"device_id": 0, "idle_ns": idle, "after_ns": after, "after_by_cause": {"host_other": after}}],
            "groups": [{"unit": "layer_N", "bytes": 8, "sync_api": "cudaStreamSynchronize", "count": count,
                        "layers": 32, "host_blocked_ns": count * 2_000_000, "sync_ns": count * 1_900_000,
                        "busy_ns": 0, "idle_during_ns": idle, "idle_after_ns": after}],
            "per_step": {"steps": 2, "with_readbacks": 2, "median": count / 2, "max": count // 2}}


def per_launch(idle: int) -> dict[str, Any]:
    return {"found": True, "syncs": 1_000, "launches": 1_000, "threads": 1,
            "apis": [{"api": "cudaDeviceSynchronize", "calls": 1_000}], "idle_ns": idle,
            "devices": [{"device_id": 0, "idle_ns": idle}], "pids": [7]}


STARTUP = {
    "startup_pct_of_window": 40.0, "steady_state": False, "steady_start_ns": None,
    "checks": [{"id": "too_little_data", "found": False, "summary": "enough", "time_ns": 0, "pct_of_window": 0.0},
               {"id": "jit_compile", "found": True, "summary": "1 compile-named ranges", "time_ns": 400_000,
                "pct_of_window": 40.0, "compilers": []}],
}

TRIGGERS = {
    "NLE103": with_buckets(sync_wait=300_000),
    "NLE202": with_change("launch_overhead.kernels_without_launch_pct", 12.0),
    "NLE203": with_change("launch_overhead.skew_clamped", 3),
    "NLE208": with_buckets(transfer=300_000),
    "NLE209": with_buckets(launch_bound=300_000),
    "NLE210": with_buckets(host_other=300_000),
    "NLE211": with_buckets(capture_edge=300_000),
    "NLE212": quiet_inputs() | {"steps": STEPS | {"phases": [STEPS["phases"][0] | {"outliers": 1}],
                                                 "outliers": [OUTLIER]}},
    "NLE213": with_change("steps.confidence", "low"),
    "NLE214": with_change("host_patterns.scalar_readbacks", readbacks(60_000)),
    "NLE215": with_change("host_patterns.sync_per_launch", per_launch(60_000)),
    "NLE216": with_buckets(host_other=400_000) | {"capture": STARTUP},
    "NLE217": with_change("host_patterns.layer_syncs", layer_syncs(60_000)),
    "NLE307": with_buckets(communication=100_000, exposed=200_000),
}


def test_every_rule_here_has_a_trigger_case() -> None:
    assert set(MY_RULES) == set(TRIGGERS)
    assert not set(RETIRED) & {r.id for r in RULES}


@pytest.mark.parametrize("rule_id", sorted(TRIGGERS))
def test_rule_fires_and_stays_quiet(rule_id: str) -> None:
    assert fire(rule_id, quiet_inputs()) == []
    (f,) = fire(rule_id, TRIGGERS[rule_id])
    assert f.rule_id == rule_id and f.evidence and f.recommendation
    # plain evidence; NLE217 quotes the range its stalls repeat in as code, as read-backs do
    assert not any("`" in e for e in f.evidence) or rule_id == "NLE217"
    assert "Example:" in MY_RULES[rule_id].doc


@pytest.mark.parametrize("rule_id, ns, severity", [
    ("NLE208", 250_000, Severity.HIGH), ("NLE208", 249_999, Severity.MEDIUM),
    ("NLE103", 50_000, Severity.MEDIUM), ("NLE103", 49_999, Severity.LOW),
    ("NLE210", 10_000, Severity.LOW), ("NLE209", 9_999, None),
])
def test_severity_is_the_impact_band(rule_id: str, ns: int, severity: Severity | None) -> None:
    bucket = {"NLE208": "transfer", "NLE103": "sync_wait", "NLE210": "host_other", "NLE209": "launch_bound"}
    found = fire(rule_id, with_buckets(**{bucket[rule_id]: ns}))
    if severity is None:
        assert found == []
        return
    (f,) = found
    assert (f.severity, f.impact_ns, f.impact_pct) == (severity, ns, round(100.0 * ns / WINDOW, 2))


def test_bands_boundaries() -> None:
    assert [band(p) for p in (25.0, 24.99, 5.0, 4.99, 1.0, 0.99)] == [
        Severity.HIGH, Severity.MEDIUM, Severity.MEDIUM, Severity.LOW, Severity.LOW, None]


def test_one_finding_per_cause_lists_every_device() -> None:
    # 30% and 10% of two 1 ms windows: the time at stake is the largest single device's, 300,000
    # ns, 30% of its window -> high, never the 400,000 ns sum; each device in `affected`, the
    # largest first.
    data = {**quiet_inputs(), **device_metrics({0: {"sync_wait": 100_000}, 1: {"sync_wait": 300_000}})}
    (f,) = fire("NLE103", data)
    assert (f.impact_ns, f.impact_pct, f.severity) == (300_000, 30.0, Severity.HIGH)
    assert [(a.device_id, a.impact_ns, a.impact_pct, a.pids) for a in f.affected] == [
        (1, 300_000, 30.0, (7,)), (0, 100_000, 10.0, (7,))]


def test_sync_sources_are_not_counted_twice() -> None:
    # 300 us of sync_wait, 60 us of it from read-backs and 100 us from per-launch syncs:
    # NLE103 keeps 140 us (14%, medium); NLE214 6% and NLE215 10% carry the rest.
    data = with_buckets(sync_wait=300_000)
    data["host_patterns"] = PATTERNS | {
        "scalar_readbacks": readbacks(60_000), "sync_per_launch": per_launch(100_000),
        "sync_wait_pieces": pieces((("scalar_readbacks",), "cudaMemcpyAsync", 60_000),
                                   (("sync_per_launch",), "cudaDeviceSynchronize", 100_000),
                                   ((), "cudaStreamSynchronize", 140_000)),
    }
    (general,) = fire("NLE103", data)
    assert (general.impact_ns, general.severity) == (140_000, Severity.MEDIUM)
    assert fire("NLE214", data)[0].impact_ns == 60_000
    assert fire("NLE215", data)[0].impact_ns == 100_000


def pieces(*rows: tuple[tuple[str, ...], str, int]) -> list[dict[str, Any]]:
    return [{"device_id": 0, "sources": list(src), "api": api, "idle_ns": ns} for src, api, ns in rows]


def sync_copies(transfer: int, stall: int) -> dict[str, Any]:
    return {"count": 20, "bytes": 1 << 20, "copy_ns": transfer, "on_launch_threads": 20,
            "apis": [{"api": "cudaMemcpy", "calls": 20}], "idle_ns": transfer + stall,
            "devices": [{"device_id": 0, "transfer_ns": transfer, "stall_ns": stall, "idle_ns": transfer + stall}],
            "pids": [7]}


def test_nle103_subtracts_the_union_of_reported_sources_and_cites_what_it_keeps() -> None:
    # 300 us of sync_wait: read-backs 60 us and per-launch syncs 100 us, 40 us of it shared.
    data = with_buckets(sync_wait=300_000)
    data["host_patterns"] = PATTERNS | {
        "scalar_readbacks": readbacks(60_000), "sync_per_launch": per_launch(100_000),
        "sync_wait_pieces": pieces(
            (("scalar_readbacks", "sync_per_launch"), "cudaStreamSynchronize", 40_000),
            (("scalar_readbacks",), "cudaMemcpyAsync", 20_000),
            (("sync_per_launch",), "cudaDeviceSynchronize", 60_000),
            ((), "cudaStreamSynchronize", 150_000),
            ((), "cudaMemcpy", 30_000),
        ),
    }
    (f,) = fire("NLE103", data)
    assert (f.impact_ns, f.severity) == (300_000 - 120_000, Severity.MEDIUM)
    assert "counted here, inside the calls (and the launch right after them): cudaStreamSynchronize 150 µs, " \
           "cudaMemcpy 30.0 µs" in f.evidence
    assert "not counted here: 120 µs explained by NLE214/NLE215" in f.evidence
    # With NLE214 ignored its read-backs are no finding: only the per-launch syncs' 100 us go.
    metrics = outcomes(data)
    view = RuleInput(metrics, Options(ignore=("NLE214",)), SCHEMA, accounting.build(metrics))
    rule = next(r for r in RULES if r.id == "NLE103")
    (g,) = rule.check(view, rule)
    assert g.impact_ns == 200_000
    assert any(e.endswith("cudaStreamSynchronize 150 µs, cudaMemcpy 30.0 µs, cudaMemcpyAsync 20.0 µs")
               for e in g.evidence)


def test_synchronous_copies_are_one_finding() -> None:
    # 300 us of transfer and 100 us of sync_wait; synchronous copies cover 120 us of the transfer
    # time and stall 80 us: NLE305 20%, NLE208 keeps 180 us, NLE103 keeps 20 us.
    data = with_buckets(transfer=300_000, sync_wait=100_000)
    data["host_patterns"] = PATTERNS | {
        "sync_copies": sync_copies(120_000, 80_000),
        "sync_wait_pieces": pieces((("sync_copies",), "cudaMemcpy", 80_000), ((), "cudaStreamSynchronize", 20_000)),
    }
    (copies,) = fire("NLE305", data)
    assert (copies.impact_ns, copies.severity, copies.cause) == (200_000, Severity.MEDIUM, "transfer")
    assert fire("NLE208", data)[0].impact_ns == 180_000
    assert fire("NLE103", data)[0].impact_ns == 20_000


@pytest.mark.parametrize("direction, words", [
    ("host_to_device", "from pinned memory on a separate stream"),
    ("device_to_host", "Copy results back asynchronously"),
    ("peer", "cudaDeviceEnablePeerAccess"),
])
def test_copy_advice_follows_the_copy_direction(direction: str, words: str) -> None:
    data = with_buckets(transfer=300_000)
    data["idle_causes"]["devices"][0]["transfers"] = [
        {"kind": "k", "direction": direction, "count": 3, "bytes": 30, "copy_ns": 300_000, "idle_ns": 300_000}]
    (f,) = fire("NLE208", data, workload="generic_cuda")
    assert words in " ".join(f.recommendation)


def test_capture_edge_is_a_note() -> None:
    (f,) = fire("NLE211", TRIGGERS["NLE211"])
    assert f.severity is Severity.INFO and f.impact_ns is None


def test_slow_steps_with_a_reported_cause_are_a_note() -> None:
    # The slow step's gap is host_other, which has its own finding (30%): NLE212 is a note.
    data = with_buckets(host_other=300_000) | {"steps": copy.deepcopy(TRIGGERS["NLE212"]["steps"])}
    data["steps"]["outliers"] = [OUTLIER | {"reason": "idle_gap"}]
    (f,) = fire("NLE212", data)
    assert (f.severity, f.impact_ns) == (Severity.INFO, None)
    assert "host time (100 µs beyond the median), at stake in that cause's own finding" in f.evidence[-1]
    (g,) = fire("NLE212", TRIGGERS["NLE212"])  # slow kernel: 100 us beyond the median of 1 us
    assert (g.impact_ns, g.severity) == (100_000, Severity.MEDIUM)


@pytest.mark.parametrize("workload, word", [
    ("llm_inference", "decode loop"), ("generic_cuda", "cudaDeviceSynchronize"), ("pytorch_training", ".item()"),
])
def test_advice_fits_the_workload(workload: str, word: str) -> None:
    (f,) = fire("NLE103", TRIGGERS["NLE103"], workload=workload)
    text = " ".join(f.recommendation)
    assert word in text
    if workload != "llm_inference":
        assert "decode" not in text and "token" not in text


def test_rules_quiet_when_metrics_are_skipped() -> None:
    skipped = {m: "not measured" for m in quiet_inputs()}
    for rule_id in MY_RULES:
        if rule_id != "NLE213":
            assert fire(rule_id, {}, skipped=skipped) == []


def test_steps_not_found_fires_on_the_skip_reason() -> None:
    found = fire("NLE213", {}, skipped={"steps": "no steps found: nothing repeats"})
    assert len(found) == 1 and found[0].title == "Steps were not identified"


def test_start_up_is_one_finding_and_the_causes_keep_only_the_steady_part() -> None:
    # 40% of the window is host work during start-up and no steady part follows: NLE216 holds
    # all of the idle time, and NLE210 (host work) reports nothing that start-up already holds.
    data = with_buckets(host_other=400_000) | {"capture": STARTUP}
    (f,) = fire("NLE216", data)
    assert (f.impact_ns, f.cause, f.severity) == (400_000, "startup", Severity.HIGH)
    assert f.recommendation[0].startswith("Capture a short steady window after the warm-up")
    assert fire("NLE210", data) == []
    assert fire("NLE216", with_buckets(host_other=400_000)) == []  # a steady capture: no start-up finding
