"""The Kineto reader decodes traceEvents a batch of items at a time: whatever the batch
size and the text inside the events (item boundaries inside strings, lists of objects in
args), it hands over exactly the events json.load sees, in order."""

from __future__ import annotations

import json

import pytest

from nsys_llm_explainer.trace.kineto import collect
from tests.fixtures.kineto.builder import KinetoBuilder


def tricky(b: KinetoBuilder) -> KinetoBuilder:
    for i in range(60):
        op = b.op(f'aten::op{i} }},{{"ph": "X"}}, {{ "}}', 10_000 * i, 10_000 * i + 5_000, ext=i)
        op["args"]["Input Dims"] = [[i, 2], []]
        op["args"]["Nested"] = [{"a": {"b": i}}, {"c": "},{"}]  # '}, {' inside one event's args
        b.launch(f"k{i % 3}", 10_000 * i + 100, 10_000 * i + 200, 10_000 * i + 300, 10_000 * i + 900 + i,
                 corr=i + 1, ext=i)
    return b


def events(path, monkeypatch, batch: int, chunk: int, tail: int) -> list:
    monkeypatch.setattr(collect, "BATCH_CHARS", batch)
    monkeypatch.setattr(collect, "CHUNK_CHARS", chunk)
    monkeypatch.setattr(collect, "SAFE_TAIL", tail)
    got: list = []
    collect.read_trace(path, got.append)
    return got


@pytest.mark.parametrize("one_line", [False, True])
@pytest.mark.parametrize(("batch", "chunk", "tail"), [(1, 97, 13), (64, 500, 50), (2000, 8192, 1000),
                                                      (1 << 18, 1 << 22, 1 << 20)])
def test_batches_give_the_events_json_load_gives(tmp_path, monkeypatch, one_line, batch, chunk, tail):
    path = tricky(KinetoBuilder()).write(tmp_path / "t.json", one_line=one_line)
    want = json.loads(path.read_text(), parse_float=str)["traceEvents"]
    got = events(path, monkeypatch, batch, chunk, tail)
    assert got == want
    assert len(got) == 60 * 3


def test_a_trailing_item_and_whitespace_before_the_end(tmp_path, monkeypatch):
    b = tricky(KinetoBuilder())
    text = b.text().replace("\n ]", "\n\n \t ]")
    path = tmp_path / "t.json"
    path.write_text(text)
    assert events(path, monkeypatch, 200, 1000, 100) == json.loads(text, parse_float=str)["traceEvents"]
