"""Run the registered metrics over one TraceData, in this thread or in worker threads.

Metrics spend most of their time in numpy sorts, joins and reductions over millions of rows,
which release the GIL, so on a big trace two threads finish the metric phase well before one
(docs/performance.md: paired on a quiet 2-core machine, one thread takes 1.14x the wall time
of two on the 5M-kernel export, 1.30x on the 500k one). Metrics share TraceData's cache (built once, see
TraceData.cached) and its connection (one statement at a time, see deadline.limit). A metric
sees the results of the metrics it names in Metric.after, which run before it, and no others,
however many threads run. The report does not depend on the number of threads: outcomes are
collected in the order given and warnings are sorted by the caller.

Memory: cached keys are released once all their readers have finished (lifetimes.py), and
on traces of HEAVY_ALONE_KERNELS kernels or more at most one HEAVY metric (lifetimes.HEAVY)
runs at a time, the others beside it, and HEAVY metrics start in run order, so the peak stays
near that of one thread.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence

from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.metrics import Metric
from nsys_llm_explainer.model import Outcome
from nsys_llm_explainer.runtime import machine
from nsys_llm_explainer.runtime.lifetimes import HEAVY, Releases

THREADS_MIN_KERNELS = 250_000  # below this the metric phase takes well under a second
# From here at most one HEAVY metric runs at a time. Below it two may run side by side: on the
# 500k-kernel export one at a time peaked at 271 MiB instead of 320 but took 1.13x the wall time
# (3 pairs each against the same baseline), so the threads keep their speed there.
HEAVY_ALONE_KERNELS = 1_000_000
WAIT_STEP_S = 0.5
# On big traces a metric may start only among the next LOOKAHEAD pending ones (in run order):
# one far ahead would build its cached tables early and keep them alive until their last
# reader, which costs memory the run order was chosen to save.
LOOKAHEAD = 3
RunOne = Callable[[Metric, Context], Outcome]


@frozen
class Plan:
    threads: int = 1
    heavy_alone: bool = True  # at most one HEAVY metric at a time


def plan(rows: int, jobs: int) -> Plan:
    """Threads pay off with jobs > 1 and at least THREADS_MIN_KERNELS kernel rows (`rows`:
    an upper bound of the kernel rows)."""
    threads = jobs if jobs > 1 and rows >= THREADS_MIN_KERNELS else 1
    return Plan(threads, heavy_alone=rows >= HEAVY_ALONE_KERNELS)


def run_metrics(
    metrics: Sequence[Metric], ctx: Context, run_one: RunOne, how: Plan = Plan()
) -> dict[str, Outcome]:
    """metric id -> outcome, in the order of `metrics`. `run_one` must not raise
    Exception (it turns failures into Skipped); anything else it raises is raised here.
    A metric listed in another's `after` must come before it in `metrics`."""
    ids = [m.id for m in metrics]
    for metric in metrics:
        early = [d for d in metric.after if d in ids and ids.index(d) > ids.index(metric.id)]
        if early:
            raise ValueError(f"{metric.id} reads {early}, which run after it")
    releases = Releases(metrics)
    if how.threads < 2 or len(metrics) < 2:
        results: dict[str, Outcome] = {}
        checks = _Checks(metrics)
        for metric in metrics:
            if metric.id in results:  # skipped early
                continue
            results[metric.id] = run_one(metric, _view(ctx, metric, results))
            _release(ctx, releases.finished(metric.id), metric.id in HEAVY)
            for m in checks.due(results):
                if (reason := _skip_reason(m, ctx, results)) is not None:
                    results[m.id] = m.skipped(reason)
                    _release(ctx, releases.finished(m.id))
        return {m.id: results[m.id] for m in metrics}
    return _Pool(metrics, ctx, run_one, releases, how.heavy_alone).run(how.threads)


class _Checks:
    """The metrics with a skip_when check not asked yet; due(results) hands out those whose
    skip_after metrics have all finished, each once."""

    def __init__(self, metrics: Sequence[Metric]) -> None:
        ids = {m.id for m in metrics}
        self._left = [(m, [d for d in m.skip_after if d in ids]) for m in metrics if m.skip_when is not None]

    def due(self, results: dict[str, Outcome]) -> list[Metric]:
        ready = [m for m, deps in self._left if m.id not in results and all(d in results for d in deps)]
        asked = {m.id for m in ready}
        self._left = [(m, deps) for m, deps in self._left if m.id not in asked and m.id not in results]
        return ready


def _skip_reason(metric: Metric, ctx: Context, results: dict[str, Outcome]) -> str | None:
    """metric.skip_when on its view; None when it answers none or fails (the metric then runs
    and meets the failure itself), and under --timeout (a check has no deadline: the metric's
    run has)."""
    assert metric.skip_when is not None
    if ctx.options.timeout_s:
        return None
    try:
        return metric.skip_when(_view(ctx, metric, results))
    except Exception:  # noqa: BLE001 - the metric's own run reports it
        return None


def _view(ctx: Context, metric: Metric, results: dict[str, Outcome]) -> Context:
    """`ctx` with only the results `metric` declared (all of them finished)."""
    return dataclasses.replace(ctx, results={d: results[d] for d in metric.after if d in results})


def _release(ctx: Context, keys: Sequence[str], heavy: bool = False) -> None:
    """Drop `keys` and give free heap pages back; after a HEAVY metric also when it
    released nothing, so that its temporaries do not raise the next metric's peak."""
    if keys:
        ctx.data.release(*keys)
    if keys or heavy:
        machine.release_free_memory()


class _Pool:
    def __init__(
        self,
        metrics: Sequence[Metric],
        ctx: Context,
        run_one: RunOne,
        releases: Releases,
        heavy_alone: bool,
    ) -> None:
        self.metrics = metrics
        self.ids = {m.id for m in metrics}
        self.ctx = ctx
        self.run_one = run_one
        self.releases = releases
        self.heavy_alone = heavy_alone
        self.pending = list(metrics)
        self.running: set[str] = set()
        self.results: dict[str, Outcome] = {}
        self.checks = _Checks(metrics)
        self.error: BaseException | None = None
        self.cond = threading.Condition()

    def _wake(self) -> None:
        with self.cond:
            self.cond.notify_all()

    def run(self, threads: int) -> dict[str, Outcome]:
        self.ctx.data.parts.wake = self._wake
        try:
            return self._run(threads)
        finally:
            self.ctx.data.parts.wake = lambda: None

    def _run(self, threads: int) -> dict[str, Outcome]:
        workers = [
            threading.Thread(target=self._work, name=f"nsys-llm-explain-metrics-{i}", daemon=True)
            for i in range(min(threads, len(self.metrics)))
        ]
        for worker in workers:
            worker.start()
        try:
            with self.cond:
                while self.error is None and len(self.results) < len(self.metrics):
                    self.cond.wait(WAIT_STEP_S)
        except BaseException:  # Ctrl-C: start nothing new and stop the running statements
            self._stop()
            raise
        if self.error is not None:
            self._stop()
            raise self.error
        for worker in workers:
            worker.join()
        return {m.id: self.results[m.id] for m in self.metrics}

    def _stop(self) -> None:
        with self.cond:
            self.pending.clear()
        self.ctx.data.interrupt()

    def _next(self) -> Metric | None:
        """The first pending metric that may start now (called with cond held): what it
        reads has finished, and it is not a second HEAVY one. On big traces HEAVY metrics
        also start in run order: one that waits for its results holds back the HEAVY ones
        after it, which would otherwise run while the keys the waiting one reads (and the
        run order meant to release before them) are still held."""
        heavy_blocked = self.heavy_alone and not self.running.isdisjoint(HEAVY)
        for m in self.pending[: LOOKAHEAD if self.heavy_alone else None]:
            heavy = m.id in HEAVY
            if heavy_blocked and heavy:
                continue
            if all(d in self.results for d in m.after if d in self.ids):
                return m
            heavy_blocked = heavy_blocked or (self.heavy_alone and heavy)
        return None

    def _take(self) -> Metric | Callable[[], None] | None:
        """The next metric this thread runs (marked running), else a part a running metric
        offered (analysis/idle_sweep.py, it raises nothing), else None: nothing is left."""
        with self.cond:
            while (metric := self._next()) is None:
                if not self.pending or self.error is not None:
                    return None
                if (part := self.ctx.data.parts.take()) is not None:
                    return part  # nothing may start: help the running metric
                self.cond.wait()
            self.pending.remove(metric)
            self.running.add(metric.id)
            return metric

    def _work(self) -> None:
        while True:
            job = self._take()
            if job is None:
                return
            if not isinstance(job, Metric):
                job()
                continue
            metric = job
            try:
                outcome = self.run_one(metric, _view(self.ctx, metric, self.results))
            except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
                with self.cond:
                    self.error = self.error or exc
                    self.pending.clear()
                    self.cond.notify_all()
                return
            with self.cond:
                self.results[metric.id] = outcome
                self.running.discard(metric.id)
                released = self.releases.finished(metric.id)
                due = self.checks.due(self.results)
                self.cond.notify_all()
            _release(self.ctx, released, metric.id in HEAVY)
            for m in due:
                self._skip_early(m)

    def _skip_early(self, metric: Metric) -> None:
        """Ask metric.skip_when (outside the lock); a reason is its outcome, if it has not
        started meanwhile (then it skips by itself)."""
        with self.cond:
            view_results = dict(self.results)
        reason = _skip_reason(metric, self.ctx, view_results)
        if reason is None:
            return
        with self.cond:
            if metric not in self.pending:
                return
            self.pending.remove(metric)
            self.results[metric.id] = metric.skipped(reason)
            released = self.releases.finished(metric.id)
            self.cond.notify_all()
        _release(self.ctx, released)
