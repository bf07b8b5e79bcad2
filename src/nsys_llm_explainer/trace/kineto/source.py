"""Open a PyTorch profiler (Kineto) trace as TraceData: read it once, fail with one line."""

from __future__ import annotations

import os
from pathlib import Path

from nsys_llm_explainer.errors import InputError
from nsys_llm_explainer.trace.kineto import prefetch
from nsys_llm_explainer.trace.kineto.events import read_events
from nsys_llm_explainer.trace.kineto.load import KinetoTraceData
from nsys_llm_explainer.trace.kineto.read import NOT_A_TRACE

# A traceEvents array of only these is not a profiler trace (e.g. a Chrome trace of
# something else): at least one event must be a GPU or CUDA/operator event.
PROFILER_CATEGORIES_HINT = "kernel, cuda_runtime, cpu_op, user_annotation ..."
# Top-level keys only the PyTorch profiler writes: with one of them, a trace without events
# is an empty capture (reported as such), not some other JSON file.
KINETO_KEYS = frozenset({"schemaVersion", "deviceProperties", "baseTimeNanoseconds", "distributedInfo",
                         "cupti_version", "cuda_runtime_version", "roctracer_version"})


def open_kineto(path: Path, kernel_name: str = "demangled") -> KinetoTraceData:
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such file")
    top, collected = prefetch.take(path) or read_events(path)
    if not any(len(t) for t in collected.tables) and not KINETO_KEYS & set(top):
        seen = sum(collected.categories.values())
        raise InputError(
            f"{path}: {NOT_A_TRACE} ({seen} events, none of them a PyTorch profiler "
            f"category such as {PROFILER_CATEGORIES_HINT})"
        )
    data = KinetoTraceData(collected, top, kernel_name=kernel_name)
    if kernel_name != "demangled":
        data.warnings.append(
            f"--kernel-name {kernel_name}: PyTorch profiler traces hold one (demangled) kernel "
            "name; it is used as it is"
        )
    return data


def describe_trace(path: Path) -> str:
    """--print-schema for a PyTorch profiler trace: its event categories and their counts."""
    data = open_kineto(path)
    counts = data.table_counts()
    return "\n".join([f"{path}: {data.format_name}", *(f"  {c}: {n} events" for c, n in counts.items())])
