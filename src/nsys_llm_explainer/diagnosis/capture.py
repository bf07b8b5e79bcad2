"""What the trace says about itself, whether it shows steady state, how to capture it again
when it does not, and how the run ended, in words (below: the outcomes)."""

from __future__ import annotations

from nsys_llm_explainer.analysis.capture import CUDA_KINDS
from nsys_llm_explainer.analysis.program import Ending, Program
from nsys_llm_explainer.fmt import dur
from nsys_llm_explainer.model import (
    CaptureCheck,
    CaptureReview,
    Outcome,
    Primary,
    TraceFormat,
    TraceInfo,
    Verdict,
    typed_result,
)
from nsys_llm_explainer.results.launches import CudaGraphs
from nsys_llm_explainer.results.run import Capture, CaptureSlice, RunFacts, SanityCheck

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
def one_shot_words(program: Program) -> str:
    """"`test_matmul --gtest_filter=X`, a unit test," for a program of the capture metric."""
    kind = {"test": "a unit test", "benchmark": "a benchmark"}.get(program.kind, "a single run")
    return f"`{program.text()}`, {kind},"


def one_shot(cap: Capture) -> str | None:
    """one_shot_words() of the capture's program when it runs its work once, else None."""
    program = cap.one_shot_program()
    return one_shot_words(program) if program is not None else None


def one_shot_recipe(program: Program) -> tuple[str, ...]:
    """How to see past the start-up of a program that runs its work once."""
    repeat = ("`--gtest_repeat=N`" if program.runner == "gtest" else
              "`pytest --count=N` (pytest-repeat) or a loop in the test" if program.runner == "pytest" else
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


def _words(check: SanityCheck) -> str:
    """The check's words, naming the compiler when the check found one (JIT compilation
    (NVRTC) and module loading)."""
    words = STARTUP_WORDS[check.id]
    compilers = check.compilers or ()
    if check.id == "jit_compile" and compilers:
        return words.replace("JIT compilation", f"JIT compilation ({', '.join(compilers)})", 1)
    return words


def startup_parts(cap: Capture) -> str:
    """The start-up parts the capture checks found, longest first: "X (t)" or "X (t), Y (t)
    and Z (t), overlaps counted once"."""
    found = sorted((c for c in cap.checks if c.id in STARTUP_WORDS and c.time_ns > 0), key=lambda c: -c.time_ns)
    parts = [f"{_words(c)} ({dur(c.time_ns)})" for c in found] or ["start-up"]
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
    graphs = typed_result(metrics, CudaGraphs)
    if graphs is not None and graphs.trace_mode:
        facts.append(f"CUDA-graph trace mode: {graphs.trace_mode}")
    if trace.window_start_ns is not None and trace.window_end_ns is not None:
        facts.append(f"captured window: {dur(trace.window_end_ns - trace.window_start_ns)}")
    return facts


OVERHEAD_WORDS = {"with_stack": "Python stack tracing", "profile_memory": "memory profiling",
                  "record_shapes": "shape recording"}
EVENT_WORDS = {"python_function": "python_function events", "cpu_instant_event": "memory events"}


def _and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + f" and {parts[-1]}"


def slice_text(sl: CaptureSlice) -> str:
    """"A 1.00 s window cut from a 295.7 s capture, starting 120.1 s in"."""
    length = f"{dur(sl.window_ns)} " if sl.window_ns else ""
    if sl.how == "cut":
        of = f" from a {dur(sl.capture_ns)} capture" if sl.capture_ns else " from a longer capture"
        at = f", starting {dur(sl.offset_ns)} in" if sl.offset_ns is not None else ""
        return f"a {length}window cut{of}{at} (recorded in {sl.source})"
    if sl.how == "delay":
        return f"a {length}window that began {dur(sl.offset_ns or 0)} after the program started (--delay)"
    return f"a {length}window begun by a capture trigger ({sl.trigger})"


def captured_lines(cap: Capture, verdict: Verdict) -> list[str]:
    """What changes the figures' meaning, one sentence each (model.CaptureReview.captured)."""
    c = cap.captured
    lines = []
    if cap.run.outcome == "interrupted" and verdict != Verdict.NO_GPU_WORK:
        text = interrupted_text(cap.run) or ""
        lines.append(text[:1].upper() + text[1:] + ": the figures up to the interrupt stand.")
    sl = c.slice
    if sl:
        text = slice_text(sl)
        lines.append(text[:1].upper() + text[1:] + ": judged as a slice (no start-up is counted, no step is cut at "
                     "its edges; work running in it counts whenever it was launched).")
    carried = c.carried
    if carried and carried.kernels:
        by = f", drained by `{carried.drained_by}`" if carried.drained_by and not sl else ""
        n = carried.kernels
        lines.append(f"{n:,} kernel{'s' if n != 1 else ''} ({dur(carried.kernel_ns)}) queued before the capture "
                     f"ran at its start{by}: counted in GPU busy time, in no step.")
    missing = c.missing
    if missing.launches:
        n = missing.launches
        lines.append(f"Events are missing: {n:,} of {missing.kernels:,} kernels {'has' if n == 1 else 'have'} no "
                     "launch call although their process's launches were traced (a filtered or sampled trace): host "
                     "and launch figures leave them out.")
    if missing.waits_unseen:
        lines.append(f"Events are missing: {missing.wait_calls:,} stream waits (cudaStreamWaitEvent) but no "
                     "synchronization records, so what queued work waited on cannot be seen.")
    if missing.sampled:
        lines.append(f"The trace says it was sampled or filtered ({', '.join(missing.sampled)}): events may be "
                     "missing.")
    over = c.overhead
    if over:
        parts = []
        for setting in over.settings:
            event = next((e for s_, e in (("with_stack", "python_function"), ("profile_memory", "cpu_instant_event"))
                          if s_ == setting), None)
            count = over.events.get(event) if event else None
            parts.append(OVERHEAD_WORDS[setting] + (f" ({count:,} {EVENT_WORDS[event]})" if count and event else ""))
        text = _and(parts)
        lines.append(text[:1].upper() + text[1:] + (" was on: it inflates" if len(parts) == 1 else " were on: they "
                     "inflate") + " the host's time between launches, so host-bound figures are partly the profiler's.")
    return lines


def review(trace: TraceInfo, metrics: dict[str, Outcome], verdict: Verdict) -> CaptureReview:
    cap = typed_result(metrics, Capture)
    facts = _facts(trace, metrics)
    if cap is None:
        return CaptureReview(False, (), tuple(facts), ())
    checks = tuple(CaptureCheck(c.id, c.found, c.summary, c.time_ns, c.pct_of_window) for c in cap.checks)
    cuda = [d for d in cap.diagnostics if d.kind in CUDA_KINDS or d.events_may_be_missing]
    for d in cuda[:3]:
        what = "events may be missing" if d.events_may_be_missing else "concerns the CUDA trace"
        facts.append(f"profiler {d.severity} ({what}): {d.text}")
    recipe: tuple[str, ...] = ()
    kineto = getattr(trace, "format", None) is TraceFormat.KINETO
    program = cap.one_shot_program()
    if verdict == Verdict.NOT_STEADY_STATE and program is not None:
        recipe = one_shot_recipe(program)
    elif verdict == Verdict.NOT_STEADY_STATE:
        recipe = KINETO_RECIPE if kineto else NSYS_RECIPE
    elif verdict == Verdict.INSUFFICIENT_DATA:
        recipe = (SHORT_RECIPE, *(KINETO_RECIPE if kineto else NSYS_RECIPE[1:]))
    return CaptureReview(cap.steady_state, checks, tuple(facts), recipe, tuple(captured_lines(cap, verdict)))


# How the run ended, in words: why there is no GPU work, or that a run with GPU work ended
# in an error. Reads the capture metric's `run` facts (metrics/capture.py).
#
# Outcomes, as the capture metric decides them:
# - profiler_failed: the profiler's own library failed to load or attach (its stderr says so);
#   nothing the program did was captured.
# - profiler_conflict: the program failed because of the profiling itself: its own profiler
#   or timer found nothing while Nsight Systems held CUPTI. Fixing "the program" and capturing
#   again would fail the same way: run that profiler outside Nsight Systems, or turn it off.
# - program_failed / killed: the program printed an error (an exception, an error message) or
#   ended on a signal. With no kernel, it failed before its GPU work; with kernels, the capture
#   ends in that failure and is not a steady state.
# - interrupted: the run was stopped from outside (Ctrl-C, SIGTERM, the profiler's duration
#   limit): not a failure. With no kernel, it was stopped before its GPU work (the traceback
#   says where it was: a hung download, a slow load); with kernels, the figures up to the
#   interrupt stand.
# - cuda_not_traced: no CUDA API table, or an empty one, and no error: CUDA tracing was off.
# - kernels_not_recorded: launch calls were traced but no kernel rows: the CUDA trace lost them.
# - no_kernels: CUDA calls were traced, no kernel was launched, and the output shows no error:
#   the program exited early, hung or was killed, or the capture window missed its GPU work.
FAILED = ("program_failed", "killed", "profiler_failed", "profiler_conflict")
CONFLICT_FIX = ("run the program's own profiler or timer outside Nsight Systems (or turn it off while capturing), "
                "then capture again: Nsight Systems holds CUPTI, so under it that profiler records nothing")
# CUDA API calls by what they do, for the one-line account of a run that launched nothing.
_CALL_KINDS = (
    ("stream creation", ("StreamCreate",)),
    ("allocation", ("Malloc", "HostAlloc", "MemAlloc", "HostRegister")),
    ("memset", ("Memset",)),
    ("copy", ("Memcpy",)),
    ("event", ("Event",)),
    ("module load", ("ModuleLoad", "LibraryLoad")),
    ("synchronize", ("Synchronize",)),
    ("device query", ("GetDevice", "DeviceGet", "GetLoadingMode", "Attribute")),
)


def quote(ending: Ending) -> str:
    """The decisive line as a code span, with its continuation."""
    text = f"`{ending.line}`"
    if ending.context:
        text += f" (then `{ending.context}`)"
    return text


def _plural(word: str) -> str:
    return word[:-1] + "ies" if word.endswith("y") else word + "s"


def _kind(api: str) -> str:
    for word, keys in _CALL_KINDS:
        if any(k in api for k in keys):
            return word
    return "other"


def calls_text(run: RunFacts) -> str:
    """'23 CUDA calls (context creation in cudaFree, 118.640 ms; 16 stream creations ...)'."""
    n = run.cuda_calls
    parts: dict[str, int] = {}
    for c in run.cuda_call_kinds:
        kind = _kind(c.api)
        parts[kind] = parts.get(kind, 0) + c.calls
    words = []
    ctx = run.context_call
    if ctx:
        words.append(f"context creation in {ctx.api} ({dur(ctx.ns)})")
    for kind, count in sorted(parts.items(), key=lambda kv: (-kv[1], kv[0])):
        if kind == "other":
            continue
        words.append(f"1 {kind}" if count == 1 else f"{count:,} {_plural(kind)}")
    inner = f" ({', '.join(words[:5])})" if words else ""
    return f"{n:,} CUDA call{'' if n == 1 else 's'}{inner}"


def _stream(ending: Ending) -> str:
    return "standard error" if ending.stream == "stderr" else "standard output"


def where(ending: Ending) -> str:
    """Where a traceback says the program was: "in `http_get` (FILE:467), called
    from `from_pretrained` > `cached_file`", or ""."""
    if not ending.where:
        return ""
    stack = [f"`{f}`" for f in ending.stack[:-1]]
    text = f"in {ending.where}"
    return text + (f", called from {' > '.join(stack)}" if stack else "")


def interrupted_text(run: RunFacts) -> str | None:
    """The sentence for a run that was interrupted, or None."""
    ending = run.ending
    if not ending or run.outcome != "interrupted":
        return None
    at = where(ending)
    return (f"the run was interrupted, not failed: its {_stream(ending)} says {quote(ending)}"
            + (f", {at}" if at else ""))


def no_gpu_work(run: RunFacts | None, fallback: str) -> tuple[str, Primary | None]:
    """(the summary's reason, the primary bottleneck) for a capture with no GPU work."""
    if run is None:
        return f"No GPU work: {fallback}. Nothing on the GPU side can be judged.", None
    outcome, ending = run.outcome, run.ending
    pids = (ending.pid,) if ending else ()
    if outcome == "profiler_failed" and ending:
        text = (f"No GPU work: the profiler failed to attach, so nothing the program did was captured. Its "
                f"{_stream(ending)} says {quote(ending)}. The Nsight Systems installation or version does not fit "
                "this system, not the program.")
        return text, Primary("profiler_failed", (), pids, 0, 0.0, (f"{ending.stream}: {ending.line}",))
    if outcome == "profiler_conflict" and ending:
        text = (f"No GPU work: the program failed because of the profiling: its own profiler or timer found nothing "
                f"while Nsight Systems held CUPTI (`{ending.conflict}`), then its {_stream(ending)} says "
                f"{quote(ending)}. Capturing again as it is would fail the same way: {CONFLICT_FIX}.")
        return text, Primary("profiler_conflict", (), pids, 0, 0.0,
                             (f"{ending.stream}: {ending.conflict}", f"then: {ending.line}"))
    if outcome == "interrupted" and ending:
        made = calls_text(run) if run.cuda_calls else "no CUDA call"
        at = where(ending)
        text = (f"No GPU work: the run was interrupted before launching a kernel (Ctrl-C, SIGTERM or the profiler's "
                f"duration limit), not failed. It made {made}; its {_stream(ending)} says {quote(ending)}"
                + (f", {at}" if at else "") + ". Capture again long enough to reach the GPU work, or find why it "
                "stopped where it did.")
        lines = [f"{ending.stream}: {ending.line}", *([at] if at else []), f"before that: {made}"]
        return text, Primary("interrupted", (), pids, 0, 0.0, tuple(lines))
    if outcome in ("program_failed", "killed") and ending:
        did = ("the program failed before launching a kernel" if outcome == "program_failed"
               else "the program was killed before launching a kernel")
        made = calls_text(run) if run.cuda_calls else "no CUDA call"
        text = (f"No GPU work: {did}. It made {made}, then its {_stream(ending)} says {quote(ending)}. The profiler "
                "captured what ran: fix the program's error, then capture again.")
        lines = [f"{ending.stream}: {ending.line}" + (f" / {ending.context}" if ending.context else ""),
                 f"before that: {made}"]
        return text, Primary(outcome, (), pids, 0, 0.0, tuple(lines))
    if outcome == "cuda_not_traced":
        why = ("the export has no CUDA API table" if not run.cuda_api_table
               else "the CUDA API table is empty")
        if run.cuda_trace_requested is False:
            why += ", and the capture settings had CUDA tracing off"
        seen = f"; it holds {run.nvtx_ranges:,} NVTX ranges" if run.nvtx_ranges else ""
        text = f"No GPU work: CUDA was not traced ({why}{seen}). Capture again with CUDA tracing on."
        return text, Primary("cuda_not_traced", (), (), 0, 0.0, (why,))
    if outcome == "kernels_not_recorded":
        made = calls_text(run)
        text = (f"No GPU work recorded: the program made {made}, {run.launch_calls:,} of them kernel launches, but "
                "the capture holds no kernel: CUDA kernel tracing lost them (the capture section lists the "
                "profiler's own messages). Capture again with CUDA tracing on.")
        return text, Primary("kernels_not_recorded", (), (), 0, 0.0, (made,))
    if outcome == "no_kernels":
        made = calls_text(run)
        text = (f"No GPU work: the program made {made} but never launched a kernel, and its output shows no error: "
                "it exited early, hung or was killed, or the capture window ended before its GPU work.")
        return text, Primary("no_kernels", (), (), 0, 0.0, (made,))
    return f"No GPU work: {fallback}. Nothing on the GPU side can be judged.", None


def failed_with_work(run: RunFacts) -> str | None:
    """The sentence for a capture with GPU work whose program ended in a failure, or None."""
    ending = run.ending
    if not ending or run.outcome not in FAILED:
        return None
    if run.outcome == "profiler_conflict":
        return (f"the program failed because of the profiling: its own profiler or timer found nothing while "
                f"Nsight Systems held CUPTI (`{ending.conflict}`), then its {_stream(ending)} says "
                f"{quote(ending)}; the capture ends in that failure, not in the steady loop")
    what = "was killed" if run.outcome == "killed" else "ended in an error"
    return (f"the program {what} (its {_stream(ending)} says {quote(ending)}), so the capture ends in a failure, "
            "not in the steady loop")


def failure_fix(run: RunFacts) -> str:
    """What to do about a run that ended in a failure."""
    if run.outcome == "profiler_conflict":
        return CONFLICT_FIX[0].upper() + CONFLICT_FIX[1:] + "."
    return "Fix the failure, then capture again."
