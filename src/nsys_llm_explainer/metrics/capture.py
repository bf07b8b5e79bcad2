"""capture: is this capture steady-state work, or start-up? Checked before anything is judged.

Checks, each with what it found (thresholds are the named constants below):

- too_little_data: nothing to weigh, or too few repetitions to tell a pattern from a one-off.
  Enough is judged by repetition: at least MIN_REPEATS complete steps (the steps metric)
  covering at least MIN_REPEAT_NS in all are enough whatever the kernel count (five
  iterations of 250 ms with one kernel each are plenty; one forward pass with a synchronize
  after every operator is one step, not many). Without that, it is found when there are
  fewer than MIN_KERNELS kernels unless at least MIN_FEW_KERNELS long ones keep the GPU busy
  (at least MIN_FEW_KERNEL_NS of kernel time, or MIN_FEW_BUSY_PCT of the GPU window of the
  devices that ran them): a GEMM benchmark with 50 kernels of 20 ms is judged, ten 5 us
  kernels are not. Less than MIN_KERNEL_NS of kernel time is always too little.
- jit_compile: run-time compilation and module loading inside the GPU window: CUDA API calls
  that load or link code (JIT_API: cuModuleLoad*, cuLibraryLoad*, cuLink*, nvJitLink*,
  nvrtc*) and NVTX ranges named like a compiler step (COMPILE_RANGE: NVRTC, nvJitLink,
  compile/compiler/compilation, codegen as a word, Lower/lowering, autotune, engine build).
  Ranges named after compiled code, not compiling, are not counted: PyTorch's `CompiledFunction`,
  `CompiledFunctionBackward` and "Torch-Compiled Region" wrap every step of a torch.compile
  model. The summary names the longest range with its own duration; the check's time is the
  union of all ranges and calls.
- lazy_loading: a kernel's first launch call took at least LAZY_LAUNCH_NS and, when the
  kernel was launched again, at least LAZY_RATIO times the median of its later launches,
  while the device ran neither kernels nor copies for most of the call (so not a launch
  blocked on a full queue):
  the driver loaded the kernel's module on first use (CUDA lazy loading).
- startup: context creation, device queries and allocator calls (STARTUP_API) of at least
  STARTUP_CALL_NS each.
- autotuning: cuBLAS/cuDNN or framework algorithm searches (analysis/capture.py): several
  variants of one GEMM/convolution family tried once each, close together, then one winner
  repeating; the time is the variants' own kernel intervals. Not checked for TensorRT engines
  (workload tensorrt_inference), whose tactics are chosen when the engine is built.
- program_failed: the program's captured output (Nsight Systems ProcessStreams) ends in a
  failure (analysis/program.py: an exception, an error message, a kill, the profiler
  failing to attach, or the program's own profiler failing because Nsight Systems holds
  CUPTI): the capture ends in that failure, not in the steady loop. The decisive line is kept,
  scrubbed (paths cut to file names, nothing from the environment). Warnings are not
  failures, and an interrupted run (Ctrl-C, SIGTERM, the profiler's duration limit) is not
  one either: the figures up to the interrupt stand.
- diagnostics: warnings and errors the profiler wrote about its own capture, each classified
  (analysis/capture.py); found when one concerns the CUDA trace (events missing, or a driver
  or library version this Nsight Systems does not support). CPU-sampling notes and "No NVTX
  events collected" are listed but do not count.

`run` holds what the capture says about how the program ran, whatever the GPU did: the
outcome (profiler_failed, profiler_conflict: the program failed because its own profiler or
timer found nothing while Nsight Systems held CUPTI, program_failed, killed, interrupted,
cuda_not_traced, kernels_not_recorded: launch calls but no kernel rows, no_kernels: CUDA calls
but no launch, completed), the decisive output line with where a traceback says the program
was, whether CUDA API calls were traced (and asked for, from the capture settings), how many
and of what kind, and the call that created the CUDA context.

`captured` holds what the capture is (analysis/program.py, analysis/capture.py):
the program (its base name, the model or the test selected, whether it runs its work once),
whether the trace is a slice of a longer capture and where it sits, the work queued before
the capture (carried), missing events, and profiler settings that inflate host times.

Start-up time is the union of the jit_compile, lazy_loading, startup and autotuning intervals
clipped to the GPU window (first kernel start to last kernel end, all devices): start-up that
ends before the first kernel does not change any GPU figure. The capture is not steady state
when that time is at least NOT_STEADY_PCT of the window. steady_start_ns is the end of the last
start-up interval inside the window; the idle split is also reported from there on. A slice
of a longer run has no start-up: its checks are listed, and their time is not counted.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np

from nsys_llm_explainer import fmt
from nsys_llm_explainer.analysis import (
    capture as capture_parts,
)
from nsys_llm_explainer.analysis import intervals
from nsys_llm_explainer.analysis import program as prog
from nsys_llm_explainer.analysis.busy import copy_union, device_busy
from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.analysis.groups import distinct_few
from nsys_llm_explainer.analysis.join import kernel_launch_index, launch_api_mask
from nsys_llm_explainer.analysis.nvtx import name_mask
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome
from nsys_llm_explainer.results.launches import ApiCalls
from nsys_llm_explainer.results.run import (
    Capture,
    Captured,
    CaptureSlice,
    CarriedFact,
    ContextCall,
    MissingEvents,
    ProfilerDiagnostic,
    ProfilerOverhead,
    RunFacts,
    SanityCheck,
    Steps,
    Workload,
)
from nsys_llm_explainer.trace.data import TraceData, Unavailable

MIN_KERNELS = 100
MIN_KERNEL_NS = 1_000_000
MIN_FEW_KERNELS = 10
MIN_FEW_KERNEL_NS = 50_000_000
MIN_FEW_BUSY_PCT = 50.0
MIN_REPEATS = 3
MIN_REPEAT_NS = 10_000_000
CONTEXT_API = re.compile(r"^(cudaFree|cuInit|cuCtxCreate\w*|cuDevicePrimaryCtxRetain|cudaSetDevice|cudaInitDevice)$")
CONTEXT_CALL_NS = 1_000_000
TOP_CALL_KINDS = 8
NOT_STEADY_PCT = 25.0
LAZY_LAUNCH_NS = 500_000
LAZY_RATIO = 10.0
STARTUP_CALL_NS = 100_000
JIT_API = re.compile(
    r"^(cuModuleLoad\w*|cuLibraryLoad\w*|cuLink(Create|AddData|AddFile|Complete)\w*|nvJitLink\w*|nvrtc\w*)$"
)
STARTUP_API = re.compile(
    r"^(cuInit|cuCtxCreate\w*|cuDevicePrimaryCtxRetain|cudaSetDevice|cudaGetDeviceProperties\w*|"
    r"cudaMalloc\w*|cudaFree\w*|cudaHostAlloc|cudaHostRegister|cudaMallocHost|cuMemAlloc\w*|"
    r"cuMemFree\w*|cuMemCreate|cuMemHostAlloc|cuMemHostRegister\w*|cudaDeviceReset)$"
)
COMPILE_RANGE = re.compile(
    r"(?i:nvrtc|nvjitlink|culink|cumoduleload|culibraryload|ptxas|"
    r"compil(?!ed)|(?<![a-z0-9_])code_?gen(?![a-z0-9_])|autotun|"
    r"build(ing)?[ _]?(\w+[ _])?(serialized[ _]?)?(engine|network))|"
    r"Lower(ing)?(?![a-zA-Z_])|(?<![A-Za-z])lowering(?![a-zA-Z_])"
)
NVRTC = re.compile(r"nvrtc", re.IGNORECASE)
EMPTY = (np.empty(0, np.int64), np.empty(0, np.int64))
FAILED_OUTCOMES = ("profiler_failed", "profiler_conflict", "program_failed", "killed")
OUTCOME_OF = {"profiler": "profiler_failed", "conflict": "profiler_conflict", "killed": "killed",
              "interrupted": "interrupted", "error": "program_failed"}


def _check(cid: str, found: bool, summary: str, ns: int = 0, window: int = 0, **counts: Any) -> SanityCheck:
    return SanityCheck(cid, found, summary, int(ns), round(100.0 * ns / window, 2) if window > 0 else 0.0, **counts)


def _api_rows(data: TraceData, pattern: re.Pattern[str]) -> np.ndarray:
    rt = data.runtime()
    names = data.runtime_api_names()
    mask = np.array([bool(pattern.match(n)) for n in names] or [False], dtype=bool)
    return np.flatnonzero(mask[rt.api]) if len(rt) else np.empty(0, np.int64)


def _clip(s: np.ndarray, e: np.ndarray, w0: int, w1: int) -> tuple[np.ndarray, np.ndarray]:
    return intervals.intersect(*intervals.merge(s, e), np.array([w0]), np.array([w1]))


def _jit(data: TraceData) -> tuple[tuple[np.ndarray, np.ndarray], list[str], list[str]]:
    """(merged intervals, evidence, compilers named): code-loading calls and compile ranges."""
    rt = data.runtime()
    names = data.runtime_api_names()
    rows = _api_rows(data, JIT_API)
    evidence, compilers = [], []
    nvrtc_calls = 0
    if len(rows):
        apis = sorted({names[int(a)] for a in rt.api[rows]})
        evidence.append(f"{len(rows)} code-loading calls ({', '.join(apis[:4])})")
        nvrtc_calls = sum(1 for a in rt.api[rows] if NVRTC.search(names[int(a)]))
    s, e = [rt.start[rows]], [rt.end[rows]]
    nvrtc_range = ""
    try:
        nv = data.nvtx()
        nv_names = data.nvtx_names()
        hit = name_mask(data, COMPILE_RANGE)
        sel = (nv.end >= 0) & hit[nv.name] if len(nv) else np.zeros(0, bool)
        if sel.any():
            dur = np.where(sel, nv.end - nv.start, -1)
            longest = int(np.argmax(dur))
            nv_hit = name_mask(data, NVRTC)
            nsel = sel & nv_hit[nv.name]
            if nsel.any():
                j = int(np.argmax(np.where(nsel, nv.end - nv.start, -1)))
                nvrtc_range = f"{nv_names[int(nv.name[j])]!r} ({fmt.dur(int(nv.end[j] - nv.start[j]))})"
            evidence.append(
                f"{int(sel.sum())} compile-named ranges, the longest {nv_names[int(nv.name[longest])]!r} "
                f"lasting {fmt.dur(int(dur[longest]))}"
            )
            s.append(nv.start[sel])
            e.append(nv.end[sel])
    except Unavailable:
        pass
    if nvrtc_range or nvrtc_calls:
        compilers.append("NVRTC")
        evidence.insert(0, "NVRTC run-time compilation: " + (nvrtc_range or f"{nvrtc_calls} nvrtc calls"))
    return intervals.merge(np.concatenate(s), np.concatenate(e)), evidence, compilers


def _lazy(data: TraceData) -> tuple[tuple[np.ndarray, np.ndarray], int]:
    """First launch calls that loaded a module (see the module docstring)."""
    k = data.kernels()
    call = kernel_launch_index(data)
    rt = data.runtime()
    ok = call >= 0
    if not ok.any():
        return EMPTY, 0
    kid = np.flatnonzero(ok)
    # Kernel-sized temporaries one at a time: this runs beside the heaviest metrics.
    c = call[kid]
    start = rt.start[c]
    dur = rt.end[c] - start
    del c
    # Grouped by name id (the groups' order does not matter: the loads are merged by time).
    names = k.name_id[kid]
    order = np.lexsort((start, names))
    del start
    names = names[order]
    first = np.r_[True, names[1:] != names[:-1]]
    del names
    dur = dur[order]  # in launch order within each kernel name from here on
    group_start = np.flatnonzero(first)
    group_end = np.r_[group_start[1:], len(order)]  # per group: end position
    starts, ends = [], []
    # device -> union of its kernels and copies (when it was doing anything), built for
    # the devices a candidate launch needs only
    busy: dict[int, tuple[np.ndarray, np.ndarray] | None] = {}

    def busy_of(d: int) -> tuple[np.ndarray, np.ndarray] | None:
        if d not in busy:
            b = device_busy(data).get(d)
            if b is None:
                busy[d] = None
            else:
                cs, ce = copy_union(data, "device", d)
                busy[d] = intervals.merge(np.concatenate((b.busy_start, cs)), np.concatenate((b.busy_end, ce)))
        return busy[d]

    for pos in np.flatnonzero(first & (dur >= LAZY_LAUNCH_NS)).tolist():
        j = order[pos]
        later = dur[pos + 1 : group_end[np.searchsorted(group_start, pos, "right") - 1]]
        if len(later) and dur[pos] < LAZY_RATIO * float(np.median(later)):
            continue
        c0, c1 = int(rt.start[call[kid[j]]]), int(rt.end[call[kid[j]]])
        dev = busy_of(int(k.device[kid[j]]))
        if dev is not None:
            run = int(intervals.overlap_with_union(np.array([c0]), np.array([c1]), *dev)[0])
            if 2 * run > c1 - c0:
                continue  # the GPU was busy: a launch blocked on a full queue, not a load
        starts.append(c0)
        ends.append(c1)
    if not starts:
        return EMPTY, 0
    return intervals.merge(np.array(starts), np.array(ends)), len(starts)


def _startup(data: TraceData) -> tuple[tuple[np.ndarray, np.ndarray], int]:
    rt = data.runtime()
    rows = _api_rows(data, STARTUP_API)
    rows = rows[rt.end[rows] - rt.start[rows] >= STARTUP_CALL_NS]
    return intervals.merge(rt.start[rows], rt.end[rows]), len(rows)


def _repeats(ctx: Context) -> tuple[int, int]:
    """(complete steps, their summed latency) from the steps metric; (0, 0) without steps."""
    st = ctx.typed(Steps)
    if st is None:
        return 0, 0
    return st.step_count, sum(p.total_ns for p in st.phases)


def _too_little(k: Any, repeats: tuple[int, int] = (0, 0)) -> SanityCheck:
    """The too_little_data check (module docstring)."""
    n = len(k)
    kernel_ns = int(k.dur.sum()) if n else 0
    devices = len(distinct_few(k.device)) if n else 0
    window = int(k.end.max() - k.start.min()) if n else 0
    busy_pct = min(100.0, 100.0 * kernel_ns / (window * devices)) if window and devices else 0.0
    steps, step_ns = repeats
    repeated = steps >= MIN_REPEATS and step_ns >= MIN_REPEAT_NS
    long_enough = n >= MIN_FEW_KERNELS and (kernel_ns >= MIN_FEW_KERNEL_NS or busy_pct >= MIN_FEW_BUSY_PCT)
    little = kernel_ns < MIN_KERNEL_NS or (n < MIN_KERNELS and not long_enough and not repeated)
    seen = (f"{n:,} kernels, {fmt.dur(kernel_ns)} of kernel time"
            + (f", {busy_pct:.1f}% of the {fmt.dur(window)} from the first to the last kernel" if window else "")
            + (f"; {steps:,} complete step{'' if steps == 1 else 's'} covering {fmt.dur(step_ns)}" if steps else
               "; no repeating step found"))
    need = (f"at least {MIN_KERNEL_NS / 1e6:g} ms of kernel time, and {MIN_REPEATS} steps covering "
            f"{MIN_REPEAT_NS / 1e6:g} ms, or {MIN_KERNELS} kernels, or {MIN_FEW_KERNELS} kernels that take "
            f"{MIN_FEW_KERNEL_NS / 1e6:g} ms or {MIN_FEW_BUSY_PCT:g}% of the window")
    summary = f"{seen}; judging needs {need}" if little else f"{seen}: enough to judge (needs {need})"
    return _check("too_little_data", little, summary, kernels=n, kernel_ns=kernel_ns, steps=steps,
                  step_ns=step_ns)


def _tensorrt(ctx: Context) -> bool:
    w = ctx.typed(Workload)
    return w is not None and w.kind == "tensorrt_inference"


def run(ctx: Context) -> Outcome:
    data = ctx.data
    try:
        k = data.kernels()
    except Unavailable as exc:
        check = _check("too_little_data", True, f"no kernels: {exc.reason}", kernels=0, kernel_ns=0, steps=0,
                       step_ns=0)
        return _outcome(_result([check], None, None, 0, data))
    checks: list[SanityCheck] = [_too_little(k, _repeats(ctx))]
    if len(k) == 0:
        return _outcome(_result(checks, None, None, 0, data))
    w0, w1 = int(k.start.min()), int(k.end.max())
    window = w1 - w0
    have_api = True
    try:
        data.runtime()
    except Unavailable:
        have_api = False
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    if have_api:
        (js, je), jit_ev, compilers = _jit(data)
        js, je = _clip(js, je, w0, w1)
        jit_ns = int((je - js).sum())
        checks.append(_check("jit_compile", jit_ns > 0, "; ".join(jit_ev) or "no code loading or compiling seen",
                             jit_ns, window, compilers=tuple(compilers)))
        (ls, le), lazy_n = _lazy(data)
        ls, le = _clip(ls, le, w0, w1)
        lazy = (f"{lazy_n} first launch{'' if lazy_n == 1 else 'es'} of a kernel took >= "
                f"{LAZY_LAUNCH_NS / 1e6:g} ms while the GPU was idle (module loaded on first use)")
        checks.append(_check("lazy_loading", lazy_n > 0, lazy if lazy_n else "no slow first launches",
                             int((le - ls).sum()), window, launches=lazy_n))
        (ss, se), start_n = _startup(data)
        before = int(((np.minimum(se, w0) - ss).clip(min=0)).sum())
        ss, se = _clip(ss, se, w0, w1)
        startup_ns = int((se - ss).sum())
        summary = f"{start_n} context/allocator call{'' if start_n == 1 else 's'} of >= {STARTUP_CALL_NS / 1e3:g} µs"
        if before:
            summary += f"; {fmt.dur(before)} of them before the first kernel (not counted)"
        checks.append(_check("startup", startup_ns > 0, summary if start_n else "no slow start-up calls",
                             startup_ns, window, calls=start_n))
        parts += [(js, je), (ls, le), (ss, se)]
    if _tensorrt(ctx):
        checks.append(_check("autotuning", False, "not checked: a TensorRT engine chooses its tactics when it "
                             "is built, and runs one kernel per layer", variants=0))
    else:
        found = capture_parts.find(data)
        ats, ate = _clip(found.starts, found.ends, w0, w1)
        checks.append(_check(
            "autotuning", found.searches > 0,
            f"{found.searches} algorithm searches: {found.variants} variants of GEMM/convolution kernels "
            f"tried once each, then one kept (largest: {found.example}, winner {found.winner})"
            if found.searches else "no algorithm search seen",
            int((ate - ats).sum()), window, variants=found.variants,
        ))
        parts.append((ats, ate))
    s = np.concatenate([p[0] for p in parts]) if parts else np.empty(0, np.int64)
    e = np.concatenate([p[1] for p in parts]) if parts else np.empty(0, np.int64)
    us, ue = intervals.merge(s, e)
    startup_total = int((ue - us).sum())
    steady_start = int(ue[-1]) if len(ue) and int(ue[-1]) < w1 else None
    if capture_parts.slice_of(data.capture_span(), w0, w1) is not None:
        startup_total, steady_start = 0, None  # a slice of a longer run: no start-up (module docstring)
    return _outcome(_result(checks, (w0, w1), steady_start, startup_total, data))


def _outcome(result: Capture) -> MetricResult:
    return MetricResult(METRIC.id, result.to_json(), typed=result)


def _run_facts(data: TraceData, kernels: int) -> RunFacts:
    """What the capture says about how the program ran (module docstring)."""
    end = prog.ending(data.program_output())
    try:
        rt = data.runtime()
        api_table, calls = True, len(rt)
    except Unavailable:
        rt, api_table, calls = None, False, 0
    kinds: list[ApiCalls] = []
    context = None
    launches = 0
    if rt is not None and calls:
        names = data.runtime_api_names()
        launches = int(launch_api_mask(names)[rt.api].sum())
        per_api = np.bincount(rt.api)  # API codes: small, from 0 (as np.unique's counts)
        apis = np.flatnonzero(per_api)
        counts = per_api[apis]
        order = np.lexsort((apis, -counts))[:TOP_CALL_KINDS]
        kinds = [ApiCalls(names[int(apis[i])], int(counts[i])) for i in order]
        ctx_api = np.array([bool(CONTEXT_API.match(x)) for x in names] or [False])
        rows = np.flatnonzero(ctx_api[rt.api] & (rt.end - rt.start >= CONTEXT_CALL_NS))
        if len(rows):
            first = rows[np.argmin(rt.start[rows])]
            context = ContextCall(names[int(rt.api[first])], int(rt.end[first] - rt.start[first]))
    try:
        nvtx = len(data.nvtx())
    except Unavailable:
        nvtx = 0
    if end is not None:
        outcome = OUTCOME_OF[end.kind]
    elif kernels:
        outcome = "completed"
    elif not calls:
        outcome = "cuda_not_traced"
    elif launches:
        outcome = "kernels_not_recorded"
    else:
        outcome = "no_kernels"
    return RunFacts(
        outcome=outcome,
        ending=end,
        streams=len(data.program_output()),
        cuda_api_table=api_table,
        cuda_calls=calls,
        launch_calls=launches,
        cuda_trace_requested=data.cuda_trace_requested(),
        cuda_call_kinds=tuple(kinds),
        context_call=context,
        kernels=kernels,
        nvtx_ranges=nvtx,
    )


def _program_check(run: RunFacts) -> SanityCheck:
    end = run.ending
    if end is None:
        seen = ("no error in the program's captured output" if run.streams
                else "the trace holds no captured program output")
        return _check("program_failed", False, seen)
    said = f"its {end.stream} says {end.line!r}"
    if end.kind == "interrupted":
        where = f", in {end.where}" if end.where else ""
        return _check("program_failed", False, f"the run was interrupted, not failed: {said}{where}")
    what = {"profiler": "the profiler failed to attach", "killed": "the program was killed",
            "conflict": "the program failed because of the profiling: its own profiler found nothing while "
                        f"Nsight Systems held CUPTI ({end.conflict!r})",
            "error": "the program ended in an error"}[end.kind]
    return _check("program_failed", True, f"{what}: {said}")


def _diagnostics_check(diags: list[ProfilerDiagnostic]) -> SanityCheck:
    cuda = [d for d in diags if d.kind in capture_parts.CUDA_KINDS]
    harmless = len(diags) - len(cuda)
    summary = f"{len(diags)} profiler warnings/errors"
    if cuda:
        summary += (f"; {len(cuda)} {'concerns' if len(cuda) == 1 else 'concern'} the CUDA trace"
                    + (" (events may be missing)" if any(d.events_may_be_missing for d in cuda) else "")
                    + f": {cuda[0].text}")
    if harmless:
        summary += (f"; {harmless} about CPU sampling, absent NVTX/OpenGL/OS events or other "
                    f"matters that {'does' if harmless == 1 else 'do'} not change the GPU figures")
    return _check("diagnostics", bool(cuda), summary)


def _captured(data: TraceData, window: tuple[int, int] | None) -> Captured:
    """What the capture is (module docstring): program, slice, carried, missing, overhead."""
    program = prog.program(data)
    w0, w1 = window if window else (None, None)
    cut = capture_parts.slice_of(data.capture_span(), w0, w1)
    if cut is not None and program is not None and program.one_shot:
        # A window cut from a longer run shows part of the work, not the whole of a run that
        # does its work once: the slice is judged as a slice (no start-up in it).
        program = dataclasses.replace(program, one_shot=False)
    carried = capture_parts.carried_fact(data) if window else None
    missing = capture_parts.missing_events(data)
    over = capture_parts.overhead(data)
    return Captured(
        program=program,
        slice=None if cut is None else CaptureSlice(**cut),
        carried=None if carried is None else CarriedFact(**carried),
        missing=MissingEvents(**missing),
        overhead=None if over is None else ProfilerOverhead(tuple(over["settings"]), over["events"]),
    )


def _result(
    checks: list[SanityCheck], window: tuple[int, int] | None, steady_start: int | None,
    startup_ns: int, data: TraceData,
) -> Capture:
    diags = []
    for d in data.diagnostics():
        kind = capture_parts.kind_of(d.text)
        diags.append(ProfilerDiagnostic(d.severity, d.text, kind, kind == "events_missing"))
    span = window[1] - window[0] if window else 0
    kernels = int(checks[0].kernels or 0)
    run = _run_facts(data, kernels)
    checks.append(_program_check(run))
    checks.append(_diagnostics_check(diags))
    captured = _captured(data, window)
    pct = round(100.0 * startup_ns / span, 2) if span else 0.0
    little = checks[0].found
    return Capture(
        window_start_ns=window[0] if window else None,
        window_end_ns=window[1] if window else None,
        startup_ns=startup_ns,
        startup_pct_of_window=pct,
        steady_state=(not little) and pct < NOT_STEADY_PCT and run.outcome not in FAILED_OUTCOMES,
        steady_start_ns=steady_start,
        checks=tuple(checks),
        diagnostics=tuple(diags),
        run=run,
        captured=captured,
        thresholds={
            "min_kernels": MIN_KERNELS, "min_kernel_ns": MIN_KERNEL_NS, "min_few_kernels": MIN_FEW_KERNELS,
            "min_few_kernel_ns": MIN_FEW_KERNEL_NS, "min_few_busy_pct": MIN_FEW_BUSY_PCT,
            "not_steady_pct": NOT_STEADY_PCT, "min_repeats": MIN_REPEATS, "min_repeat_ns": MIN_REPEAT_NS,
            "lazy_launch_ns": LAZY_LAUNCH_NS,
            "startup_call_ns": STARTUP_CALL_NS, "autotune_variants": capture_parts.VARIANTS,
            "autotune_winner_runs": capture_parts.WINNER_RUNS, "autotune_rare_runs": capture_parts.RARE_RUNS,
            "autotune_burst_gap_ns": capture_parts.BURST_GAP_NS,
        },
    )


METRIC = Metric(
    id="capture",
    order=120,
    title="Capture sanity",
    run=run,
    description="Is the capture steady state? How the run ended, too little data (by repetition), JIT "
    "compilation, lazy module loading, start-up calls, autotuning and the profiler's own diagnostics.",
    after=("workload", "steps"),
    reads=("runtime", "device_busy", "kernel_launch_index", "nvtx_normalized"),
)
