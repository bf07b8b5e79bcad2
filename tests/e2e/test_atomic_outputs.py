"""Outputs are written atomically: an interrupted run leaves the previous report or none,
no temporary directories, and never deletes files that are not ours."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from nsys_llm_explainer import cli
from nsys_llm_explainer.render import output
from tests.fixtures import hostile as h


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    (tmp_path / "in").mkdir()
    return h.good(tmp_path / "in")


@pytest.fixture
def public() -> Iterator[Path]:
    d = h.world_dir("outputs")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str]:
    code = cli.run([str(a) for a in argv])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


def digest(d: Path) -> dict[str, str]:
    return {
        str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(d.rglob("*"))
        if p.is_file()
    }


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def boom(exc: BaseException, at: int = 2):  # noqa: ANN201 - a Path.write_text stand-in
    """A Path.write_text whose `at`-th call raises `exc` (a crash midway through writing)."""
    real, calls = Path.write_text, []

    def write_text(path: Path, *a: object, **kw: object) -> int:
        calls.append(path)
        if len(calls) == at:
            raise exc
        return real(path, *a, **kw)  # type: ignore[arg-type]

    return write_text


@pytest.mark.parametrize(
    "exc, code", [(KeyboardInterrupt(), 130), (OSError(errno.ENOSPC, "No space left on device"), 4)]
)
def test_crash_without_previous_report_leaves_none(
    trace: Path, tmp_path: Path, capsys, monkeypatch, exc: BaseException, code: int
) -> None:
    monkeypatch.setattr(Path, "write_text", boom(exc))
    rc, err = run(capsys, trace, "--out", tmp_path / "out", "-q")
    assert rc == code and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out").exists()
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), OSError(errno.EIO, "I/O error")])
def test_crash_keeps_previous_report(
    trace: Path, tmp_path: Path, capsys, monkeypatch, exc: BaseException
) -> None:
    out = tmp_path / "out"
    assert run(capsys, trace, "--out", out, "-q")[0] == 0
    before = digest(out)
    monkeypatch.setattr(Path, "write_text", boom(exc, at=3))
    assert run(capsys, trace, "--out", out, "-q", "--top-n", "3")[0] != 0
    assert digest(out) == before
    assert leftovers(tmp_path) == []


def test_interrupt_between_renames_restores_previous(
    trace: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    out = tmp_path / "out"
    assert run(capsys, trace, "--out", out, "-q")[0] == 0
    before = digest(out)
    real, calls = os.rename, []

    def rename(src: object, dst: object) -> None:
        calls.append((src, dst))
        if len(calls) == 2:  # old report moved aside, new one not yet in place
            raise KeyboardInterrupt
        real(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(output.os, "rename", rename)
    assert run(capsys, trace, "--out", out, "-q")[0] == 130
    assert digest(out) == before
    assert leftovers(tmp_path) == []


def test_interrupt_during_analysis_creates_nothing(
    trace: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    def interrupted(*a: object, **kw: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("nsys_llm_explainer.api.explain", interrupted)
    assert run(capsys, trace, "--out", tmp_path / "out", "-q")[0] == 130
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]


def test_previous_report_is_replaced(trace: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    assert run(capsys, trace, "--out", out, "-q", "--top-n", "7")[0] == 0
    assert run(capsys, trace, "--out", out, "-q", "--top-n", "9", "--format", "md,json")[0] == 0
    doc = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert doc["options"]["top_n"] == 9
    assert not (out / "tables").exists()  # the whole previous report went
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("fmt", ["md", "csv", "json"])
def test_rerun_into_single_format_report(trace: Path, tmp_path: Path, capsys, fmt: str) -> None:
    out = tmp_path / "out"
    assert run(capsys, trace, "--out", out, "-q", "--format", fmt)[0] == 0
    assert run(capsys, trace, "--out", out, "-q", "--format", fmt)[0] == 0


def test_unrelated_files_are_never_deleted(trace: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    (out / "tables").mkdir(parents=True)
    (out / "notes.txt").write_text("mine")
    (out / "tables" / "mine.xlsx").write_text("mine too")
    code, err = run(capsys, trace, "--out", out, "-q")
    assert code == 4 and "--force" in err and "not empty" in err
    assert sorted(digest(out)) == ["notes.txt", "tables/mine.xlsx"]
    assert run(capsys, trace, "--out", out, "-q", "--force")[0] == 0
    assert run(capsys, trace, "--out", out, "-q")[0] == 0  # now ours: no --force needed
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "tables" / "mine.xlsx").read_text() == "mine too"
    assert (out / "report.json").is_file() and (out / "tables" / "kernels.csv").is_file()
    assert leftovers(tmp_path) == []


def test_output_is_a_file(trace: Path, tmp_path: Path, capsys) -> None:
    (tmp_path / "out").write_text("x")
    code, err = run(capsys, trace, "--out", tmp_path / "out", "-q")
    assert code == 4 and "not a directory" in err and "--out" in err
    assert (tmp_path / "out").read_text() == "x"


def test_output_below_a_file(trace: Path, tmp_path: Path, capsys) -> None:
    (tmp_path / "f").write_text("x")
    code, err = run(capsys, trace, "--out", tmp_path / "f" / "sub" / "out", "-q")
    assert code == 4 and "is a file, not a directory" in err


def test_output_on_unwritable_filesystem(trace: Path, capsys) -> None:
    # /proc refuses new entries even to root: the read-only-mount stand-in.
    code, err = run(capsys, trace, "--out", "/proc/nle-no-such/out", "-q")
    assert code == 4 and "cannot write to /proc" in err, err


def test_output_dir_not_writable(trace: Path, public: Path, capsys) -> None:
    locked = public / "locked"
    locked.mkdir(mode=0o555)
    locked.chmod(0o555)
    with h.unprivileged():
        code, err = run(capsys, trace.resolve(), "--out", locked / "out", "-q")
    assert code == 4 and "permission denied" in err.lower(), err
    assert list(locked.iterdir()) == []


def test_unreadable_input(public: Path, capsys) -> None:
    trace = h.good(public)
    trace.chmod(0)
    before = hashlib.sha256(trace.read_bytes()).hexdigest()
    with h.unprivileged():
        try:
            trace.open("rb").close()
            pytest.skip("chmod 000 does not stop this user from reading")
        except PermissionError:
            pass
        code, err = run(capsys, trace, "--out", public / "out", "-q")
    assert code == 3, err
    assert "permission denied" in err.lower() and "check its permissions" in err
    assert not (public / "out").exists()
    assert hashlib.sha256(trace.read_bytes()).hexdigest() == before


def test_report_dir_mode_follows_umask(trace: Path, tmp_path: Path, capsys) -> None:
    old = os.umask(0o022)
    try:
        assert run(capsys, trace, "--out", tmp_path / "out", "-q")[0] == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o755
