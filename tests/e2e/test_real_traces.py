"""Every shared real export: exit 0, input untouched, numbers equal to a direct SQL query."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from nsys_llm_explainer.render import rich
from tests import reference
from tests.conftest import NSYS_TRACES, nsys_trace_files, require_nsys_traces, run_cli
from tests.e2e.test_leaks import shown_program

pytestmark = pytest.mark.slow

KERNEL_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL")
TRACES = nsys_trace_files() or [NSYS_TRACES / "(none found)"]


def connect_ro(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    con.text_factory = lambda raw: raw.decode("utf-8", "replace")
    return con


def kernel_table(con: sqlite3.Connection) -> str | None:
    names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    found = [t for t in KERNEL_TABLES if t in names]
    if not found or con.execute(f"SELECT count(*) FROM {found[0]}").fetchone()[0] == 0:
        return None
    return found[0]


@pytest.fixture(scope="module", params=TRACES, ids=lambda p: p.stem)
def analyzed(request, tmp_path_factory) -> dict[str, Any]:
    """Run the CLI once per real trace; the tests below read what it wrote."""
    require_nsys_traces()
    trace: Path = request.param
    listing = sorted(p.name for p in trace.parent.iterdir())
    digest = hashlib.sha256(trace.read_bytes()).hexdigest()
    out = tmp_path_factory.mktemp(trace.stem) / "report"
    res = run_cli(trace, "--out", out, "--quiet")
    return {
        "trace": trace, "out": out, "result": res, "listing": listing, "sha256": digest,
        "doc": json.loads((out / "report.json").read_text(encoding="utf-8"))
        if res.exit_code == 0 else None,
        "md": (out / "report.md").read_text(encoding="utf-8") if res.exit_code == 0 else "",
    }


def test_exit_zero_and_input_untouched(analyzed):
    res = analyzed["result"]
    assert res.exit_code == 0, res.stderr
    trace: Path = analyzed["trace"]
    assert hashlib.sha256(trace.read_bytes()).hexdigest() == analyzed["sha256"]
    assert sorted(p.name for p in trace.parent.iterdir()) == analyzed["listing"]
    for name in ("report.md", "report.json", "tables/kernels.csv", "tables/gpu_idle_gaps.csv"):
        assert (analyzed["out"] / name).is_file()


def test_total_kernel_time_equals_sql(analyzed):
    doc = analyzed["doc"]
    with connect_ro(analyzed["trace"]) as con:
        table = kernel_table(con)
        if table is None:
            assert doc["metrics"]["top_kernels"]["status"] == "skipped"
            return
        total = con.execute(f'SELECT SUM("end" - "start") FROM {table}').fetchone()[0]
        count = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    tk = doc["metrics"]["top_kernels"]
    assert (tk["total_kernel_ns"], tk["kernel_count"]) == (total, count)
    assert sum(k["total_ns"] for k in tk["kernels"]) == total
    assert sum(k["calls"] for k in tk["kernels"]) == count
    assert doc["metrics"]["nvtx_attribution"].get("total_kernel_ns", total) == total
    assert sum(p["kernel_ns"] for p in doc["metrics"]["per_process"]["processes"]) == total


def test_busy_time_per_device_equals_reference_union(analyzed):
    doc = analyzed["doc"]
    with connect_ro(analyzed["trace"]) as con:
        table = kernel_table(con)
        if table is None:
            assert doc["metrics"]["gpu_idle"]["status"] == "skipped"
            return
        per_device: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for dev, s, e in con.execute(f'SELECT deviceId, "start", "end" FROM {table}'):
            per_device[dev].append((s, e))
        # The device's own work besides kernels: device-local copies (array/device kinds 5-8 within
        # one device; a NULL device id says nothing about a peer) and memsets.
        local: dict[int, list[tuple[int, int]]] = defaultdict(list)
        names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "CUPTI_ACTIVITY_KIND_MEMCPY" in names:
            for dev, s, e in con.execute(
                'SELECT deviceId, "start", "end" FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind BETWEEN 5 AND 8 '
                "AND (srcDeviceId IS NULL OR dstDeviceId IS NULL OR srcDeviceId = dstDeviceId)"
            ):
                local[dev].append((s, e))
        if "CUPTI_ACTIVITY_KIND_MEMSET" in names:
            for dev, s, e in con.execute('SELECT deviceId, "start", "end" FROM CUPTI_ACTIVITY_KIND_MEMSET'):
                local[dev].append((s, e))
    devices = {d["device_id"]: d for d in doc["metrics"]["gpu_idle"]["devices"]}
    assert set(devices) == set(per_device)
    for dev, kernels in per_device.items():
        d = devices[dev]
        spans = kernels + local[dev]
        assert d["kernel_busy_ns"] == reference.union_length(kernels)
        assert d["busy_ns"] == reference.union_length(spans)
        assert d["window_start_ns"] == min(s for s, _ in spans)
        assert d["window_end_ns"] == max(e for _, e in spans)
        assert d["busy_ns"] + d["idle_ns"] == d["window_end_ns"] - d["window_start_ns"]
        assert d["gap_count"] == len(reference.gaps(spans))


def test_top_kernel_calls_equal_sql(analyzed):
    doc = analyzed["doc"]
    with connect_ro(analyzed["trace"]) as con:
        table = kernel_table(con)
        if table is None:
            return
        top = doc["metrics"]["top_kernels"]["kernels"][0]
        name_id, dev, calls, total = con.execute(
            f'SELECT demangledName, deviceId, count(*), SUM("end" - "start") AS t FROM {table} '
            "GROUP BY demangledName, deviceId ORDER BY t DESC LIMIT 1"
        ).fetchone()
        name = con.execute("SELECT value FROM StringIds WHERE id = ?", (name_id,)).fetchone()[0]
    got = (top["name"], top["device_id"], top["calls"], top["total_ns"])
    assert got == (name, dev, calls, total)


def test_attribution_bounds(analyzed):
    att = analyzed["doc"]["metrics"]["nvtx_attribution"]
    if att["status"] == "ok":
        assert 0 <= att["attributed_ns"] <= att["total_kernel_ns"]
        assert 0.0 <= att["coverage"] <= 1.0
        for r in att["ranges"]:
            assert r["kernel_ns"] <= r["inclusive_kernel_ns"] <= att["total_kernel_ns"]


WITHOUT_LAUNCH_SQL = """
SELECT count(*) FROM {kernels} AS k WHERE NOT EXISTS (
  SELECT 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r
  WHERE r.correlationId = k.correlationId
    AND ((r.globalTid >> 24) & 16777215) = ((k.globalPid >> 24) & 16777215))
"""


def test_kernels_without_launch_equal_sql_join_on_pid_and_corr(analyzed):
    att = analyzed["doc"]["metrics"]["nvtx_attribution"]
    if att["status"] != "ok":
        return
    with connect_ro(analyzed["trace"]) as con:
        table = kernel_table(con)
        expected = con.execute(WITHOUT_LAUNCH_SQL.format(kernels=table)).fetchone()[0]
    assert att["kernels_without_launch"] == expected


def test_sections_that_cannot_be_computed_say_why(analyzed):
    doc, text = analyzed["doc"], analyzed["md"]
    by_reason: dict[str, list[str]] = {}
    for mid, m in doc["metrics"].items():
        if m["status"] == "skipped":
            assert m["reason"], mid
            assert f"_Not measured, because {rich.md(m['reason'])}._" in text
            by_reason.setdefault(m["reason"], []).append(mid)
    # One coverage line per reason, naming every metric skipped for it (in report order).
    for reason, mids in by_reason.items():
        lines = [x for x in doc["limitations"] if x.endswith(f": not measured, because {reason}.")]
        assert lines == [f"{', '.join(mids)}: not measured, because {reason}."]


def test_capture_metadata_is_never_echoed(analyzed):
    """No capture metadata value reaches the report but the program's name and the arguments
    that select its model or test, shown on purpose (test_leaks.shown_program checks them)."""
    with connect_ro(analyzed["trace"]) as con:
        try:
            values = [v for (v,) in con.execute("SELECT value FROM META_DATA_CAPTURE")]
        except sqlite3.OperationalError:
            values = []
    out = analyzed["out"]
    shown = shown_program(out)
    secrets = {v for v in values if isinstance(v, str) and len(v) >= 12 and not v.isdigit()
               and not any(v in w for w in shown)}
    texts = [p.read_text(encoding="utf-8") for p in out.rglob("*") if p.is_file()]
    leaked = sum(1 for s in secrets for t in texts if s in t)
    assert leaked == 0, f"{leaked} capture metadata values appear in the report"
