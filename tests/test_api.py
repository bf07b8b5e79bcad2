"""The notebook API (explain -> Report) and the installed console script."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsys_llm_explainer import TOOL_NAME, __version__
from nsys_llm_explainer.api import Report
from nsys_llm_explainer.errors import OutputError
from nsys_llm_explainer.render import csv_writer
from tests.conftest import run_cli
from tests.schema.test_report_schema import full_trace

SCRIPT = Path(sys.executable).with_name(TOOL_NAME)


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    return full_trace(tmp_path_factory.mktemp("api") / "t.sqlite", "2024.6")


@pytest.fixture(scope="module")
def report(trace: Path) -> Report:
    from nsys_llm_explainer import explain

    return explain(trace)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_explain_is_importable_from_the_package(report: Report):
    import nsys_llm_explainer

    assert isinstance(report, nsys_llm_explainer.Report)
    assert report.findings and all(f.rule_id.startswith("NLE") for f in report.findings)


def test_write_writes_what_the_cli_writes(report: Report, trace: Path, tmp_path: Path):
    assert run_cli(trace, "--out", tmp_path / "cli", "--quiet").exit_code == 0
    report.write(tmp_path / "api")
    assert _files(tmp_path / "api") == _files(tmp_path / "cli")


def test_write_chooses_formats_and_refuses_foreign_directories(report: Report, tmp_path: Path):
    report.write(tmp_path / "a", formats="md,json")
    assert {p.name for p in (tmp_path / "a").iterdir()} == {"report.md", "report.json", "plots"}
    report.write(tmp_path / "b", formats=["csv"])
    assert [p.name for p in (tmp_path / "b").iterdir()] == ["tables"]
    foreign = tmp_path / "c"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(OutputError):
        report.write(foreign, formats="json")
    report.write(foreign, formats="json", force=True)
    assert (foreign / "notes.txt").read_text() == "mine" and (foreign / "report.json").is_file()


def test_to_dict_is_report_json_and_a_copy(report: Report, tmp_path: Path):
    report.write(tmp_path, formats="json")
    doc = report.to_dict()
    assert doc == json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    # explain() fills the diagnosis; report.json holds the same one.
    d = report.diagnosis
    assert d is not None and d.summary
    assert (doc["diagnosis"]["verdict"], doc["diagnosis"]["summary"]) == (d.verdict, d.summary)
    assert doc["diagnosis"]["devices"] == list(d.devices)
    doc["metrics"].clear()
    assert report.to_dict()["metrics"]


def test_table_gives_every_csv_table(report: Report, tmp_path: Path):
    report.write(tmp_path, formats="csv")
    names = report.table_names()
    assert sorted(f"{n}.csv" for n in names) == sorted(p.name for p in (tmp_path / "tables").iterdir())
    for name in names:
        frame = report.table(name)
        text = (tmp_path / "tables" / f"{name}.csv").read_text(encoding="utf-8")
        header, *rows = list(csv.reader(io.StringIO(text)))
        assert list(frame.columns) == header, name
        assert len(frame) == len(rows), name
        on_disk = pd.read_csv(io.StringIO(text))
        for column in frame.columns:
            if pd.api.types.is_numeric_dtype(frame[column]) and len(frame):
                assert np.allclose(frame[column].to_numpy(float), on_disk[column].to_numpy(float), equal_nan=True)
    assert report.table("kernels.csv").equals(report.table("kernels"))
    kernels = report.table("kernels")
    assert list(kernels["label"]) == [report.kernel_labels(n) for n in kernels["name"]]
    with pytest.raises(KeyError, match="no table"):
        report.table("nope")


def test_the_cli_writes_through_report_write(trace: Path, tmp_path: Path, monkeypatch):
    calls = []
    original = Report.write

    def spy(self, out_dir, formats="md,json,csv,html", force=False, md="compact", **kw):
        calls.append((Path(out_dir), formats, force, md))
        return original(self, out_dir, formats, force, md, **kw)

    monkeypatch.setattr(Report, "write", spy)
    assert run_cli(trace, "--out", tmp_path / "o", "--format", "json", "--quiet").exit_code == 0
    assert run_cli(trace, "--out", tmp_path / "f", "--md", "full", "--quiet").exit_code == 0
    assert [(p.name, force, md) for p, _, force, md in calls] == [("o", False, "compact"), ("f", False, "full")]


# --- the CSV writer equals pandas' to_csv, with the spreadsheet guard ---------------------

def reference_csv(frame: pd.DataFrame) -> str:
    """to_csv(index=False) after prefixing every text cell a spreadsheet would run with "'"."""
    guarded = frame.copy()
    for c in guarded.columns:
        if not pd.api.types.is_numeric_dtype(guarded[c]) and not pd.api.types.is_bool_dtype(guarded[c]):
            guarded[c] = [
                "'" + v if isinstance(v, str) and v[:1] in ("=", "+", "-", "@", "\t", "\r") else v
                for v in guarded[c]
            ]
    return guarded.to_csv(index=False, lineterminator="\n")


cell = st.one_of(st.none(), st.integers(-10**12, 10**12), st.floats(allow_nan=True, allow_infinity=False),
                 st.text(max_size=12), st.sampled_from(["=1+1", "-x", "@a", "+", "a,b", 'q"uote', "line\nbreak",
                                                        "\tx", "\rcr"]),
                 st.booleans())


@settings(max_examples=150)
@given(st.lists(st.tuples(cell, cell, st.integers(0, 9), st.floats(allow_nan=True, allow_infinity=False),
                          st.booleans(), st.text(max_size=6)),
                max_size=8))
def test_csv_writer_matches_to_csv(rows):
    frame = pd.DataFrame(rows, columns=["a", "b", "n", "x", "flag", "name"])
    frame["a"] = frame["a"].astype(object)
    frame["b"] = frame["b"].astype(object)
    if len(frame):
        frame["n"] = frame["n"].astype("int64")
        frame["x"] = frame["x"].astype("float64")
        frame["flag"] = frame["flag"].astype(bool)
        frame["name"] = frame["name"].astype("string")  # pandas' string dtype, as NVTX names are
    assert csv_writer.render_frame(frame) == reference_csv(frame)


def test_csv_writer_matches_to_csv_on_a_large_table():
    rng = np.random.default_rng(7)
    n = 5_000
    names = np.array(["aten::mm", "=cmd", "-neg", "a,b", 'say "hi"', "multi\nline", "plain"], dtype=object)
    frame = pd.DataFrame({
        "name": pd.array(names[rng.integers(0, len(names), n)], dtype="string"),
        "count": rng.integers(0, 10**9, n),
        "share": np.where(rng.random(n) < 0.1, np.nan, rng.random(n) * 100),
        "phase": np.array([None, "decode", "prefill"], dtype=object)[rng.integers(0, 3, n)],
    })
    assert csv_writer.render_frame(frame) == reference_csv(frame)


# --- the installed console script -----------------------------------------------------


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    if not SCRIPT.is_file():
        pytest.skip(f"console script not installed next to {sys.executable}")
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=120, check=False)


def test_console_script_version():
    res = _script("--version")
    assert (res.returncode, res.stdout.strip(), res.stderr) == (0, f"{TOOL_NAME} {__version__}", "")


def test_console_script_help_and_diff_help():
    res = _script("--help")
    assert res.returncode == 0 and res.stdout.startswith(f"Usage: {TOOL_NAME} [report] TRACE [OPTIONS]")
    assert "\nCommands:\n  report " in res.stdout
    res = _script("report", "--help")
    assert res.returncode == 0 and res.stdout.startswith(f"Usage: {TOOL_NAME} report [OPTIONS]")
    res = _script("diff", "--help")
    assert res.returncode == 0 and res.stdout.startswith(f"Usage: {TOOL_NAME} diff [OPTIONS]")


def test_console_script_missing_trace_is_a_usage_error():
    res = _script()
    assert res.returncode == 2 and "Missing argument" in res.stderr


def test_version_and_help_load_no_analysis_modules():
    code = (
        "import sys\nfrom nsys_llm_explainer import cli\n"
        "for args in (['--version'], ['--help']):\n"
        "    try:\n        cli.run(args)\n    except SystemExit:\n        pass\n"
        "print(sorted(m for m in ('pandas', 'numpy', 'jinja2') if m in sys.modules))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert res.stdout.strip().splitlines()[-1] == "[]"
