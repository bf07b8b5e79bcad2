"""The load helper process: same report as loading in-process, and any failure of the
helper costs time only (the table is then loaded here)."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from nsys_llm_explainer.api import explain
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.render import json_writer
from nsys_llm_explainer.runtime import machine
from nsys_llm_explainer.trace.columns import Columns
from nsys_llm_explainer.trace.nsys import helper
from tests.conftest import NSYS_TRACES
from tests.fixtures import hostile as h


@pytest.fixture
def always_helper(monkeypatch: pytest.MonkeyPatch) -> list[helper.Loaded | None]:
    """Helpers start for any trace size; returns what each take() handed over."""
    monkeypatch.setattr(helper, "HELPER_MIN_ROWS", 0)
    taken: list[helper.Loaded | None] = []
    original = helper.LoadHelper.take

    def take(self: helper.LoadHelper, key: str, progress: object = None) -> helper.Loaded | None:
        got = original(self, key, progress)  # type: ignore[arg-type]
        taken.append(got)
        return got

    monkeypatch.setattr(helper.LoadHelper, "take", take)
    return taken


def damaged_trace(d: Path) -> Path:
    """good() plus damage in the helper's tables, so their warnings must travel back:
    a runtime row without start, a duplicated API row, an NVTX range ending before it
    starts, and an NVTX text id missing from StringIds."""
    path = h.good(d)
    con = sqlite3.connect(path)
    max_id = con.execute("SELECT max(id) FROM StringIds").fetchone()[0]
    con.close()
    return h.mutate(
        path,
        f'INSERT INTO {h.RUNTIME} SELECT * FROM {h.RUNTIME} WHERE correlationId = 2',
        f"UPDATE {h.RUNTIME} SET start = NULL WHERE correlationId = 4",
        f'INSERT INTO {h.NVTX} (start, "end", eventType, globalTid, textId) '
        f"SELECT 3000, 2000, 59, globalTid, NULL FROM {h.NVTX} LIMIT 1",
        f'INSERT INTO {h.NVTX} (start, "end", eventType, globalTid, textId) '
        f"SELECT 3000, 3500, 59, globalTid, {max_id + 50} FROM {h.NVTX} LIMIT 1",
        loosen=(h.RUNTIME, h.NVTX),
    )


def report_text(path: Path, jobs: int, **options: object) -> str:
    return json_writer.render(explain(path, Options(**options), jobs=jobs))  # type: ignore[arg-type]


def test_helper_report_equals_in_process(tmp_path: Path, always_helper: list) -> None:
    path = damaged_trace(tmp_path)
    alone = report_text(path, jobs=1)
    assert always_helper == []
    helped = report_text(path, jobs=2)
    assert [t is not None for t in always_helper] == [True, True]  # runtime and nvtx came back
    assert helped == alone
    for expected in ("duplicated API rows", "ranges end before they start", "StringIds: 1"):
        assert expected in alone


def test_three_jobs_use_one_helper_per_table(tmp_path: Path, always_helper: list) -> None:
    path = damaged_trace(tmp_path)
    assert report_text(path, jobs=3) == report_text(path, jobs=1)
    assert len([t for t in always_helper if t is not None]) == 2


@pytest.mark.parametrize(
    "boot",
    [
        "import sys; sys.exit(3)",  # dies at once
        "import sys; sys.stdout.write('garbage' * 1000)",  # writes nonsense
        "import sys, struct; sys.stdout.buffer.write(struct.pack('<I', 1 << 30))",  # cut short
        "import sys, time; sys.stdin.read(); time.sleep(30)",  # says nothing: stalled
    ],
    ids=["exits", "garbage", "truncated", "stalls"],
)
def test_failed_helper_costs_time_only(
    tmp_path: Path, always_helper: list, monkeypatch: pytest.MonkeyPatch, boot: str
) -> None:
    path = damaged_trace(tmp_path)
    alone = report_text(path, jobs=1)
    monkeypatch.setattr(helper, "_BOOT", boot)
    monkeypatch.setattr(helper, "STALL_S", 0.5)
    assert report_text(path, jobs=2) == alone
    assert always_helper and all(t is None for t in always_helper)


def test_helpers_start_only_when_they_can_pay_off(tmp_path: Path) -> None:
    from nsys_llm_explainer.trace.nsys.helper import open_export as open_trace

    conn, schema = open_trace(h.good(tmp_path))
    try:
        assert helper.start_helpers(conn, schema, jobs=1) == []
        assert helper.start_helpers(conn, schema, jobs=2) == []  # 4 + 2 rows: not worth it
        plain = sqlite3.connect(":memory:")  # not opened by trace/open.py: no URI to share
        assert helper.start_helpers(plain, schema, jobs=2) == []
    finally:
        conn.close()
    assert 1 <= machine.default_jobs() <= machine.MAX_JOBS


def test_helper_processes_are_gone_after_explain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(helper, "HELPER_MIN_ROWS", 0)
    started: list[helper.LoadHelper] = []
    original = helper.LoadHelper.__init__

    def init(self: helper.LoadHelper, *a: object) -> None:
        original(self, *a)  # type: ignore[arg-type]
        started.append(self)

    monkeypatch.setattr(helper.LoadHelper, "__init__", init)
    # --no-nvtx-kernel-map and an empty selection still end with the helper reaped, even
    # though nothing took the NVTX table from it.
    explain(damaged_trace(tmp_path), Options(nvtx_kernel_map=False), jobs=2)
    assert started and all(s._proc.poll() is not None for s in started)


def test_wire_round_trip_keeps_dtypes_and_lengths() -> None:
    cols = Columns("T", {
        "a": np.array([1, -2, 3], dtype=np.int64),
        "b": np.array([7, 8, 9], dtype=np.int32),
        "c": np.array([True, False, True]),
    })
    empty = Columns("E", {"x": np.empty(0, dtype=np.int64)})
    buf = io.BytesIO()
    helper.write_header(buf, {"type": "progress", "key": "runtime", "rows": 5})
    helper.write_loaded(buf, "runtime", {"t": cols, "e": empty, "names": ["x", "é"]},
                      ["w"], {"T": 3}, [42])
    buf.seek(0)
    assert helper.read_header(buf) == {"type": "progress", "key": "runtime", "rows": 5}
    header = helper.read_header(buf)
    assert header is not None and header["warnings"] == ["w"] and header["missing"] == [42]
    entries = helper.read_entries(buf, header)
    assert helper.read_header(buf) is None  # clean end
    assert entries["names"] == ["x", "é"]
    assert entries["e"].table == "E" and len(entries["e"]) == 0
    for name in ("a", "b", "c"):
        assert entries["t"][name].dtype == cols[name].dtype
        assert entries["t"][name].tolist() == cols[name].tolist()
    with pytest.raises(TypeError):
        helper.write_loaded(io.BytesIO(), "k", {"o": Columns("O", {"s": np.array(["x"], dtype=object)})},
                          [], {}, [])


def test_helper_on_a_real_export(always_helper: list) -> None:
    path = NSYS_TRACES / "nsysai_h100_2gpu_1s.sqlite"
    if not path.is_file():
        pytest.skip(f"shared real trace not found at {path}")
    assert report_text(path, jobs=2) == report_text(path, jobs=1)
    assert [t is not None for t in always_helper] == [True, True]
