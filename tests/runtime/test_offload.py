"""A metric's prebuild in a forked child (runtime/offload.py, runner._run_offloading): the
value comes back into the cache with the warnings its build added, the metric and its
readers run after the others, a failed child leaves the build to the metric, and the report
of a PyTorch profiler trace is the same with and without it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.metrics import Metric
from nsys_llm_explainer.model import MetricResult, Outcome
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.runtime import offload, runner
from nsys_llm_explainer.trace import forked
from nsys_llm_explainer.trace.kineto.source import open_kineto
from tests.fixtures.kineto.builder import KinetoBuilder

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork is used on Linux only")


def kineto(path: Path) -> Path:
    b = KinetoBuilder()
    b.user("ProfilerStep#1", 0, 90_000)
    for i in range(30):
        t = 1_000 + i * 2_000
        b.op("aten::mm", t, t + 900, ext=i + 1)
        b.launch(f"gemm_{i % 3}", t + 100, t + 400, t + 500, t + 1_700, corr=100 + i)
    return b.write(path)


def context(tmp_path: Path) -> Context:
    data = open_kineto(kineto(tmp_path / "t.json"))
    return Context(data.schema, data, Options())


class Built:
    """The stand-in metrics: `first`, then `slow` whose prebuild is `value`, then `reader`
    of slow's result, then `last`; each records where it ran and what it saw."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.built_in: list[int] = []  # pids where the prebuild ran

    def prebuild(self, ctx: Context) -> dict[str, object]:
        self.built_in.append(os.getpid())
        ctx.data.warnings.append("built: a warning of the build")
        return {"pid": os.getpid(), "array": np.arange(5), "saw": sorted(ctx.results)}

    def metrics(self, fail: bool = False) -> list[Metric]:
        def make(mid: str, after: tuple[str, ...] = (), prebuild=None) -> Metric:
            def run(ctx: Context) -> Outcome:
                self.order.append(mid)
                data = {"id": mid}
                if mid == "slow":
                    data["value"] = ctx.data.cached("slow_value", lambda: self.prebuild(ctx))
                return MetricResult(mid, data)

            return Metric(id=mid, title=mid, run=run, after=after, prebuild=prebuild)

        def broken(ctx: Context) -> object:
            raise RuntimeError("in the child")

        return [make("first"), make("slow", after=("first",),
                                     prebuild=("slow_value", broken if fail else self.prebuild)),
                make("reader", after=("slow",)), make("last")]


def run_one(metric: Metric, ctx: Context) -> Outcome:
    return metric.run(ctx)


def test_the_prebuild_runs_in_a_child_and_its_readers_last(tmp_path, monkeypatch):
    monkeypatch.setattr(forked, "one_thread", lambda: True)  # pytest has a watchdog thread
    b, ctx = Built(), context(tmp_path)
    results = runner.run_metrics(b.metrics(), ctx, run_one, runner.Plan(offload=True))
    assert list(results) == ["first", "slow", "reader", "last"]  # the given order
    assert b.order == ["first", "last", "slow", "reader"]  # the prebuild's metric and its reader last
    value = results["slow"].data["value"]
    assert value["pid"] != os.getpid() and b.built_in == []  # built in the child, not here
    assert value["array"].tolist() == [0, 1, 2, 3, 4] and value["saw"] == ["first"]
    assert ctx.data.warnings == ["built: a warning of the build"]  # the child's warning came back


def test_a_failed_child_leaves_the_build_to_the_metric(tmp_path, monkeypatch):
    monkeypatch.setattr(forked, "one_thread", lambda: True)
    b, ctx = Built(), context(tmp_path)
    results = runner.run_metrics(b.metrics(fail=True), ctx, run_one, runner.Plan(offload=True))
    assert results["slow"].data["value"]["pid"] == os.getpid() and b.built_in == [os.getpid()]
    assert ctx.data.warnings == ["built: a warning of the build"]  # once: the child's build failed


def test_no_fork_without_one_thread_permission_or_room(tmp_path, monkeypatch):
    b, ctx = Built(), context(tmp_path)
    monkeypatch.setattr(forked, "one_thread", lambda: False)
    runner.run_metrics(b.metrics(), ctx, run_one, runner.Plan(offload=True))
    assert b.built_in == [os.getpid()]
    monkeypatch.setattr(offload, "_allowed", False)  # a library caller's process
    assert not offload.wanted(ctx.data, 2, 1, None, 5_000)
    monkeypatch.setattr(offload, "_allowed", True)
    assert offload.wanted(ctx.data, 2, 1, None, 5_000)
    assert not offload.wanted(ctx.data, 1, 1, None, 5_000)  # --jobs 1
    assert not offload.wanted(ctx.data, 2, 2, None, 5_000)  # metrics in threads
    assert not offload.wanted(ctx.data, 2, 1, 30.0, 5_000)  # --timeout
    assert not offload.wanted(ctx.data, 2, 1, None, 3_999)  # a short build
    monkeypatch.setattr(offload, "MAX_RSS_BYTES", 1 << 20)  # a process larger than this
    assert not offload.wanted(ctx.data, 2, 1, None, 5_000)
    monkeypatch.undo()
    monkeypatch.setattr(offload, "_allowed", True)
    monkeypatch.setenv(offload.OFF_VAR, "1")
    assert not offload.wanted(ctx.data, 2, 1, None, 5_000)


CLI = """
import sys
from nsys_llm_explainer.runtime import offload
offload.MIN_KERNELS = 0  # the test trace is small
used = []
original = offload.Offload.finish
def finish(self):
    ok = original(self)
    used.append(ok)
    return ok
offload.Offload.finish = finish
import atexit, os
from nsys_llm_explainer import cli
real = cli._exit_now
def exit_now(code):
    sys.stderr.write(f"offloaded={used}\\n")
    real(code)
cli._exit_now = exit_now
sys.argv = ["nsys-llm-explain", *sys.argv[1:]]
cli.main()
"""


def test_the_report_is_the_same_with_and_without_it(tmp_path):
    """The command line in a new single-threaded process, as users run it."""
    trace = kineto(tmp_path / "t.json")
    runs = {}
    for side, env in (("on", {}), ("off", {offload.OFF_VAR: "1"})):
        out = tmp_path / side
        done = subprocess.run([sys.executable, "-c", CLI, str(trace), "--out", str(out), "-q", "--jobs", "2"],
                              capture_output=True, text=True, timeout=300, env={**os.environ, **env})
        assert done.returncode == 0, done.stderr
        runs[side] = done.stderr
    assert "offloaded=[True]" in runs["on"] and "offloaded=[]" in runs["off"]
    for name in ("report.md", "report.json", "report.html"):
        assert (tmp_path / "on" / name).read_bytes() == (tmp_path / "off" / name).read_bytes(), name
    on = sorted(p.name for p in (tmp_path / "on" / "tables").iterdir())
    assert on == sorted(p.name for p in (tmp_path / "off" / "tables").iterdir())
    for name in on:
        assert (tmp_path / "on" / "tables" / name).read_bytes() == (tmp_path / "off" / "tables" / name).read_bytes()
