"""Every command and output as a new user runs it: in a subprocess, with a new empty home
directory (so no cache) for each run, from a working directory of its own; once with the
project's own install and once from `pip install .` (not editable) into a new virtualenv.

A run on a new machine must write what a run on a used one writes: each --format alone writes
the same bytes as the same file of a run with all of them, and --jobs 1 the same as the default.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from nsys_llm_explainer import __version__
from tests import fresh

FORMATS = ("md", "json", "csv", "html", "ncu")
INSTALLS = ["project", pytest.param("pip", marks=pytest.mark.slow)]


@pytest.fixture(scope="session")
def pip_tool(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, ...]:
    """nsys-llm-explain from `pip install .` into a new virtualenv (one per test session)."""
    work = tmp_path_factory.mktemp("pip-install")
    script = fresh.install(work / "venv", work)
    where = subprocess.run(
        [str(work / "venv" / "bin" / "python"), "-c", "import nsys_llm_explainer; print(nsys_llm_explainer.__file__)"],
        cwd=work, capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()
    assert Path(where).is_relative_to(work / "venv"), where  # the installed copy, not the checkout
    return (str(script),)


@pytest.fixture(params=INSTALLS)
def tool(request: pytest.FixtureRequest) -> tuple[str, ...]:
    if request.param == "pip":
        return request.getfixturevalue("pip_tool")  # type: ignore[no-any-return]
    return fresh.dev_tool()


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return fresh.small_traces(tmp_path_factory.mktemp("traces"))


def digests(paths: list[Path]) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def only_cache(home: Path) -> None:
    """A run keeps nothing in the home directory but the tool's own cache."""
    left = fresh.cache_entries(home)
    assert all(p.startswith(".cache/nsys-llm-explain/") for p in left), left


@pytest.mark.parametrize("kind", ["nsys", "kineto"])
def test_report_on_a_new_machine(tool: tuple[str, ...], traces: dict[str, Path], kind: str, tmp_path: Path) -> None:
    trace = traces[kind]
    inputs = sorted(trace.parent.iterdir())
    before = digests(inputs)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    out = tmp_path / "out"
    runs: dict[str, list[str]] = {
        "all": [],
        "jobs1": ["-q", "--jobs", "1"],
        "full": ["-q", "--md", "full"],
        **{fmt: ["-q", "--format", fmt] for fmt in FORMATS},
    }
    homes = {name: fresh.new_home(tmp_path / "homes") for name in runs}
    with ThreadPoolExecutor(2) as pool:
        done = dict(zip(runs, pool.map(
            lambda name: fresh.run(tool, [trace, "--out", out / name, *runs[name]], homes[name], cwd), runs
        ), strict=True))
    for name, ran in done.items():
        ran.ok()
        assert ran.stderr == "", (name, ran.stderr)
        only_cache(ran.home)
    assert done["all"].stdout.startswith(f"wrote {out / 'all'}/ (")
    assert all(done[name].stdout == "" for name in runs if name != "all")

    everything = fresh.files(out / "all")
    assert {"report.md", "report.json", "report.html", "ncu_plan.sh"} <= set(everything)
    assert fresh.files(out / "jobs1") == everything
    alone: dict[str, bytes] = {}
    for fmt in FORMATS:
        mine = fresh.files(out / fmt)
        assert mine, fmt
        assert not set(mine) & set(alone), fmt  # each file belongs to one format
        alone.update(mine)
    assert alone == everything
    full = fresh.files(out / "full")
    assert set(full) == set(everything)
    assert {k for k in full if full[k] != everything[k]} == {"report.md"}
    assert b"<details>" not in full["report.md"] and b"<details>" in everything["report.md"]
    doc = json.loads(everything["report.json"])
    assert doc["trace"]["format"] == ("kineto-json" if kind == "kineto" else "nsys-sqlite")
    assert doc["tool"]["version"] == __version__

    assert digests(inputs) == before and sorted(trace.parent.iterdir()) == inputs
    assert list(cwd.iterdir()) == []


def test_diff_fleet_schema_and_version_on_a_new_machine(
    tool: tuple[str, ...], traces: dict[str, Path], tmp_path: Path
) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    out = tmp_path / "out"
    runs = {
        "diff-nsys": ["diff", traces["nsys"], traces["nsys2"], "--out", out / "diff-nsys"],
        "diff-kineto": ["diff", traces["kineto"], traces["kineto2"], "--out", out / "diff-kineto"],
        "fleet": ["fleet", traces["nsys"], traces["kineto"], "--out", out / "fleet", "-q"],
        "schema-nsys": [traces["nsys"], "--print-schema"],
        "schema-kineto": [traces["kineto"], "--print-schema"],
        "version": ["--version"],
    }
    homes = {name: fresh.new_home(tmp_path / "homes") for name in runs}
    with ThreadPoolExecutor(2) as pool:
        done = dict(zip(runs, pool.map(lambda name: fresh.run(tool, runs[name], homes[name], cwd), runs),
                        strict=True))
    for name, ran in done.items():
        ran.ok()
        assert ran.stderr == "", (name, ran.stderr)
        only_cache(ran.home)
    for side in ("nsys", "kineto"):
        got = fresh.files(out / f"diff-{side}")
        assert set(got) == {"diff.md", "diff.html", "diff.json", "tables/diff_kernels.csv"}
        assert done[f"diff-{side}"].stdout.startswith("DIFF: ")
        assert json.loads(got["diff.json"])["headline"]
    fleet_doc = json.loads((out / "fleet" / "fleet.json").read_text(encoding="utf-8"))
    assert [t["ok"] for t in fleet_doc["traces"]] == [True, True]
    assert {"fleet.md", "fleet.html", "tables/ranks.csv"} <= set(fresh.files(out / "fleet"))
    assert any(p.startswith(".cache/nsys-llm-explain/fleet/") for p in fresh.cache_entries(homes["fleet"]))
    assert "kernel table: CUPTI_ACTIVITY_KIND_KERNEL" in done["schema-nsys"].stdout
    assert "kernel: 25 events" in done["schema-kineto"].stdout
    assert done["version"].stdout.strip() == f"nsys-llm-explain {__version__}"
    assert list(cwd.iterdir()) == []
