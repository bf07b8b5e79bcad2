"""Hostile PyTorch profiler traces through the whole CLI, with the guarantees the Nsight Systems
corpus has (tests/e2e/test_bad_inputs.py): the documented exit code, no traceback, one stderr
line for a failure, the input's bytes unchanged and nothing created beside it, and the run over
within 30 s. Numbers beyond 64 bits or beyond 2^62 ns leave their event out, counted in a
warning; names longer than the analysis reads are cut, and the report says so.

The cases with large inputs run in a subprocess under the time limit, with an empty home
directory; these are the guarantees any trace reader must keep.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest

from nsys_llm_explainer import cli
from nsys_llm_explainer.trace.clean import NAME_LIMIT
from tests import fresh
from tests.fixtures import hostile_kineto as hk
from tests.fixtures import variants

LIMIT_S = 30.0


def snapshot(d: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in d.iterdir()}


def test_corpus_ids_are_unique() -> None:
    assert len({c.id for c in hk.CASES}) == len(hk.CASES) >= 30


def test_the_good_trace_is_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The base every case changes: all its events are read, so a case's counts are its own."""
    out = tmp_path / "out"
    assert cli.run([str(hk.good(tmp_path)), "--out", str(out), "-q", "--format", "json"]) == 0
    doc = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert doc["warnings"] == [] and capsys.readouterr().err == ""
    assert doc["metrics"]["top_kernels"]["kernel_count"] == hk.GOOD_KERNELS


def run_case(case: hk.Case, trace: Path, out: Path, tmp_path: Path,
             capsys: pytest.CaptureFixture[str]) -> tuple[int, str, float]:
    args = [str(trace), "--out", str(out), "-q"]
    t0 = time.monotonic()
    if case.big:
        ran = fresh.run(fresh.dev_tool(), args, fresh.new_home(tmp_path / "homes"), tmp_path,
                        timeout=LIMIT_S)
        return ran.returncode, ran.stdout + ran.stderr, time.monotonic() - t0
    code = cli.run(args)
    captured = capsys.readouterr()
    return code, captured.out + captured.err, time.monotonic() - t0


@pytest.mark.parametrize("case", hk.CASES, ids=lambda c: c.id)
def test_case(case: hk.Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    indir = tmp_path / "in"
    indir.mkdir()
    trace = case.build(indir)
    before = snapshot(indir)
    out = tmp_path / "out"
    code, printed, seconds = run_case(case, trace, out, tmp_path, capsys)
    assert seconds < LIMIT_S
    assert "Traceback" not in printed and "internal error" not in printed, printed[:2000]
    assert snapshot(indir) == before  # bytes unchanged, nothing created beside the input
    assert code == case.exit_code, printed[:2000]
    if case.exit_code != 0:
        lines = printed.splitlines()
        assert len(lines) == 1 and lines[0].startswith("nsys-llm-explain: error: "), printed[:2000]
        for want in case.message:
            assert want in lines[0].lower(), lines[0]
        assert not out.exists()
        return
    assert printed == ""
    doc = json.loads((out / "report.json").read_text(encoding="utf-8"))
    md = (out / "report.md").read_text(encoding="utf-8")
    assert not [w for w in doc["warnings"] if "internal error" in w]  # no metric crashed
    assert "could not be rendered" not in md
    for want in case.warnings:
        assert any(want in w for w in doc["warnings"]), doc["warnings"]
        assert want in md.replace("\\", "")  # said in report.md (escaped), not only in report.json
    if case.kernels is not None:
        tk = doc["metrics"]["top_kernels"]
        assert tk["status"] == "ok", tk
        assert tk["kernel_count"] == case.kernels
    if case.big:  # a cut name is not carried whole into any output
        written = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
        assert written < 40 * NAME_LIMIT * 4 + (2 << 20), written


def test_a_cut_name_keeps_its_length_and_digest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = hk.long_names(2, NAME_LIMIT + 10)(tmp_path)
    out = tmp_path / "out"
    assert cli.run([str(trace), "--out", str(out), "-q", "--format", "json,csv"]) == 0
    doc = json.loads((out / "report.json").read_text(encoding="utf-8"))
    names = [r["name"] for r in doc["metrics"]["top_kernels"]["kernels"] if len(r["name"]) > NAME_LIMIT]
    assert len(names) == 2 and len(set(names)) == 2  # names that differ past the cut stay apart
    for i, name in enumerate(sorted(names)):
        whole = f"{i:08d}" + "k" * (NAME_LIMIT + 2)
        assert name.startswith(whole[:NAME_LIMIT])
        assert f"{len(whole):,} characters, sha1 {hashlib.sha1(whole.encode()).hexdigest()}" in name
    (tmp_path / "exact").mkdir()
    short = hk.long_names(1, NAME_LIMIT)(tmp_path / "exact")
    out2 = tmp_path / "out2"
    assert cli.run([str(short), "--out", str(out2), "-q", "--format", "json"]) == 0
    doc2 = json.loads((out2 / "report.json").read_text(encoding="utf-8"))
    assert doc2["warnings"] == []  # a name of exactly NAME_LIMIT characters is read whole
    assert any(len(r["name"]) == NAME_LIMIT for r in doc2["metrics"]["top_kernels"]["kernels"])


def test_fleet_over_hostile_traces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d1, d2 = tmp_path / "a", tmp_path / "b"
    d1.mkdir()
    d2.mkdir()
    overflow = hk.CASES[0].build(d1)
    no_kernel_table = variants.no_kernels(d2 / "nokernels.sqlite")
    out = tmp_path / "out"
    code = cli.run(["fleet", str(overflow), str(no_kernel_table), "--out", str(out), "-q", "--no-cache"])
    err = capsys.readouterr().err
    assert code == 0 and "Traceback" not in err
    doc = json.loads((out / "fleet.json").read_text(encoding="utf-8"))
    errors = {Path(t["path"]).name: t["error"] for t in doc["traces"]}
    assert errors[overflow.name] is None
    assert errors[no_kernel_table.name] == "the export has no kernel table (kernel not captured)"
    assert "internal error" not in (out / "fleet.md").read_text(encoding="utf-8")


def test_fleet_over_only_a_trace_without_kernels_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = variants.no_kernels(tmp_path / "nokernels.sqlite")
    before = trace.read_bytes()
    code = cli.run(["fleet", str(trace), "--out", str(tmp_path / "out"), "-q", "--no-cache"])
    err = capsys.readouterr().err.splitlines()
    assert code == 3
    assert len(err) == 1 and err[0].startswith("nsys-llm-explain: error: no trace could be analyzed")
    assert "the export has no kernel table" in err[0] and "internal error" not in err[0]
    assert trace.read_bytes() == before
