"""report.html: self-contained, hostile names shown as text, every writer case, file sizes."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from nsys_llm_explainer.render import Format, html
from nsys_llm_explainer.render.writers import build as build_files
from tests.conftest import analyze, nsys_trace_files, require_nsys_traces, run_cli
from tests.fixtures import variants
from tests.fixtures.builder import TraceBuilder

EVIL_KERNEL = '<script>alert("k")</script>'
EVIL_RANGE = '<img src=x onerror=alert(1)> "quoted" & https://evil.example/x'
MAX_HTML_BYTES = 2 * 1024 * 1024


class Tags(HTMLParser):
    """Collects start tags with their attributes, and the text of <script> elements."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts.append(data)


def parse(text: str) -> Tags:
    t = Tags()
    t.feed(text)
    return t


def hostile_trace(path: Path) -> Path:
    b = TraceBuilder("2024.6")
    b.process(100)
    for i in range(6):
        b.runtime(i * 10_000, i * 10_000 + 10, corr=i + 1)
        b.kernel(
            i * 10_000 + 50,
            i * 10_000 + 5_000,
            corr=i + 1,
            name=EVIL_KERNEL if i % 2 else "gemm_kernel",
        )
    b.nvtx(0, 60_000, text=EVIL_RANGE)
    return b.write(path)


def test_hostile_names_are_text_not_markup(tmp_path):
    page = html.render(analyze(hostile_trace(tmp_path / "t.sqlite")))
    tags = parse(page)
    assert [t for t, _ in tags.tags].count("script") == 1  # the sorter, nothing from the trace
    assert not any(t == "img" for t, _ in tags.tags)
    assert not any("onerror" in attrs for _, attrs in tags.tags)
    assert "alert" not in "".join(tags.scripts)
    assert (
        "&lt;script&gt;alert(&#34;k&#34;)&lt;/script&gt;" in page
        or "&lt;script&gt;alert(&quot;k&quot;)" in page
    )
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_page_is_self_contained(tmp_path):
    page = html.render(analyze(hostile_trace(tmp_path / "t.sqlite")))
    tags = parse(page)
    csp = next(
        a["content"]
        for t, a in tags.tags
        if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"
    )
    assert "default-src 'none'" in csp
    for tag, attrs in tags.tags:
        for key in ("src", "href", "xlink:href", "action", "data"):
            value = attrs.get(key)
            assert value is None or value.startswith("#"), (tag, key, value)
        assert not (tag == "link" and attrs.get("rel") == "stylesheet")
    assert not re.search(r"url\(|@import", page)
    # Every inline plot names itself and has a text alternative.
    svgs = [a for t, a in tags.tags if t == "svg"]
    assert svgs and all(a.get("role") == "img" and a.get("aria-labelledby") for a in svgs)


@pytest.mark.parametrize("case", ["no_kernels", "empty"])
def test_degraded_reports_render_with_reasons(tmp_path, case):
    path = tmp_path / "t.sqlite"
    trace = (
        variants.no_kernels(path, "2024.6")
        if case == "no_kernels"
        else variants.empty_export(path, "2024.6")
    )
    page = html.render(analyze(trace))
    assert "Not measured, because" in page
    assert "GPU timeline: not drawn, because" in page
    parse(page)


def test_cli_writes_html_and_plots_by_default(tmp_path):
    out = tmp_path / "out"
    res = run_cli(hostile_trace(tmp_path / "t.sqlite"), "--out", out, "-q")
    assert res.exit_code == 0, res.stderr
    assert (out / "report.html").is_file()
    plots = sorted(p.name for p in (out / "plots").glob("*.svg"))
    assert "timeline.svg" in plots and "top_kernels.svg" in plots
    md = (out / "report.md").read_text(encoding="utf-8")
    for name in plots:
        assert f"(plots/{name})" in md


def test_format_selects_outputs(tmp_path):
    report = analyze(hostile_trace(tmp_path / "t.sqlite"))
    assert Format.parse("html") == (Format.HTML,)
    assert set(build_files(report, (Format.JSON,))) == {"report.json"}
    assert set(build_files(report, (Format.HTML, Format.JSON))) == {"report.html", "report.json"}


@pytest.mark.parametrize(
    "trace", nsys_trace_files() or [None], ids=lambda p: p.name if p else "none"
)
def test_report_html_size_for_shared_traces(trace, capsys):
    if trace is None:
        require_nsys_traces()
    page = html.render(analyze(trace)).encode("utf-8")
    with capsys.disabled():
        print(f"\nreport.html {trace.name}: {len(page):,} bytes")
    assert len(page) < MAX_HTML_BYTES
    parse(page.decode("utf-8"))
