"""fleet aligns only captures of one job at one time: captures that never overlapped, or whose
metadata says they come from different jobs, are refused (or forced, at low trust), and a wait
that cannot be true is an error, never a straggler."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from nsys_llm_explainer import fleet
from nsys_llm_explainer.cli import run as cli_run
from nsys_llm_explainer.fleet import inputs, runs
from nsys_llm_explainer.fleet.render_files import files
from tests.fleet_support import make_set, schema_errors, shape_errors
from tests.trace.nsys.test_ranks import with_nccl_init

LATER_NS = 80 * 60 * 1_000_000_000  # a second capture of the job, 80 minutes later


def shift_start(path: Path, ns: int) -> None:
    """Move a generated capture's recorded start time (our own fixture file)."""
    con = sqlite3.connect(path)
    con.execute("UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = utcEpochNs + ?", (ns,))
    con.commit()
    con.close()


@pytest.fixture(scope="module")
def two_captures(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-rank job captured twice, 80 minutes apart: four traces that look like four ranks."""
    root = tmp_path_factory.mktemp("apart")
    make_set(root / "first", ranks=2, steps=6, straggler=None, seed=1)
    make_set(root / "later", ranks=2, steps=6, straggler=None, seed=2)
    for p in (root / "later").glob("*.sqlite"):
        shift_start(p, LATER_NS)
    return root


def run_fleet(paths: list[Path], force: bool = False) -> fleet.FleetResult:
    return fleet.run(inputs.collect([str(p) for p in paths], [], None), jobs=1, use_cache=False, force_align=force)


def test_captures_that_never_overlapped_are_refused(two_captures: Path) -> None:
    result = run_fleet([two_captures])
    run = result.doc["runs"][0]
    comp = run["comparability"]
    assert comp["refused"] is True and comp["comparable"] is False
    assert comp["overlap_ns"] < -LATER_NS + 60_000_000_000  # about 80 minutes minus the capture lengths
    assert comp["reasons"][0].startswith("the captures never overlapped in time: ")
    assert "minutes after it ended" in comp["reasons"][0]
    assert run["clock"]["method"] == "refused" and run["clock"]["trust"].startswith("none: ")
    for part in ("collectives", "stragglers", "imbalance"):
        assert run[part]["status"] == "skipped" and run[part]["reason"].startswith(
            "the run was not aligned (the captures never overlapped in time; --force-align")
    assert run["headline"]["rank"] is None and run["headline"]["stragglers"] == []
    assert result.doc["verdict"].startswith("**Not aligned, not compared**: the captures never overlapped")
    assert schema_errors(result.doc) == []
    assert shape_errors(result.doc, runs.FleetDoc) == []
    out = files(result)
    assert "The captures do not overlap in time: the latest starts " in out["fleet.md"]  # in the clock section
    assert "No common time axis" in out["fleet.html"] and "Not aligned, not compared" in out["fleet.html"]


def test_forced_alignment_is_low_trust_and_blames_nobody(two_captures: Path) -> None:
    run = run_fleet([two_captures], force=True).doc["runs"][0]
    assert run["comparability"]["forced"] is True
    assert run["clock"]["trust"].startswith("low (forced with --force-align): the captures never overlapped")
    assert run["clock"]["trust_level"] == run["headline"]["trust"] == "low"
    # at low trust no rank is named: neither who arrives last nor a straggler
    for part in ("collectives", "stragglers"):
        assert run[part]["status"] == "skipped"
        assert run[part]["reason"].startswith("no rank is named at low clock trust (low (forced with --force-align)")
    assert run["headline"]["rank"] is None and run["headline"]["wait_caused_ns"] is None
    assert run["headline"]["stragglers"] == []


def test_cli_refuses_and_documents_the_flag(two_captures: Path, tmp_path: Path, capsys: Any) -> None:
    assert cli_run(["fleet", str(two_captures), "--out", str(tmp_path / "o"), "--no-cache", "-j", "1"]) == 0
    out = capsys.readouterr().out
    assert "Not aligned, not compared: the captures never overlapped in time" in out
    assert "--force-align" in out
    cli_run(["fleet", "--help"])
    assert "--force-align" in capsys.readouterr().out


def test_traces_of_different_jobs_are_refused(tmp_path: Path) -> None:
    make_set(tmp_path / "set", ranks=3, steps=4, straggler=None, version="2026.2")
    a, b, c = (tmp_path / "set" / f"report_{r}.sqlite" for r in range(3))
    with_nccl_init(a, [(8, 3)])
    with_nccl_init(b, [(2, 1)])
    comp = run_fleet([a, b]).doc["runs"][0]["comparability"]
    assert comp["refused"] and comp["reasons"][0].startswith("the traces come from different jobs (world sizes 2 vs 8;")
    # a byte-identical copy is the same capture: counted once, and listed
    d = tmp_path / "copy_of_0.sqlite"
    shutil.copy(a, d)
    result = run_fleet([a, d])
    assert result.doc["inputs"]["traces"] == 1 and len(result.doc["runs"][0]["ranks"]) == 1
    # the same rank captured twice (other contents) is not two ranks
    con = sqlite3.connect(d)
    con.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
                "VALUES (30, 40, 59, 'another capture', 0, 0)")
    con.commit()
    con.close()
    comp = run_fleet([a, d]).doc["runs"][0]["comparability"]
    assert comp["refused"] and "both record rank 3 of 8" in comp["reasons"][0]
    # ranks of one job that ran together are aligned
    with_nccl_init(c, [(8, 5)])
    comp = run_fleet([a, c]).doc["runs"][0]["comparability"]
    assert comp["comparable"] and not comp["refused"] and comp["overlap_ns"] > 0


def test_pages_fit(two_captures: Path, tmp_path: Path) -> None:
    root = tmp_path / "tp12"
    make_set(root, ranks=12, steps=4)
    out = files(run_fleet([root]))
    html = out["fleet.html"]
    assert '<div class=tablebox><table><thead>' in html and ".tablebox{max-height:70vh;overflow:auto" in html
    assert 'height="24"' in html  # each rank's row in "ranks over time" (26 px with its gap)
    assert "The captures overlap in time for " in out["fleet.md"]
