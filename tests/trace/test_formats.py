"""The format registry (trace/formats.py): one name per format, told by content, and no code
outside trace/ that compares a format's id string."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from nsys_llm_explainer.model import TraceFormat
from nsys_llm_explainer.trace import formats
from tests.fixtures.builder import TraceBuilder


def _export(path: Path) -> Path:
    b = TraceBuilder()
    b.process(100)
    b.kernel(1_000, 2_000, pid=100)
    return b.write(path)

PACKAGE = Path(formats.__file__).resolve().parents[1]


def test_sniff_reads_content_not_names(tmp_path: Path) -> None:
    export = tmp_path / "capture.json"  # an export under a PyTorch profiler name
    _export(export)
    trace = tmp_path / "trace.sqlite"  # a profiler trace under an export's name
    trace.write_bytes(gzip.compress(b'  {"traceEvents": []}'))
    other = tmp_path / "notes.txt"
    other.write_text("neither\n")
    assert formats.sniff(export) is TraceFormat.NSYS
    assert formats.sniff(trace) is TraceFormat.KINETO
    assert formats.sniff(other) is None
    assert formats.sniff(tmp_path) is None  # a directory


def test_a_gzipped_export_is_neither_and_says_so(tmp_path: Path) -> None:
    plain = tmp_path / "a.sqlite"
    _export(plain)
    packed = tmp_path / "b.sqlite.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert formats.sniff(packed) is None
    with pytest.raises(Exception, match="gzip"):
        formats.open_trace(packed)


def test_each_format_has_one_id_one_label_one_word() -> None:
    assert [(f.value, f.label, f.word) for f in TraceFormat] == [
        ("nsys-sqlite", "Nsight Systems SQLite export", "nsys"),
        ("kineto-json", "PyTorch profiler trace (Kineto JSON)", "kineto"),
    ]
    assert set(formats.READERS) == set(TraceFormat)
    assert TraceFormat.parse("kineto-json") is TraceFormat.KINETO
    assert TraceFormat.parse("nsys") is None and TraceFormat.parse(None) is None


def test_capture_advice_is_the_formats_own() -> None:
    assert "nsys profile --trace=cuda" in (formats.capture_hint(TraceFormat.NSYS, "launches") or "")
    assert "prof.step()" in (formats.capture_hint(TraceFormat.KINETO, "launches") or "")
    assert formats.capture_hint(TraceFormat.NSYS, "ranges") is None  # the general NVTX advice applies
    assert "record_function" in (formats.capture_hint(TraceFormat.KINETO, "ranges") or "")


def test_opened_data_names_its_format(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    _export(path)
    data = formats.open_trace(path)
    try:
        assert data.format is TraceFormat.NSYS and data.format_name == "Nsight Systems SQLite export"
    finally:
        data.close()


ID_LITERAL = re.compile(r"""["'](nsys-sqlite|kineto-json)["']""")


def test_no_format_id_is_compared_outside_the_registry() -> None:
    """Outside trace/ a format is TraceFormat (model.py names the ids once): no code and no
    template spells an id, so none can compare one."""
    found = []
    for path in sorted(PACKAGE.rglob("*")):
        rel = path.relative_to(PACKAGE).as_posix()
        if path.suffix not in (".py", ".j2") or rel.startswith("trace/") or rel == "model.py":
            continue
        found += [f"{rel}:{n}" for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                  if ID_LITERAL.search(line)]
    assert found == []


def test_source_text_names_format_and_versions() -> None:
    kineto = {"format": "kineto-json", "kineto": {"schemaVersion": 1, "cupti_version": 22}}
    assert formats.source_text(kineto) == "PyTorch profiler trace (schema 1, CUPTI 22)"
    rocm = {"format": "kineto-json", "kineto": {"roctracer_version": "4.1"}}
    assert formats.source_text(rocm) == "PyTorch profiler trace (schema unknown, roctracer 4.1)"
    # A trace section whose version facts are not an object (a damaged report.json) has none.
    for facts in (None, [1], "x"):
        assert formats.source_text({"format": "kineto-json", "kineto": facts}) == \
            "PyTorch profiler trace (schema unknown)"
    nsys = {"format": "nsys-sqlite", "nsys_version": "2024.5.1", "export_schema_version": "3.11.1"}
    assert formats.source_text(nsys) == "Nsight Systems 2024.5.1 (export schema 3.11.1)"
    assert formats.source_text({}) == "Nsight Systems version unknown (export schema unknown)"
