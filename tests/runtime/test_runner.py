"""The metric runner: declared dependencies run first and are all a metric sees, cached keys
are built once and released after their readers."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.api import explain
from nsys_llm_explainer.errors import MetricTimeout
from nsys_llm_explainer.metrics import REGISTRY, RUN_AFTER, Metric, in_run_order
from nsys_llm_explainer.model import MetricResult, Outcome
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.runtime import runner
from nsys_llm_explainer.runtime.lifetimes import READERS, Releases
from nsys_llm_explainer.trace import deadline
from nsys_llm_explainer.trace.data import TraceData
from nsys_llm_explainer.trace.nsys.load import NsysTraceData
from nsys_llm_explainer.trace.nsys.source import open_export as open_trace
from tests.fixtures import hostile as h

REGISTRY_IDS = [m.id for m in REGISTRY]


# -- the scheduler, with stand-in metrics -------------------------------------------------
class Recorder:
    def __init__(self) -> None:
        self.spans: dict[str, tuple[float, float]] = {}
        self.seen: dict[str, dict[str, Outcome]] = {}
        self.lock = threading.Lock()

    def metric(self, mid: str, seconds: float, after: tuple[str, ...] = ()) -> Metric:
        def run(ctx: Context) -> Outcome:
            start = time.monotonic()
            time.sleep(seconds)  # releases the GIL like numpy's long phases
            with self.lock:
                self.spans[mid] = (start, time.monotonic())
                self.seen[mid] = dict(ctx.results)
            return MetricResult(mid, {"id": mid})

        return Metric(id=mid, title=mid, run=run, after=after)


def _context(tmp_path: Path) -> Context:
    conn, schema = open_trace(h.good(tmp_path))
    return Context(schema, NsysTraceData(conn, schema), Options())


def _run_one(metric: Metric, ctx: Context) -> Outcome:
    return metric.run(ctx)


def test_a_metric_sees_only_the_results_it_declared(tmp_path: Path) -> None:
    rec = Recorder()
    metrics = [rec.metric("a", 0), rec.metric("b", 0), rec.metric("c", 0, after=("a",))]
    runner.run_metrics(metrics, _context(tmp_path), _run_one)
    assert rec.seen == {"a": {}, "b": {}, "c": {"a": MetricResult("a", {"id": "a"})}}


def test_a_dependency_listed_after_its_reader_is_refused(tmp_path: Path) -> None:
    rec = Recorder()
    metrics = [rec.metric("a", 0, after=("b",)), rec.metric("b", 0)]
    with pytest.raises(ValueError, match="a reads \\['b'\\]"):
        runner.run_metrics(metrics, _context(tmp_path), _run_one)


def test_registry_declares_dependencies_in_order() -> None:
    for i, metric in enumerate(REGISTRY):
        assert set(metric.after) <= set(REGISTRY_IDS[:i]), metric.id


def test_run_order_keeps_dependencies_and_the_report_keeps_registry_order(tmp_path: Path) -> None:
    order = [m.id for m in in_run_order(REGISTRY)]
    assert sorted(order) == sorted(REGISTRY_IDS)
    for i, mid in enumerate(order):
        assert set(next(m for m in REGISTRY if m.id == mid).after) <= set(order[:i]), mid
    for mid, leader in RUN_AFTER.items():
        assert order.index(mid) == order.index(leader) + 1 + sum(
            1 for m, lead in RUN_AFTER.items() if lead == leader and order.index(m) < order.index(mid)
        )
    # A leader left out: its follower runs in its report place.
    ids = [m.id for m in in_run_order([m for m in REGISTRY if m.id != "capture"])]
    assert ids.index("communication") > ids.index("idle_causes") and len(ids) == len(REGISTRY) - 1
    report = explain(h.good(tmp_path), Options(), jobs=1)
    assert list(report.metrics) == [m.id for m in REGISTRY if m.wanted(Options())]


@settings(max_examples=60)
@given(st.permutations(REGISTRY_IDS))
def test_keys_are_released_once_all_their_readers_finished(order: list[str]) -> None:
    releases = Releases(REGISTRY_IDS)
    released_at = {}
    for i, mid in enumerate(order):
        for key in releases.finished(mid):
            assert key not in released_at
            released_at[key] = i
    expected = {}
    for key, readers in READERS.items():
        positions = [order.index(r) for r in readers if r in order]
        if positions:
            expected[key] = max(positions)
    assert released_at == expected


# -- shared state ---------------------------------------------------------------------------
def test_a_cached_key_is_built_once_when_threads_ask_together(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    builds = []

    def build() -> list[int]:
        builds.append(1)
        time.sleep(0.2)
        return [len(builds)]

    got: list[list[int]] = []
    threads = [threading.Thread(target=lambda: got.append(ctx.data.cached("k", build)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert builds == [1]
    assert len(got) == 4 and all(g is got[0] for g in got)


def test_deadline_stays_enforced_when_another_limit_on_the_connection_ends() -> None:
    conn = sqlite3.connect(":memory:")
    long_query = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200000000) "
        "SELECT count(*) FROM c"
    )
    started = time.monotonic()
    with pytest.raises(MetricTimeout), deadline.limit(conn, 0.05):
        with deadline.limit(conn, 100.0):  # another metric's limit, ending first
            pass
        conn.execute(long_query).fetchone()
    assert time.monotonic() - started < 5
    conn.execute("SELECT 1").fetchone()  # the handler is gone with the last limit


def test_no_released_key_is_built_twice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """READERS lists every metric that reads a key (directly or through a helper): a key
    released before its last reader would be built again, costing the time its cache saved."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks.synth import SynthConfig, generate

    path = tmp_path / "t.sqlite"
    generate(SynthConfig(kernels=2_000, processes=2, layers=3, prefill_every=4, seed=3), path, sidecar=False)
    builds: dict[str, int] = {}
    original = TraceData.cached

    def counting(self: TraceData, key: str, build):  # type: ignore[no-untyped-def]
        def counted():  # type: ignore[no-untyped-def]
            builds[key] = builds.get(key, 0) + 1
            return build()

        return original(self, key, counted)

    monkeypatch.setattr(TraceData, "cached", counting)
    explain(path, Options(), jobs=1)
    assert {"gpu_work", "gap_causes", "kernel_attribution", "launch_pairs", "device_busy",
            "host_rows"} <= set(builds)
    assert {k: n for k, n in builds.items() if n > 1} == {}


def test_explain_drops_every_cached_table_at_its_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nsys_llm_explainer import api
    from nsys_llm_explainer.trace import sources

    opened: list[TraceData] = []
    real = sources.open_trace

    def keep(*a: object, **k: object) -> TraceData:
        opened.append(real(*a, **k))  # type: ignore[arg-type]
        return opened[-1]

    monkeypatch.setattr(api.sources, "open_trace", keep)
    report = explain(h.good(tmp_path), Options(), jobs=1)
    assert report.ok("top_kernels") is not None
    assert len(opened) == 1 and opened[0]._cache == {}
