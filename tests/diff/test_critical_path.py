"""diff compares the critical path's composition: the copies pair of the planted pairs
(benchmarks/planted_pairs.py), base with the copies on the compute stream, new without."""

from __future__ import annotations

from pathlib import Path

from benchmarks import planted_pairs as pp
from nsys_llm_explainer.diff import diff
from nsys_llm_explainer.options import Options


def test_copies_leave_the_critical_path(tmp_path: Path) -> None:
    base, new = tmp_path / "base.sqlite", tmp_path / "new.sqlite"
    pp.generate("copies", True, base, steps=8)
    pp.generate("copies", False, new, steps=8)
    doc = diff(base, new, Options(step_range=pp.STEP_RANGE)).doc
    cp = doc["critical_path"]
    assert cp["status"] == "ok"
    rows = {r["kind"]: r for r in cp["rows"]}
    # Four 110 us copies per step lie on the base path (within the jitter); on the new one only
    # their four 8 us calls do.
    assert 4 * 110_000 * 0.8 <= rows["copy"]["base_ns"] - rows["copy"]["new_ns"] <= 4 * 110_000 * 1.2
    assert rows["copy"]["new_ns"] <= 4 * pp.COPY_CALL_NS * 1.3 and rows["copy"]["delta_ns"] < 0
    for r in cp["rows"]:
        assert r["delta_ns"] == r["new_ns"] - r["base_ns"]
    assert sum(r["base_share_pct"] for r in cp["rows"]) == __import__("pytest").approx(100, abs=0.1)
