"""What each trace format is called, and how to capture it better, by format id.

Reports store the format id in trace.format ("nsys-sqlite", "kineto-json"); texts that name
the format or tell the user how to record a missing kind of event read them here, so no
report of one format gives the other profiler's commands.
"""

from __future__ import annotations

from typing import Any

NSYS = "nsys-sqlite"
KINETO = "kineto-json"
LABELS = {NSYS: "Nsight Systems SQLite export", KINETO: "PyTorch profiler trace (Kineto JSON)"}

# topic -> advice line, per format. "launches": kernels whose launch call is missing;
# "ranges": host ranges (NVTX, or record_function) that would name the work.
CAPTURE_HINTS: dict[str, dict[str, str]] = {
    NSYS: {
        "launches": "Start the capture before the workload (or widen the window) and keep CUDA API tracing "
                    "on (nsys profile --trace=cuda) so every kernel's launch is recorded.",
        "ranges": "",  # the workload's NVTX advice (rules/advice.py) applies as it is
    },
    KINETO: {
        "launches": "Start the profiler before the part you measure, or give it a schedule "
                    "(`torch.profiler.schedule(wait=1, warmup=1, active=3)`, calling `prof.step()` once per "
                    "iteration) so recording is on when the measured steps launch their kernels; kernels "
                    "still queued from the step before the first active one run there without a launch "
                    "call (`torch.cuda.synchronize()` before that `prof.step()` keeps them out).",
        "ranges": "Wrap the steps and phases in `torch.profiler.record_function('decode')` (recorded as "
                  "user_annotation ranges) and call `prof.step()` once per iteration; the PyTorch "
                  "profiler does not record `torch.cuda.nvtx` ranges.",
    },
}


def capture_hint(format_id: str, topic: str) -> str | None:
    """The format's advice for `topic`; None when the format has none of its own (the
    caller's general advice applies)."""
    return CAPTURE_HINTS.get(format_id, CAPTURE_HINTS[NSYS]).get(topic) or None


def source_text(trace: dict[str, Any]) -> str:
    """One line naming a report's input format and its version facts, from report.json's
    trace section: "Nsight Systems 2024.5.1 (export schema 3.11.1)", "PyTorch profiler
    trace (schema 1, CUPTI 22)"."""
    if trace.get("format") == KINETO:
        facts = trace.get("kineto") or {}
        parts = [f"schema {facts.get('schemaVersion', 'unknown')}"]
        for key, label in (("cupti_version", "CUPTI"), ("roctracer_version", "roctracer")):
            if facts.get(key) is not None:
                parts.append(f"{label} {facts[key]}")
        return f"PyTorch profiler trace ({', '.join(parts)})"
    version = trace.get("nsys_version") or "version unknown"
    return f"Nsight Systems {version} (export schema {trace.get('export_schema_version') or 'unknown'})"
