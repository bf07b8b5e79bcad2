"""The bad-input corpus: every case through the whole CLI, with its exact exit code.

Each case asserts: the exit code; for failures one stderr line naming the problem and what to
do; never a traceback; the input's bytes unchanged (sha256) and no file created beside it;
unreadable inputs create no output directory; damaged but readable inputs still write the
report, with the affected sections skipped and a warning that counts the ignored rows.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from nsys_llm_explainer import cli
from nsys_llm_explainer.errors import ExitCode
from tests.fixtures.hostile_cases import CASES, Case


def sha(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def snapshot(d: Path) -> dict[str, str | None]:
    return {p.name: sha(p) for p in d.iterdir()}


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.run(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_corpus_size() -> None:
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_case(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    indir = tmp_path / "in"
    indir.mkdir()
    trace = case.build(indir)
    before = snapshot(indir)
    out = tmp_path / "out"
    code, stdout, stderr = run([str(trace), "--out", str(out), "-q"], capsys)
    assert "Traceback" not in stderr + stdout
    assert snapshot(indir) == before  # bytes unchanged, nothing created beside the input
    assert code == case.exit_code, stderr
    if case.exit_code != 0:
        lines = stderr.splitlines()
        assert len(lines) == 1, stderr
        assert lines[0].startswith("nsys-llm-explain: error: ")
        for want in case.message:
            assert want.lower() in lines[0].lower(), lines[0]
        assert not out.exists()
        return
    assert stderr == ""
    doc = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert not [w for w in doc["warnings"] if "internal error" in w]  # no metric crashed
    assert "could not be rendered" not in (out / "report.md").read_text(encoding="utf-8")
    for want in case.warnings:
        assert any(want in w for w in doc["warnings"]), doc["warnings"]
    for mid in case.skipped:
        assert doc["metrics"][mid]["status"] == "skipped", mid
    for want in case.extra:
        reasons = " ".join(m.get("reason", "") for m in doc["metrics"].values()).lower()
        assert want.lower() in reasons, reasons
    if case.kernels is not None:
        tk = doc["metrics"]["top_kernels"]
        assert tk["status"] == "ok", tk
        assert tk["kernel_count"] == case.kernels


def test_exit_codes_documented(capsys: pytest.CaptureFixture[str]) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    assert cli.run(["--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    for code in ExitCode:
        assert f"| {int(code)} |" in section, code
        assert f"{int(code)} " in cli.EXIT_CODES_HELP, code
    assert " ".join(cli.EXIT_CODES_HELP.split()) in help_text
