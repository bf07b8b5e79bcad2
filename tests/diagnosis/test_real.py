"""The diagnosis on the shared real exports: what an expert names first, checked against SQL."""

from __future__ import annotations

import bisect
import sqlite3
from pathlib import Path

import pytest

from nsys_llm_explainer.api import explain
from nsys_llm_explainer.model import Report, Severity
from nsys_llm_explainer.options import Options
from tests import reference
from tests.conftest import NSYS_TRACES, require_nsys_traces, table

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


def test_nsysai_work_launched_before_the_capture_is_queued() -> None:
    # Kernels with no launch row and a correlation id below every API call of their process were
    # launched before the capture: the gaps they end are device-side waits, never host time.
    name = "nsysai_h100_2gpu_1s"
    report_of(name)
    early = set(sql(name, "WITH r AS (SELECT globalTid >> 24 AS p, min(correlationId) AS c "
                          "FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId > 0 GROUP BY p) "
                          "SELECT k.deviceId, k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                          "JOIN r ON r.p = k.globalPid >> 24 WHERE k.correlationId < r.c"))
    assert len(early) == 2 * 905
    r = explain(NSYS_TRACES / f"{name}.sqlite", Options(min_gap_us=0))
    gaps = table(r, "idle_causes", "idle_causes_gaps")
    ending = gaps[[(int(d), int(e)) in early for d, e in zip(gaps["device_id"], gaps["end_ns"], strict=True)]]
    assert len(ending) > 1_000
    assert ending["next_kernel_queued"].all()
    host = ending[["sync_wait_ns", "launch_bound_ns", "host_other_ns", "capture_edge_ns"]].to_numpy().sum()
    assert host == 0


def test_cloverleaf_is_plain_cuda_with_a_sync_per_launch() -> None:
    r = report_of("pipit_cloverleaf")
    d = r.diagnosis
    assert d.workload.kind == "generic_cuda"
    assert d.verdict == "gpu_bound"
    launches = sql("pipit_cloverleaf", "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0]
    (spl,) = [f for f in r.findings if f.rule_id == "NLE215"]
    assert f"{launches:,} syncs for {launches:,} launches" in spl.title
    text = advice_text(r)
    assert not any(w in text for w in LLM_WORDS), text


def test_cloverleaf_synchronous_copies_are_one_finding() -> None:
    # 279 synchronous pageable cudaMemcpy calls: 269 of more than 1 KiB and 10 smaller host-to-device
    # ones (a read-back is a device-to-host copy; there is none): their copy time and the idle
    # time inside the calls (no kernel and no copy running) are one cause, reported once, by NLE305.
    name = "pipit_cloverleaf"
    r = report_of(name)
    kernels = sql(name, 'SELECT "start", "end" FROM CUPTI_ACTIVITY_KIND_KERNEL')
    copies = sql(name, 'SELECT "start", "end" FROM CUPTI_ACTIVITY_KIND_MEMCPY')
    calls = sql(name, 'SELECT m."start", m."end", r."start", r."end" FROM CUPTI_ACTIVITY_KIND_MEMCPY m '
                "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = m.correlationId "
                "AND r.globalTid >> 24 = m.globalPid >> 24 JOIN StringIds s ON s.id = r.nameId "
                "WHERE s.value LIKE 'cudaMemcpy%' AND s.value NOT LIKE '%Async%' "
                "AND (m.bytes > 1024 OR m.copyKind = 1)")
    assert len(calls) == 279
    w0, w1 = min(s for s, _ in kernels), max(e for _, e in kernels)

    def in_window(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
        return [(max(s, w0), min(e, w1)) for s, e in reference.merged(spans) if min(e, w1) > max(s, w0)]

    # A launch call starting within 20 us of a blocking call's return on its thread refills the
    # GPU: the stall runs to its end (idle_sweep REFILL_GRACE_NS).
    runtime = sorted(sql(name, 'SELECT r."start", r."end", s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r '
                              "JOIN StringIds s ON s.id = r.nameId"))
    starts = [r[0] for r in runtime]

    def refilled(c: int, d: int) -> int:
        i = bisect.bisect_right(starts, c)
        while i < len(runtime) and runtime[i][0] < d:
            i += 1
        if i < len(runtime) and runtime[i][2].startswith("cudaLaunchKernel") and runtime[i][0] - d <= 20_000:
            return max(d, runtime[i][1])
        return d

    busy, busy_or_copying = reference.merged(kernels), reference.merged(kernels + copies)
    copy_idle = sum((e - s) - reference.covered((s, e), busy) for s, e in in_window([(a, b) for a, b, _, _ in calls]))
    stall = sum((e - s) - reference.covered((s, e), busy_or_copying)
                for s, e in in_window([(c, refilled(c, d)) for _, _, c, d in calls]))
    (f,) = [f for f in r.findings if f.rule_id == "NLE305"]
    assert f.impact_ns == copy_idle + stall and f.title.startswith("279 synchronous copies")
    buckets = {b["bucket"]: b["ns"] for b in r.diagnosis.devices[0]["buckets"]}
    by_rule = {f.rule_id: f for f in r.findings}
    if "NLE208" in by_rule:
        assert by_rule["NLE208"].impact_ns == buckets["transfer"] - copy_idle
    if "NLE103" in by_rule:
        assert not any("cudaDeviceSynchronize" in e for e in by_rule["NLE103"].evidence)
    claimed = sum(by_rule[i].impact_ns for i in ("NLE103", "NLE208", "NLE214", "NLE215", "NLE305") if i in by_rule)
    assert claimed <= buckets["transfer"] + buckets["sync_wait"]


def test_cloverleaf_is_gpu_bound_on_memory_bound_stencil_kernels() -> None:
    # A stencil code: no GEMM, convolution or attention runs, so its busy GPU is limited by
    # memory; its dominant kernel family (par_ranged2d_kernel, one template with many
    # instantiations) is named with its share of kernel time, summed here by nsys' shortName.
    r = report_of("pipit_cloverleaf")
    d = r.diagnosis
    rows = sql("pipit_cloverleaf", "SELECT s.value, sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
               "JOIN StringIds s ON s.id = k.shortName GROUP BY 1")
    total = sum(ns for _, ns in rows)
    family = dict(rows)["par_ranged2d_kernel"]
    assert d.kernels is not None and d.kernels["limit"] == "memory" and d.kernels["no_matrix_math"]
    assert d.kernels["dominant"]["family"] == "par_ranged2d_kernel"
    assert d.kernels["dominant"]["ns"] == family and d.kernels["kernel_ns"] == total
    assert f"par_ranged2d_kernel ({d.kernels['dominant']['kernel_names']} instantiations), takes " \
           f"{100 * family / total:.1f}% of kernel time" in d.summary
    assert "memory-bound kernels" in d.summary and "compute-bound" not in d.summary


def test_fuser_is_start_up_and_nothing_else_is_loud() -> None:
    r = report_of("fuser_gemm_report1")
    d = r.diagnosis
    assert d.verdict == "not_steady_state" and "JIT compilation" in d.summary
    assert r.findings[0].rule_id == "NLE216" and r.findings[0].impact_ns == d.primary.impact_ns
    assert all(f.severity.rank >= Severity.LOW.rank for f in r.findings[1:])
    assert d.capture.recipe
    text = advice_text(r)
    assert "torch.compile" not in text and "tokeniz" not in text


@pytest.mark.parametrize(("name", "kind"), [("weatherbench2_report1", "program_failed"),
                                          ("centerformer_baseline", "cuda_not_traced"),
                                          ("dynamicvit_nsys_profile", "profiler_failed")])
def test_exports_without_kernels_say_why(name: str, kind: str) -> None:
    r = report_of(name)
    assert r.diagnosis.verdict == "no_gpu_work" and r.diagnosis.primary.kind == kind
    assert all(f.severity is Severity.INFO for f in r.findings)


def test_saxpy_is_judged_by_its_five_iterations() -> None:
    # 5 kernels, but 5 identical iterations of about 251 ms: 4 complete ones between the
    # synchronous device-to-host copies that end them.
    r = report_of("pipit_saxpy_mpi")
    cap = r.ok("capture").data["checks"][0]
    assert (cap["id"], cap["found"], cap["kernels"], cap["steps"]) == ("too_little_data", False, 5, 4)
    assert r.diagnosis.verdict != "insufficient_data"


def test_report_md_opens_with_the_verdict(tmp_path: Path) -> None:
    """What changes the figures' meaning (here: a 1 s slice, 120 s into a 296 s capture) comes first,
    then the verdict."""
    r = report_of("nsysai_h100_2gpu_1s")
    r.write(tmp_path / "out", formats="md")
    lines = (tmp_path / "out" / "report.md").read_text(encoding="utf-8").splitlines()
    assert lines[2].startswith("**Captured:** A 1.00 s window cut from a 296 s capture, starting 120 s in ")
    assert lines[4].startswith("**Verdict:** Transfer-bound (`transfer_bound`, ")
