"""How the run ended, in words: why there is no GPU work, or that a run with GPU work ended
in an error. Reads the capture metric's `run` facts (metrics/capture.py).

Outcomes, as the capture metric decides them:
- profiler_failed: the profiler's own library failed to load or attach (its stderr says so);
  nothing the program did was captured.
- profiler_conflict: the program failed because of the profiling itself: its own profiler
  or timer found nothing while Nsight Systems held CUPTI. Fixing "the program" and capturing
  again would fail the same way: run that profiler outside Nsight Systems, or turn it off.
- program_failed / killed: the program printed an error (an exception, an error message) or
  ended on a signal. With no kernel, it failed before its GPU work; with kernels, the capture
  ends in that failure and is not a steady state.
- interrupted: the run was stopped from outside (Ctrl-C, SIGTERM, the profiler's duration
  limit): not a failure. With no kernel, it was stopped before its GPU work (the traceback
  says where it was: a hung download, a slow load); with kernels, the figures up to the
  interrupt stand.
- cuda_not_traced: no CUDA API table, or an empty one, and no error: CUDA tracing was off.
- kernels_not_recorded: launch calls were traced but no kernel rows: the CUDA trace lost them.
- no_kernels: CUDA calls were traced, no kernel was launched, and the output shows no error:
  the program exited early, hung or was killed, or the capture window missed its GPU work.
"""

from __future__ import annotations

from typing import Any

from nsys_llm_explainer.fmt import dur
from nsys_llm_explainer.model import Primary

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


def quote(ending: dict[str, Any]) -> str:
    """The decisive line as a code span, with its continuation."""
    text = f"`{ending['line']}`"
    if ending.get("context"):
        text += f" (then `{ending['context']}`)"
    return text


def _plural(word: str) -> str:
    return word[:-1] + "ies" if word.endswith("y") else word + "s"


def _kind(api: str) -> str:
    for word, keys in _CALL_KINDS:
        if any(k in api for k in keys):
            return word
    return "other"


def calls_text(run: dict[str, Any]) -> str:
    """'23 CUDA calls (context creation in cudaFree, 118.640 ms; 16 stream creations ...)'."""
    n = int(run.get("cuda_calls", 0))
    parts: dict[str, int] = {}
    for c in run.get("cuda_call_kinds", []):
        kind = _kind(c["api"])
        parts[kind] = parts.get(kind, 0) + int(c["calls"])
    words = []
    ctx = run.get("context_call")
    if ctx:
        words.append(f"context creation in {ctx['api']} ({dur(ctx['ns'])})")
    for kind, count in sorted(parts.items(), key=lambda kv: (-kv[1], kv[0])):
        if kind == "other":
            continue
        words.append(f"1 {kind}" if count == 1 else f"{count:,} {_plural(kind)}")
    inner = f" ({', '.join(words[:5])})" if words else ""
    return f"{n:,} CUDA call{'' if n == 1 else 's'}{inner}"


def _stream(ending: dict[str, Any]) -> str:
    return "standard error" if ending["stream"] == "stderr" else "standard output"


def where(ending: dict[str, Any]) -> str:
    """Where a traceback says the program was: "in `http_get` (FILE:467), called
    from `from_pretrained` > `cached_file`", or ""."""
    if not ending.get("where"):
        return ""
    stack = [f"`{f}`" for f in (ending.get("stack") or [])[:-1]]
    text = f"in {ending['where']}"
    return text + (f", called from {' > '.join(stack)}" if stack else "")


def interrupted_text(run: dict[str, Any]) -> str | None:
    """The sentence for a run that was interrupted, or None."""
    ending = run.get("ending") if run else None
    if not ending or run.get("outcome") != "interrupted":
        return None
    at = where(ending)
    return (f"the run was interrupted, not failed: its {_stream(ending)} says {quote(ending)}"
            + (f", {at}" if at else ""))


def no_gpu_work(run: dict[str, Any] | None, fallback: str) -> tuple[str, Primary | None]:
    """(the summary's reason, the primary bottleneck) for a capture with no GPU work."""
    if run is None:
        return f"No GPU work: {fallback}. Nothing on the GPU side can be judged.", None
    outcome, ending = run["outcome"], run.get("ending")
    pids = (int(ending["pid"]),) if ending else ()
    if outcome == "profiler_failed" and ending:
        text = (f"No GPU work: the profiler failed to attach, so nothing the program did was captured. Its "
                f"{_stream(ending)} says {quote(ending)}. The Nsight Systems installation or version does not fit "
                "this system, not the program.")
        return text, Primary("profiler_failed", (), pids, 0, 0.0, (f"{ending['stream']}: {ending['line']}",))
    if outcome == "profiler_conflict" and ending:
        text = (f"No GPU work: the program failed because of the profiling: its own profiler or timer found nothing "
                f"while Nsight Systems held CUPTI (`{ending.get('conflict')}`), then its {_stream(ending)} says "
                f"{quote(ending)}. Capturing again as it is would fail the same way: {CONFLICT_FIX}.")
        return text, Primary("profiler_conflict", (), pids, 0, 0.0,
                             (f"{ending['stream']}: {ending.get('conflict')}", f"then: {ending['line']}"))
    if outcome == "interrupted" and ending:
        made = calls_text(run) if run.get("cuda_calls") else "no CUDA call"
        at = where(ending)
        text = (f"No GPU work: the run was interrupted before launching a kernel (Ctrl-C, SIGTERM or the profiler's "
                f"duration limit), not failed. It made {made}; its {_stream(ending)} says {quote(ending)}"
                + (f", {at}" if at else "") + ". Capture again long enough to reach the GPU work, or find why it "
                "stopped where it did.")
        lines = [f"{ending['stream']}: {ending['line']}", *([at] if at else []), f"before that: {made}"]
        return text, Primary("interrupted", (), pids, 0, 0.0, tuple(lines))
    if outcome in ("program_failed", "killed") and ending:
        did = ("the program failed before launching a kernel" if outcome == "program_failed"
               else "the program was killed before launching a kernel")
        made = calls_text(run) if run.get("cuda_calls") else "no CUDA call"
        text = (f"No GPU work: {did}. It made {made}, then its {_stream(ending)} says {quote(ending)}. The profiler "
                "captured what ran: fix the program's error, then capture again.")
        lines = [f"{ending['stream']}: {ending['line']}" + (f" / {ending['context']}" if ending.get("context") else ""),
                 f"before that: {made}"]
        return text, Primary(outcome, (), pids, 0, 0.0, tuple(lines))
    if outcome == "cuda_not_traced":
        why = ("the export has no CUDA API table" if not run.get("cuda_api_table")
               else "the CUDA API table is empty")
        if run.get("cuda_trace_requested") is False:
            why += ", and the capture settings had CUDA tracing off"
        seen = f"; it holds {run['nvtx_ranges']:,} NVTX ranges" if run.get("nvtx_ranges") else ""
        text = f"No GPU work: CUDA was not traced ({why}{seen}). Capture again with CUDA tracing on."
        return text, Primary("cuda_not_traced", (), (), 0, 0.0, (why,))
    if outcome == "kernels_not_recorded":
        made = calls_text(run)
        text = (f"No GPU work recorded: the program made {made}, {run['launch_calls']:,} of them kernel launches, but "
                "the capture holds no kernel: CUDA kernel tracing lost them (the capture section lists the "
                "profiler's own messages). Capture again with CUDA tracing on.")
        return text, Primary("kernels_not_recorded", (), (), 0, 0.0, (made,))
    if outcome == "no_kernels":
        made = calls_text(run)
        text = (f"No GPU work: the program made {made} but never launched a kernel, and its output shows no error: "
                "it exited early, hung or was killed, or the capture window ended before its GPU work.")
        return text, Primary("no_kernels", (), (), 0, 0.0, (made,))
    return f"No GPU work: {fallback}. Nothing on the GPU side can be judged.", None


def failed_with_work(run: dict[str, Any]) -> str | None:
    """The sentence for a capture with GPU work whose program ended in a failure, or None."""
    ending = run.get("ending") if run else None
    if not ending or run["outcome"] not in FAILED:
        return None
    if run["outcome"] == "profiler_conflict":
        return (f"the program failed because of the profiling: its own profiler or timer found nothing while "
                f"Nsight Systems held CUPTI (`{ending.get('conflict')}`), then its {_stream(ending)} says "
                f"{quote(ending)}; the capture ends in that failure, not in the steady loop")
    what = "was killed" if run["outcome"] == "killed" else "ended in an error"
    return (f"the program {what} (its {_stream(ending)} says {quote(ending)}), so the capture ends in a failure, "
            "not in the steady loop")


def failure_fix(run: dict[str, Any]) -> str:
    """What to do about a run that ended in a failure."""
    if run.get("outcome") == "profiler_conflict":
        return CONFLICT_FIX[0].upper() + CONFLICT_FIX[1:] + "."
    return "Fix the failure, then capture again."
