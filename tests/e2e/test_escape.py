"""Names from the trace cannot break a Markdown table, inject HTML or links, forge a heading,
or run as a spreadsheet formula; the JSON keeps them exactly."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from nsys_llm_explainer import cli
from nsys_llm_explainer.render import Format, escape
from nsys_llm_explainer.render.csv_writer import defuse
from tests.fixtures.builder import TraceBuilder

HOSTILE = [
    "# forged heading\n## another",
    "a | b | c",
    "`tick` ``double``",
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[click](http://evil.example/x) ![img](https://evil.example/i.png)",
    "www.evil.example and https://evil.example",
    "line1\r\nline2\u2028line3",
    "**bold** _it_ ~~strike~~ \\ &lt;b&gt;",
    '=HYPERLINK("http://evil.example","x")',
    "+1-2",
    "-cmd|' /C calc'!A0",
    "@SUM(A1:A2)",
]
UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


def hostile_trace(d: Path) -> Path:
    b = TraceBuilder("2024.6")
    b.process(100)
    t = 1000
    for i, name in enumerate(HOSTILE, start=1):
        b.runtime(t, t + 50, corr=i)
        b.kernel(t + 100, t + 900, corr=i, name=name)
        b.nvtx(t, t + 950, text=name)
        t += 1000
    return b.write(d / "hostile.sqlite")


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("escape")
    assert cli.run([str(hostile_trace(d)), "--out", str(d / "out"), "-q"]) == 0
    return d / "out"


def tables_of(md: str) -> list[list[str]]:
    blocks: list[list[str]] = []
    current: list[str] = []
    for line in md.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            blocks.append(current)
            current = []
    return blocks + ([current] if current else [])


def test_markdown_tables_keep_their_shape(report_dir: Path) -> None:
    md = (report_dir / "report.md").read_text(encoding="utf-8")
    blocks = tables_of(md)
    assert len(blocks) >= 3
    for block in blocks:
        widths = {len(UNESCAPED_PIPE.findall(line)) for line in block}
        assert len(widths) == 1, block


def test_markdown_has_no_forged_structure(report_dir: Path) -> None:
    md = (report_dir / "report.md").read_text(encoding="utf-8")
    assert "forged" in md  # the names are there, escaped
    for line in md.splitlines():
        assert not (line.lstrip().startswith("#") and "forged" in line), line
    assert not re.search(r"(?<!\\)<(script|img|/script)", md)  # only escaped \<script\>
    # No [text](url) link, except the tool's own plot images: ![title](plots/<id>.svg)
    assert not re.search(r"(?<!\\)\]\((?!plots/[a-z_]+\.svg\))", md)
    assert "http://evil" not in md and "https://evil" not in md and "www.evil" not in md
    assert "`tick`" not in md.replace("\\`", "")  # every trace backtick is escaped
    assert "\u2028" not in md and "\r" not in md


def test_json_keeps_exact_names(report_dir: Path) -> None:
    doc = json.loads((report_dir / "report.json").read_text(encoding="utf-8"))
    names = {k["name"] for k in doc["metrics"]["top_kernels"]["kernels"]}
    assert names == set(HOSTILE)


def test_csv_cells_are_not_formulas(report_dir: Path) -> None:
    text = (report_dir / "tables" / "kernels.csv").read_bytes().decode("utf-8")  # keep \r\n
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    names = {r["name"] for r in rows}
    assert len(rows) == len(HOSTILE)
    for name in HOSTILE:
        assert (("'" + name) if name[0] in "=+-@" else name) in names
    assert not any(n[:1] in "=+-@" for n in names)


@pytest.mark.parametrize(
    "value, expected",
    [
        ("=1+1", "'=1+1"),
        ("+x", "'+x"),
        ("-x", "'-x"),
        ("@x", "'@x"),
        ("\tx", "'\tx"),
        ("x=1", "x=1"),
        ("", ""),
        (-5, -5),
        (None, None),
    ],
)
def test_defuse(value: object, expected: object) -> None:
    assert defuse(value) == expected


@pytest.mark.parametrize("text", HOSTILE)
def test_md_is_one_inert_line(text: str) -> None:
    out = escape.md(text)
    assert "\n" not in out and "\r" not in out
    assert not UNESCAPED_PIPE.search(out)
    assert not re.search(r"(?<!\\)[<>`\[\]#]", out)


def test_long_name_is_shortened_in_markdown(tmp_path: Path) -> None:
    b = TraceBuilder("2024.6")
    b.process(100)
    b.runtime(1000, 1050, corr=1)
    b.kernel(1100, 2000, corr=1, name="k" + "x" * 1_000_000)
    trace = b.write(tmp_path / "t.sqlite")
    assert cli.run([str(trace), "--out", str(tmp_path / "out"), "-q"]) == 0
    assert (tmp_path / "out" / "report.md").stat().st_size < 200_000


def test_html_report_has_no_live_markup(tmp_path: Path) -> None:
    if "html" not in {f.value for f in Format}:
        pytest.skip("the HTML writer is not there yet")
    trace = hostile_trace(tmp_path)
    out = tmp_path / "out"
    assert cli.run([str(trace), "--out", str(out), "-q", "--format", "html"]) == 0
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "forged" in page
    assert not re.search(r"<script>alert|<img src=x|href=\"http://evil", page, re.IGNORECASE)
