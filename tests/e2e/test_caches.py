"""A cache only changes how fast a run is: never what it writes, nor whether it succeeds.

The compiled-template cache (render/templates.py) and fleet's result cache (fleet/worker.py):
a cold and a warm run write the same bytes; eight processes started at once on one cold cache
all succeed with the same files; damaged entries, entries written by another version and a
cache that cannot be written give the same report, with nothing on stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from nsys_llm_explainer import __version__
from nsys_llm_explainer.cli import run as cli_run
from tests import fresh

TIMING = "fleet_timing.json"


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return fresh.small_traces(tmp_path_factory.mktemp("traces"))


def template_entries(home: Path) -> dict[str, bytes]:
    root = home / ".cache" / "nsys-llm-explain"
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.glob("templates-*/*/*.cache"))}


def report(trace: Path, home: Path, out: Path, *extra: str, **env: str) -> dict[str, bytes]:
    ran = fresh.run(fresh.dev_tool(), [trace, "--out", out, "-q", *extra], home, out.parent, **env).ok()
    assert ran.stderr == "" and ran.stdout == ""
    return fresh.files(out)


# -- the compiled-template cache ---------------------------------------------------------------

def test_cold_warm_and_no_cache_runs_write_the_same_files(traces: dict[str, Path], tmp_path: Path) -> None:
    home = fresh.new_home(tmp_path)
    cold = report(traces["nsys"], home, tmp_path / "cold")
    entries = template_entries(home)
    families = {k.split("/")[1].rsplit("-", 1)[0] for k in entries}
    assert families == {"report-md", "report-html"}
    assert report(traces["nsys"], home, tmp_path / "warm") == cold
    assert template_entries(home) == entries  # the warm run compiled nothing
    assert report(traces["nsys"], home, tmp_path / "off", NSYS_LLM_EXPLAIN_NO_CACHE="1") == cold
    diff_args = ["diff", traces["nsys"], traces["nsys2"], "--out"]
    first = fresh.run(fresh.dev_tool(), [*diff_args, tmp_path / "d1"], home, tmp_path).ok()
    second = fresh.run(fresh.dev_tool(), [*diff_args, tmp_path / "d2"], home, tmp_path).ok()
    assert first.stdout == second.stdout and fresh.files(tmp_path / "d1") == fresh.files(tmp_path / "d2")
    assert any("/diff-md-" in f"/{k}" for k in template_entries(home))


def _start(argv: list[str], home: Path, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(argv, cwd=cwd, env=fresh.environment(home), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_eight_processes_on_one_cold_cache(traces: dict[str, Path], tmp_path: Path) -> None:
    home = fresh.new_home(tmp_path)
    tool = list(fresh.dev_tool())
    procs = [_start([*tool, str(traces["kineto"]), "--out", str(tmp_path / f"out{i}"), "-q"], home, tmp_path)
             for i in range(8)]
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, results
    assert all(out == err == "" for out, err in results)
    first = fresh.files(tmp_path / "out0")
    assert all(fresh.files(tmp_path / f"out{i}") == first for i in range(1, 8))
    assert report(traces["kineto"], home, tmp_path / "after") == first
    assert not [p for p in (home / ".cache").rglob(".tmp-*")]  # no temporary file left behind


def _truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _garbage(data: bytes) -> bytes:
    return bytes((b * 7 + 13) % 256 for b in data)


def _flip_code(data: bytes) -> bytes:
    return data[:-20] + bytes(b ^ 0xFF for b in data[-20:])


def _other_version(data: bytes) -> bytes:
    return data.replace(__version__.encode(), b"0.0.0-other", 1)


DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "truncated": _truncate, "garbage": _garbage, "flipped": _flip_code, "other_version": _other_version,
    "empty": lambda data: b"",
}


def test_damaged_template_cache_gives_the_same_report(traces: dict[str, Path], tmp_path: Path) -> None:
    """Every kind of damage at once, each on some of the entries; "swapped": an entry holds
    another template's valid entry."""
    home = fresh.new_home(tmp_path)
    before = report(traces["nsys"], home, tmp_path / "before", "--format", "md,html")
    root = home / ".cache" / "nsys-llm-explain"
    paths = sorted(root.glob("templates-*/*/*.cache"))
    kinds = [*DAMAGE, "swapped"]
    assert len(paths) >= 2 * len(kinds)
    contents = [p.read_bytes() for p in paths]
    for i, p in enumerate(paths):
        kind = kinds[i % len(kinds)]
        p.write_bytes(contents[(i + 1) % len(paths)] if kind == "swapped" else DAMAGE[kind](contents[i]))
    damaged = [p.read_bytes() for p in paths]
    assert report(traces["nsys"], home, tmp_path / "after", "--format", "md,html") == before
    repaired = [p.read_bytes() for p in paths]
    assert all(r != d for r, d in zip(repaired, damaged, strict=True))  # compiled again and replaced


def test_a_cache_that_cannot_be_written_gives_the_same_report(traces: dict[str, Path], tmp_path: Path) -> None:
    home = fresh.new_home(tmp_path)
    reference = report(traces["kineto"], home, tmp_path / "ref")
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("a file where the cache folder would be")
    assert report(traces["kineto"], home, tmp_path / "a", XDG_CACHE_HOME=str(not_a_folder)) == reference
    blocked = fresh.new_home(tmp_path)
    (blocked / ".cache").mkdir()
    (blocked / ".cache" / "nsys-llm-explain").write_text("not a folder")
    assert report(traces["kineto"], blocked, tmp_path / "b") == reference
    read_only = fresh.new_home(tmp_path)
    (read_only / ".cache").mkdir(mode=0o500)
    try:
        assert report(traces["kineto"], read_only, tmp_path / "c") == reference
    finally:
        (read_only / ".cache").chmod(0o700)


# -- fleet's result cache -------------------------------------------------------------------------

def fleet(paths: list[Path], out: Path, *extra: str) -> dict[str, bytes]:
    assert cli_run(["fleet", *map(str, paths), "--out", str(out), "-q", "-j", "1", *extra]) == 0
    return fresh.files(out, skip=(TIMING,))


def cached(out: Path) -> int:
    return int(json.loads((out / TIMING).read_text(encoding="utf-8"))["cached"])


def _wrong_key(text: str) -> str:
    doc = json.loads(text)
    doc["key"] = "0" * 64
    return json.dumps(doc)


def _wrong_sha(text: str) -> str:
    doc = json.loads(text)
    doc["summary"] = doc["summary"].replace('"ranks"', '"ranks" ', 1)
    return json.dumps(doc)


def _fleet_other_version(text: str) -> str:
    doc = json.loads(text)
    doc["tool"] = "0.0.0-other"
    return json.dumps(doc)


FLEET_DAMAGE: dict[str, Callable[[str], str]] = {
    "truncated": lambda t: t[: len(t) // 2], "not_json": lambda t: "\x00garbage", "a_list": lambda t: "[]",
    "other_version": _fleet_other_version, "other_key": _wrong_key, "wrong_digest": _wrong_sha,
    "older_layout": lambda t: json.loads(t)["summary"],  # the summary alone, as older versions wrote it
}


@pytest.mark.parametrize("damage", list(FLEET_DAMAGE))
def test_damaged_fleet_cache_gives_the_same_outputs(
    damage: str, traces: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = [traces["nsys"], traces["kineto"]]
    cache = tmp_path / "cache"
    cold = fleet(inputs, tmp_path / "cold", "--cache-dir", str(cache))
    entries = sorted(cache.glob("*/*/summary.json"))
    assert len(entries) == 2
    for p in entries:
        p.write_text(FLEET_DAMAGE[damage](p.read_text(encoding="utf-8")), encoding="utf-8")
    assert fleet(inputs, tmp_path / "again", "--cache-dir", str(cache)) == cold
    assert cached(tmp_path / "again") == 0
    assert fleet(inputs, tmp_path / "warm", "--cache-dir", str(cache)) == cold
    assert cached(tmp_path / "warm") == 2  # the damaged entries were replaced
    assert "Traceback" not in capsys.readouterr().err


def test_fleet_cache_off_or_unwritable_gives_the_same_outputs(
    traces: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs = [traces["nsys"], traces["kineto"]]
    reference = fleet(inputs, tmp_path / "ref", "--no-cache")
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    assert fleet(inputs, tmp_path / "a", "--cache-dir", str(not_a_folder)) == reference
    assert fleet(inputs, tmp_path / "b", "--cache-dir", str(not_a_folder / "below")) == reference
    monkeypatch.setenv("NSYS_LLM_EXPLAIN_NO_CACHE", "1")
    cache = tmp_path / "off"
    assert fleet(inputs, tmp_path / "c", "--cache-dir", str(cache)) == reference
    assert not cache.exists()


def test_eight_fleet_processes_on_one_cold_cache(traces: dict[str, Path], tmp_path: Path) -> None:
    home = fresh.new_home(tmp_path)
    tool = list(fresh.dev_tool())
    inputs = [str(traces["nsys"]), str(traces["kineto"])]
    procs = [_start([*tool, "fleet", *inputs, "--out", str(tmp_path / f"out{i}"), "-q", "-j", "1"], home, tmp_path)
             for i in range(8)]
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, results
    assert all(err == "" for _, err in results)
    first = fresh.files(tmp_path / "out0", skip=(TIMING,))
    assert all(fresh.files(tmp_path / f"out{i}", skip=(TIMING,)) == first for i in range(1, 8))
    entries = sorted((home / ".cache" / "nsys-llm-explain" / "fleet").glob("*/*/summary.json"))
    assert len(entries) == 2
    again = fresh.run(fresh.dev_tool(), ["fleet", *inputs, "--out", tmp_path / "warm", "-q"], home, tmp_path).ok()
    assert again.stderr == ""
    assert fresh.files(tmp_path / "warm", skip=(TIMING,)) == first
    assert cached(tmp_path / "warm") == 2
    assert not [p for p in (home / ".cache").rglob(".*tmp-*")]
    assert os.access(entries[0], os.R_OK)
