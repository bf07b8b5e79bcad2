"""What the trace says about itself, whether it shows steady state, and how to capture it
again when it does not."""

from __future__ import annotations

from typing import Any

from nsys_llm_explainer.analysis.capture import CUDA_KINDS
from nsys_llm_explainer.diagnosis.outcome import interrupted_text
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
def one_shot_words(program: dict[str, Any]) -> str:
    """"`test_matmul --gtest_filter=X`, a unit test," for a program of the capture metric."""
    kind = {"test": "a unit test", "benchmark": "a benchmark"}.get(str(program.get("kind")), "a single run")
    return f"`{program.get('shown')}`, {kind},"


def one_shot(cap: dict[str, Any]) -> str | None:
    """one_shot_words() of the capture's program when it runs its work once, else None."""
    program = (cap.get("captured") or {}).get("program") or {}
    return one_shot_words(program) if program.get("one_shot") else None


def one_shot_recipe(program: dict[str, Any]) -> tuple[str, ...]:
    """How to see past the start-up of a program that runs its work once."""
    repeat = ("`--gtest_repeat=N`" if program.get("runner") == "gtest" else
              "`pytest --count=N` (pytest-repeat) or a loop in the test" if program.get("runner") == "pytest" else
              "a loop over the work")
    return (
        f"Repeat the work inside one run ({repeat}) and capture the later repetitions "
        "(`--capture-range=cudaProfilerApi` around them, or `--delay`): a one-shot run is all start-up.",
        "To study one kernel, profile it directly (Nsight Compute on NVIDIA GPUs; rocprofv3 or ROCm Compute "
        "Profiler on AMD) rather than the whole run.",
        "If the run's own wall time matters (a test suite, a CI job): keep compiled kernels between runs "
        "(`CUDA_CACHE_PATH` and a large `CUDA_CACHE_MAXSIZE` for PTX JIT, the framework's kernel cache).",
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


OVERHEAD_WORDS = {"with_stack": "Python stack tracing", "profile_memory": "memory profiling",
                  "record_shapes": "shape recording"}
EVENT_WORDS = {"python_function": "python_function events", "cpu_instant_event": "memory events"}


def _and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + f" and {parts[-1]}"


def slice_text(sl: dict[str, Any]) -> str:
    """"A 1.00 s window cut from a 295.7 s capture, starting 120.1 s in"."""
    length = f"{dur(sl['window_ns'])} " if sl.get("window_ns") else ""
    if sl["how"] == "cut":
        of = f" from a {dur(sl['capture_ns'])} capture" if sl.get("capture_ns") else " from a longer capture"
        at = f", starting {dur(sl['offset_ns'])} in" if sl.get("offset_ns") is not None else ""
        return f"a {length}window cut{of}{at} (recorded in {sl['source']})"
    if sl["how"] == "delay":
        return f"a {length}window that began {dur(sl['offset_ns'])} after the program started (--delay)"
    return f"a {length}window begun by a capture trigger ({sl.get('trigger')})"


def captured_lines(cap: dict[str, Any], verdict: Verdict) -> list[str]:
    """What changes the figures' meaning, one sentence each (model.CaptureReview.captured)."""
    c = cap.get("captured") or {}
    lines = []
    run = cap.get("run") or {}
    if run.get("outcome") == "interrupted" and verdict != Verdict.NO_GPU_WORK:
        text = interrupted_text(run) or ""
        lines.append(text[:1].upper() + text[1:] + ": the figures up to the interrupt stand.")
    sl = c.get("slice")
    if sl:
        text = slice_text(sl)
        lines.append(text[:1].upper() + text[1:] + ": judged as a slice (no start-up is counted, no step is cut at "
                     "its edges; work running in it counts whenever it was launched).")
    carried = c.get("carried")
    if carried and carried.get("kernels"):
        by = f", drained by `{carried['drained_by']}`" if carried.get("drained_by") and not sl else ""
        n = carried["kernels"]
        lines.append(f"{n:,} kernel{'s' if n != 1 else ''} ({dur(carried['kernel_ns'])}) queued before the capture "
                     f"ran at its start{by}: counted in GPU busy time, in no step.")
    missing = c.get("missing") or {}
    if missing.get("launches"):
        n = missing["launches"]
        lines.append(f"Events are missing: {n:,} of {missing['kernels']:,} kernels {'has' if n == 1 else 'have'} no "
                     "launch call although their process's launches were traced (a filtered or sampled trace): host "
                     "and launch figures leave them out.")
    if missing.get("waits_unseen"):
        lines.append(f"Events are missing: {missing['wait_calls']:,} stream waits (cudaStreamWaitEvent) but no "
                     "synchronization records, so what queued work waited on cannot be seen.")
    if missing.get("sampled"):
        lines.append(f"The trace says it was sampled or filtered ({', '.join(missing['sampled'])}): events may be "
                     "missing.")
    over = c.get("overhead")
    if over:
        parts = []
        for setting in over["settings"]:
            event = next((e for s_, e in (("with_stack", "python_function"), ("profile_memory", "cpu_instant_event"))
                          if s_ == setting), None)
            count = (over.get("events") or {}).get(event) if event else None
            parts.append(OVERHEAD_WORDS[setting] + (f" ({count:,} {EVENT_WORDS[event]})" if count and event else ""))
        text = _and(parts)
        lines.append(text[:1].upper() + text[1:] + (" was on: it inflates" if len(parts) == 1 else " were on: they "
                     "inflate") + " the host's time between launches, so host-bound figures are partly the profiler's.")
    return lines


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
    program = (cap.get("captured") or {}).get("program") or {}
    if verdict == Verdict.NOT_STEADY_STATE and program.get("one_shot"):
        recipe = one_shot_recipe(program)
    elif verdict == Verdict.NOT_STEADY_STATE:
        recipe = KINETO_RECIPE if kineto else NSYS_RECIPE
    elif verdict == Verdict.INSUFFICIENT_DATA:
        recipe = (SHORT_RECIPE, *(KINETO_RECIPE if kineto else NSYS_RECIPE[1:]))
    return CaptureReview(bool(cap["steady_state"]), checks, tuple(facts), recipe,
                         tuple(captured_lines(cap, verdict)))
