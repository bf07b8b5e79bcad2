"""The package's shape, held to the figures the house step set (at most 200 modules, dict[str,
Any] written at most 80 times), results read through their typed fields, and the trace format
compared as a TraceFormat, never as a string, outside trace/."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nsys_llm_explainer
from nsys_llm_explainer.model import TraceFormat

PACKAGE = Path(nsys_llm_explainer.__file__).resolve().parent
SOURCES = sorted(PACKAGE.rglob("*.py"))

MAX_MODULES = 200
MAX_UNTYPED_DICTS = 80
# dict[str, Any] as written, and any alias of it (`Obj: TypeAlias = dict[str, Any]`).
UNTYPED_DICT = re.compile(r"\b[Dd]ict\[\s*str\s*,\s*(?:typing\.)?Any\s*\]")


def relative(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def test_the_package_has_at_most_200_modules() -> None:
    assert len(SOURCES) <= MAX_MODULES, [relative(p) for p in SOURCES]


def untyped_dict_count(text: str) -> int:
    count = len(UNTYPED_DICT.findall(text))
    aliases = re.findall(r"^(\w+)\s*(?::\s*TypeAlias)?\s*=\s*" + UNTYPED_DICT.pattern, text, re.M)
    for alias in aliases:
        count += len(re.findall(rf"\b{alias}\b", text)) - 1
    return count


def test_untyped_dict_count_counts_aliases() -> None:
    text = "Obj: TypeAlias = dict[str, Any]\ndef f(a: Obj, b: dict[str, Any]) -> Obj: ...\n"
    # the alias's definition, its two uses and the one written out
    assert untyped_dict_count(text) == 4


def test_dict_str_any_is_written_at_most_80_times() -> None:
    counts = {relative(p): untyped_dict_count(p.read_text(encoding="utf-8")) for p in SOURCES}
    total = sum(counts.values())
    assert total <= MAX_UNTYPED_DICTS, sorted(((n, f) for f, n in counts.items() if n), reverse=True)


def test_no_string_key_lookup_of_a_metric_result_outside_metrics() -> None:
    lookup = re.compile(r"\.data\.get\(|\.data\[")
    found = [
        f"{relative(p)}:{i}"
        for p in SOURCES
        if not relative(p).startswith("metrics/")
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if lookup.search(line)
    ]
    assert found == []


def format_string_comparisons(tree: ast.AST, source: str) -> list[int]:
    """Lines comparing anything with a format's id ("nsys-sqlite"), or something named like a
    format with its one-word name ("kineto": also the name of other things, such as where an
    operator's shapes came from)."""
    ids = {f.value for f in TraceFormat}
    words = {f.word for f in TraceFormat}
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        consts = [
            c.value
            for o in operands
            for c in ([o] if not isinstance(o, (ast.Tuple, ast.List, ast.Set)) else o.elts)
            if isinstance(c, ast.Constant)
        ]
        others = [ast.get_source_segment(source, o) or "" for o in operands]
        if any(v in ids for v in consts) or (
            any(v in words for v in consts) and any("format" in t.lower() for t in others)
        ):
            out.append(node.lineno)
    return out


def test_format_comparison_finder_finds_one() -> None:
    src = ('if trace.format == "kineto":\n    pass\nif s.source == "kineto":\n    pass\n'
           'if fmt in ("nsys-sqlite", "x"):\n    pass\n')
    assert format_string_comparisons(ast.parse(src), src) == [1, 5]


def test_no_string_comparison_of_the_trace_format_outside_trace() -> None:
    found = []
    for p in SOURCES:
        if relative(p).startswith("trace/"):
            continue
        src = p.read_text(encoding="utf-8")
        found += [f"{relative(p)}:{n}" for n in format_string_comparisons(ast.parse(src), src)]
    assert found == []
