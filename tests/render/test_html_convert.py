"""render/html.convert: the Markdown subset of report.md's sections as HTML."""

from __future__ import annotations

import html
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.render import escape
from nsys_llm_explainer.render.html import convert, header, inline, sort_key


def test_blocks():
    src = (
        "First line\nsame paragraph with **bold** and `code_x`.\n\n"
        "| Kernel | Calls | Total |\n|---|---:|---:|\n| a\\|b | 1,024 | 1.500 ms |\n\n"
        "- one\n\n- two _italic note_\n\n#### Heading\n_46 more in `tables/x.csv`._\n"
    )
    out = str(convert(src))
    assert out.split("\n") == [
        "<p>First line same paragraph with <strong>bold</strong> and <code>code_x</code>.</p>",
        '<div class="scroll"><table class="sortable"><thead><tr>'
        '<th scope="col"><button type="button">Kernel</button></th>'
        '<th scope="col" class="n"><button type="button">Calls</button></th>'
        '<th scope="col" class="n"><button type="button">Total</button></th></tr></thead><tbody><tr>'
        '<td>a|b</td><td class="n" data-v="1024">1,024</td><td class="n" data-v="1500000">1.500 ms</td>'
        "</tr></tbody></table></div>",
        "<ul><li>one</li><li>two <em>italic note</em></li></ul>",
        "<h4>Heading</h4>",
        "<p><em>46 more in <code>tables/x.csv</code>.</em></p>",
    ]


def test_kernel_marks_become_labels_with_the_full_name():
    out = inline("top: \ue0000\ue001, then \ue0001\ue001", ["full<a>", 'x"y'], lambda n: f"L({n})")
    assert out == ('top: <span class="k" title="full&lt;a&gt;">L(full&lt;a&gt;)</span>, then '
                   '<span class="k" title="x&quot;y">L(x&quot;y)</span>')


def test_sort_keys_in_base_units():
    assert sort_key("1.5 ms") == 1_500_000
    assert sort_key("210.1 us (bimodal: ...)") == 210_100
    assert sort_key("2.0 KiB") == 2048
    assert sort_key("-3") == -3
    assert sort_key("97.0%") == 97.0
    assert sort_key("n/a") is None and sort_key("pid 5") is None


def test_headers_wrap_only_at_spaces():
    assert header("Launch-to-start p50") == '<span class="nw">Launch-to-start</span> p50'
    assert header("Kernels/step") == '<span class="nw">Kernels/step</span>'
    assert header("Calls") == "Calls"


@settings(max_examples=400)
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=60))
def test_escaped_text_comes_back_as_the_same_text(text):
    """Whatever a trace name holds, escape.md then convert shows exactly its characters (line
    breaks as spaces, control characters dropped), never markup."""
    out = str(convert(escape.md(text)))
    visible = html.unescape(re.sub(r"</?(p|ul|li|h4)>", "", out)).replace("\n", " ")
    expected = escape.strip_controls(text)
    assert not re.search(r"<(?!/?(p|ul|li|h4)>)", out)
    if expected.strip() and not re.match(r"\s*(- |#{1,6}\s|\|)", expected):
        # escape.md breaks autolinks with U+200B, so U+200B in the name itself cannot be told apart
        assert " ".join(visible.replace("\u200b", "").split()) == " ".join(expected.replace("\u200b", "").split())
