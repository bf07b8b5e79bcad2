"""fleet on generated rank sets: the planted straggler, skew, slow collectives and clock
offsets are found (expected values from the generator's bookkeeping), and the outputs."""

from __future__ import annotations

import gzip
import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nsys_llm_explainer import fleet
from nsys_llm_explainer.cli import run as cli_run
from nsys_llm_explainer.fleet import align, inputs, robust, runs
from nsys_llm_explainer.fleet.render_files import files
from nsys_llm_explainer.render.escape import md
from tests.fleet_support import make_set, output_files, schema_errors, shape_errors, truth_waits

SKEW_TOL_NS = 1_000  # two ranks' clock corrections, each within END_JITTER_NS of the truth
CLOCK_TOL_NS = 1_000


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], fleet.FleetResult]:
    root, truth = make_set(tmp_path_factory.mktemp("tp8"))
    result = fleet.run(inputs.collect([str(root)], [], None), jobs=1, use_cache=False)
    return root, truth, result


def test_finds_the_planted_straggler_and_blames_it(planted: Any) -> None:
    _, truth, result = planted
    run = result.doc["runs"][0]
    found = [s["rank"] for s in run["stragglers"]["stragglers"]]
    assert found == [truth["straggler"]]
    assert run["headline"]["rank"] == truth["straggler"]
    why = run["stragglers"]["stragglers"][0]["why"][0]
    assert why["signal"] == "compute_per_step_ns"
    # The generator slows only the straggler's GEMMs, so its extra time is in GEMM kernels.
    assert all("gemm" in k["name"].lower() or "Kernel2" in k["name"]
               for k in run["stragglers"]["stragglers"][0]["kernels"])


def binom_tail(k: int, n: int, p: Fraction) -> float:
    """P(X >= k), X ~ Binomial(n, p), summed exactly in fractions."""
    return float(sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k, n + 1)))


def test_the_planted_straggler_stands_out_from_chance(planted: Any) -> None:
    _, truth, result = planted
    coll = result.doc["runs"][0]["collectives"]
    b = coll["blame"]
    s = truth["straggler"]
    ref = truth_waits(truth, align.TIE_NS)
    charged = ref["skew"] >= align.TIE_NS
    assert (b["rank"], b["stands_out"], b["charged"]) == (s, True, int(charged.sum()))
    assert b["arrived_last"] == int((ref["last"][charged] == s).sum())
    assert b["chance_pct"] == 100 / 8 and b["rank_level"] == robust.LEVEL / 8
    assert b["p_value"] == pytest.approx(binom_tail(b["arrived_last"], b["charged"], Fraction(1, 8)), rel=1e-2)
    assert b["p_value"] <= b["rank_level"] and b["wait_caused_ns"] > b["wait_band_ns"]
    assert coll["culprit"]["rank"] == s


@pytest.mark.parametrize("ranks", [16, 3])
def test_arrivals_that_are_noise_name_no_rank(tmp_path: Path, ranks: int) -> None:
    """All ranks alike: some rank still arrives last most often, by chance; none is named."""
    root, truth = make_set(tmp_path, ranks=ranks, steps=20, layers=4, straggler=None)
    result = fleet.run(inputs.collect([str(root)], [], None), jobs=1, use_cache=False)
    run = result.doc["runs"][0]
    coll, b = run["collectives"], run["collectives"]["blame"]
    ref = truth_waits(truth, align.TIE_NS)
    charged = ref["skew"] >= align.TIE_NS
    top = int(np.argmax(ref["caused"]))
    assert (b["rank"], b["charged"]) == (top, int(charged.sum()))
    assert abs(b["arrived_last"] - int((ref["last"][charged] == top).sum())) <= 1  # near-ties
    assert b["chance_pct"] == pytest.approx(100 / ranks, abs=0.01)
    assert b["p_value"] == pytest.approx(binom_tail(b["arrived_last"], b["charged"], Fraction(1, ranks)), rel=1e-2)
    # The wait band alone would name it; the arrivals are what chance gives.
    assert b["wait_caused_ns"] > b["wait_band_ns"]
    assert b["p_value"] > robust.LEVEL / ranks and b["stands_out"] is False
    assert coll["culprit"] is None and run["headline"]["rank"] is None
    md = files(result)["fleet.md"].splitlines()[2]
    assert md.startswith(f"Clock trust: high. **No rank stands out as making the others wait**: rank {top} ")
    assert f"but binomial p = {b['p_value']:.2g} against chance" in md


def test_clock_corrections_match_the_planted_errors(planted: Any) -> None:
    _, truth, result = planted
    clock = result.doc["runs"][0]["clock"]
    assert clock["method"] == "session_start" and clock["refined_by_collectives"]
    got = [d["correction_ns"] or 0 for d in clock["domains"]]
    assert np.abs(np.array(got) - np.array(truth["expected_correction_ns"])).max() <= CLOCK_TOL_NS


def test_per_collective_skew_and_wait_match_the_generator(planted: Any) -> None:
    _, truth, result = planted
    ref = truth_waits(truth, align.TIE_NS)
    table = result.tables["collectives"].sort_values("index")
    assert len(table) == len(ref["skew"])
    assert np.abs(table["skew_ns"].to_numpy() - ref["skew"]).max() <= SKEW_TOL_NS
    assert np.abs(table["wait_ns"].to_numpy() - ref["wait"]).max() <= SKEW_TOL_NS * 8
    clear = ref["skew"] >= align.TIE_NS + 2 * SKEW_TOL_NS  # no doubt who was last
    assert (table["last_rank"].to_numpy()[clear] == ref["last"][clear]).all()
    per_rank = {r["rank"]: r["wait_caused_ns"] for r in result.doc["runs"][0]["collectives"]["ranks"]}
    s = truth["straggler"]
    assert abs(per_rank[s] - ref["caused"][s]) <= SKEW_TOL_NS * 8 * len(ref["skew"])


def test_planted_slow_collectives_are_the_slow_ones(planted: Any) -> None:
    _, truth, result = planted
    slow = result.doc["runs"][0]["collectives"]["slow"]
    got = {(s["kind"], s["stream_ordinal"], s["index"]) for s in slow}
    want = {(s["kind"], s["stream_ordinal"], s["index"]) for s in truth["slow_collectives"]}
    assert got == want
    assert all(4.0 <= s["ratio_to_median"] <= 8.0 for s in slow)  # planted at 6x


def test_rank_numbers_equal_the_generator_totals(planted: Any) -> None:
    _, truth, result = planted
    rows = result.doc["runs"][0]["ranks"]
    a = np.asarray(truth["collective_arrival_ns"])
    e = np.asarray(truth["collective_end_ns"])
    for r, row in enumerate(rows):
        assert row["compute_ns"] == sum(truth["step_compute_ns"][r])
        # Compute waits for every all-reduce, so all communication time is exposed.
        assert row["exposed_comm_ns"] == row["comm_ns"] == int((e[:, r] - a[:, r]).sum())
        assert row["name"] == f"report_{r}.sqlite"


def test_imbalance_names_the_straggler(planted: Any) -> None:
    _, truth, result = planted
    imb = result.doc["runs"][0]["imbalance"]
    assert imb["compute_max_rank"] == truth["straggler"]
    totals = np.array([sum(x) for x in truth["step_compute_ns"]], dtype=float)
    assert imb["compute_max_over_mean"] == pytest.approx(totals.max() / totals.mean(), abs=1e-4)
    assert imb["per_step"]["most_often_max_rank"] == truth["straggler"]


def test_fleet_json_matches_its_schema_and_md_leads_with_the_verdict(planted: Any) -> None:
    _, truth, result = planted
    out = files(result)
    assert schema_errors(json.loads(out["fleet.json"])) == []
    md = out["fleet.md"].splitlines()
    assert md[0] == "# nsys-llm-explain fleet"
    s = truth["straggler"]
    assert md[2].startswith(f"Clock trust: high. **rank {s} (report\\_{s}.sqlite) makes the others wait**")
    html = out["fleet.html"]
    assert "Content-Security-Policy" in html and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert html.count('stroke="#dc2626"') == 1  # the straggler row is outlined, once


def test_fleet_documents_have_the_shapes_their_types_declare(planted: Any) -> None:
    _, _, result = planted
    assert result.doc["runs"][0]["stragglers"]["stragglers"]  # the parts with most keys are there
    assert shape_errors(result.doc, runs.FleetDoc) == []
    assert shape_errors(result.runs[0].timeline, runs.RankTimeline) == []
    broken = json.loads(json.dumps(result.doc["runs"][0]["headline"]))
    broken["extra"] = broken.pop("trust")
    assert shape_errors(broken, runs.Headline) == ["$: lacks 'trust' (Headline)",
                                                   "$: undeclared key 'extra' (Headline)"]


def test_two_ranks_do_not_define_a_band(tmp_path: Path) -> None:
    root, _ = make_set(tmp_path, ranks=2, straggler=1)
    result = fleet.run(inputs.collect([str(root)], [], None), jobs=1, use_cache=False)
    run = result.doc["runs"][0]
    assert run["stragglers"]["status"] == "skipped"
    assert run["headline"]["rank"] == 1  # still: the slow rank makes the other wait
    b = run["collectives"]["blame"]
    assert b["wait_band_ns"] is None and b["chance_pct"] == 50.0  # the binomial test alone
    assert b["p_value"] == pytest.approx(binom_tail(b["arrived_last"], b["charged"], Fraction(1, 2)), rel=1e-2)


def test_no_straggler_when_all_ranks_are_alike(tmp_path: Path) -> None:
    root, _ = make_set(tmp_path, ranks=6, straggler=None, slow_collectives=())
    result = fleet.run(inputs.collect([str(root)], [], None), jobs=1, use_cache=False)
    run = result.doc["runs"][0]
    assert run["stragglers"]["stragglers"] == []
    assert run["collectives"]["slow_count"] == 0


def test_cli_cache_rerun_and_pool_give_identical_outputs(tmp_path: Path, capsys: Any) -> None:
    root, _ = make_set(tmp_path / "set", ranks=4)
    cache = tmp_path / "cache"
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    assert cli_run(["fleet", str(root), "--out", str(a), "--cache-dir", str(cache), "-j", "1"]) == 0
    err = capsys.readouterr().err
    assert err.count("fleet: [") == 4 and "(cached)" not in err
    assert cli_run(["fleet", str(root), "--out", str(b), "--cache-dir", str(cache), "-j", "1"]) == 0
    assert capsys.readouterr().err.count("(cached)") == 4
    timing = json.loads((b / "fleet_timing.json").read_text())
    assert timing["cached"] == 4
    assert cli_run(["fleet", str(root), "--out", str(c), "--no-cache", "-j", "2", "-q"]) == 0
    assert capsys.readouterr().err == ""
    assert output_files(a) == output_files(b) == output_files(c)
    entries = list(cache.glob("*/*/report.json"))
    assert len(entries) == 4 and json.loads(entries[0].read_text())["tool"]["name"] == "nsys-llm-explain"
    # A changed trace is analyzed again; the others come from the cache.
    (root / "report_2.sqlite").write_bytes((root / "report_2.sqlite").read_bytes())
    assert cli_run(["fleet", str(root), "--out", str(b), "--cache-dir", str(cache), "-j", "1"]) == 0
    assert capsys.readouterr().err.count("(cached)") == 3


def test_one_bad_trace_does_not_stop_the_others(tmp_path: Path, capsys: Any) -> None:
    root, _ = make_set(tmp_path / "set", ranks=3)
    bad = tmp_path / "broken.sqlite"
    bad.write_bytes(b"SQLite format 3\x00" + b"\x00" * 200)
    out = tmp_path / "out"
    args = ["fleet", str(root), str(bad), "--out", str(out), "--no-cache", "-j", "1"]
    assert cli_run(args) == 0
    err = capsys.readouterr().err
    doc = json.loads((out / "fleet.json").read_text())
    assert doc["inputs"] == {"traces": 4, "ok": 3, "failed": 1, "ranks": 3, "runs": 1, "skipped": [], "duplicates": []}
    failed = [t for t in doc["traces"] if not t["ok"]]
    assert failed[0]["path"] == str(bad)
    assert failed[0]["error"] == "is damaged (file is not a database); export the capture again"
    assert f"{bad}: FAILED: is damaged" in err  # the path once
    # The first screen (before the rank table) says how many failed, and the first with its error.
    first = (out / "fleet.md").read_text().split("| rank |")[0]
    assert f"**1 of 4 traces could not be analyzed**: {md(str(bad))}: is damaged" in first
    assert first.count(md(str(bad))) == 1
    assert cli_run(["fleet", str(bad), "--out", str(tmp_path / "o2"), "--no-cache", "-j", "1"]) == 3
    assert "no trace could be analyzed" in capsys.readouterr().err


def test_directory_scan_skips_json_that_is_not_a_trace(tmp_path: Path, capsys: Any) -> None:
    root, _ = make_set(tmp_path / "set", ranks=3)
    config = root / "config.json"
    config.write_text('{"architectures": ["Qwen2ForCausalLM"], "hidden_size": 1024}')
    metrics = root / "sub" / "metrics.json.gz"
    metrics.parent.mkdir()
    metrics.write_bytes(gzip.compress(b'[{"loss": 1.5}]'))
    out = tmp_path / "out"
    assert cli_run(["fleet", str(root), "--out", str(out), "--no-cache", "-j", "1"]) == 0
    assert f"fleet: skipped 2 JSON file(s) that are not traces (no traceEvents), first: {config}" in (
        capsys.readouterr().err)
    doc = json.loads((out / "fleet.json").read_text())
    assert doc["inputs"]["skipped"] == [str(config), str(metrics)]
    assert (doc["inputs"]["traces"], doc["inputs"]["failed"]) == (3, 0)
    assert "Skipped 2 JSON file(s) that are not traces" in (out / "fleet.md").read_text()
    # Named explicitly, it is tried and fails with the reason.
    out2 = tmp_path / "out2"
    assert cli_run(["fleet", str(root / "report_0.sqlite"), str(config), "--out", str(out2), "--no-cache",
                    "-j", "1", "-q"]) == 0
    doc2 = json.loads((out2 / "fleet.json").read_text())
    (bad,) = [t for t in doc2["traces"] if not t["ok"]]
    assert bad["path"] == str(config) and "traceEvents" in bad["error"]
    assert doc2["inputs"]["skipped"] == []


def test_usage_and_input_errors(tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli_run(["fleet", str(tmp_path / "missing.sqlite"), "--out", str(tmp_path / "o")]) == 3
    assert cli_run(["fleet", str(tmp_path / "nothing-*.sqlite"), "--out", str(tmp_path / "o")]) == 3
    root, _ = make_set(tmp_path / "set", ranks=2)
    assert cli_run(["fleet", str(root)]) == 2
    assert cli_run(["fleet", str(root), "--out", str(tmp_path / "o"), "--label", "nokey"]) == 2
    assert cli_run(["fleet", str(root), "--out", str(tmp_path / "o"), "--label", "x=zzz"]) == 2
    assert cli_run(["fleet", str(root), "--out", str(tmp_path / "o"), "--scheduler", "nonsense"]) == 2
    monkeypatch.setitem(__import__("sys").modules, "distributed", None)
    assert cli_run(["fleet", str(root), "--out", str(tmp_path / "o"), "--scheduler", "local"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'nsys-llm-explain[distributed]'" in err
    assert all(line.startswith("nsys-llm-explain") for line in err.strip().splitlines())


def test_sweep_by_label_regex_and_runs_csv(tmp_path: Path) -> None:
    for bs, layers in ((16, 4), (8, 2), (32, 6)):
        make_set(tmp_path / f"bs{bs}", ranks=3, layers=layers, straggler=None, slow_collectives=())
    out = tmp_path / "out"
    code = cli_run(["fleet", str(tmp_path / "bs*"), "--out", str(out), "--no-cache", "-j", "1", "-q",
                    "--label", r"batch=bs(?P<batch>\d+)"])
    assert code == 0
    doc = json.loads((out / "fleet.json").read_text())
    assert [r["label"] for r in doc["sweep"]["rows"]] == ["8", "16", "32"]  # numeric order
    assert doc["sweep"]["numeric_labels"] is True
    p50 = [r["step_p50_ns"] for r in doc["sweep"]["rows"]]
    assert p50 == sorted(p50)  # more layers, longer steps
    # No rank stands out in these alike runs; the sweep still shows the most wait one rank causes.
    for row, run in zip(doc["sweep"]["rows"], doc["runs"], strict=True):
        assert run["headline"]["rank"] is None
        assert row["wait_caused_ns"] == max(r["wait_caused_ns"] for r in run["ranks"]) > 0
    assert (out / "plots" / "sweep.svg").read_text().startswith("<svg")
    assert (out / "tables" / "sweep.csv").read_text().splitlines()[0].startswith("label,ranks,step_p50_ns")
    assert schema_errors(doc) == []
    csv = tmp_path / "runs.csv"
    csv.write_text("path,label\n" + "".join(
        f"bs{bs}/report_{r}.sqlite,{name}\n" for bs, name in ((8, "small"), (32, "large")) for r in range(3)))
    out2 = tmp_path / "out2"
    assert cli_run(["fleet", "--runs", str(csv), "--out", str(out2), "--no-cache", "-j", "1", "-q"]) == 0
    doc2 = json.loads((out2 / "fleet.json").read_text())
    assert [r["label"] for r in doc2["sweep"]["rows"]] == ["large", "small"]
    assert [len(r["ranks"]) for r in doc2["runs"]] == [3, 3]


def test_a_copy_of_a_rank_is_counted_once_and_named(tmp_path: Path, capsys: Any) -> None:
    import shutil

    root, _ = make_set(tmp_path / "set", ranks=3)
    copy = root / "report_3.sqlite"
    shutil.copyfile(root / "report_1.sqlite", copy)
    out = tmp_path / "out"
    assert cli_run(["fleet", str(root), "--out", str(out), "--no-cache", "-j", "1"]) == 0
    assert (f"fleet: counted 1 repeated trace(s) once, first: {copy} (the same contents as "
            f"{root / 'report_1.sqlite'})") in capsys.readouterr().err
    doc = json.loads((out / "fleet.json").read_text())
    assert (doc["inputs"]["traces"], doc["inputs"]["ranks"]) == (3, 3)
    assert doc["inputs"]["duplicates"] == [
        {"path": str(copy), "same_as": str(root / "report_1.sqlite"), "how": "the same contents"}]
    assert "Counted once: 1 path(s) repeat a trace already taken" in (out / "fleet.md").read_text()
