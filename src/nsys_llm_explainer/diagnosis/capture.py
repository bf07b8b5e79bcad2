"""What the trace says about itself, whether it shows steady state, and how to capture it
again when it does not."""

from __future__ import annotations

from typing import Any

from nsys_llm_explainer.analysis.capture_messages import CUDA_KINDS
from nsys_llm_explainer.diagnosis.verdict import metric
from nsys_llm_explainer.fmt import dur
from nsys_llm_explainer.model import CaptureCheck, CaptureReview, Outcome, TraceFormat, TraceInfo, Verdict

NSYS_RECIPE = (
    "Warm up before capturing: run a few iterations (model load, compilation, CUDA-graph capture, "
    "autotuning and the first requests are start-up, not steady state).",
    "Capture a short steady window after the warm-up: `nsys profile --capture-range=cudaProfilerApi` with "
    "`torch.cuda.profiler.start()`/`stop()` (or `cudaProfilerStart()`/`cudaProfilerStop()`) around the "
    "steps you care about, or `--delay`/`--duration` past the warm-up.",
)
KINETO_RECIPE = (
    "Warm up before capturing: `torch.profiler.schedule(wait=1, warmup=3, active=5)` skips the first "
    "steps; call `prof.step()` once per iteration.",
)
SHORT_RECIPE = "Capture several steady-state steps (seconds of work), not a single call."
STARTUP_WORDS = {
    "jit_compile": "JIT compilation and module loading",
    "lazy_loading": "lazy module loading on first launch",
    "startup": "context and allocator start-up",
    "autotuning": "algorithm autotuning",
}


def _words(check: dict[str, Any]) -> str:
    """The check's words, naming the compiler when the check found one (JIT compilation
    (NVRTC) and module loading)."""
    words = STARTUP_WORDS[check["id"]]
    compilers = check.get("compilers") or []
    if check["id"] == "jit_compile" and compilers:
        return words.replace("JIT compilation", f"JIT compilation ({', '.join(compilers)})", 1)
    return words


def startup_parts(cap: dict[str, Any]) -> str:
    """The start-up parts the capture checks found, longest first: "X (t)" or "X (t), Y (t)
    and Z (t), overlaps counted once"."""
    found = sorted((c for c in cap["checks"] if c["id"] in STARTUP_WORDS and c["time_ns"] > 0),
                   key=lambda c: -c["time_ns"])
    parts = [f"{_words(c)} ({dur(c['time_ns'])})" for c in found] or ["start-up"]
    if len(parts) == 1:
        return parts[0]
    return ", ".join(parts[:-1]) + f" and {parts[-1]}, overlaps counted once"


def _facts(trace: TraceInfo, metrics: dict[str, Outcome]) -> list[str]:
    facts = []
    if trace.nsys_version or trace.export_schema_version:
        facts.append(f"exporter: Nsight Systems {trace.nsys_version or 'unknown'} "
                     f"(export schema {trace.export_schema_version or 'unknown'})")
    named = [g for g in trace.gpus if g.name]
    if trace.gpus:
        facts.append(f"GPUs: {len(trace.gpus)}" + (f" ({', '.join(sorted({g.name or '' for g in named}))})"
                                                   if named else " (models not recorded)"))
    graphs = metric(metrics, "cuda_graphs")
    if graphs is not None and graphs.get("trace_mode"):
        facts.append(f"CUDA-graph trace mode: {graphs['trace_mode']}")
    if trace.window_start_ns is not None and trace.window_end_ns is not None:
        facts.append(f"captured window: {dur(trace.window_end_ns - trace.window_start_ns)}")
    return facts


def review(trace: TraceInfo, metrics: dict[str, Outcome], verdict: Verdict) -> CaptureReview:
    cap = metric(metrics, "capture")
    facts = _facts(trace, metrics)
    if cap is None:
        return CaptureReview(False, (), tuple(facts), ())
    checks = tuple(
        CaptureCheck(c["id"], bool(c["found"]), c["summary"], int(c["time_ns"]), float(c["pct_of_window"]))
        for c in cap["checks"]
    )
    cuda = [d for d in cap["diagnostics"] if d.get("kind") in CUDA_KINDS or d["events_may_be_missing"]]
    for d in cuda[:3]:
        what = "events may be missing" if d["events_may_be_missing"] else "concerns the CUDA trace"
        facts.append(f"profiler {d['severity']} ({what}): {d['text']}")
    recipe: tuple[str, ...] = ()
    kineto = getattr(trace, "format", None) is TraceFormat.KINETO
    if verdict == Verdict.NOT_STEADY_STATE:
        recipe = KINETO_RECIPE if kineto else NSYS_RECIPE
    elif verdict == Verdict.INSUFFICIENT_DATA:
        recipe = (SHORT_RECIPE, *(KINETO_RECIPE if kineto else NSYS_RECIPE[1:]))
    return CaptureReview(bool(cap["steady_state"]), checks, tuple(facts), recipe)
