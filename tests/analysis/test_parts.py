"""analysis/idle_sweep.py: a build's parts, shared with the run's idle metric threads."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.analysis.idle_sweep import each
from nsys_llm_explainer.errors import MetricTimeout
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult
from nsys_llm_explainer.runtime import runner
from nsys_llm_explainer.trace import deadline
from nsys_llm_explainer.trace.data import TraceData
from tests.runtime.test_runner import _context


@pytest.fixture
def ctx(tmp_path: Path) -> Context:
    return _context(tmp_path)


def _data(ctx: Context, threads: int) -> TraceData:
    ctx.data.threads = threads
    return ctx.data


def test_one_thread_runs_the_parts_in_order_here(ctx: Context) -> None:
    data = _data(ctx, 1)
    seen: list[str] = []
    out = each(lambda x: seen.append(threading.current_thread().name) or x * x, [1, 2, 3], data)
    assert out == [1, 4, 9]
    assert set(seen) == {threading.current_thread().name}
    assert data.parts.take() is None  # nothing offered


def test_offers_nobody_took_are_withdrawn(ctx: Context) -> None:
    """Parts the calling thread ran itself leave nothing on offer (an offer holds the
    build's data alive)."""
    data = _data(ctx, 2)
    assert each(lambda x: x + 1, [1, 2, 3, 4], data) == [2, 3, 4, 5]
    assert data.parts.take() is None


def test_results_in_part_order_and_errors_raised_here(ctx: Context) -> None:
    data = _data(ctx, 2)
    got: list[object] = []

    def idle_worker() -> None:  # takes offered parts as runner does
        while (task := data.parts.take()) is not None:
            task()

    def slow_first(x: int) -> int:
        if x == 0:
            time.sleep(0.2)  # the worker takes the later parts meanwhile
        return x + 10

    thread = threading.Thread(target=lambda: got.extend(each(slow_first, [0, 1, 2, 3], data)))
    thread.start()
    time.sleep(0.05)
    idle_worker()
    thread.join()
    assert got == [10, 11, 12, 13]

    def fails(x: int) -> int:
        if x == 2:
            raise ValueError("part 2")
        return x

    with pytest.raises(ValueError, match="part 2"):
        each(fails, [0, 1, 2], data)


def test_the_deadline_holds_in_a_part_another_thread_runs(ctx: Context) -> None:
    data = _data(ctx, 2)
    taken: list[BaseException] = []

    def part(x: int) -> int:
        if x == 1:
            deadline.check()
        return x

    offered = threading.Event()
    original = data.parts.offer

    def offer(task):  # type: ignore[no-untyped-def]
        original(task)
        offered.set()

    data.parts.offer = offer  # type: ignore[method-assign]

    def worker() -> None:
        offered.wait()
        task = data.parts.take()
        assert task is not None
        task()

    helper = threading.Thread(target=worker)
    helper.start()
    with deadline.limit(None, 0.0):
        time.sleep(0.01)
        with pytest.raises(MetricTimeout):
            each(lambda x: (time.sleep(0.05), part(x))[1], [0, 1], data)
    helper.join()
    assert taken == []


def test_runner_threads_help_a_metric_that_offers_parts(ctx: Context) -> None:
    """A metric that offers its parts while the other worker has nothing to start: that
    worker runs some of them; the outcome is the same as with one thread."""
    where: list[str] = []

    def offering(ctx: Context) -> MetricResult:
        def part(x: int) -> int:
            where.append(threading.current_thread().name)
            time.sleep(0.05)
            return x * 2

        return MetricResult("offering", data={"out": each(part, list(range(8)), ctx.data)})

    def waits(ctx: Context) -> MetricResult:  # runs after: the other worker is idle meanwhile
        return MetricResult("waits", data={})

    metrics = [Metric("offering", "offering", offering),
               Metric("waits", "waits", waits, after=("offering",))]
    for threads, helped in ((1, False), (2, True)):
        where.clear()
        _data(ctx, threads)
        how = runner.Plan(threads=threads)
        out = runner.run_metrics(metrics, ctx, lambda m, c: m.run(c), how)
        assert out["offering"].data["out"] == [0, 2, 4, 6, 8, 10, 12, 14]
        assert (len(set(where)) == 2) == helped, where
