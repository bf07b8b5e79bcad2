"""Shared test fixtures: synthetic traces in tmp_path, the real shared exports, the CLI."""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from typer.testing import CliRunner

from nsys_llm_explainer.api import explain
from nsys_llm_explainer.cli import run
from nsys_llm_explainer.model import MetricResult, Report, Skipped
from nsys_llm_explainer.options import Options
from tests import fresh
from tests.fixtures.builder import TraceBuilder

# The tool's caches (compiled templates, fleet results) start empty in every test session, as
# on a new machine: a cache left by an earlier run must never decide whether a test passes.
_CACHE_HOME = Path(tempfile.mkdtemp(prefix="nsys-llm-explain-tests-cache-"))
fresh.isolate(_CACHE_HOME)


@pytest.fixture(scope="session", autouse=True)
def _remove_session_cache() -> Iterator[None]:
    yield
    shutil.rmtree(_CACHE_HOME, ignore_errors=True)


# Hypothesis profiles, registered here once. Examples have no deadline: the machine is shared
# and timings are noisy, so a slow example is not a failure. On CI, Hypothesis loads its own
# "ci" profile (derandomized, no deadline), which is kept. HYPOTHESIS_PROFILE=quick caps every
# property at 20 examples for a fast local loop (tests that set max_examples keep theirs).
settings.register_profile("local", deadline=None)
settings.register_profile("quick", deadline=None, max_examples=20)
if "HYPOTHESIS_PROFILE" in os.environ or settings.get_current_profile_name() != "ci":
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "local"))

# The real exports live beside the project, never inside it (see traces/README.md).
SHARED_TRACES = Path(__file__).resolve().parents[1].parent / "shared" / "traces"
NSYS_TRACES = SHARED_TRACES / "nsys"
# The generations every metric test runs against: oldest, middle, newest DDL.
GENERATIONS = ("2022.2", "2024.6", "2026.2")
# The metrics of the core report (later issues register more after them).
CORE_METRICS = ("top_kernels", "launch_storm", "sync", "gpu_idle", "nvtx_ranges",
                "nvtx_attribution", "per_process")


def nsys_trace_files() -> list[Path]:
    """The shared Nsight Systems exports, or [] when this checkout has none beside it."""
    return sorted(NSYS_TRACES.glob("*.sqlite")) if NSYS_TRACES.is_dir() else []


def require_nsys_traces() -> list[Path]:
    files = nsys_trace_files()
    if not files:
        pytest.skip(f"shared real traces not found at {NSYS_TRACES} (a clone outside /work)")
    return files


def analyze(path: Path, **options: Any) -> Report:
    """explain() with Options built from keyword arguments."""
    return explain(path, Options(**options))


def ok(report: Report, metric_id: str) -> dict[str, Any]:
    """The data of a metric that must have run."""
    outcome = report.metrics[metric_id]
    reason = getattr(outcome, "reason", "")
    assert isinstance(outcome, MetricResult), f"{metric_id} skipped: {reason}"
    return outcome.data


def skipped(report: Report, metric_id: str) -> str:
    """The reason of a metric that must have been skipped."""
    outcome = report.metrics[metric_id]
    assert isinstance(outcome, Skipped), f"{metric_id} ran but should have been skipped"
    return outcome.reason


def table(report: Report, metric_id: str, name: str) -> Any:
    """A metric's CSV table as a DataFrame."""
    outcome = report.metrics[metric_id]
    assert isinstance(outcome, MetricResult)
    return next(t for t in outcome.tables if t.name == name).rows()


@pytest.fixture
def build(tmp_path: Path) -> Callable[[TraceBuilder], Path]:
    """Write a TraceBuilder's export into tmp_path and return its path."""
    counter = itertools.count()

    def write(builder: TraceBuilder, name: str | None = None) -> Path:
        return builder.write(tmp_path / (name or f"trace{next(counter)}.sqlite"))

    return write


@dataclass(frozen=True)
class CliResult:
    exit_code: int
    stdout: str
    stderr: str


def run_cli(*args: str | Path) -> CliResult:
    """The command line in-process, as the console script runs it (cli.run: one error line and
    the documented exit code); stdout and stderr are kept apart."""
    with CliRunner().isolation() as (stdout, stderr, _):
        code = run([str(a) for a in args])
        return CliResult(code, stdout.getvalue().decode(), stderr.getvalue().decode())


def md_open_lines(text: str) -> list[str]:
    """report.md's lines outside <details> blocks: what GitHub shows before anything is opened."""
    out, depth = [], 0
    for line in text.splitlines():
        opens, closes = line.count("<details>"), line.count("</details>")
        if depth == 0 and not opens:
            out.append(line)
        depth = max(0, depth + opens - closes)
    return out


def md_section(text: str, title: str) -> list[str]:
    """The lines under the heading `title` (## or ###), up to the next heading of that level or
    higher, or the end of the <details> block holding it."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line in (f"## {title}", f"### {title}"))
    level = len(lines[start].split(" ", 1)[0])
    end = start + 1
    while end < len(lines):
        mark = lines[end].split(" ", 1)[0]
        if lines[end].startswith("</details>") or (set(mark) == {"#"} and len(mark) <= level):
            break
        end += 1
    return lines[start + 1 : end]
