"""Evidence lines and the one- or two-sentence summary for each verdict: the phenomenon as
measured first ("GPU 0 idle 38% ..."), then the likely source with the numbers behind it.

Host work (host_sources, host_clause, host_work_lines): what the host was doing while the
GPU waited on it, in words: the named sources of the host-caused idle time
(analysis/host_sources.py, reported per device by idle_causes), the family that holds the
most of it, and what capture option would name the rest.

A family leads the advice when it holds at least LEAD_SHARE of the host-caused idle time of
the devices in question; when no record names at least UNNAMED_SHARE of it, one line says
what capture option would."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TypedDict

from nsys_llm_explainer.analysis.host_sources import Source
from nsys_llm_explainer.diagnosis.accounting import BUSY, Accounting, Figure
from nsys_llm_explainer.diagnosis.kernel_mix import LIMIT_WORDS, KernelMix
from nsys_llm_explainer.diagnosis.verdict import readback_hold, readback_text
from nsys_llm_explainer.fmt import dur, pct, sig, size
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.kernels.labels import labels_for
from nsys_llm_explainer.model import Bucket, Cause, JsonObject, MetricResult, Outcome, Verdict, typed_result
from nsys_llm_explainer.results.devices import (
    Communication,
    FamilyTime,
    GpuIdle,
    HostBlocked,
    HostSources,
    IdleCauses,
    SampleCount,
)
from nsys_llm_explainer.results.host import HostPatterns, Sync
from nsys_llm_explainer.results.kernels import Categories, TopKernels
from nsys_llm_explainer.results.launches import LaunchOverhead, LaunchStorm
from nsys_llm_explainer.results.run import SanityCheck

CAUSE_WORDS: dict[Cause, str] = {
    Cause.COMPUTE: "kernels run",
    Cause.TRANSFER: "copies cover the idle time",
    Cause.COMMUNICATION: "communication (exposed collectives and waits) takes",
    Cause.SYNC: "the GPU idles while the host waits in synchronize calls for",
    Cause.HOST: "the GPU idles while the host launches kernels or does other work for",
}
MAX_DEVICES_LISTED = 8
MIN_KIND_SHARE = 0.1  # copy kinds below this share of copy time are not evidence
ALSO_SHARE = 0.05  # other idle causes named beside a host-bound verdict from this share of the window


@frozen
class Second:
    """The cause named second beside the verdict's lead, with the time it holds on the lead's
    devices (report.json `diagnosis.second`)."""

    kind: Cause
    impact_ns: int
    impact_pct: float

    def to_json(self) -> JsonObject:
        return {"kind": self.kind, "impact_ns": self.impact_ns, "impact_pct": self.impact_pct}


class SummaryParts(TypedDict, total=False):
    """What the summary sentence of a verdict is made of, worked out before it is written
    (diagnosis/__init__.py): each verdict fills the parts its sentence uses."""

    text: str  # no_gpu_work: the whole sentence
    failed: str | None  # not_steady_state after a failure: what failed, what it ran first
    fix: str
    before: str  # the summary the figures would get had the run not failed
    parts: str  # not_steady_state: what start-up was made of
    one_shot: str | None  # the program, when it runs its work once
    what: str  # insufficient_data: why the idle time could not be judged
    too_little: bool
    check: SanityCheck
    kernels: str  # what the kernels are limited by (kernel_clause)
    second: Second | None


def devices_text(devices: list[int]) -> str:
    if not devices:
        return "no GPU"
    if len(devices) == 1:
        return f"GPU {devices[0]}"
    # consecutive ids without building the range (a hostile trace's ids reach 2**62)
    steps = zip(devices, devices[1:], strict=False)
    if devices[-1] - devices[0] == len(devices) - 1 and all(b - a == 1 for a, b in steps):
        return f"GPUs {devices[0]}-{devices[-1]}"
    return "GPUs " + ", ".join(str(d) for d in devices)


def per_device_lines(acct: Accounting, cause: Figure, devices: list[int]) -> list[str]:
    lines = []
    for dev in devices[:MAX_DEVICES_LISTED]:
        d = acct.device(dev)
        if d is None:
            continue
        ns = d.cause_ns(cause)
        lines.append(f"GPU {dev}: {dur(ns)} of its {dur(d.window_ns)} window ({d.pct(ns):.1f}%)")
    if len(devices) > MAX_DEVICES_LISTED:
        lines.append(f"... and {len(devices) - MAX_DEVICES_LISTED} more devices (see the device table)")
    return lines


def _transfer_kinds(ic: IdleCauses, devices: list[int]) -> list[str]:
    by_kind: dict[str, list[int]] = {}
    for d in ic.of(devices):
        for t in d.transfers:
            k = by_kind.setdefault(t.kind, [0, 0, 0])
            k[0] += t.count
            k[1] += t.bytes
            k[2] += t.copy_ns
    copy_ns = sum(v[2] for v in by_kind.values())
    out = []
    for kind, (count, nbytes, ns) in sorted(by_kind.items(), key=lambda kv: (-kv[1][2], kv[0]))[:2]:
        if ns < MIN_KIND_SHARE * copy_ns:
            continue
        gbps = nbytes / ns if ns else 0.0
        out.append(f"{kind}: {count:,} copies, {size(nbytes)} in {dur(ns)} of copy time ({sig(gbps)} GB/s)")
    return out


def host_wait_line(device: int, blocked: HostBlocked) -> str:
    """What the host's blocking calls overlapped on one device, and what that says: the host
    waited for copies, for the device's own work, or the GPU drained while it waited."""
    ns, busy, copies, drained = blocked.ns, blocked.busy_ns, blocked.transfer_ns, blocked.sync_wait_ns
    queued = blocked.other_idle_ns
    head = (f"GPU {device}: the processes driving it were blocked in synchronizing calls for {dur(ns)} of its "
            f"window; meanwhile it copied for {dur(copies)}, ran its own work for {dur(busy)}, had nothing "
            f"queued for {dur(drained)}" + (f" and sat idle for {dur(queued)} for other reasons" if queued else ""))
    if queued > max(copies, busy, drained):
        return head + (": the GPU was mostly idle during the wait, not drained by it (the idle causes say what "
                       "held it), and the host could queue nothing more meanwhile")
    if copies > busy and copies >= drained:
        return head + ": the host simply waited for the copies"
    if busy >= copies and busy >= drained:
        return head + ": the host mostly waited for the GPU's own work, which costs the GPU nothing"
    return head + ": the GPU drained while the host waited"


def transfer_lines(metrics: dict[str, Outcome], acct: Accounting, devices: list[int]) -> list[str]:
    ic = typed_result(metrics, IdleCauses)
    if ic is None:
        return []
    out = _transfer_kinds(ic, devices)
    rows = ic.of(devices)
    q, qn = sum(d.queued_gaps for d in rows), sum(d.queued_ns for d in rows)
    a, an = sum(d.copy_ahead_gaps for d in rows), sum(d.copy_ahead_ns for d in rows)
    known = sum(d.launch_known_gaps for d in rows)
    if q:
        out.append(
            f"{q:,} of the {known:,} idle gaps whose work has a known launch time ({dur(qn)}) ended with work "
            "queued before the gap: the GPU waited on device-side work, not on the host; for "
            f"{a:,} of them ({dur(an)}) a copy on the work's own stream ran just ahead of it"
        )
    for d in rows[:MAX_DEVICES_LISTED]:
        if d.host_blocked.ns:
            out.append(host_wait_line(d.device_id, d.host_blocked))
    return out


def _compute(metrics: dict[str, Outcome], acct: Accounting, devices: list[int]) -> list[str]:
    out = []
    gi = typed_result(metrics, GpuIdle)
    for d in gi.devices if gi is not None else ():
        if d.device_id in devices[:MAX_DEVICES_LISTED] and (d.graph_busy_ns or d.device_copy_busy_ns):
            parts = [(d.kernel_busy_ns, "kernels"), (d.graph_busy_ns, "whole-graph executions"),
                     (d.device_copy_busy_ns, "device-local copies and memsets")]
            out.append(f"GPU {d.device_id} busy by kind (each a union; they may overlap): "
                       + ", ".join(f"{what} {dur(ns)}" for ns, what in parts if ns))
    tk = typed_result(metrics, TopKernels)
    if tk is not None:
        label = labels_for(metrics)  # the kernel as every table and plot names it
        for r in tk.kernels[:3]:
            if r.device_id in devices:
                out.append(f"{label(r.name)} on GPU {r.device_id}: {dur(r.total_ns)} in {r.calls:,} calls")
    cats = typed_result(metrics, Categories)
    if cats is not None:
        top = [c for c in cats.categories if c.total_ns][:3]
        if top:
            out.append("kernel time by category: " + ", ".join(
                f"{c.category} {c.pct_of_scope_time:.1f}%" for c in top))
    return out


def _sync(metrics: dict[str, Outcome], acct: Accounting, devices: list[int]) -> list[str]:
    out = []
    sync = typed_result(metrics, Sync)
    if sync is not None:
        blocking = [c for c in sync.calls if c.blocking][:3]
        if blocking:
            calls = ", ".join(f"{c.api} x{c.calls:,} ({dur(c.total_ns)})" for c in blocking)
            out.append(f"blocking calls: {calls}")
    hp = typed_result(metrics, HostPatterns)
    if hp is not None:
        spl = hp.sync_per_launch
        if spl.found:
            out.append(f"one synchronize after each launch: {spl.syncs:,} syncs for {spl.launches:,} launches, "
                       f"costing the GPU {dur(spl.idle_ns)} of idle time")
        rb = hp.scalar_readbacks
        if rb is not None and rb.count:
            out.append(f"{rb.count:,} scalar read-backs (a copy of at most {hp.readback_bytes} bytes with a "
                       f"blocking wait), costing the GPU {dur(rb.idle_ns)} of idle time")
    return out


def _host(metrics: dict[str, Outcome], acct: Accounting, devices: list[int]) -> list[str]:
    out = host_work_lines(host_sources(typed_result(metrics, IdleCauses), devices), _kineto(metrics))
    launch = sum(d.buckets[Bucket.LAUNCH_BOUND] for d in acct.chosen(devices))
    other = sum(d.buckets[Bucket.HOST_OTHER] for d in acct.chosen(devices))
    out.append(f"inside launch calls: {dur(launch)}; other host work (no launch, copy or sync call: its own "
               f"code, or other CUDA calls such as allocation): {dur(other)}")
    ls = typed_result(metrics, LaunchStorm)
    if ls is not None:
        g = ls.global_
        out.append(f"{g.kernels:,} kernels at {g.launches_per_s:,.0f} per second, median {dur(g.p50_ns)}, "
                   f"{g.pct_under_10us:.1f}% shorter than 10 µs")
    return out


def _kineto(metrics: dict[str, Outcome]) -> bool:
    """Whether the trace is a PyTorch profiler trace (operators run only there)."""
    return isinstance(metrics.get("operators"), MetricResult)


def dependency_lines(metrics: dict[str, Outcome], devices: list[int]) -> list[str]:
    """Idle time the GPU spent with work already queued, waiting on a collective's dependency:
    right after a collective, or while a collective queued earlier had not started."""
    ic = typed_result(metrics, IdleCauses)
    if ic is None:
        return []
    out = []
    for d in ic.of(devices)[:MAX_DEVICES_LISTED]:
        if d.dependency_ns:
            out.append(f"GPU {d.device_id}: {dur(d.dependency_ns)} idle with the next kernel already queued "
                       "and no copy ahead of it: the GPU waited on a collective or what it depends on (another "
                       "rank, another stream), not on the host")
        if d.behind_collective_ns:
            out.append(f"GPU {d.device_id}: {dur(d.behind_collective_ns)} idle with its next work queued while "
                       "a collective queued before the gap had not started: the work waited behind communication, "
                       "which waits on the other ranks or on what its stream waits for (outside this trace), not "
                       "on the host")
    return out


def stream_wait_lines(metrics: dict[str, Outcome], devices: list[int]) -> list[str]:
    """Idle time after a launch its thread queued behind a stream wait on an event: a
    synchronize or copy waiting behind that work waits on the event, not on the host."""
    ic = typed_result(metrics, IdleCauses)
    if ic is None:
        return []
    return [
        f"GPU {d.device_id}: {dur(d.stream_wait_ns)} idle after work was launched behind a stream wait on an "
        "event (`cudaStreamWaitEvent` before its launch): the GPU waited on that event's work, a dependency on "
        "the device side; a synchronize or copy behind it waited on the same dependency, not on the host"
        for d in ic.of(devices) if d.stream_wait_ns
    ][:MAX_DEVICES_LISTED]


def _communication(metrics: dict[str, Outcome], acct: Accounting, devices: list[int]) -> list[str]:
    out = []
    comm = typed_result(metrics, Communication)
    if comm is not None:
        for d in comm.devices:
            if d.device_id in devices:
                out.append(f"GPU {d.device_id}: communication kernels {dur(d.comm_union_ns)}, "
                           f"{dur(d.exposed_ns)} of it with no compute beside it")
    out = out[:MAX_DEVICES_LISTED] + dependency_lines(metrics, devices)
    lo = typed_result(metrics, LaunchOverhead)
    if lo is not None and lo.global_.latency_p50_ns:
        out.append(f"kernels start {dur(lo.global_.latency_p50_ns)} after their launch call at the median: "
                   "the host runs ahead of the GPU")
    return out


def _with_stream_waits(
    lines: Callable[[dict[str, Outcome], Accounting, list[int]], list[str]],
) -> Callable[[dict[str, Outcome], Accounting, list[int]], list[str]]:
    """A cause's evidence, then the idle time behind stream waits on its devices: what the
    host's blocking calls waited on there."""
    def both(metrics: dict[str, Outcome], acct: Accounting, devices: list[int]) -> list[str]:
        return [*lines(metrics, acct, devices), *stream_wait_lines(metrics, devices)]

    return both


CAUSE_EVIDENCE: dict[Cause, Callable[[dict[str, Outcome], Accounting, list[int]], list[str]]] = {
    Cause.TRANSFER: _with_stream_waits(transfer_lines),
    Cause.COMPUTE: _with_stream_waits(_compute),
    Cause.SYNC: _with_stream_waits(_sync),
    Cause.HOST: _with_stream_waits(_host),
    Cause.COMMUNICATION: _with_stream_waits(_communication),
}


# What a share of the window is lost to, per cause ("18.0% lost to ...").
LOST_TO: dict[Cause, str] = {
    Cause.TRANSFER: "copies the GPU waits on",
    Cause.COMMUNICATION: "communication no compute overlaps (collectives alone, or idle waiting on them)",
    Cause.SYNC: "the host's synchronize calls",
    Cause.HOST: "the host (kernel launches and other host work)",
}
CAUSE_HEADS: dict[Verdict, str] = {
    Verdict.TRANSFER_BOUND: "Transfer-bound: on {where}, copies cover {share} of the time while no kernel runs",
    Verdict.SYNC_BOUND: "Sync-bound: {where} {sits} idle {share} of the time while the host waits in synchronize "
                        "calls",
    Verdict.HOST_BOUND: "Host-bound: {where} {sits} idle {share} of the time while the host launches kernels or "
                        "does other work",
    Verdict.COMMUNICATION_BOUND: "Communication-bound: {where} {spends} {share} of {its} time in collectives no "
                                 "compute overlaps, or idle waiting on them",
}
MIX_WORDS = {
    "memory": "memory-bound", "compute": "compute-bound", "far": "far from both roofs", "unknown": "of unknown kind",
}


def _pct(x: float) -> str:
    return pct(x)


def kernel_clause(mix: KernelMix, metrics: dict[str, Outcome], scope: str = "kernel time") -> str:
    """What the kernels are limited by, and the dominant kernel, as a clause of the verdict
    (diagnosis/kernel_mix.py). Every share is of `scope`: the kernel time the key numbers show
    (all the devices' kernels, communication included), or the named devices' when the verdict
    names only some of them."""
    limit = mix.limit
    if limit == "memory" and mix.no_matrix and mix.by_roofline_ns == 0:
        text = (f"{LIMIT_WORDS['memory']} (likely: no GEMM, convolution or attention ran, and loops over "
                "arrays such as these stream memory)")
    elif limit == "memory":
        text = (f"{LIMIT_WORDS['memory']} ({_pct(mix.pct('memory'))} of {scope} in elementwise, copy, "
                "reduction and other bytes-only kernels, GEMV or decode attention)")
    elif limit == "compute" and mix.basis == "roofline":
        text = (f"{LIMIT_WORDS['compute']} ({_pct(mix.pct('compute'))} of {scope} in matrix math at 60% or "
                "more of its compute roof)")
    elif limit == "compute":
        text = (f"matrix-math kernels ({_pct(mix.pct('compute'))} of {scope} in GEMMs, convolutions or "
                "attention: compute-bound when large, but no operand shapes place them on the roofline)")
    elif limit == "far" and 2 * mix.far_large_ns >= mix.ns["far"]:
        text = (f"{LIMIT_WORDS['far']} ({_pct(mix.pct('far'))} of {scope} below 60% of the roof it sits "
                "under, most of it matrix math large on every side: the kernel the library picked or the "
                "clocks, not launch or occupancy)")
    elif limit == "far":
        text = (f"{LIMIT_WORDS['far']} ({_pct(mix.pct('far'))} of {scope} below 60% of the roof it sits "
                "under: launch, latency or occupancy limit it)")
    elif limit == "unknown":
        text = f"{LIMIT_WORDS['unknown']} ({_pct(mix.pct('unknown'))} of {scope} in kernels of no known family)"
    else:
        words = MIX_WORDS | ({} if mix.basis == "roofline" else {"compute": "matrix math"})
        parts = [f"{_pct(mix.pct(c))} {words[c]}" for c in ("memory", "compute", "far", "unknown")
                 if mix.pct(c) >= 1.0]
        text = f"{LIMIT_WORDS['mixed']}: " + ", ".join(parts)
    if mix.comm_pct >= 1.0 and limit != "mixed":
        text = text[:-1] + f"; {_pct(mix.comm_pct)} in communication kernels)"
    elif mix.comm_pct >= 1.0:
        text += f", {_pct(mix.comm_pct)} communication"
    if mix.dominant is not None:
        family, ns, names = mix.dominant
        share = 100.0 * ns / mix.total_ns
        if mix.dominant_name is not None:
            who = labels_for(metrics)(mix.dominant_name)
        else:
            who = f"{family} ({names:,} instantiations)"
        text += f"; the largest, {who}, takes {_pct(share)} of {scope}"
    return text


def summary(verdict: Verdict, cause: Cause | None, acct: Accounting, devices: list[int], extra: SummaryParts,
            metrics: dict[str, Outcome] | None = None) -> str:
    """One or two sentences a reviewer reads first. Every share is of the same windows (the
    devices' first to last activity) the key numbers and the findings use."""
    where = devices_text(devices)
    if verdict == Verdict.NO_GPU_WORK:
        return str(extra["text"])
    if verdict == Verdict.NOT_STEADY_STATE and extra.get("failed"):
        before = extra.get("before")
        return (f"Not steady state: {extra['failed']}. {extra.get('fix') or 'Fix the failure, then capture again.'}"
                + (f" Until it failed: {before}" if before else ""))
    if verdict == Verdict.NOT_STEADY_STATE:
        ds = acct.devices
        n = len(ds)
        ns, window = sum(d.before_steady_ns() for d in ds), acct.window()
        share = _pct(100.0 * ns / window) if window else "n/a"
        spent = (f"{dur(ns)} of {dur(window)}" if n == 1 else
                 f"{dur(ns // n)} of {dur(window // n)} per device on average")
        gpus = devices_text([d.device_id for d in ds])
        text = (f"Not steady state: {gpus} {'sits' if n == 1 else 'sit'} idle {share} of the time before the "
                f"steady part begins ({spent}), during start-up: {extra['parts']}.")
        if extra.get("one_shot"):
            return (text + f" The program, {extra['one_shot']} runs its work once: start-up is part of every run, "
                    "and there is no steady loop to capture. Repeat the work inside one run to see past it.")
        return text + " The figures describe start-up, not the steady loop. Capture again after warm-up."
    if verdict == Verdict.INSUFFICIENT_DATA:
        if extra.get("too_little"):
            return f"Too little to judge: {_too_little(acct, extra)}. Capture a longer steady-state window."
        return f"Cannot judge the bottleneck: {extra['what']}."
    assert cause is not None
    chosen = acct.chosen(devices)
    n = len(chosen)
    window = sum(d.window_ns for d in chosen)
    busy = sum(d.cause_ns(BUSY) for d in chosen)
    ns = busy if cause == Cause.COMPUTE else sum(d.cause_ns(cause) for d in chosen)

    def amount(x: int) -> str:
        return f"{dur(x)} of {dur(window)}" if n == 1 else f"{dur(x // n)} of {dur(window // n)} per device on average"

    share = _pct(100.0 * ns / window) if window else "n/a"
    busy_text = _pct(100.0 * busy / window) if window else "n/a"
    its, is_ = ("its", "is") if n == 1 else ("their", "are")
    second = extra.get("second")
    kernels = extra.get("kernels")
    waits = stream_wait_sentence(metrics or {}, acct, devices)
    if verdict == Verdict.GPU_BOUND:
        text = f"GPU-bound: {where} {is_} busy {share} of {its} window{'s' if n > 1 else ''} ({amount(ns)})"
        if kernels:
            text += f", with {kernels}"
        text += "."
        if second and second.impact_pct >= 1.0:
            text += f" Next: {_pct(second.impact_pct)} of the time is lost to {LOST_TO[second.kind]}."
        return text + (f" {waits}" if waits else "")
    if verdict == Verdict.MIXED:
        other = second.kind if second else None

        def clause(kind: Cause | None) -> str:
            if kind == Cause.COMPUTE:
                return (f"{where} {is_} busy {busy_text} of {its} time{_with_collectives(acct, devices, cause, other)}"
                        + (f", with {kernels}" if kernels else ""))
            if kind is None:
                return "nothing else holds time"
            x = sum(d.cause_ns(kind) for d in chosen)
            return f"{_pct(100.0 * x / window) if window else 'n/a'} of the time is lost to {LOST_TO[kind]}"

        text = (f"Mixed: {clause(cause)}; {clause(other)}. Neither is clearly ahead: a few percent either way "
                "would change which leads.")
        source = (host_source_sentence(metrics or {}, devices)
                  if {Cause.HOST, Cause.SYNC} & {cause, other} else None)
        return text + (f" {source}" if source else "") + (f" {waits}" if waits else "")
    head = CAUSE_HEADS[verdict].format(where=where, share=share, its=its, sits="sits" if n == 1 else "sit",
                                       spends="spends" if n == 1 else "spend")
    text = f"{head} ({amount(ns)})."
    host_side = verdict in (Verdict.HOST_BOUND, Verdict.SYNC_BOUND)
    source = host_source_sentence(metrics or {}, devices) if host_side else None
    shares = also_sentence(metrics or {}, acct, devices) if verdict == Verdict.HOST_BOUND else None
    held = None if host_side else readback_hold(metrics or {}, queued_wait_ns(metrics or {}, acct, devices),
                                                 sum(d.window_ns for d in chosen))
    if source:
        text += f" {source}"
    if held:
        text += f" {held[:1].upper()}{held[1:]}."
    if shares:
        text += f" {shares}"
    elif second and second.kind != Cause.COMPUTE and second.impact_pct >= 1.0:
        text += f" Next: {_pct(second.impact_pct)} of the time is lost to {LOST_TO[second.kind]}."
    if waits:
        text += f" {waits}"
    text += f" {where} {is_} busy {busy_text} of {its} time{_with_collectives(acct, devices, cause)}."
    return text


def stream_wait_sentence(metrics: dict[str, Outcome], acct: Accounting, devices: list[int]) -> str | None:
    """A sentence when at least ALSO_SHARE of the devices' windows is idle time after work
    launched behind a stream wait on an event (idle_causes stream_wait_ns): the host's
    synchronize or copy calls waited there on a dependency on the device side, which the
    verdict does not count as host time."""
    ic = typed_result(metrics, IdleCauses)
    ns = sum(d.stream_wait_ns for d in ic.of(devices)) if ic is not None else 0
    window = sum(d.window_ns for d in acct.chosen(devices))
    if not window or ns < ALSO_SHARE * window:
        return None
    return (f"For {_pct(100.0 * ns / window)} of the time the GPU waited on work queued behind a stream wait on an "
            "event (a dependency on the device side): the host's synchronize or copy calls then waited on that "
            "dependency, not the other way round.")


def _with_collectives(acct: Accounting, devices: list[int], *named: Cause | None) -> str:
    """', collectives included (15.0% with nothing beside them)' when the verdict names
    communication and collectives run alone for at least 1% of the devices' windows: the busy
    figure counts them, and the communication share counts them too."""
    if Cause.COMMUNICATION not in named:
        return ""
    chosen = acct.chosen(devices)
    window = sum(d.window_ns for d in chosen)
    alone = sum(d.buckets[Bucket.EXPOSED_COMMUNICATION] for d in chosen)
    if not window or 100.0 * alone < window:
        return ""
    return f", collectives included ({_pct(100.0 * alone / window)} with nothing beside them)"


def queued_wait_ns(metrics: dict[str, Outcome], acct: Accounting, devices: list[int]) -> int:
    """Idle time with the next work queued on `devices`: device_wait, and what waited on a
    collective (idle_causes dependency_ns and behind_collective_ns)."""
    ic = typed_result(metrics, IdleCauses)
    comm = sum(d.dependency_ns + d.behind_collective_ns for d in ic.of(devices)) if ic is not None else 0
    return comm + sum(d.buckets[Bucket.DEVICE_WAIT] for d in acct.chosen(devices))


def host_source_sentence(metrics: dict[str, Outcome], devices: list[int]) -> str | None:
    """What the launching thread was doing in the host-caused idle time (host_work_lines, below),
    with the read-back's particulars when a read-back drained the queue first."""
    hs = host_sources(typed_result(metrics, IdleCauses), devices)
    text = host_clause(hs)
    if text is None:
        return None
    top = hs.sources[0].name if hs is not None and hs.sources else ""
    if top.startswith("after "):
        hp = typed_result(metrics, HostPatterns)
        rb = hp.scalar_readbacks if hp is not None else None
        what = top[len("after "):]
        g = next((g for g in rb.groups if what in (g.region, g.op)), None) if rb is not None else None
        if g is not None and rb is not None:
            text += f": {readback_text(g, rb.per_step)}"
    return text[0].upper() + text[1:] + "."


def also_sentence(metrics: dict[str, Outcome], acct: Accounting, devices: list[int]) -> str | None:
    """The other idle causes with a share worth naming next to a host-bound verdict: copies
    and communication (an MPI code waits on both)."""
    window = sum(d.window_ns for d in acct.chosen(devices))
    if not window:
        return None
    parts = []
    for other, words in ((Cause.COMMUNICATION, "communication (collectives, MPI calls)"), (Cause.TRANSFER, "copies"),
                         (Cause.SYNC, "synchronize calls")):
        ns = sum(d.cause_ns(other) for d in acct.chosen(devices))
        if ns >= ALSO_SHARE * window:
            parts.append(f"{words} {_pct(100.0 * ns / window)}")
    return ("Beside it: " + ", ".join(parts) + " of the time.") if parts else None


def _too_little(acct: Accounting, extra: SummaryParts) -> str:
    """The too_little_data check's finding in the report's one window: kernels and kernel time,
    the busy share of the devices' windows, and what judging needs."""
    check: SanityCheck | None = extra.get("check")
    kernels, kernel_ns = (check.kernels or 0, check.kernel_ns or 0) if check is not None else (0, 0)
    window, busy = acct.window(), acct.total(BUSY)
    seen = f"{kernels:,} kernel{'s' if kernels != 1 else ''}, {dur(kernel_ns)} of kernel time"
    if window and acct.devices:
        if len(acct.devices) == 1:
            d = acct.devices[0]
            seen += f"; GPU {d.device_id} busy {_pct(100.0 * busy / window)} of its {dur(window)} window"
        else:
            seen += f"; busy {_pct(100.0 * busy / window)} of the devices' time"
    summary = str((check.summary if check is not None else "") or extra.get("what") or "")
    need = summary.split("; judging needs ", 1)[1] if "; judging needs " in summary else None
    return seen + (f"; judging needs {need}" if need else "")


LEAD_SHARE = 0.3
UNNAMED_SHARE = 0.5
TOP_SOURCES = 3
FAMILY_WORDS = {
    "data_loading": "data loading",
    "optimizer": "the optimizer step",
    "sync": "a read-back or synchronize",
    "allocation": "memory allocation",
    "communication": "communication calls",
    "file_io": "file or network I/O",
    "waiting": "waiting: poll, lock or sleep",
    "serving_host": "serving work on the host: scheduling, sampling, detokenization",
    "logging_checkpoint": "logging or checkpointing",
    "framework": "framework operators: Python and dispatch between launches",
}
KIND_WORDS = {"range": "", "os": " (OS call)", "cuda": " (CUDA call)", "python": " (Python frame)"}
NSYS_HINT = ("Nothing in the trace names the host's work for {pct} of that time: capture CPU samples "
             "(`nsys profile --sample=process-tree`), OS runtime calls (`--trace=osrt`) or NVTX ranges around "
             "the host's phases to see it.")
KINETO_HINT = ("Nothing in the trace names the host's work for {pct} of that time: profile with "
               "`torch.profiler.profile(with_stack=True)` and wrap the host's phases in "
               "`torch.profiler.record_function(...)` to see it.")


def host_sources(ic: IdleCauses | None, devices: list[int]) -> HostSources | None:
    """The host sources of `devices` summed: idle_ns, unnamed_ns, sources (by name and kind,
    largest first), families and samples (largest first); None when nothing was measured."""
    rows: list[HostSources] = [d.host_sources for d in ic.of(devices)] if ic is not None else []
    if not rows:
        return None
    idle = sum(r.idle_ns for r in rows)
    if idle <= 0:
        return None
    sources: dict[tuple[str, str], Source] = {}
    families: dict[str, int] = {}
    samples: dict[str, int] = {}
    for r in rows:
        for s in r.sources:
            old = sources.get((s.name, s.kind))
            sources[(s.name, s.kind)] = s if old is None else replace(old, ns=old.ns + s.ns)
        for f in r.families:
            families[f.family] = families.get(f.family, 0) + f.ns
        for x in r.samples:
            samples[x.symbol] = samples.get(x.symbol, 0) + x.count
    return HostSources(
        idle_ns=idle,
        unnamed_ns=sum(r.unnamed_ns for r in rows),
        sources=tuple(sorted(sources.values(), key=lambda s: (-s.ns, s.name))),
        families=tuple(FamilyTime(f, ns) for f, ns in sorted(families.items(), key=lambda kv: (-kv[1], kv[0]))),
        samples=tuple(SampleCount(x, n) for x, n in sorted(samples.items(), key=lambda kv: (-kv[1], kv[0]))),
    )


def lead_family(hs: HostSources | None) -> str | None:
    """The family that holds at least LEAD_SHARE of the host-caused idle time, or None."""
    if hs is None or not hs.families:
        return None
    top = hs.families[0]
    return top.family if top.ns >= LEAD_SHARE * hs.idle_ns else None


def source_text(s: Source, idle_ns: int) -> str:
    """One source with its share, what it is in parentheses after the share, so that a list of
    sources reads one item at a time: "`write` (OS call) 31.8% (file or network I/O)"."""
    share = pct(100.0 * s.ns / idle_ns)
    if s.name.startswith("after "):
        return f"after a blocking `{s.name[len('after '):]}` drained the GPU {share}"
    notes = [FAMILY_WORDS[s.family]] if s.family is not None and s.family in FAMILY_WORDS else []
    if s.inner:
        notes.append(f"inside it mostly `{s.inner}`")
    words = f" ({'; '.join(notes)})" if notes else ""
    return f"`{s.name}`{KIND_WORDS.get(s.kind, '')} {share}{words}"


def host_clause(hs: HostSources | None) -> str | None:
    """'the launching thread was in `X` for 82.4% of that time (data loading)', naming the
    source that holds the most, or the CPU samples when no range does; None when nothing
    names at least LEAD_SHARE of it."""
    if hs is None:
        return None
    idle = hs.idle_ns
    top = hs.sources[0] if hs.sources else None
    if top is not None and top.ns >= LEAD_SHARE * idle and top.name.startswith("after "):
        return (f"for {100.0 * top.ns / idle:.1f}% of that time the GPU had drained while the launching thread "
                f"was blocked in `{top.name[len('after '):]}`, and the host had not queued more work yet")
    if top is not None and top.ns >= LEAD_SHARE * idle:
        words = f" ({FAMILY_WORDS[top.family]})" if top.family is not None and top.family in FAMILY_WORDS else ""
        return (f"the launching thread was in `{top.name}`{KIND_WORDS.get(top.kind, '')} for "
                f"{100.0 * top.ns / idle:.1f}% of that time{words}")
    family = lead_family(hs)
    if family is not None:
        ns = hs.families[0].ns  # lead_family names the first family
        return f"the launching thread was in {FAMILY_WORDS[family]} for {100.0 * ns / idle:.1f}% of that time"
    if hs.samples and hs.unnamed_ns >= UNNAMED_SHARE * idle:
        total = sum(x.count for x in hs.samples)
        first = hs.samples[0]
        return (f"no range names the host's work then; CPU samples on the launching thread put "
                f"{100.0 * first.count / total:.0f}% of it in `{first.symbol}`")
    return None


def host_work_lines(hs: HostSources | None, kineto: bool) -> list[str]:
    """Evidence lines: the top sources with their shares, the CPU samples, the capture hint."""
    if hs is None:
        return []
    idle = hs.idle_ns
    lines = []
    shown = [s for s in hs.sources[:TOP_SOURCES] if 100.0 * s.ns / idle >= 0.05]  # never "0.0%"
    if shown:
        tops = "; ".join(source_text(s, idle) for s in shown)
        unnamed = 100.0 * hs.unnamed_ns / idle
        lines.append(f"what the launching thread was in during the {dur(idle)} of host-caused idle time: {tops}"
                     + (f"; nothing recorded for {pct(unnamed)}" if unnamed >= 0.05 else ""))
    if hs.samples:
        total = sum(x.count for x in hs.samples)
        tops = ", ".join(f"`{x.symbol}` {100.0 * x.count / total:.0f}%" for x in hs.samples[:TOP_SOURCES])
        lines.append(f"CPU samples on the launching thread in the time no range names ({total:,} samples): {tops}")
    if hs.unnamed_ns >= UNNAMED_SHARE * idle and not hs.samples:
        unnamed_pct = pct(100.0 * hs.unnamed_ns / idle)
        lines.append((KINETO_HINT if kineto else NSYS_HINT).format(pct=unnamed_pct))
    return lines
