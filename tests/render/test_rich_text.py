"""Rule and diagnosis text: its own `code spans` render as code in report.md and report.html,
while names from the trace it quotes stay escaped, backticks included."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.render import escape, rich
from nsys_llm_explainer.render.markdown import render
from tests.conftest import analyze
from tests.fixtures.builder import TraceBuilder

NCU = "Profile it (else `ncu --kernel-name regex:NAME --set full`) to see more."
UNESCAPED = re.compile(r"(?<!\\)[<>\[\]#|]")


def test_rule_code_spans_render_as_code():
    assert rich.md(NCU) == "Profile it (else `ncu --kernel-name regex:NAME --set full`) to see more."
    assert str(rich.html(NCU)) == "Profile it (else <code>ncu --kernel-name regex:NAME --set full</code>) to see more."
    # Text around the spans is escaped as usual; the span's own text is literal.
    assert rich.md("use `a_b` on x_y <b>") == "use `a_b` on x\\_y \\<b\\>"
    assert str(rich.html("use `<b>` & more")) == "use <code>&lt;b&gt;</code> &amp; more"


def test_unpaired_or_empty_backticks_are_escaped():
    assert rich.md("one ` tick") == "one \\` tick"
    assert rich.md("empty `` pair") == "empty \\`\\` pair"
    assert rich.md("`a` and ` b") == "`a` and \\` b"


def test_pipes_in_code_inside_a_table_cell_are_escaped():
    assert rich.md("`a|b`", table=True) == "`a\\|b`"
    assert rich.md("`a|b`") == "`a|b`"


def test_trace_backticks_are_never_code_delimiters():
    name = "x`y`z"
    text = f"{name}: 69.4% of GPU 0's kernel time; run `ncu -k x`"
    out = rich.md(text, frozenset({name}))
    assert out.startswith("x\\`y\\`z: 69.4%") and out.endswith("run `ncu -k x`")
    html = str(rich.html(text, frozenset({name})))
    assert html.startswith("x`y`z: 69.4%") and html.endswith("run <code>ncu -k x</code>")
    # A span that would hold a trace backtick is not code either.
    assert rich.md(f"`{name}`", frozenset({name})) == "\\`x\\`y\\`z\\`"
    # A shortened form of the name (head ... tail) is recognized from the text around its backticks.
    assert rich.md("kernel ab`cdef…wx`yz takes 5%", frozenset({"ab`cdefghijklmnopqrstuvwx`yz"})) == (
        "kernel ab\\`cdef…wx\\`yz takes 5%")


rule_text = st.text(st.characters(blacklist_characters="`", blacklist_categories=("Cs",)), max_size=20)
code = st.text(st.characters(blacklist_characters="`\n\r", blacklist_categories=("Cs", "Cc")), min_size=1,
               max_size=10)


@settings(max_examples=300)
@given(st.lists(st.one_of(rule_text, code.map(lambda c: f"`{c}`")), max_size=4),
       st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30),
       st.lists(st.one_of(rule_text, code.map(lambda c: f"`{c}`")), max_size=4))
def test_a_quoted_trace_name_stays_escaped(before, name, after):
    """Whatever the name holds, its Markdown-escaped form is in the output unchanged, and the
    HTML has no markup but <code>."""
    text = "".join(before) + " " + name + " " + "".join(after)
    out = rich.md(text, frozenset({name}) if "`" in name else frozenset())
    assert escape.md(name).strip() in out
    assert "\n" not in out and "\r" not in out
    html = str(rich.html(text, frozenset({name}) if "`" in name else frozenset()))
    tags = re.findall(r"<(/?)([a-z]+)", html)
    assert {t for _, t in tags} <= {"code"}
    opened = [t for t in tags if t == ("", "code")]
    assert len(opened) == html.count("</code>")


def test_report_md_keeps_rule_code_and_escapes_trace_backticks(tmp_path: Path):
    """End to end: a dominant kernel named with backticks and HTML; NLE101's evidence quotes
    its label, its recommendation holds an ncu command in backticks."""
    b = TraceBuilder("2024.6")
    b.process(100)
    hostile = "`tick` <img src=x> [l](http://e.x)"
    t = 1_000
    for i in range(200):
        length = 20_000 if i % 2 else 2_000
        b.runtime(t, t + 10, corr=i + 1)
        b.kernel(t + 50, t + 50 + length, corr=i + 1, name=hostile if i % 2 else "small")
        t += length + 100  # back to back: the GPU is busy, the verdict names this kernel
    report = analyze(b.write(tmp_path / "t.sqlite"))
    assert any(f.rule_id == "NLE101" for f in report.findings)
    # The diagnosis quotes the kernel too: its evidence renders escaped like the rest.
    primary = report.document["diagnosis"]["primary"]
    assert primary is not None and any(hostile in e for e in primary["evidence"])
    text = render(report, mode="full")
    assert "`ncu --kernel-name regex:NAME --launch-skip 10 --launch-count 1 --set full`" in text
    assert "`tick`" not in text.replace("\\`", "")
    assert "\\`tick\\` \\<img src=x\\>" in text
    diagnosis = text.split("## Diagnosis", 1)[1].split("## Findings", 1)[0]
    assert "- \\`tick\\` \\<img src=x\\> \\[l\\](http:\u200b//e.x) on GPU 0: " in diagnosis
    assert not re.search(r"(?<!\\)<img", text) and not re.search(r"(?<!\\)\]\(http", text)

    class Tags(HTMLParser):
        found: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            self.found.append(tag)

    from nsys_llm_explainer.render.html import render as html_render

    page = html_render(report)
    parser = Tags()
    parser.feed(page)
    assert "img" not in parser.found
    assert "<code>ncu --kernel-name regex:NAME --launch-skip 10 --launch-count 1 --set full</code>" in page
    assert "<code>tick</code>" not in page
