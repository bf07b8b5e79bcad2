"""The metric runner: declared dependencies run first and are all a metric sees, metrics in
threads give the one-thread report with at most one HEAVY metric at a time on big traces,
cached keys are built once and released after their readers."""

from __future__ import annotations

import itertools
import json
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
from nsys_llm_explainer.runtime.lifetimes import HEAVY, Releases
from nsys_llm_explainer.trace import deadline
from nsys_llm_explainer.trace.data import TraceData
from nsys_llm_explainer.trace.nsys.fetch import rows_upper_bound
from nsys_llm_explainer.trace.nsys.helper import open_export as open_trace
from nsys_llm_explainer.trace.nsys.load import NsysTraceData
from tests.conftest import nsys_trace_files
from tests.fixtures import hostile as h
from tests.fixtures import variants

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
    releases = Releases(REGISTRY)
    released_at = {}
    for i, mid in enumerate(order):
        for key in releases.finished(mid):
            assert key not in released_at
            released_at[key] = i
    expected = {}
    for key in {k for m in REGISTRY for k in m.reads}:
        expected[key] = max(order.index(m.id) for m in REGISTRY if key in m.reads)
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
    """Every metric declares the keys it reads (Metric.reads, helpers included): a key
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
    from nsys_llm_explainer.trace import formats

    opened: list[TraceData] = []
    real = formats.open_trace

    def keep(*a: object, **k: object) -> TraceData:
        opened.append(real(*a, **k))  # type: ignore[arg-type]
        return opened[-1]

    monkeypatch.setattr(api.formats, "open_trace", keep)
    report = explain(h.good(tmp_path), Options(), jobs=1)
    assert report.ok("top_kernels") is not None
    assert len(opened) == 1 and opened[0]._cache == {}


# -- metrics in threads ---------------------------------------------------------------------
@pytest.fixture
def always_threads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Metrics run in threads for any trace size; returns the thread count of each pool."""
    monkeypatch.setattr(runner, "THREADS_MIN_KERNELS", 0)
    pools: list[int] = []
    original = runner._Pool.run

    def run(self: runner._Pool, threads: int) -> dict[str, Outcome]:
        pools.append(threads)
        return original(self, threads)

    monkeypatch.setattr(runner._Pool, "run", run)
    return pools


def report_text(path: Path, jobs: int) -> str:
    return json.dumps(explain(path, Options(), jobs=jobs).to_dict(), sort_keys=True, default=str)


FIXTURES = {
    "damaged": lambda d: h.mutate(
        h.good(d),
        f"INSERT INTO {h.RUNTIME} SELECT * FROM {h.RUNTIME} WHERE correlationId = 2",
        f"UPDATE {h.RUNTIME} SET start = NULL WHERE correlationId = 4",
        f"INSERT INTO {h.KERNEL} SELECT * FROM {h.KERNEL} LIMIT 1",
        loosen=(h.RUNTIME, h.KERNEL),
    ),
    "colliding_corr": lambda d: variants.multi_process_colliding_corr(d / "t.sqlite"),
    "null_ends": lambda d: variants.null_ends(d / "t.sqlite"),
    "mixed_text": lambda d: variants.mixed_text(d / "t.sqlite"),
    "no_nvtx": lambda d: variants.no_nvtx(d / "t.sqlite"),
    "no_kernels": lambda d: variants.no_kernels(d / "t.sqlite", kernel_table=True),
}


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_threads_give_the_one_thread_report(
    name: str, tmp_path: Path, always_threads: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = FIXTURES[name](tmp_path)
    alone = report_text(path, jobs=1)
    assert always_threads == []
    assert report_text(path, jobs=2) == alone  # heavy metrics side by side (a small trace)
    monkeypatch.setattr(runner, "HEAVY_ALONE_KERNELS", 0)
    assert report_text(path, jobs=3) == alone  # one heavy metric at a time
    assert always_threads == [2, 3]


@pytest.mark.parametrize("trace", nsys_trace_files(), ids=lambda p: p.stem)
def test_threads_give_the_one_thread_report_on_real_exports(trace: Path, always_threads: list[int]) -> None:
    assert report_text(trace, jobs=2) == report_text(trace, jobs=1)
    assert always_threads == [2]


def test_threads_only_when_they_can_pay_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conn, schema = open_trace(h.good(tmp_path))
    kernels = conn.execute(f"SELECT count(*) FROM {h.KERNEL}").fetchone()[0]
    try:
        assert runner.plan(rows_upper_bound(conn, schema.kernel_table), jobs=4) == runner.Plan(1, heavy_alone=False)
        assert runner.plan(rows_upper_bound(conn, None), jobs=4) == runner.Plan(1, heavy_alone=False)
        monkeypatch.setattr(runner, "THREADS_MIN_KERNELS", kernels)
        assert runner.plan(rows_upper_bound(conn, schema.kernel_table), jobs=4) == runner.Plan(4, heavy_alone=False)
        assert runner.plan(rows_upper_bound(conn, schema.kernel_table), jobs=1) == runner.Plan(1, heavy_alone=False)
        monkeypatch.setattr(runner, "HEAVY_ALONE_KERNELS", kernels)
        assert runner.plan(rows_upper_bound(conn, schema.kernel_table), jobs=2) == runner.Plan(2, heavy_alone=True)
        monkeypatch.setattr(runner, "THREADS_MIN_KERNELS", kernels + 1)
        assert runner.plan(rows_upper_bound(conn, schema.kernel_table), jobs=4) == runner.Plan(1, heavy_alone=True)
    finally:
        conn.close()


def test_pool_keeps_heavy_metrics_apart_and_runs_dependencies_first(tmp_path: Path) -> None:
    heavy = sorted(HEAVY)[:3]
    rec = Recorder()
    metrics = [
        rec.metric(heavy[0], 0.15),
        rec.metric("light_a", 0.05),
        rec.metric(heavy[1], 0.15),
        rec.metric("light_b", 0.05),
        rec.metric("reader", 0.01, after=(heavy[1], "light_a", "not_registered")),
        rec.metric(heavy[2], 0.15),
        rec.metric("light_c", 0.05),
    ]
    results = runner.run_metrics(metrics, _context(tmp_path), _run_one, runner.Plan(3, heavy_alone=True))
    assert list(results) == [m.id for m in metrics]  # the order given, whatever finished first
    assert all(isinstance(r, MetricResult) and r.data["id"] == mid for mid, r in results.items())
    spans = rec.spans
    for a, b in itertools.combinations(heavy, 2):
        assert spans[a][1] <= spans[b][0] or spans[b][1] <= spans[a][0], (a, b)
    overlapped = [
        (a, b) for a, b in itertools.combinations(spans, 2)
        if spans[a][0] < spans[b][1] and spans[b][0] < spans[a][1]
    ]
    assert overlapped  # the pool did run metrics side by side
    assert spans["reader"][0] >= max(spans[heavy[1]][1], spans["light_a"][1])
    # A metric sees the results it declared, and nothing else.
    assert set(rec.seen["reader"]) == {heavy[1], "light_a"}
    assert all(rec.seen[m.id] == {} for m in metrics if m.id != "reader")


def test_on_big_traces_heavy_metrics_start_in_run_order(tmp_path: Path) -> None:
    """A HEAVY metric that waits for a result holds back the HEAVY ones after it (they would
    run while the keys it reads are still held); on smaller traces the free thread goes on."""
    h0, h1 = sorted(HEAVY)[:2]
    ctx = _context(tmp_path)
    for heavy_alone in (True, False):
        rec = Recorder()
        metrics = [rec.metric("slow", 0.3), rec.metric(h0, 0.05, after=("slow",)), rec.metric(h1, 0.05)]
        runner.run_metrics(metrics, ctx, _run_one, runner.Plan(2, heavy_alone=heavy_alone))
        assert rec.spans[h0][0] >= rec.spans["slow"][1]
        if heavy_alone:
            assert rec.spans[h1][0] >= rec.spans[h0][1]
        else:
            assert rec.spans[h1][1] <= rec.spans["slow"][1]


def test_heavy_metrics_share_the_pool_on_smaller_traces(tmp_path: Path) -> None:
    a, b = sorted(HEAVY)[:2]
    rec = Recorder()
    metrics = [rec.metric(a, 0.2), rec.metric(b, 0.2)]
    runner.run_metrics(metrics, _context(tmp_path), _run_one, runner.Plan(2, heavy_alone=False))
    assert rec.spans[a][0] < rec.spans[b][1] and rec.spans[b][0] < rec.spans[a][1]


def test_heavy_metrics_are_registered() -> None:
    assert HEAVY <= set(REGISTRY_IDS)


def test_an_interrupt_in_a_worker_reaches_the_caller(tmp_path: Path) -> None:
    rec = Recorder()

    def interrupted(ctx: Context) -> Outcome:
        raise KeyboardInterrupt

    metrics = [rec.metric("slow", 0.2), Metric(id="boom", title="boom", run=interrupted),
               rec.metric("never", 0.0, after=("boom",))]
    with pytest.raises(KeyboardInterrupt):
        runner.run_metrics(metrics, _context(tmp_path), _run_one, runner.Plan(2))
    assert "never" not in rec.spans


def test_on_big_traces_a_metric_starts_only_near_the_front_of_the_queue(tmp_path: Path) -> None:
    """With one heavy metric at a time, a free thread takes only among the next LOOKAHEAD
    pending metrics: a light one further down waits, rather than building its tables early
    and holding them until their last reader."""
    h0, h1, h2, h3 = sorted(HEAVY)[:4]
    rec = Recorder()
    metrics = [rec.metric(h0, 0.3), rec.metric(h1, 0.05), rec.metric(h2, 0.05), rec.metric(h3, 0.05),
               rec.metric("far", 0.01)]
    assert runner.LOOKAHEAD == 3
    ctx = _context(tmp_path)
    runner.run_metrics(metrics, ctx, _run_one, runner.Plan(2, heavy_alone=True))
    assert rec.spans["far"][0] >= rec.spans[h0][1]
    # without the heavy rule (a smaller trace) the free thread runs it at once
    rec = Recorder()
    metrics = [rec.metric(h0, 0.3), rec.metric(h1, 0.05), rec.metric(h2, 0.05), rec.metric(h3, 0.05),
               rec.metric("far", 0.01)]
    runner.run_metrics(metrics, ctx, _run_one, runner.Plan(2, heavy_alone=False))
    assert rec.spans["far"][0] < rec.spans[h0][1]


@pytest.mark.parametrize("threads", [1, 2])
def test_a_metric_that_will_skip_is_skipped_once_its_check_can_answer(tmp_path: Path, threads: int) -> None:
    """late reads key "k" and declares a check on "a": on this trace it skips, so its outcome is
    the check's reason, it never runs, and "k" goes as soon as the check answers, before "b"
    (which comes between a and late and reads nothing) runs."""
    ctx = _context(tmp_path)
    ran: list[str] = []
    cached_when: dict[str, bool] = {}

    def plain(mid: str, reads: tuple[str, ...] = ()) -> Metric:
        def run(c: Context) -> Outcome:
            ran.append(mid)
            if mid == "b":
                cached_when["b"] = "k" in c.data._cache
            if reads:
                c.data.cached("k", lambda: 1)
            return MetricResult(mid, {"id": mid})

        return Metric(id=mid, title=mid, run=run, reads=reads)

    def check(c: Context) -> str | None:
        assert set(c.results) == {"a"}  # only what it declared, all finished
        return "not this kind of trace"

    late = Metric(id="late", title="late", run=lambda c: ran.append("late") or MetricResult("late", {}),
                  after=("a", "b"), reads=("k",), skip_when=check, skip_after=("a",))
    metrics = [plain("a", reads=("k",)), plain("b"), late]
    results = runner.run_metrics(metrics, ctx, _run_one, runner.Plan(threads, heavy_alone=True))
    assert list(results) == ["a", "b", "late"]
    assert str(results["late"].reason) == "not this kind of trace"  # type: ignore[union-attr]
    assert "late" not in ran
    if threads == 1:
        assert cached_when == {"b": False}  # released right after the check, before b


def test_a_check_that_answers_none_or_fails_leaves_the_metric_to_run(tmp_path: Path) -> None:
    ran: list[str] = []

    def runs(mid: str, check) -> Metric:  # type: ignore[no-untyped-def]
        return Metric(id=mid, title=mid, run=lambda c: ran.append(mid) or MetricResult(mid, {}),
                      skip_when=check)

    def fails(c: Context) -> str | None:
        raise ValueError("a bug in the check")

    ctx = _context(tmp_path)
    results = runner.run_metrics([runs("x", lambda c: None), runs("y", fails)], ctx, _run_one)
    assert ran == ["x", "y"] and all(isinstance(r, MetricResult) for r in results.values())
    timed = Context(ctx.schema, ctx.data, Options(timeout_s=5.0))
    runner.run_metrics([runs("z", lambda c: "skip")], timed, _run_one)
    assert ran[-1] == "z"  # under --timeout the check is not asked: the run has the deadline
