"""Every writer on a full, an empty (no kernels) and an all-skipped report; hostile names."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsys_llm_explainer import schema
from nsys_llm_explainer.metrics import ALWAYS
from nsys_llm_explainer.model import Report
from nsys_llm_explainer.render import Format, csv_writer, json_writer, markdown
from nsys_llm_explainer.render.escape import md
from nsys_llm_explainer.render.overview import verdict_words
from nsys_llm_explainer.render.writers import build as build_files
from tests.conftest import analyze, md_section, ok
from tests.fixtures import variants
from tests.fixtures.builder import TraceBuilder

HOSTILE_KERNELS = (
    "a|b",
    "x`y`z",
    "<script>alert(1)</script>",
    "line1\nline2|tail",
    "back\\|slash",
)
HOSTILE_RANGE = "range|<b>bold</b>\nnext"


def full_trace(path: Path) -> Path:
    b = TraceBuilder("2024.6")
    for pid in (100, 200):
        b.process(pid)
    t = 1_000
    for i, name in enumerate(HOSTILE_KERNELS * 3):
        pid = 100 if i % 2 else 200
        b.runtime(t, t + 10, pid=pid, corr=i + 1)
        b.kernel(t + 50, t + 50 + 1_000 * (i + 1), pid=pid, device=i % 2, corr=i + 1, name=name)
        t += 20_000
    b.runtime(t, t + 5_000, pid=100, name="cudaDeviceSynchronize_v3020")
    b.nvtx(0, t, text=HOSTILE_RANGE, pid=100)
    b.nvtx(0, t, text_id_for="decode", pid=200)
    b.memcpy(t, t + 100, bytes=4_096, copy_kind=1)
    return b.write(path)


REPORTS = {
    "full": full_trace,
    "no_kernels": lambda p: variants.no_kernels(p, "2024.6"),
    "all_skipped": lambda p: variants.empty_export(p, "2024.6"),
}


@pytest.fixture(params=sorted(REPORTS))
def report(request, tmp_path) -> Report:
    return analyze(REPORTS[request.param](tmp_path / "t.sqlite"))


def unescaped_pipes(line: str) -> int:
    count, i = 0, 0
    while i < len(line):
        if line[i] == "\\":
            i += 2
            continue
        count += line[i] == "|"
        i += 1
    return count


@pytest.mark.parametrize("mode, mark", [("compact", "###"), ("full", "##")])
def test_markdown_has_every_section(report, mode, mark):
    text = markdown.render(report, mode=mode)
    assert text.startswith("# nsys-llm-explain report\n")
    lines = text.splitlines()
    for metric in ALWAYS:
        assert f"{mark} {md(metric.title)}" in lines
    assert f"{mark} Coverage and limitations" in lines
    d = report.document["diagnosis"]
    verdict = d["verdict"]
    words = verdict_words(verdict, (d.get("primary") or {}).get("kind"))
    assert lines[2].startswith(f"**Verdict:** {words} (`{verdict}`, ")
    for line in lines:
        if line.startswith("|"):
            assert line.rstrip().endswith("|"), line
    # Every <details> is closed, never nested in a table, and GitHub needs a blank line after
    # </summary> and before </details> for the Markdown between them to render.
    assert text.count("<details>") == text.count("</details>")
    for i, line in enumerate(lines):
        if line.startswith("<details>"):
            assert line.endswith("</summary>") and lines[i + 1] == "", line
        if line == "</details>":
            assert lines[i - 1] == "", lines[i - 1]
    if mode == "full":
        assert "<details>" not in text.replace("<details><summary>What to do", "")


def test_json_is_valid_and_matches_the_schema(report):
    doc = json.loads(json_writer.render(report))
    assert schema.errors(doc) == []
    assert set(doc["metrics"]) == {m.id for m in ALWAYS}
    for mid, outcome in report.metrics.items():
        assert doc["metrics"][mid]["status"] == outcome.status


def test_csv_has_every_declared_table_with_a_header(report):
    files = csv_writer.render(report)
    declared = {stem: cols for m in ALWAYS for stem, cols in m.tables.items()}
    assert set(files) == {f"{stem}.csv" for stem in declared}
    for stem, cols in declared.items():
        rows = list(csv.reader(io.StringIO(files[f"{stem}.csv"])))
        assert rows and tuple(rows[0]) == csv_writer.columns(stem, cols)


def test_kernel_tables_get_a_label_column_after_the_name():
    assert csv_writer.columns("kernels", ("name", "device_id", "calls")) == ("name", "label", "device_id", "calls")
    assert csv_writer.columns("tiny_kernels", ("name", "calls")) == ("name", "label", "calls")
    assert csv_writer.columns("nvtx_ranges", ("name", "count")) == ("name", "count")


def test_build_files_writes_each_chosen_format(report):
    md_files = set(build_files(report, (Format.MD,)))  # report.md links the plots it ships
    plots = {f for f in md_files if f.startswith("plots/") and f.endswith(".svg")}
    assert md_files - plots == {"report.md"}
    assert set(build_files(report, (Format.HTML,))) == {"report.html"}
    assert set(build_files(report, (Format.JSON,))) == {"report.json"}
    csv_only = build_files(report, (Format.CSV,))
    assert all(name.startswith("tables/") and name.endswith(".csv") for name in csv_only)


def test_hostile_names_cannot_break_report_md(tmp_path):
    report = analyze(full_trace(tmp_path / "t.sqlite"))
    text = markdown.render(report)
    assert "<script>" not in text and "<b>" not in text
    rows = [line for line in md_section(text, "Top kernels") if line.startswith("| ")]
    header, body = rows[0], rows[1:]
    assert unescaped_pipes(header) == 12
    # One row per (name, device): 5 names on both devices.
    assert len(body) == len(ok(report, "top_kernels")["kernels"]) == 10
    for line in body:
        assert unescaped_pipes(line) == 12, line
    assert sum("line1 line2" in line for line in body) == 2  # the newline became a space
    assert any("a\\|b" in line for line in body)
    assert any("x\\`y\\`z" in line for line in body)
    ranges = [line for line in md_section(text, "NVTX ranges") if line.startswith("| ")]
    assert all(unescaped_pipes(line) == 7 for line in ranges)  # no phase map: no Phase column
    assert any("range\\|\\<b\\>bold\\</b\\> next" in line for line in ranges)


def test_full_names_stay_intact_in_json_and_csv(tmp_path):
    report = analyze(full_trace(tmp_path / "t.sqlite"))
    doc = json.loads(json_writer.render(report))
    names = {k["name"] for k in doc["metrics"]["top_kernels"]["kernels"]}
    assert names == set(HOSTILE_KERNELS)
    rows = list(csv.DictReader(io.StringIO(csv_writer.render(report)["kernels.csv"])))
    assert {r["name"] for r in rows} == set(HOSTILE_KERNELS)
    assert HOSTILE_RANGE in {r["name"] for r in doc["metrics"]["nvtx_ranges"]["ranges"]}


def test_empty_tables_still_have_headers_on_disk(tmp_path):
    from nsys_llm_explainer.render import output

    report = analyze(variants.empty_export(tmp_path / "t.sqlite", "2024.6"))
    out = tmp_path / "out"
    output.write(out, build_files(report, (Format.MD, Format.JSON, Format.CSV)))
    for name in ("kernels", "gpu_idle_gaps", "sync", "nvtx_ranges", "nvtx_attribution",
                 "kernels_by_pid", "sync_by_pid", "nvtx_by_pid"):
        lines = (out / "tables" / f"{name}.csv").read_text(encoding="utf-8").splitlines()
        assert len(lines) == 1 and lines[0].count(",") >= 1


def test_csv_rows_are_written_in_chunks_with_the_same_text(monkeypatch):
    rows = pd.DataFrame({
        "n": np.arange(10, dtype=np.int64) * 7 - 20,
        "x": [0.5, float("nan"), 1e-9, 3.0, 2.5, -1.0, float("nan"), 7.25, 0.1, 1e20],
        "s": ["a", "=1+1", None, "b,c", 'q"q', "-x", "", "@y", "plain", "z"],
        "b": [True, False] * 5,
        # numpy columns are sliced as arrays, the others as Series: both kinds in one frame
        "i": pd.array([1, None, 3, None, 5, 6, None, 8, 9, 10], dtype="Int64"),
        "o": pd.Series(["k", 2, None, 1.5, "=o", "t", "u", "v", "w", "x"], dtype=object),
    })
    whole = csv_writer.render_frame(rows)
    monkeypatch.setattr(csv_writer, "CHUNK_ROWS", 3)
    assert csv_writer.render_frame(rows) == whole
    guard = [("'" + v if isinstance(v, str) and v[:1] in ("=", "-", "@") else v) for v in rows["s"]]
    guarded = rows.assign(s=guard, o=["k", 2, None, 1.5, "'=o", "t", "u", "v", "w", "x"])
    assert whole == guarded.to_csv(index=False, lineterminator="\n")


_TEXT = st.one_of(
    st.none(),
    st.text(alphabet=st.sampled_from(list('ab ,"\n\r\t=+-@\'`|x1.')), max_size=6),
    st.integers(-5, 5),
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 4).flatmap(lambda ncols: st.tuples(
    st.lists(st.text(alphabet=st.sampled_from(list('ab ,"\n')), max_size=3), min_size=ncols, max_size=ncols),
    st.lists(st.lists(_TEXT, min_size=ncols, max_size=ncols), max_size=8),
    st.lists(st.sampled_from(["int", "float", "bool", "mixed"]), min_size=ncols, max_size=ncols),
)))
def test_csv_text_is_what_to_csv_writes_with_the_guard(case):
    names, rows, kinds = case
    cols = {}
    for j, kind in enumerate(kinds):
        raw = [r[j] for r in rows]
        if kind == "int":
            ints = [v if isinstance(v, int) and not isinstance(v, bool) else 0 for v in raw]
            cols[j] = pd.Series(ints, dtype=np.int64)
        elif kind == "float":
            floats = [float(v) if isinstance(v, int | float) else float("nan") for v in raw]
            cols[j] = pd.Series(floats, dtype=np.float64)
        elif kind == "bool":
            cols[j] = pd.Series([bool(v) for v in raw], dtype=bool)
        else:
            cols[j] = pd.Series(raw, dtype=object)
    frame = pd.DataFrame(cols)
    frame.columns = names
    guarded = frame.copy()
    for j in range(len(names)):
        guarded.isetitem(j, pd.Series([("'" + v if isinstance(v, str) and v.startswith(("=", "+", "-", "@", "\t", "\r"))
                                        else v) for v in frame.iloc[:, j]], dtype=object))
    # dtype-preserving for the numeric columns (isetitem of a list re-infers them)
    for j, kind in enumerate(kinds):
        if kind != "mixed":
            guarded.isetitem(j, frame.iloc[:, j])
    assert csv_writer.render_frame(frame) == guarded.to_csv(index=False, lineterminator="\n")


def test_csv_writes_unsigned_ints_and_str_subclasses_as_to_csv_writes_their_values():
    """An enum member that is a str writes its value (format() would write its name for a
    plain str-mixin enum), a uint64 column its numbers: checked by hand and against to_csv."""
    import enum

    class Cause(enum.StrEnum):
        SYNC = "sync_wait"

    class Mixed(str, enum.Enum):  # noqa: UP042 - the plain mixin formats as its name
        EDGE = "=edge"
        PLAIN = "plain"

    rows = pd.DataFrame({
        "u": np.array([0, 2**63 + 5, 7], dtype=np.uint64),
        "c": pd.Series([Cause.SYNC, Mixed.EDGE, Mixed.PLAIN], dtype=object),
        "b": [True, False, True],
    })
    assert csv_writer.render_frame(rows) == "u,c,b\n0,sync_wait,True\n9223372036854775813,'=edge,False\n7,plain,True\n"
    plain = rows.assign(c=["sync_wait", "'=edge", "plain"])
    assert csv_writer.render_frame(rows) == plain.to_csv(index=False, lineterminator="\n")
