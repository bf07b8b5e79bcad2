"""GPU-work metrics on the shared real exports, checked against direct SQL queries."""

from __future__ import annotations

import hashlib
import re
import sqlite3
from pathlib import Path

import pytest

from nsys_llm_explainer import schema
from nsys_llm_explainer.analysis.comm_kernels import COMM_PATTERN
from nsys_llm_explainer.render.json_writer import report_dict
from tests.conftest import NSYS_TRACES, analyze, ok, require_nsys_traces

MINE = (
    "categories",
    "memory_transfers",
    "gpu_context",
    "communication",
    "cuda_graphs",
    "fusion_candidates",
)
COVERAGE_TARGETS = ("nsysai_h100_2gpu_1s.sqlite", "fuser_gemm_report1.sqlite")
COPY_SQL = (
    "SELECT e.label, count(*), sum(m.bytes), sum(m.end - m.start) FROM "
    "CUPTI_ACTIVITY_KIND_MEMCPY m "
    "JOIN ENUM_CUDA_MEMCPY_OPER e ON e.id = m.copyKind GROUP BY e.label"
)
NAMES_SQL = (
    "SELECT s.value, count(*), sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
    "JOIN StringIds s ON s.id = k.demangledName GROUP BY s.value"
)
GRAPH_SQL = (
    "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
    "WHERE s.value LIKE 'cudaGraphLaunch%' OR s.value LIKE 'cuGraphLaunch%'"
)


def _query(path: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _trace(name: str) -> Path:
    require_nsys_traces()
    path = NSYS_TRACES / name
    if not path.exists():
        pytest.skip(f"{name} not among the shared traces")
    return path


@pytest.mark.parametrize("name", COVERAGE_TARGETS)
def test_categories_cover_90_pct_and_match_top_kernels(name):
    report = analyze(_trace(name))
    d = ok(report, "categories")
    assert d["categorized_pct"] >= 90.0
    assert d["total_kernel_ns"] == ok(report, "top_kernels")["total_kernel_ns"]
    assert sum(c["total_ns"] for c in d["categories"]) == d["total_kernel_ns"]


@pytest.mark.parametrize("name", COVERAGE_TARGETS)
def test_copies_match_direct_sql(name):
    path = _trace(name)
    d = ok(analyze(path), "memory_transfers")
    got = {
        r["kind"]: (r["count"], r["bytes"], r["time_ns"])
        for r in d["by_kind"]
        if r["kind"] != "Memset"
    }
    want = {label: (n, b, t) for label, n, b, t in _query(path, COPY_SQL)}
    assert got == want


@pytest.mark.parametrize("name", COVERAGE_TARGETS)
def test_communication_and_graph_counts_match_direct_sql(name):
    path = _trace(name)
    report = analyze(path)
    rx = re.compile(COMM_PATTERN, re.IGNORECASE)
    rows = [r for r in _query(path, NAMES_SQL) if rx.search(r[0])]
    d = ok(report, "communication")
    assert (d["comm_kernels"], d["comm_kernel_ns"]) == (
        sum(r[1] for r in rows),
        sum(r[2] for r in rows),
    )
    assert ok(report, "cuda_graphs")["graph_launches"] == _query(path, GRAPH_SQL)[0][0]


def test_every_shared_trace_runs_validates_and_stays_unchanged():
    for path in require_nsys_traces():
        before = hashlib.sha256(path.read_bytes()).hexdigest()
        report = analyze(path)
        doc = report_dict(report)
        problems = [
            e for e in schema.errors(doc) if e.startswith(tuple(f"metrics/{m}" for m in MINE))
        ]
        assert problems == [], path.name
        assert not [w for w in report.warnings if any(m in w for m in MINE)], path.name
        assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_gpu_context_on_real_names():
    d = ok(analyze(_trace("fuser_gemm_report1.sqlite")), "gpu_context")
    assert d["unknown_models"] == [] and len(d["gpus"]) == 8
    assert sum(g["active"] for g in d["gpus"]) == 1
    cl = ok(analyze(_trace("pipit_cloverleaf.sqlite")), "gpu_context")
    assert {g["model"] for g in cl["gpus"]} == {"A100 SXM4 80GB"}
    h2d = [c for c in cl["copy_bandwidth"] if c["kind"] == "Host-to-Device"]
    assert h2d and 0 < h2d[0]["pct_of_reference"] < 100
    wb = ok(analyze(_trace("weatherbench2_report1.sqlite")), "gpu_context")
    assert wb["unknown_models"] == [] and wb["gpus"][0]["model"] == "GeForce RTX 4060"
