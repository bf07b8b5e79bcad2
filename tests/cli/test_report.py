"""The command line end to end: outputs, summary, exit codes, one real subprocess."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.fixtures import variants

CORE_CSVS = ("kernels", "gpu_idle_gaps", "sync", "nvtx_ranges", "nvtx_attribution",
             "kernels_by_pid", "sync_by_pid", "nvtx_by_pid")


@pytest.fixture
def trace(tmp_path) -> Path:
    return variants.multi_process_colliding_corr(tmp_path / "in" / "trace.sqlite", "2024.6")


@pytest.fixture(autouse=True)
def _input_dir(tmp_path):
    (tmp_path / "in").mkdir()


def doc_of(out: Path) -> dict:
    return json.loads((out / "report.json").read_text(encoding="utf-8"))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_writes_all_outputs_and_a_summary(trace, tmp_path):
    before = sha256(trace)
    out = tmp_path / "out"
    res = run_cli(trace, "--out", out)
    assert res.exit_code == 0, res.stderr
    assert res.stdout.splitlines()[0].startswith(f"wrote {out}/ (")
    assert "findings)" in res.stdout.splitlines()[0]
    diagnosis = doc_of(out)["diagnosis"]
    verdict = f"  verdict: {diagnosis['verdict']} ({diagnosis['confidence']}): {diagnosis['summary']}"
    assert res.stdout.splitlines()[1] == verdict
    assert (out / "report.md").read_text(encoding="utf-8").startswith("# nsys-llm-explain report")
    doc = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert doc["metrics"]["top_kernels"]["total_kernel_ns"] == 4_100
    assert [p["pid"] for p in doc["metrics"]["per_process"]["processes"]] == [200, 100]
    for stem in CORE_CSVS:
        assert (out / "tables" / f"{stem}.csv").is_file()
    assert sha256(trace) == before
    assert sorted(p.name for p in trace.parent.iterdir()) == ["trace.sqlite"]


def test_quiet_prints_nothing(trace, tmp_path):
    res = run_cli(trace, "--out", tmp_path / "out", "--quiet")
    assert (res.exit_code, res.stdout, res.stderr) == (0, "", "")
    assert (tmp_path / "out" / "report.json").is_file()


def test_options_reach_the_report(trace, tmp_path):
    out = tmp_path / "out"
    res = run_cli(trace, "--out", out, "-q", "--kernel-name", "short", "--max-gaps", "1",
                  "--min-gap-us", "0", "--format", "json")
    assert res.exit_code == 0, res.stderr
    assert sorted(p.name for p in out.iterdir()) == ["report.json"]
    doc = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert doc["metrics"]["top_kernels"]["name_mode"] == "short"
    assert doc["metrics"]["gpu_idle"]["min_gap_ns"] == 0
    assert len(doc["metrics"]["gpu_idle"]["gaps"]) == 1


def test_phase_map_option(trace, tmp_path):
    pm = tmp_path / "phases.json"
    pm.write_text(json.dumps({"decode": ["re:^k_[xyz]$"]}), encoding="utf-8")
    res = run_cli(trace, "--out", tmp_path / "out", "-q", "--phases-json", pm)
    assert res.exit_code == 0, res.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    res = run_cli(trace, "--out", tmp_path / "out2", "--phase-map", bad)
    assert res.exit_code == 2 and "not valid JSON" in res.stderr


def test_print_schema(trace):
    res = run_cli(trace, "--print-schema")
    assert res.exit_code == 0, res.stderr
    assert "nsys version: 2024.6.2.25" in res.stdout
    assert "kernel table: CUPTI_ACTIVITY_KIND_KERNEL" in res.stdout
    assert "CUPTI_ACTIVITY_KIND_KERNEL (6 rows)" in res.stdout


def one_error_line(res) -> str:
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert "Traceback" not in res.stderr
    assert res.stdout == ""
    return lines[0]


def test_missing_file(tmp_path):
    res = run_cli(tmp_path / "nope.sqlite", "--out", tmp_path / "out")
    assert res.exit_code == 3
    assert "no such file" in one_error_line(res)
    assert not (tmp_path / "out").exists()


def test_directory(tmp_path):
    res = run_cli(tmp_path / "in", "--out", tmp_path / "out")
    assert res.exit_code == 3
    assert "is a directory" in one_error_line(res)


def test_not_sqlite(tmp_path):
    bad = tmp_path / "in" / "notes.sqlite"
    bad.write_text("hello, this is not a database\n" * 10, encoding="utf-8")
    res = run_cli(bad, "--out", tmp_path / "out")
    assert res.exit_code == 3
    assert "not a SQLite database" in one_error_line(res)


def test_sqlite_that_is_not_an_nsys_export(tmp_path):
    db = tmp_path / "in" / "other.sqlite"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    res = run_cli(db, "--out", tmp_path / "out")
    assert res.exit_code == 3
    assert "not an Nsight Systems export" in one_error_line(res)


@pytest.mark.parametrize("suffix", [".nsys-rep", ".qdrep"])
def test_report_file_that_looks_like_json_is_still_a_report(suffix, tmp_path):
    """A report's name decides, not its first bytes: random bytes that begin like a JSON
    array (1 in 256 of them) still get the export command."""
    rep = tmp_path / "in" / f"profile{suffix}"
    rep.write_bytes(b"[" + os.urandom(4_095))
    res = run_cli(rep, "--out", tmp_path / "out")
    assert res.exit_code == 3
    line = one_error_line(res)
    assert "nsys export --type sqlite" in line
    assert "profile.sqlite" in line


@pytest.mark.parametrize("suffix", [".nsys-rep", ".qdrep"])
def test_report_file_given_by_mistake(suffix, tmp_path):
    rep = tmp_path / "in" / f"profile{suffix}"
    rep.write_bytes(os.urandom(4_096))
    res = run_cli(rep, "--out", tmp_path / "out")
    assert res.exit_code == 3
    line = one_error_line(res)
    assert "nsys export --type sqlite" in line
    assert "profile.sqlite" in line


def test_unknown_option(trace, tmp_path):
    res = run_cli(trace, "--out", tmp_path / "out", "--no-such-option")
    assert res.exit_code == 2
    assert "--no-such-option" in res.stderr


@pytest.mark.parametrize("value", ["pretty", "DEMANGLED", ""])
def test_bad_kernel_name(value, trace, tmp_path):
    res = run_cli(trace, "--out", tmp_path / "out", "--kernel-name", value)
    assert res.exit_code == 2
    assert f"Invalid value for '--kernel-name': {value!r} is not one of 'demangled', 'short', 'mangled'" in (
        one_error_line(res)
    )
    assert not (tmp_path / "out").exists()


def test_missing_out_is_a_usage_error(trace):
    res = run_cli(trace)
    assert res.exit_code == 2
    assert "--out" in one_error_line(res)


def run_module(*args: str | Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NSYS_LLM_EXPLAIN_DEBUG"}
    return subprocess.run(
        [sys.executable, "-m", "nsys_llm_explainer", *map(str, args)],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )


def test_subprocess_run(trace, tmp_path):
    before = sha256(trace)
    out = tmp_path / "out"
    proc = run_module(trace, "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"wrote {out}/")
    assert json.loads((out / "report.json").read_text(encoding="utf-8"))["tool"]["name"] == (
        "nsys-llm-explain"
    )
    assert sha256(trace) == before
    assert sorted(p.name for p in trace.parent.iterdir()) == ["trace.sqlite"]


def test_subprocess_exit_codes(trace, tmp_path):
    missing = run_module(tmp_path / "nope.sqlite", "--out", tmp_path / "o1")
    assert missing.returncode == 3 and "Traceback" not in missing.stderr
    unknown = run_module(trace, "--out", tmp_path / "o2", "--bogus")
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr
    assert len(unknown.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--md", "wide"), "Invalid value for '--md': 'wide' is not one of 'compact', 'full'"),
        (
            ("--format", "md,pdf"),
            "Invalid value for '--format': unknown format 'pdf' (choose from md, json, csv, html, ncu)",
        ),
        (("--format", ","), "Invalid value for '--format': no format given"),
    ],
)
def test_choices_are_checked_by_the_parser(args, message, trace, tmp_path):
    res = run_cli(trace, "--out", tmp_path / "out", *args)
    assert res.exit_code == 2
    assert message in one_error_line(res)
    assert not (tmp_path / "out").exists()


def test_the_report_is_the_default_command(trace, tmp_path):
    """`TRACE --out DIR` and `report TRACE --out DIR` are the same command; options may come first."""
    a = run_cli(trace, "--out", tmp_path / "a", "--format", "json", "-q")
    b = run_cli("report", trace, "--out", tmp_path / "b", "--format", "json", "-q")
    c = run_cli("-q", "--format", "json", "--out", tmp_path / "c", trace)
    assert (a.exit_code, b.exit_code, c.exit_code) == (0, 0, 0)
    texts = {(tmp_path / d / "report.json").read_text(encoding="utf-8") for d in ("a", "b", "c")}
    assert len(texts) == 1


def test_progress_line_waits_two_seconds_then_shows_at_most_four_times_a_second(monkeypatch) -> None:
    import io
    from types import SimpleNamespace

    from nsys_llm_explainer.cli import report as cli_report

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    err = Tty()
    monkeypatch.setattr(cli_report.sys, "stderr", err)
    clock = iter([100.0, 101.0, 102.5, 102.6, 102.8, 200.0])
    monkeypatch.setattr(cli_report, "time", SimpleNamespace(monotonic=lambda: next(clock)))
    p = cli_report.Progress(enabled=True)  # starts at 100.0
    p("kernels", 10)  # 1.0 s in: too early
    p("kernels", 2_000)  # 2.5 s in: shown
    p("kernels", 3_000)  # 0.1 s after the last: too soon
    p("runtime", 4_000)  # 0.3 s after: shown
    p.close()
    assert err.getvalue() == (
        "\r\x1b[Kreading kernels: 2,000 rows\r\x1b[Kreading runtime: 4,000 rows\r\x1b[K"
    )
    quiet = cli_report.Progress(enabled=False)
    quiet("kernels", 1)
    quiet.close()
    assert err.getvalue().count("reading") == 2
