"""Smoke run of the benchmark generator and runner (seconds), so they keep working.

The generator's recorded totals are checked against a deliberately simple reference
computed straight from the written SQLite file, and the runner's correctness check is
shown to fail when the totals disagree.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import measure, run  # noqa: E402
from benchmarks.synth import SynthConfig, generate, sidecar_path  # noqa: E402
from tests.fixtures.kineto import workload as kineto_workload  # noqa: E402

TINY = SynthConfig(kernels=2_000, processes=2, layers=3, prefill_every=4, seed=3)


def _rows(path: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _union_length(intervals: list[tuple[int, int]]) -> int:
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            total += 0 if cur_e is None else cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (0 if cur_e is None else cur_e - cur_s)


def _reference(path: Path) -> dict:
    kernels = _rows(path, 'SELECT start, "end", deviceId, correlationId, globalPid FROM '
                          "CUPTI_ACTIVITY_KIND_KERNEL")
    calls = _rows(path, 'SELECT start, "end", globalTid, correlationId FROM '
                        "CUPTI_ACTIVITY_KIND_RUNTIME")
    ranges = _rows(path, 'SELECT start, "end", globalTid FROM NVTX_EVENTS WHERE eventType = 59')
    launch = {((gtid >> 24) & 0xFFFFFF, corr): (s, e, gtid) for s, e, gtid, corr in calls}
    by_thread: dict[int, list[tuple[int, int]]] = {}
    for s, e, gtid in ranges:
        by_thread.setdefault(gtid, []).append((s, e))
    devices: dict[int, list[tuple[int, int]]] = {}
    attributed = 0
    for s, e, dev, corr, gpid in kernels:
        devices.setdefault(dev, []).append((s, e))
        call = launch.get(((gpid >> 24) & 0xFFFFFF, corr))
        if call and any(rs <= call[0] and call[1] <= re
                        for rs, re in by_thread.get(call[2], [])):
            attributed += e - s
    return {
        "kernel_ns": sum(e - s for s, e, *_ in kernels),
        "busy_ns": {str(d): _union_length(iv) for d, iv in devices.items()},
        "attributed_ns": attributed,
    }


@pytest.mark.parametrize("graph", [False, True])
def test_generator_totals_match_a_simple_reference(tmp_path: Path, graph: bool) -> None:
    cfg = SynthConfig(**{**TINY.__dict__, "graph": graph})
    path = tmp_path / "t.sqlite"
    expected = generate(cfg, path)
    ref = _reference(path)
    assert expected["kernel_ns"] == ref["kernel_ns"]
    assert expected["busy_ns"] == ref["busy_ns"]
    assert expected["attributed_ns"] == ref["attributed_ns"]
    # Some kernels launch outside every range, and the side stream overlaps the main one.
    assert 0 < expected["attributed_ns"] < expected["kernel_ns"]
    assert sum(expected["busy_ns"].values()) < expected["kernel_ns"]
    assert json.loads(sidecar_path(path).read_text())["kernel_ns"] == ref["kernel_ns"]


def test_generator_shape(tmp_path: Path) -> None:
    path = tmp_path / "g.sqlite"
    generate(SynthConfig(**{**TINY.__dict__, "graph": True}), path)
    # Correlation ids count per process, so they collide across the two processes.
    shared = _rows(path, "SELECT count(*) FROM (SELECT correlationId FROM "
                         "CUPTI_ACTIVITY_KIND_RUNTIME GROUP BY correlationId "
                         "HAVING count(DISTINCT globalTid) > 1)")[0][0]
    assert shared > 0
    graph_kernels = _rows(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL "
                                "WHERE graphNodeId IS NOT NULL")[0][0]
    graph_calls = _rows(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN "
                              "StringIds s ON s.id = r.nameId "
                              "WHERE s.value LIKE 'cudaGraphLaunch%'")[0][0]
    assert graph_calls > 0 and graph_kernels > 10 * graph_calls
    syncs = _rows(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")[0][0]
    copies = _rows(path, "SELECT count(DISTINCT copyKind) FROM CUPTI_ACTIVITY_KIND_MEMCPY")[0][0]
    assert syncs > 0 and copies == 2


def test_runner_small_size_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run.main(["--size", "small", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "correctness (report.json vs generator sidecar): ok" in out
    assert "metric top_kernels" in out and "fetch floor" in out


def test_runner_fails_on_wrong_totals(tmp_path: Path) -> None:
    path = tmp_path / "bench_small.sqlite"
    generate(run.SIZES["small"], path)
    side = sidecar_path(path)
    expected = json.loads(side.read_text())
    expected["attributed_ns"] += 1
    side.write_text(json.dumps(expected))
    # The parameters still match, so the runner reuses the trace and must flag the total.
    assert run.main(["--size", "small", "--out", str(tmp_path), "--no-breakdown"]) == 1
    problems = measure.check_totals(tmp_path / "report_small" / "report.json", expected)
    assert problems and "attributed_ns" in problems[0]


@pytest.mark.slow
def test_shared_mode_reports_time_and_json_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import shared

    folder = tmp_path / "traces"
    (folder / "nsys").mkdir(parents=True)
    (folder / "kineto").mkdir()
    generate(TINY, folder / "nsys" / "tiny.sqlite", sidecar=False)
    kineto_workload.write(folder / "kineto" / "small.json.gz")
    (folder / "kineto" / "notes.txt").write_text("not a trace")
    results = shared.run(repeat=3, folder=folder)
    assert [r["trace"] for r in results] == ["tiny.sqlite", "small.json.gz"]
    r = results[0]
    assert all(x["exit_code"] == 0 for x in results) and shared.problems(results) == []
    assert len(r["wall_s_all"]) == 3 and r["wall_s"] == min(r["wall_s_all"])
    assert r["wall_s_median"] == sorted(r["wall_s_all"])[1]
    assert r["report_json_bytes"] and r["report_json_bytes"] > 1000
    shared.print_results(results)
    assert "tiny.sqlite" in capsys.readouterr().out
    assert shared.run(repeat=1, folder=tmp_path / "absent") == []
    assert "none found" in capsys.readouterr().out


def _judged(wall_s: float, floor_s: float | None, tree_mib: float) -> dict:
    adbc = {"seconds": floor_s} if floor_s is not None else {"unavailable": "not installed"}
    return {"size": "large", "adbc": adbc, "ratio_to_adbc": wall_s / floor_s if floor_s else None,
            "cli": {"wall_s": wall_s, "peak_tree_rss_mib": tree_mib}}


def test_large_targets_judge_the_ratio_and_the_process_tree() -> None:
    mb = 1e6 / 2**20  # MiB per MB
    assert run.missed_targets(_judged(20.0, 10.0, 1500 * mb), 2.0, 1500.0, "ADBC") == []
    slow = run.missed_targets(_judged(20.1, 10.0, 1000 * mb), 2.0, 1500.0, "ADBC")
    assert len(slow) == 1 and "2.01x the ADBC floor" in slow[0]
    big = run.missed_targets(_judged(10.0, 10.0, 1501 * mb), 2.0, 1500.0, "ADBC")
    assert len(big) == 1 and "1,501 MB" in big[0]
    # Without a floor the ratio cannot be judged: that is a miss, not a pass.
    assert "no ADBC floor" in run.missed_targets(_judged(1.0, None, 10.0), 2.0, 1500.0, "ADBC")[0]


def test_process_tree_peak_counts_children(tmp_path: Path) -> None:
    """A parent that holds little while its child holds ~200 MB: the tree's peak sees both,
    the main process's peak only the parent."""
    child = "import time; b = bytearray(200 << 20); b[::4096] = b'x' * len(b[::4096]); time.sleep(0.5)"
    script = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {child!r}], check=True)"
    res = measure.run_cmd([sys.executable, "-c", script], tmp_path / "out")
    assert res["exit_code"] == 0
    assert res["peak_tree_rss_mib"] >= 200 > res["peak_main_rss_mib"]


def test_floor_without_its_packages_is_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import floors

    monkeypatch.setattr(floors, "python", lambda: sys.executable)
    monkeypatch.setattr(floors, "NEEDS", {"adbc": ("surely_not_an_installed_module",)})
    res = floors.run("adbc", tmp_path / "t.sqlite", tmp_path / "floor.log")
    assert "surely_not_an_installed_module not installed" in res["unavailable"]
