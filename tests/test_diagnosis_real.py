"""The diagnosis on the shared real exports: what an expert names first, checked against SQL."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from nsys_llm_explainer.api import explain
from nsys_llm_explainer.model import Report, Severity
from tests.conftest import NSYS_TRACES, require_nsys_traces

LLM_WORDS = ("decode", "token", "vLLM", "SGLang", "sampling", "scheduler")


def report_of(name: str) -> Report:
    require_nsys_traces()
    path = NSYS_TRACES / f"{name}.sqlite"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    return explain(path)


def sql(name: str, query: str) -> list[tuple]:
    con = sqlite3.connect(f"{(NSYS_TRACES / f'{name}.sqlite').resolve().as_uri()}?mode=ro", uri=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def advice_text(report: Report) -> str:
    return " ".join(r for f in report.findings for r in f.recommendation)


def test_nsysai_is_transfer_bound() -> None:
    r = report_of("nsysai_h100_2gpu_1s")
    d = r.diagnosis
    assert (d.verdict, d.primary.kind, d.primary.devices) == ("transfer_bound", "transfer", (0, 1))
    # Pinned host-to-device copy time per device, straight from the export: the copies fill the
    # window (they serialize with the kernels on the same stream).
    for dev, copy_ns in sql("nsysai_h100_2gpu_1s", "SELECT deviceId, sum(end - start) FROM CUPTI_ACTIVITY_KIND_MEMCPY "
                            "WHERE copyKind = 1 AND srcKind = 1 GROUP BY deviceId"):
        buckets = next(x["buckets"] for x in d.devices if x["device_id"] == dev)
        bucket = next(b["ns"] for b in buckets if b["bucket"] == "transfer")
        assert 0.95 * copy_ns <= bucket <= 1.03 * copy_ns
    assert r.findings[0].rule_id == "NLE208" and r.findings[0].severity is Severity.HIGH
    assert not [f for f in r.findings if f.cause == "sync" and f.severity.rank < Severity.LOW.rank]
    (fp32,) = [f for f in r.findings if f.rule_id == "NLE323"]
    assert "Float32" in fp32.title
    assert d.workload.kind == "pytorch_inference"


def test_cloverleaf_is_plain_cuda_with_a_sync_per_launch() -> None:
    r = report_of("pipit_cloverleaf")
    d = r.diagnosis
    assert d.workload.kind == "generic_cuda"
    assert d.verdict == "gpu_compute_bound"
    launches = sql("pipit_cloverleaf", "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0]
    (spl,) = [f for f in r.findings if f.rule_id == "NLE215"]
    assert f"{launches:,} syncs for {launches:,} launches" in spl.title
    text = advice_text(r)
    assert not any(w in text for w in LLM_WORDS), text


def test_fuser_is_start_up_and_nothing_is_loud() -> None:
    r = report_of("fuser_gemm_report1")
    d = r.diagnosis
    assert d.verdict == "not_steady_state" and "JIT compilation" in d.summary
    assert all(f.severity.rank >= Severity.LOW.rank for f in r.findings)
    assert d.capture.recipe
    text = advice_text(r)
    assert "torch.compile" not in text and "tokeniz" not in text


@pytest.mark.parametrize("name", ["weatherbench2_report1", "centerformer_baseline", "dynamicvit_nsys_profile"])
def test_exports_without_kernels_have_no_gpu_work(name: str) -> None:
    r = report_of(name)
    assert r.diagnosis.verdict == "no_gpu_work" and r.diagnosis.primary is None
    assert all(f.severity is Severity.INFO for f in r.findings)


def test_saxpy_is_too_little_to_judge() -> None:
    r = report_of("pipit_saxpy_mpi")
    assert r.diagnosis.verdict == "insufficient_data"
    assert all(f.severity.rank >= Severity.LOW.rank for f in r.findings)


def test_report_md_opens_with_the_verdict(tmp_path: Path) -> None:
    r = report_of("nsysai_h100_2gpu_1s")
    r.write(tmp_path / "out", formats="md")
    text = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert text.splitlines()[2].startswith("**Verdict:** Transfer-bound (`transfer_bound`, ")
