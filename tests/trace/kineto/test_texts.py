"""What reports of PyTorch profiler traces say in the format's own terms: capture advice,
visible vs active GPUs, error messages by the input's name and content, diff's source row,
and the debug traceback."""

from __future__ import annotations

import gzip

import pytest

from nsys_llm_explainer.cli import run as cli_run
from nsys_llm_explainer.errors import ExitCode
from nsys_llm_explainer.metrics import workload
from nsys_llm_explainer.render import Format
from nsys_llm_explainer.render.writers import build as build_files
from tests.conftest import analyze, ok, run_cli
from tests.fixtures.builder import TraceBuilder
from tests.fixtures.kineto.builder import KinetoBuilder

H100 = {"name": "NVIDIA H100 80GB HBM3", "numSms": 132, "totalGlobalMem": 85018279936}


def finding(report, rule_id):
    return next((f for f in report.findings if f.rule_id == rule_id), None)


def prefill_trace(b: KinetoBuilder, ranged: bool) -> KinetoBuilder:
    """Ten launched kernels (inside a record_function range when `ranged`, else after the
    only range) and ten that ran before the profiler recorded their launch."""
    b.top["deviceProperties"] = [{"id": i, **H100} for i in range(4)]
    for i in range(10):
        b.kernel("early", 1_000 * i, 1_000 * i + 800, corr=900 + i)
    t = 20_000
    b.user("prefill" if ranged else "setup", t - 500, t + 10 * 2_000 if ranged else t - 100)
    for i in range(10):
        b.launch("gemm", t + 2_000 * i, t + 2_000 * i + 300, t + 2_000 * i + 400, t + 2_000 * i + 1_900,
                 corr=i + 1)
    return b


def test_kineto_reports_give_profiler_advice_not_nsys_options(tmp_path):
    report = analyze(prefill_trace(KinetoBuilder(), ranged=False).write(tmp_path / "t.json"))
    nle202 = finding(report, "NLE202")
    assert nle202 is not None and "torch.profiler.schedule(wait=1, warmup=1, active=3)" in nle202.recommendation[0]
    nle106 = finding(report, "NLE106")
    assert nle106 is not None and "torch.profiler.record_function" in nle106.recommendation[0]
    text = " ".join(r for f in report.findings for r in f.recommendation)
    assert "nsys profile" not in text and "--trace=cuda" not in text
    # coverage counts launched kernels only: 0 of 15 us
    assert nle106.evidence[0].startswith("0 ns of 15.0 µs kernel time attributed")
    assert "the 10 kernels without a launch call (NLE202) are left out" in nle106.evidence[0]


def test_kernels_without_a_launch_are_not_missing_range_coverage(tmp_path):
    report = analyze(prefill_trace(KinetoBuilder(), ranged=True).write(tmp_path / "t.json"))
    assert ok(report, "nvtx_attribution")["kernels_without_launch_ns"] == 10 * 800
    assert ok(report, "nvtx_attribution")["coverage"] == round(15_000 / 23_000, 4)  # below 0.7
    assert finding(report, "NLE106") is None  # every launched kernel is in a range
    assert finding(report, "NLE202") is not None


def test_nsys_exports_keep_the_nsys_advice(tmp_path):
    b = TraceBuilder("2024.6")
    b.process(100)
    for i in range(10):
        b.kernel(1_000 * i, 1_000 * i + 800, corr=900 + i, name="early")
    b.runtime(20_000, 20_300, corr=1)
    b.kernel(20_400, 21_900, corr=1, name="gemm")
    report = analyze(b.write(tmp_path / "t.sqlite"))
    assert "(nsys profile --trace=cuda)" in finding(report, "NLE202").recommendation[0]


def test_gpus_row_counts_visible_and_active_gpus(tmp_path):
    report = analyze(prefill_trace(KinetoBuilder(), ranged=True).write(tmp_path / "t.json"))
    files = build_files(report, (Format.MD, Format.HTML))
    assert "| GPUs | 4 visible, 1 with activity: 0: NVIDIA H100 80GB HBM3 |" in files["report.md"]
    assert "4 visible, 1 with activity: 0: NVIDIA H100 80GB HBM3" in files["report.html"]
    b = KinetoBuilder()
    b.top["deviceProperties"] = [{"id": 0, **H100}]
    b.launch("k", 1_000, 2_000, 3_000, 4_000, corr=1)
    one = build_files(analyze(b.write(tmp_path / "one.json")), (Format.MD,))["report.md"]
    assert "| GPUs | 0: NVIDIA H100 80GB HBM3 |" in one


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("garbage.json", b"\x00\x01\xfe\xff" * 64, "is not a PyTorch profiler trace (its content is not JSON)"),
        ("empty.json", b"", "is empty; save the PyTorch profiler trace again"),
        ("missing.json", None, "no such file; pass the trace torch.profiler wrote"),
        ("t.json.gz", gzip.compress(b"plain text"), "is gzip-compressed but holds no JSON"),
        ("garbage.bin", b"\x00\x01\xfe\xff" * 64,
         "is neither an Nsight Systems SQLite export nor a PyTorch profiler trace"),
        ("missing", None, "no such file; pass an Nsight Systems SQLite export (`nsys export --type sqlite`) "
                          "or a PyTorch profiler trace"),
        ("garbage.sqlite", b"\x00\x01\xfe\xff" * 64, "is not a SQLite database; pass the file written by "
                                                     "`nsys export --type sqlite`"),
    ],
)
def test_errors_are_worded_by_name_and_content(tmp_path, name, content, message):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    res = run_cli(path, "--out", tmp_path / "out")
    assert res.exit_code == 3
    assert res.stderr.startswith(f"nsys-llm-explain: error: {path}: {message}")
    assert res.stderr.count("\n") == 1
    if name.startswith(("garbage.json", "empty.json", "missing.json", "t.json")):
        assert "nsys export" not in res.stderr and "SQLite" not in res.stderr


def test_diff_names_the_formats(tmp_path, capsys):
    b = KinetoBuilder()
    b.top["cupti_version"] = 22
    b.launch("k", 1_000, 2_000, 3_000, 4_000, corr=1)
    one = b.write(tmp_path / "a.json")
    two = b.write(tmp_path / "b.json.gz", compress=True)
    assert cli_run(["diff", str(one), str(two), "--out", str(tmp_path / "d")]) == 0
    md = (tmp_path / "d" / "diff.md").read_text()
    side = "PyTorch profiler trace (schema 1, CUPTI 22)"
    assert f"| Source | {side} | {side} |" in md
    other = tmp_path / "other.json"
    other.write_text('{"tool": {"name": "someone else"}}')
    capsys.readouterr()
    assert cli_run(["diff", str(one), str(other), "--out", str(tmp_path / "d2")]) == 3
    assert "a PyTorch profiler trace (.json or .json.gz)" in capsys.readouterr().err


def test_debug_variable_prints_the_traceback(tmp_path, capsys, monkeypatch):
    from nsys_llm_explainer import api

    def broken(*_a, **_k):
        raise RuntimeError("planted bug")

    monkeypatch.setattr(api, "_trace_info", broken)
    path = prefill_trace(KinetoBuilder(), ranged=True).write(tmp_path / "t.json")
    monkeypatch.delenv("NSYS_LLM_EXPLAIN_DEBUG", raising=False)
    assert cli_run([str(path), "--out", str(tmp_path / "a")]) == int(ExitCode.INTERNAL)
    quiet = capsys.readouterr().err
    assert "Traceback" not in quiet and "RuntimeError: planted bug" in quiet
    monkeypatch.setenv("NSYS_LLM_EXPLAIN_DEBUG", "1")
    assert cli_run([str(path), "--out", str(tmp_path / "b")]) == int(ExitCode.INTERNAL)
    loud = capsys.readouterr().err
    assert "Traceback (most recent call last)" in loud and 'raise RuntimeError("planted bug")' in loud


def test_backward_signal_is_linear_in_the_name_length():
    rx = workload.re.compile(workload.SIGNALS["backward"][1], workload.re.IGNORECASE)
    assert rx.search("MulBackward0") and rx.search("autograd::engine::evaluate_function: AddBackward0")
    assert rx.search("x" * 2_000_000) is None  # quadratic backtracking took minutes on 200 KB
    assert workload.MAX_NAME_CHARS == 4096
