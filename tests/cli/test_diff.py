"""`nsys-llm-explain diff`: files, exit codes, gate verdict, report.json inputs, step summary."""

from __future__ import annotations

import json
from html import unescape
from pathlib import Path

import jsonschema
import pytest

from nsys_llm_explainer.cli import run
from nsys_llm_explainer.diff.gate import GATE_METRICS
from tests.fixtures.diff_workloads import GEMM_RENAMED, workload


def workload_on_other_gpu(path: Path) -> Path:
    """The same workload run on another GPU model."""
    return workload(path, gpu_name="Tesla V100-SXM2-16GB")

SCHEMA = (
    Path(__file__).resolve().parents[2]
    / "src"
    / "nsys_llm_explainer"
    / "schema"
    / "diff.schema.json"
)


@pytest.fixture(autouse=True)
def no_step_summary(monkeypatch):
    # CI runners set it; these tests must not write into the real job summary
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("traces")
    base = workload(d / "base.sqlite")
    new = workload(
        d / "new.sqlite", gemm_ns=40_000, gemm_name=GEMM_RENAMED, drop_norm=True, extra_kernel=True
    )
    return base, new


def diff_cli(capsys, *args):
    code = run(["diff", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def load(out_dir: Path) -> dict:
    return json.loads((out_dir / "diff.json").read_text(encoding="utf-8"))


def test_writes_four_files_valid_against_schema(traces, tmp_path, capsys):
    code, out, err = diff_cli(capsys, *traces, "--out", tmp_path / "d")
    assert code == 0, err
    assert out.startswith("DIFF: ") and out.count("\n") == 1
    names = sorted(
        str(p.relative_to(tmp_path / "d")) for p in (tmp_path / "d").rglob("*") if p.is_file()
    )
    assert names == ["diff.html", "diff.json", "diff.md", "tables/diff_kernels.csv"]
    doc = load(tmp_path / "d")
    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text())).validate(doc)
    csv = (tmp_path / "d" / "tables" / "diff_kernels.csv").read_text().splitlines()
    assert csv[0].startswith("key,match,base_name,new_name,") and len(csv) == 1 + 4
    md = (tmp_path / "d" / "diff.md").read_text()
    # Kernel labels over both sides: the renamed pair shows the template argument that changed.
    assert "| gemm\\_kernel\\<128\\> -> gemm\\_kernel\\<256\\> | renamed |" in md
    assert "| renamed |" in md and "**New kernels** (1)" in md and "**Vanished kernels** (1)" in md
    html = (tmp_path / "d" / "diff.html").read_text()
    assert "Content-Security-Policy" in html and "default-src" in html and "http" not in html.split("<body>")[1]
    assert doc["headline"]["text"] in unescape(html) and "<table class=\"sortable\">" in html


def test_schema_lists_every_gate_metric():
    schema = json.loads(SCHEMA.read_text())
    assert set(schema["properties"]["gate_values"]["required"]) == set(GATE_METRICS)


def test_rerun_into_same_directory_replaces_previous_diff(traces, tmp_path, capsys):
    assert diff_cli(capsys, *traces, "--out", tmp_path / "d")[0] == 0
    assert diff_cli(capsys, traces[0], traces[0], "--out", tmp_path / "d")[0] == 0
    assert load(tmp_path / "d")["kernels"]["counts"]["new"] == 0


def test_self_diff_exits_0_with_gates(traces, tmp_path, capsys):
    code, out, _ = diff_cli(
        capsys,
        traces[0],
        traces[0],
        "--out",
        tmp_path / "d",
        "--fail-on",
        "kernel_time_pct>0",
        "--fail-on",
        "new_findings>0",
    )
    assert code == 0
    assert out.startswith("PASS: 2 of 2 conditions checked, none tripped")


def test_gate_trips_with_exit_5(traces, tmp_path, capsys):
    code, out, _ = diff_cli(
        capsys,
        *traces,
        "--out",
        tmp_path / "d",
        "--fail-on",
        "kernel_time_pct<-10",
        "--fail-on",
        "new_kernels>=1,launches_pct>1",
    )
    assert code == 5
    assert out.startswith("FAIL: kernel_time_pct<-10 (value -27.87), new_kernels>=1 (value 1.00);")
    gate = load(tmp_path / "d")["gate"]
    assert gate["tripped"] is True
    assert [c["status"] for c in gate["conditions"]] == ["tripped", "tripped", "passed"]


def test_a_gate_that_evaluates_nothing_fails_unless_allowed(traces, tmp_path, capsys):
    base = load_report_without(traces[0], tmp_path, "steps")
    code, out, _ = diff_cli(
        capsys, base, base, "--out", tmp_path / "d", "--fail-on", "step_p50_pct>5"
    )
    assert code == 5
    assert out.startswith("FAIL: none of the 1 --fail-on conditions could be evaluated")
    assert out.rstrip().endswith("not evaluated: step_p50_pct>5")
    md = (tmp_path / "d" / "diff.md").read_text()
    assert "Step latency per phase\n\n_Not compared, because " in md
    assert "**No condition could be evaluated: the gate fails**" in md
    code, out, _ = diff_cli(capsys, base, base, "--out", tmp_path / "d", "--fail-on",
                            "step_p50_pct>5", "--allow-unevaluated")
    assert code == 0 and out.startswith("PASS: no condition could be evaluated (--allow-unevaluated)")


def test_fail_on_incomparable(traces, tmp_path, capsys):
    assert diff_cli(capsys, *traces, "--out", tmp_path / "a", "--fail-on", "incomparable")[0] == 0
    other = tmp_path / "other.sqlite"
    workload_on_other_gpu(other)
    code, out, _ = diff_cli(capsys, traces[0], other, "--out", tmp_path / "b", "--fail-on", "incomparable")
    assert code == 5 and out.startswith("FAIL: incomparable (value 1.00); Not comparable: ")
    code, _, err = diff_cli(capsys, *traces, "--out", tmp_path / "c", "--fail-on", "incomparable>1")
    assert code == 2 and "takes no operator" in err


def load_report_without(trace: Path, tmp_path: Path, metric: str) -> Path:
    """A report.json of `trace` with one metric removed (as an older version would write)."""
    assert run([str(trace), "--out", str(tmp_path / "r"), "--quiet"]) == 0
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    doc["metrics"].pop(metric, None)
    path = tmp_path / "stripped.json"
    path.write_text(json.dumps(doc))
    return path


def test_report_json_inputs_give_the_same_diff_as_traces(traces, tmp_path, capsys):
    base, new = traces
    assert run([str(base), "--out", str(tmp_path / "rb"), "--quiet"]) == 0
    assert run([str(new), "--out", str(tmp_path / "rn"), "--quiet"]) == 0
    capsys.readouterr()
    assert diff_cli(capsys, base, new, "--out", tmp_path / "from_traces")[0] == 0
    assert (
        diff_cli(
            capsys,
            tmp_path / "rb" / "report.json",
            tmp_path / "rn",
            "--out",
            tmp_path / "from_reports",
        )[0]
        == 0
    )
    a, b = load(tmp_path / "from_traces"), load(tmp_path / "from_reports")
    assert (b["base"]["kind"], b["new"]["kind"]) == ("report", "report")
    for doc in (a, b):
        for side in ("base", "new"):
            doc[side].pop("input")
            doc[side].pop("kind")
    assert a == b
    csv_a = (tmp_path / "from_traces" / "tables" / "diff_kernels.csv").read_text()
    assert csv_a == (tmp_path / "from_reports" / "tables" / "diff_kernels.csv").read_text()


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"{not json", "is not valid JSON"),
        (b'{"tool": {"name": "other"}, "schema_version": "1.0"}', "not a report.json written by"),
        (
            b'{"tool": {"name": "nsys-llm-explain"}, "schema_version": "9.0", '
            b'"metrics": {}, "trace": {}}',
            "schema_version 9.0 is not supported",
        ),
        (
            b'{"tool": {"name": "nsys-llm-explain"}, "schema_version": "3.0"}',
            "lacks its metrics or trace",
        ),
        (
            b'{"tool": {"name": "nsys-llm-explain"}, "schema_version": "1.1", '
            b'"metrics": {}, "trace": {}}',
            "schema_version 1.1 is not supported",
        ),
        (b"plain text, not a database", "not a SQLite database"),
    ],
)
def test_bad_inputs_exit_3_with_one_line(traces, tmp_path, capsys, content, needle):
    bad = tmp_path / ("bad.json" if content.startswith(b"{") else "bad.sqlite")
    bad.write_bytes(content)
    code, out, err = diff_cli(capsys, traces[0], bad, "--out", tmp_path / "d")
    assert code == 3
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "d").exists()


def test_missing_input_exits_3(traces, tmp_path, capsys):
    code, _, err = diff_cli(capsys, tmp_path / "nope.sqlite", traces[1], "--out", tmp_path / "d")
    assert code == 3 and "no such file" in err


def test_bad_fail_on_exits_2_before_any_work(traces, tmp_path, capsys):
    code, _, err = diff_cli(
        capsys, tmp_path / "nope.sqlite", traces[1], "--out", tmp_path / "d", "--fail-on", "speed>1"
    )
    assert code == 2
    assert err.count("\n") == 1 and "unknown metric 'speed'" in err and "kernel_time_pct" in err


def test_missing_out_is_a_usage_error(traces, capsys):
    code, _, err = diff_cli(capsys, *traces)
    assert code == 2 and "--out DIR is required" in err


def test_github_step_summary_is_appended(traces, tmp_path, capsys, monkeypatch):
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert diff_cli(capsys, *traces, "--out", tmp_path / "d")[0] == 0
    md = (tmp_path / "d" / "diff.md").read_text(encoding="utf-8")
    assert summary.read_text(encoding="utf-8") == "# earlier step\n" + md


def test_help_lists_gate_metrics_and_exit_codes(capsys):
    code, out, _ = diff_cli(capsys, "--help")
    assert code == 0
    assert (
        "--fail-on" in out
        and "new_high_findings" in out
        and "5 a --fail-on condition tripped" in out
    )


def test_out_directory_rules(traces, tmp_path, capsys):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("keep me")
    code, _, err = diff_cli(capsys, *traces, "--out", tmp_path / "busy")
    assert code == 4 and "--force" in err
    assert diff_cli(capsys, *traces, "--out", tmp_path / "busy", "--force")[0] == 0
    assert (tmp_path / "busy" / "notes.txt").read_text() == "keep me"
    assert run([str(traces[0]), "--out", str(tmp_path / "rep"), "--quiet"]) == 0
    code, _, err = diff_cli(capsys, *traces, "--out", tmp_path / "rep", "--force")
    assert code == 4 and "holds another output" in err
    assert (tmp_path / "rep" / "report.json").is_file()
