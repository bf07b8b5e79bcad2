"""Read a PyTorch profiler trace into collected columns (typed arrays, dicts, lists), and
nothing more."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nsys_llm_explainer.trace.kineto.collect import Collected, Collector
from nsys_llm_explainer.trace.kineto.read import read_trace

Events = tuple[dict[str, Any], Collected]  # the top-level keys besides traceEvents, the events


def read_events(path: Path) -> Events:
    """Every event of the trace at `path`, collected; InputError when it is not a trace."""
    collector = Collector()
    top = read_trace(path, collector.add)
    return top, collector.collected
