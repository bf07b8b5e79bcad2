"""The verdict: which bottleneck an expert would name first, with the GPU time at stake
(docs/diagnosis.md, "The verdict", documents the rule and its thresholds).

Order of decision:
1. no_gpu_work: no kernels or graph executions were captured (diagnosis/capture.py says
   why: the profiler failed to attach, the program failed or was killed first, CUDA was not
   traced, or no kernel was launched).
2. not_steady_state: the program ended in a failure its captured output records (cause
   program_failed: an exception, an error message, a kill, or its own profiler failing
   under Nsight Systems; an interrupted run is not a failure), or start-up (JIT compilation,
   lazy loading, start-up calls, autotuning) covers at least capture.NOT_STEADY_PCT of the
   GPU window.
3. insufficient_data:
   - too few kernels or too little kernel time to judge (capture metric);
   - the idle time cannot be explained: the idle time no cause names (capture_edge: no CUDA
     API rows, or the host not visible; device_wait: the next work was queued and what it
     waited on is not in the trace) exceeds the busy time;
   - the verdict would blame idle time, and at least UNPLACED_GRAPH_SHARE of the CUDA graph
     launches have no device work joined to them (graphs traced whole without graph-trace
     rows): their GPU time may fill what looks idle.
   Not when that idle time lies outside the serving iterations (a lead-in, a tail) and what
   remains of it inside them no longer exceeds the busy time: the main serving phase is then
   judged (_serving_decision; host_bound below), host-bound or GPU-bound.
4. The rule (rule()): the GPU's own work (compute: busy time minus communication kernels with
   nothing beside them) against the idle causes (accounting.py), as shares of the devices'
   windows. T1 and T2 are the largest and the second idle cause.
   - compute >= BUSY_MOST_PCT: gpu_bound when compute >= CLEAR_RATIO x T1 (T1 second), else
     mixed (compute and T1);
   - communication counts once: when T1 is communication and holds more than MAJORITY_PCT of
     the window (at least the queued waits the trace cannot explain), communication_bound,
     whatever the rest, its confidence from its ratio to its rival. Collectives running alone
     are busy time too, so the GPU's own work is then under half the window: collectives alone
     for 53.6% of the time are communication-bound, not a GPU busy 98.2%;
   - compute < BUSY_MOST_PCT: an idle cause leads when T1 >= CLOSE_RATIO x compute or the GPU
     is clearly underused (compute < UNDERUSED_PCT), and T1 is at least the queued waits
     (device_wait) the trace cannot explain: T1's verdict (transfer_bound, communication_bound,
     sync_bound, host_bound), or mixed (T1 and T2) when T2 > T1 / CLOSE_RATIO;
   - otherwise mixed (the larger of compute and T1 first); gpu_bound at low confidence when no
     idle cause has any time (the GPU works through a queue of its own).
   The bands leave a mixed zone between any two verdicts: captures of one workload that differ
   by a few percent move between a verdict and a mixed that names it, never from one cause to
   another (agree()).

Confidence: one step lower when the verdict names communication and at least INFERRED_SHARE of
its time is queued work waiting behind a pending collective (idle_causes behind_collective_ns).
gpu_bound high when compute is at least BUSY_MOST_PCT + 10 points and 3 x T1,
else medium; an idle cause high when it has at least CLEAR_RATIO times its rival (the larger
of T2 and compute), medium from CLOSE_RATIO, low below; mixed medium, low when the two it names
are within CLOSE_RATIO of each other. One step lower when some graph launches could not be
placed, or when the idle time could not be split (no CUDA API rows) and compute is under
BUSY_MOST_PCT + 10 points. insufficient_data is high
confidence, medium when the unexplained idle is queued work on a device that runs collectives
(a peer rank is then named as the likely dependency). The primary bottleneck lists every
device where the cause takes at least half the largest per-device share, and the processes
that drive them.

Serving captures (sentence, with_serving): the first sentence of the summary, in a serving
engineer's terms: the iterations by phase, the time per output token, and what bounds the
main phase.

    "51 iterations: 1 prefill (6.56 ms), then 50 decode at 5.31 ms per output token, of which
    316 µs is kernels: decode is host-bound, 138 launches per token and no CUDA graph"

The main phase is decode when there is one, else mixed, else prefill. A phase is host-bound
when the host holds HOST_BOUND_PCT of its time or more (its share: gaps before its iterations
plus GPU idle inside their spans, metrics/serving.py), else GPU-bound; a prefill-only capture
whose GPU is busy less than half its span is launch-bound. Profiler options that inflate host
time (Python stack tracing, memory profiling) are named before a host-bound judgement."""

from __future__ import annotations

from nsys_llm_explainer.diagnosis.accounting import BUSY, Accounting, Figure
from nsys_llm_explainer.fmt import dur, pct
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.model import Bucket, Cause, Confidence, Outcome, Verdict, typed_result
from nsys_llm_explainer.results.devices import Communication, GpuIdle, IdleCauses
from nsys_llm_explainer.results.host import HostPatterns, PerStep, ReadbackGroup
from nsys_llm_explainer.results.run import Capture
from nsys_llm_explainer.results.serving import PhaseRow, Serving

VERDICT_OF: dict[Cause, Verdict] = {
    Cause.COMPUTE: Verdict.GPU_BOUND,
    Cause.TRANSFER: Verdict.TRANSFER_BOUND,
    Cause.COMMUNICATION: Verdict.COMMUNICATION_BOUND,
    Cause.SYNC: Verdict.SYNC_BOUND,
    Cause.HOST: Verdict.HOST_BOUND,
}
IDLE_CAUSES: tuple[Cause, ...] = (Cause.TRANSFER, Cause.COMMUNICATION, Cause.SYNC, Cause.HOST)
VERDICTS: tuple[Verdict, ...] = tuple(Verdict)
BUSY_MOST_PCT = 50.0  # the GPU's own work this share of the window or more: it leads
MAJORITY_PCT = 50.0  # communication over this share of the window leads
UNDERUSED_PCT = 40.0  # under this share the GPU is clearly underused: an idle cause leads
CLEAR_RATIO = 2.0  # compute this many times the largest idle cause: gpu_bound, not mixed
CLOSE_RATIO = 1.25  # two contenders within this factor: mixed
UNPLACED_GRAPH_SHARE = 0.1
UNEXPLAINED = (Bucket.CAPTURE_EDGE, Bucket.DEVICE_WAIT)
FAILED_OUTCOMES = ("program_failed", "killed", "profiler_failed", "profiler_conflict")
_LOWER = {Confidence.HIGH: Confidence.MEDIUM, Confidence.MEDIUM: Confidence.LOW, Confidence.LOW: Confidence.LOW}


@frozen
class Decision:
    verdict: Verdict
    cause: Cause | None  # the lead: compute, an idle cause, startup, program_failed; None when nothing is judged
    confidence: Confidence
    why: str | None = None  # insufficient_data: what cannot be judged
    second: Cause | None = None  # the cause named second (mixed: the other contender)

    @property
    def mixed(self) -> bool:
        return self.verdict == Verdict.MIXED

    def named(self) -> tuple[Cause, ...]:
        """The causes the verdict names as bottlenecks: the lead, and for mixed the second."""
        if self.cause is None:
            return ()
        return (self.cause, self.second) if self.mixed and self.second else (self.cause,)


def agree(a: Decision, b: Decision) -> bool:
    """Whether two verdicts say the same thing about a workload: the same lead, or one of them
    mixed and naming the other's lead (the half-split stability check)."""
    if a.verdict == b.verdict and a.cause == b.cause:
        return True
    if a.mixed and b.cause in a.named():
        return True
    if b.mixed and a.cause in b.named():
        return True
    return a.mixed and b.mixed and bool(set(a.named()) & set(b.named()))


def ranked_causes(acct: Accounting) -> list[tuple[Cause, int]]:
    """(cause, ns at stake over all devices), largest first (ties: the order of VERDICT_OF)."""
    order = list(VERDICT_OF)
    return sorted(((c, acct.total(c)) for c in VERDICT_OF), key=lambda t: (-t[1], order.index(t[0])))


def _ratio_confidence(top: int, second: int) -> Confidence:
    if second == 0 or top >= CLEAR_RATIO * second:
        return Confidence.HIGH
    if top >= CLOSE_RATIO * second:
        return Confidence.MEDIUM
    return Confidence.LOW


def _unexplained_why(metrics: dict[str, Outcome], acct: Accounting) -> tuple[str, bool] | None:
    """(why the idle time cannot be judged, whether a likely dependency is named), or None when
    the named causes explain enough."""
    busy = acct.total(BUSY)
    edge, waiting = acct.bucket_total(Bucket.CAPTURE_EDGE), acct.bucket_total(Bucket.DEVICE_WAIT)
    window = acct.window()
    if edge + waiting <= busy or not window:
        return None
    pct = 100.0 * (edge + waiting) / window
    if typed_result(metrics, IdleCauses) is None:
        return (f"the export has no CUDA API rows, so the {pct:.1f}% of device time the GPU sat idle "
                "cannot be explained (what the host did is unknown)"), False
    if edge >= waiting:
        return (f"the GPU sat idle {pct:.1f}% of device time while the processes driving it made no "
                "CUDA call the capture recorded, so what the host did then is unknown"), False
    why = (f"the GPU sat idle {pct:.1f}% of device time with its next work already queued, and what "
           "that work waited on (an event on another stream or device) is not in the trace")
    behind_wait = stream_waits(metrics)
    if behind_wait >= READBACK_HOLD_SHARE * waiting:
        why = (f"the GPU sat idle {pct:.1f}% of device time with its next work already queued, "
               f"{dur(behind_wait)} of it behind a stream wait on an event (a `*StreamWaitEvent` call before the "
               "work's launch) whose producer is not in the trace: a dependency on the device side, and the host's "
               "synchronize or copy calls meanwhile waited on it, not the other way round")
    held = readback_hold(metrics, waiting)
    if held:
        why += f"; {held}"
    comm = typed_result(metrics, Communication)
    # the time the devices spent in collectives (each device's union), as NLE307 states it
    comm_ns = sum(d.comm_union_ns for d in comm.devices) if comm is not None else 0
    if comm_ns:
        why += (f"; the device also runs collectives ({dur(comm_ns)} of communication kernels), so "
                "a wait on a peer rank (a pipeline stage or a collective's peers) is the likely dependency: "
                "`nsys-llm-explain fleet` over every rank's trace shows which rank arrives late")
    return why, bool(comm_ns)


READBACK_HOLD_SHARE = 0.3
READBACK_WINDOW_SHARE = 0.1  # ... and of the window, for a verdict that names another cause


def readback_text(g: ReadbackGroup, per_step: PerStep | None) -> str:
    """'a 704 B device-to-host copy into pageable memory in `## sparse_data_dist ##` >
    `aten::to`, 1 per step'."""
    where = " > ".join(f"`{x}`" for x in dict.fromkeys(y for y in (g.region, g.op) if y))
    into = " into pageable memory" if g.pageable == g.count else ""
    steps = per_step.steps if per_step is not None else None
    each = (f", {g.count // steps} per step" if steps and g.count % steps == 0
            else f", {g.count:,} in all")
    return f"a {g.bytes:,} B device-to-host copy{into}" + (f" in {where}" if where else "") + each


def readback_hold(metrics: dict[str, Outcome], waiting_ns: int, window_ns: int = 0) -> str | None:
    """When read-backs hold the host during at least READBACK_HOLD_SHARE of the idle time
    with queued work (device_wait, or waiting on a collective) and, when `window_ns` is given,
    at least READBACK_WINDOW_SHARE of that window, what they are: the host could not queue
    anything else while it waited; else None."""
    hp = typed_result(metrics, HostPatterns)
    rb = hp.scalar_readbacks if hp is not None else None
    if rb is None or not rb.groups or waiting_ns <= 0:
        return None
    g = rb.groups[0]
    held = g.queued_during_ns
    if held < READBACK_HOLD_SHARE * waiting_ns or held < READBACK_WINDOW_SHARE * window_ns:
        return None
    blocked = g.host_blocked_ns // max(1, g.count)
    return (f"meanwhile the launching thread was blocked in a read-back, {readback_text(g, rb.per_step)}, "
            f"{dur(blocked)} each, which waits for that queue to drain: {dur(g.queued_during_ns)} of the "
            "idle time with work queued lies inside it, so nothing more was queued while the GPU waited")


def stream_waits(metrics: dict[str, Outcome]) -> int:
    """Idle time after launches queued behind a stream wait (idle_causes stream_wait_ns), all
    devices."""
    ic = typed_result(metrics, IdleCauses)
    return sum(d.stream_wait_ns for d in ic.devices) if ic is not None else 0


def unplaced_graphs(metrics: dict[str, Outcome]) -> tuple[int, int]:
    """(graph launches no device work joins, all graph launches) from gpu_idle."""
    gi = typed_result(metrics, GpuIdle)
    if gi is None:
        return 0, 0
    return gi.unplaced_graph_launches, gi.graph_launches


def graphs_hide_work(metrics: dict[str, Outcome]) -> str | None:
    """Why idle time cannot be blamed on anything when at least UNPLACED_GRAPH_SHARE of the
    graph launches have no execution record, else None."""
    n, total = unplaced_graphs(metrics)
    if not n or n < UNPLACED_GRAPH_SHARE * total:
        return None
    return (f"{n:,} of {total:,} CUDA graph launches have no execution record (graphs traced whole "
            "without graph-trace rows), so their GPU time cannot be placed and may fill what looks idle")


def _graph_why(metrics: dict[str, Outcome]) -> tuple[str | None, bool]:
    """(why the idle time cannot be judged, some graph launches unplaced)."""
    return graphs_hide_work(metrics), unplaced_graphs(metrics)[0] > 0


def rule(compute: int, window: int, idle: list[tuple[Cause, int]], waiting: int) -> Decision:
    """The verdict from the GPU's own work and the idle causes (module docstring, step 4).
    `idle`: (cause, ns) largest first; `waiting`: queued waits the trace cannot explain."""
    c = 100.0 * compute / window if window else 0.0
    (k1, t1), (k2, t2) = idle[0], idle[1]
    if c >= BUSY_MOST_PCT:
        if compute >= CLEAR_RATIO * t1:
            sure = c >= BUSY_MOST_PCT + 10 and compute >= 3 * t1
            return Decision(Verdict.GPU_BOUND, Cause.COMPUTE, Confidence.HIGH if sure else Confidence.MEDIUM,
                            second=k1 if t1 > 0 else None)
        return Decision(Verdict.MIXED, Cause.COMPUTE, Confidence.MEDIUM, second=k1)
    if k1 == Cause.COMMUNICATION and window and 100.0 * t1 > MAJORITY_PCT * window and t1 >= waiting:
        rival = max(t2, compute)
        return Decision(VERDICT_OF[k1], k1, _ratio_confidence(t1, rival),
                        second=Cause.COMPUTE if compute >= t2 else (k2 if t2 > 0 else None))
    if t1 > 0 and t1 >= waiting and (t1 >= CLOSE_RATIO * compute or c < UNDERUSED_PCT):
        if t2 * CLOSE_RATIO > t1:
            return Decision(Verdict.MIXED, k1, Confidence.LOW, second=k2)
        rival = max(t2, compute)
        conf = _ratio_confidence(t1, rival)
        return Decision(VERDICT_OF[k1], k1, conf, second=Cause.COMPUTE if compute >= t2 else (k2 if t2 > 0 else None))
    if t1 == 0:
        return Decision(Verdict.GPU_BOUND, Cause.COMPUTE, Confidence.LOW)
    lead, second = (k1, Cause.COMPUTE) if t1 > compute else (Cause.COMPUTE, k1)
    close = max(t1, compute) < CLOSE_RATIO * min(t1, compute)
    return Decision(Verdict.MIXED, lead, Confidence.LOW if close else Confidence.MEDIUM, second=second)


def failed(metrics: dict[str, Outcome]) -> bool:
    """The program's captured output ends in a failure (capture metric's run outcome)."""
    cap = typed_result(metrics, Capture)
    return cap is not None and cap.run.outcome in FAILED_OUTCOMES


def decide(metrics: dict[str, Outcome], acct: Accounting, failure: bool = True) -> Decision:
    """The verdict (module docstring); failure=False: as if the run had not failed (what the
    figures say up to the failure)."""
    cap = typed_result(metrics, Capture)
    if not acct.devices:
        return Decision(Verdict.NO_GPU_WORK, None, Confidence.HIGH)
    if failure and failed(metrics):
        return Decision(Verdict.NOT_STEADY_STATE, Cause.PROGRAM_FAILED, Confidence.HIGH)
    if cap is not None:
        from nsys_llm_explainer.metrics.capture import NOT_STEADY_PCT

        if cap.startup_pct_of_window >= NOT_STEADY_PCT:
            return Decision(Verdict.NOT_STEADY_STATE, Cause.STARTUP, Confidence.HIGH)
        first = cap.checks[0] if cap.checks else None
        if first is not None and first.id == "too_little_data" and first.found:
            return Decision(Verdict.INSUFFICIENT_DATA, None, Confidence.HIGH, first.summary)
    unexplained = _unexplained_why(metrics, acct)
    served = _serving_decision(metrics, acct) if unexplained is not None else None
    if served is not None:
        return served
    if unexplained is not None:
        # Queued work waiting on a dependency the trace does not name, on a device that runs
        # collectives: the likely dependency is named, so abstaining is less certain.
        why, named = unexplained
        return Decision(Verdict.INSUFFICIENT_DATA, None, Confidence.MEDIUM if named else Confidence.HIGH, why)
    window = acct.window()
    if acct.total(BUSY) == 0:
        return Decision(Verdict.INSUFFICIENT_DATA, None, Confidence.LOW, "no GPU time could be accounted for")
    idle = sorted(((c, acct.total(c)) for c in IDLE_CAUSES), key=lambda t: (-t[1], IDLE_CAUSES.index(t[0])))
    decision = rule(acct.total(Cause.COMPUTE), window, idle, acct.bucket_total(Bucket.DEVICE_WAIT))
    graph_why, unplaced = _graph_why(metrics)
    if graph_why is not None and any(c in IDLE_CAUSES for c in decision.named()):
        return Decision(Verdict.INSUFFICIENT_DATA, None, Confidence.HIGH, graph_why)
    comfortably = bool(window) and 100.0 * acct.total(Cause.COMPUTE) / window >= BUSY_MOST_PCT + 10
    if (unplaced or (typed_result(metrics, IdleCauses) is None and not comfortably)
            or _comm_inferred(metrics, acct, decision) or _host_inflated(metrics, decision)):
        decision = Decision(decision.verdict, decision.cause, _LOWER[decision.confidence], second=decision.second)
    return decision


def _serving_decision(metrics: dict[str, Outcome], acct: Accounting) -> Decision | None:
    """The main serving phase's judgement (host_bound, below) when the idle time that cannot
    be explained lies outside the iterations (a lead-in before the first one, a tail after the
    last): the iterations are the work the capture is about, and they are judged, not the
    capture's edges. None when there are no iterations by phase, or when the unexplained idle
    time inside the iterations still exceeds the busy time."""
    s = typed_result(metrics, Serving)
    if s is None or not s.phases or s.window_ns <= 0:
        return None
    main = main_phase(s)
    if main is None:
        return None
    outside = (outside_pct(s) or 0.0) / 100.0 * acct.window()
    unexplained = acct.bucket_total(Bucket.CAPTURE_EDGE) + acct.bucket_total(Bucket.DEVICE_WAIT)
    if unexplained - outside > acct.total(BUSY):
        return None
    if host_bound(main):
        host = Decision(Verdict.HOST_BOUND, Cause.HOST, Confidence.MEDIUM)
        return Decision(Verdict.HOST_BOUND, Cause.HOST, Confidence.LOW) if _host_inflated(metrics, host) else host
    return Decision(Verdict.GPU_BOUND, Cause.COMPUTE, Confidence.MEDIUM)


INFERRED_SHARE = 0.5
# The profiler's own settings that slow the host between launches (metrics/capture.py overhead):
# a host-bound verdict on such a capture is partly the profiler's, one step less sure.
HOST_INFLATING = ("with_stack", "profile_memory")


def _host_inflated(metrics: dict[str, Outcome], decision: Decision) -> bool:
    if Cause.HOST not in decision.named():
        return False
    cap = typed_result(metrics, Capture)
    overhead = cap.captured.overhead if cap is not None else None
    return overhead is not None and any(s in HOST_INFLATING for s in overhead.settings)


def behind_collectives(metrics: dict[str, Outcome]) -> int:
    """Idle time with work queued while a collective was pending (idle_causes), all devices."""
    ic = typed_result(metrics, IdleCauses)
    return sum(d.behind_collective_ns for d in ic.devices) if ic is not None else 0


def _comm_inferred(metrics: dict[str, Outcome], acct: Accounting, decision: Decision) -> bool:
    """The verdict names communication, and at least INFERRED_SHARE of its time is queued work
    waiting while a collective was pending: what the collective waited on is not in a one-rank
    trace, so the verdict is one step less sure."""
    if Cause.COMMUNICATION not in decision.named():
        return False
    total = acct.total(Cause.COMMUNICATION)
    return total > 0 and behind_collectives(metrics) >= INFERRED_SHARE * total


def primary_devices(acct: Accounting, cause: Figure) -> list[int]:
    shares = {d.device_id: d.pct(d.cause_ns(cause)) for d in acct.devices}
    best = max(shares.values(), default=0.0)
    if best <= 0:
        return []
    return [dev for dev, s in shares.items() if s >= best / 2]


HOST_BOUND_PCT = 50.0
OUTSIDE_PCT = 25.0  # of the GPU window outside every iteration: said after the phases
GROUP_WORDS = {"gemm": "GEMMs", "attention": "attention", "moe": "MoE", "communication": "communication",
               "norm_elementwise": "norms and elementwise kernels", "sampling": "sampling", "other": "other kernels"}


def _n(count: int, word: str, many: str | None = None) -> str:
    return f"{count:,} {word if count == 1 else (many or word + 's')}"


def _prefill(ph: PhaseRow) -> str:
    what = "1 prefill" if ph.iterations == 1 else f"{ph.iterations:,} prefills"
    span = dur(ph.gpu_span_p50_ns) if ph.iterations == 1 else f"p50 {dur(ph.gpu_span_p50_ns)}"
    if ph.tokens:
        seqs = f" in {_n(ph.sequences_p50, 'sequence')}" if ph.sequences_p50 and ph.iterations == 1 else ""
        per = f", {dur(ph.ns_per_token)} per token" if ph.ns_per_token else ""
        return f"{what} of {ph.tokens:,} tokens{seqs} ({span} of GPU time{per})"
    return f"{what} ({span})"


def _decode(ph: PhaseRow) -> str:
    if ph.period_p50_ns is None:
        return f"{ph.iterations:,} decode ({dur(ph.gpu_span_p50_ns)})"
    return (f"{ph.iterations:,} decode at {dur(ph.period_p50_ns)} per output token, of which "
            f"{dur(ph.gpu_busy_p50_ns)} is kernels")


def _mixed(ph: PhaseRow) -> str:
    return f"{ph.iterations:,} mixed prefill+decode (p50 {dur(ph.gpu_span_p50_ns)})"


def _overhead(s: Serving) -> str:
    if not s.profiler_overhead:
        return ""
    return f" (captured with {' and '.join(s.profiler_overhead)}, which inflate host time)"



def host_bound(ph: PhaseRow) -> bool:
    """The host holds HOST_BOUND_PCT of the phase's time or more (launch-bound for a prefill)."""
    return ph.host_share_pct is not None and ph.host_share_pct >= HOST_BOUND_PCT


def _judge(s: Serving, ph: PhaseRow) -> str:
    name = "decode" if ph.phase == "decode" else "the prefill" if ph.phase == "prefill" else "mixed batches"
    graphs = ("no CUDA graph" if ph.graph_iterations == 0
              else f"CUDA graphs in {ph.graph_iterations:,} of {ph.iterations:,} iterations")
    per = "per token" if ph.phase == "decode" else "per iteration"
    if host_bound(ph):
        if ph.phase == "prefill":
            busy = 100.0 * ph.gpu_busy_p50_ns / ph.gpu_span_p50_ns if ph.gpu_span_p50_ns else 0.0
            return (f"{name} is launch-bound: the GPU is busy {pct(busy)} of its span across "
                    f"{ph.launches_per_iteration:,.0f} launches{_overhead(s)}")
        return (f"{name} is host-bound{_overhead(s)}, {ph.launches_per_iteration:,.0f} launches {per} and "
                f"{graphs}")
    kernel = sum(ph.categories.values())
    top = max(ph.categories, key=lambda g: ph.categories[g]) if kernel else None
    lead = f", {GROUP_WORDS[top]} {pct(100.0 * ph.categories[top] / kernel)} of its kernel time" if top else ""
    busy = 100.0 * ph.gpu_busy_p50_ns / ph.gpu_span_p50_ns if ph.gpu_span_p50_ns else 0.0
    return f"{name} is GPU-bound, busy {pct(busy)} of its span{lead}"


def sentence(s: Serving) -> str | None:
    """The serving sentence (module docstring), or None without iterations by phase."""
    by = {p.phase: p for p in s.phases}
    if not by:
        return None
    parts = []
    if "prefill" in by:
        parts.append(_prefill(by["prefill"]))
    if "mixed" in by:
        parts.append(_mixed(by["mixed"]))
    if "decode" in by:
        parts.append(_decode(by["decode"]))
    main = main_phase(s)
    assert main is not None
    n = len(s.iterations)
    body = ", then ".join(parts)
    text = f"{body}: {_judge(s, main)}" if n == 1 else f"{_n(n, 'iteration')}: {body}: {_judge(s, main)}"
    outside = outside_pct(s)
    if outside is not None and outside >= OUTSIDE_PCT:
        text += f"; {pct(outside)} of the capture's GPU window lies outside the iterations"
    return text


def main_phase(s: Serving) -> PhaseRow | None:
    """The phase the capture is judged by: decode when there is one, else mixed, else prefill."""
    by = {p.phase: p for p in s.phases}
    return by.get("decode") or by.get("mixed") or by.get("prefill")


def outside_pct(s: Serving) -> float | None:
    """Share of the span from the first to the last GPU work of the iterations' processes
    that no iteration's GPU span covers (per process, the largest)."""
    if s.window_ns <= 0:
        return None
    covered = sum(it.gpu_span_ns for it in s.iterations)
    return max(0.0, 100.0 * (1 - covered / s.window_ns))


def with_serving(summary: str, s: Serving | None) -> str:
    """`summary` with the serving sentence after its verdict words ("Host-bound: ...")."""
    text = sentence(s) if s is not None else None
    if not text:
        return summary
    head, sep, rest = summary.partition(": ")
    if not sep or " " in head.strip("-"):
        return f"{text}. {summary}"
    return f"{head}: {text}. {rest[:1].upper()}{rest[1:]}"
