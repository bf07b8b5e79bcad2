"""The serving rules (NLE401-NLE406) and what they share: the serving result, per-device sums of
a figure over a phase's iterations, and advice that fits the engine that ran."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from nsys_llm_explainer.model import Affected, Cause, Confidence, Finding
from nsys_llm_explainer.results.serving import IterationRow, Serving
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, dur, pct
from nsys_llm_explainer.rules.impact import affected_devices, band

ENGINE_GRAPH_ADVICE = {
    "vllm": "vLLM captures decode in CUDA graphs by default: drop `--enforce-eager`, and make "
            "`cudagraph_capture_sizes` (or `--max-cudagraph-capture-size`) cover the batch sizes you serve.",
    "sglang": "SGLang replays decode as CUDA graphs unless `--disable-cuda-graph` is set; raise "
              "`--cuda-graph-max-bs` to cover the batch sizes you serve.",
    "tensorrt_llm": "Enable CUDA graphs in TensorRT-LLM (`cuda_graph_config` in the LLM API, or "
                    "`--use_cuda_graph`), with batch sizes that cover the traffic.",
}
GENERIC_GRAPH_ADVICE = (
    "Capture the decode step in a CUDA graph: `torch.compile(mode='reduce-overhead')` with a static KV "
    "cache (Hugging Face: `cache_implementation='static'`), or `torch.cuda.graphs` around the step; one graph "
    "launch replaces every kernel launch of the step."
)
ENGINE_GAP_ADVICE = {
    "vllm": "Overlap scheduling with the GPU: vLLM's `--async-scheduling` prepares iteration N+1 while N runs.",
    "sglang": "Keep SGLang's overlap scheduler on (do not pass `--disable-overlap-schedule`): it prepares the "
              "next batch while the GPU runs the current one.",
    "tensorrt_llm": "Overlap the executor's scheduling with the GPU (TensorRT-LLM's overlap scheduler, "
                    "`disable_overlap_scheduler=False`).",
}
GENERIC_GAP_ADVICE = (
    "Move the work between iterations off the critical path: launch iteration N+1 before reading "
    "iteration N's tokens, and keep detokenization, stop checks and logging out of the decode loop "
    "(no `.item()`/`.tolist()` per step)."
)


def serving(view: RuleInput) -> Serving | None:
    return view.result(Serving)


def per_device(view: RuleInput, rows: list[IterationRow], value: Callable[[IterationRow], int],
               detail: Callable[[int, list[IterationRow]], str] | None = None) -> tuple[Affected, ...]:
    """Affected devices with the sum of `value` over their iterations."""
    by: dict[int, list[IterationRow]] = {}
    for r in rows:
        by.setdefault(r.device, []).append(r)
    ns = {dev: sum(value(r) for r in rs) for dev, rs in by.items()}
    text = {dev: detail(dev, rs) for dev, rs in by.items()} if detail else None
    return affected_devices(view.acct, ns, text)


def largest(affected: tuple[Affected, ...]) -> tuple[int, float] | None:
    """The time at stake of the most affected device: (ns, share of its window)."""
    if not affected:
        return None
    top = affected[0]
    return top.impact_ns, top.impact_pct


def engine_advice(s: Serving, table: dict[str, str], generic: str) -> str:
    return table.get(s.engine or "", generic)


GRAPHS_HOST_SHARE_PCT = 50.0  # of the decode phase's time
MIN_LAUNCHES = 20  # launches per decode iteration
GRAPH_SHARE = 0.5  # of decode iterations replaying a graph: then graphs are on


def decode_without_graphs(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Decode runs eagerly, and launching its kernels is what takes its time.

    Reads the serving metric's decode phase: fires when fewer than half of the decode
    iterations replay a CUDA graph, each launches at least 20 kernels, and the host holds at
    least half the phase (host_share_pct: gaps before iterations plus GPU idle inside their
    spans). Impact: per device, the GPU idle inside the decode iterations' spans (the GPU waits
    for the next eager launch there; one graph launch per step removes that wait), the largest
    device's; the gaps between iterations are NLE402's. The advice is the engine's own switch
    for CUDA graphs.

    Example:

        NLE401 high: Decode runs without CUDA graphs: 138 launches per token, GPU busy 6.0% of it
        - 50 decode iterations at 5.31 ms per output token, of which 316 µs is kernels
    """
    s = serving(view)
    ph = s.phase("decode") if s is not None else None
    if s is None or ph is None or ph.launches_per_iteration < MIN_LAUNCHES:
        return
    if ph.graph_iterations >= GRAPH_SHARE * ph.iterations or (ph.host_share_pct or 0.0) < GRAPHS_HOST_SHARE_PCT:
        return
    rows = s.of_phase("decode")
    affected = per_device(view, rows, lambda r: max(r.gpu_span_ns - r.gpu_busy_ns, 0),
                          lambda d, rs: f"{len(rs):,} decode iterations")
    top = largest(affected)
    if top is None or band(top[1]) is None:
        return
    per_token = ph.period_p50_ns or ph.gpu_span_p50_ns
    busy = 100.0 * ph.gpu_busy_p50_ns / per_token if per_token else 0.0
    evidence = [
        f"{ph.iterations:,} decode iterations, {ph.launches_per_iteration:,.0f} launches each, "
        f"{'none' if not ph.graph_iterations else f'{ph.graph_iterations:,}'} replayed as a CUDA graph",
        f"{dur(per_token)} per output token (p50), of which {dur(ph.gpu_busy_p50_ns)} is kernels ({pct(busy)})",
        f"GPU idle inside the decode iterations: {dur(sum(max(r.gpu_span_ns - r.gpu_busy_ns, 0) for r in rows))}",
    ]
    if s.profiler_overhead:
        evidence.append(f"captured with {' and '.join(s.profiler_overhead)}: the host time is inflated, so "
                        "confirm on a capture without them")
    yield rule.finding(
        severity=band(top[1]) or band(0.0),  # type: ignore[arg-type]
        confidence=Confidence.MEDIUM if s.profiler_overhead else Confidence.HIGH,
        evidence=evidence,
        recommendation=[engine_advice(s, ENGINE_GRAPH_ADVICE, GENERIC_GRAPH_ADVICE),
                        "Fuse the small kernels of each layer (norm, rotary, activation) to cut the launch count."],
        title=(f"Decode runs without CUDA graphs: {ph.launches_per_iteration:,.0f} launches per token, GPU busy "
               f"{pct(busy)} of it"),
        affected=affected,
        impact=top,
        cause=Cause.HOST,
    )


NLE401 = Rule(
    id="NLE401",
    name="decode-without-graphs",
    title="Decode without CUDA graphs where launches dominate",
    check=decode_without_graphs,
    metric_ids=("serving",),
)


GAP_MIN_SHARE_PCT = 10.0  # of the time per output token


def host_between_iterations(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """The host's work between decode iterations (scheduling, sampling, detokenization) is a
    share of every output token's latency.

    Reads the serving metric's decode iterations: the gap before each (previous iteration's
    GPU end to its first kernel, same process) over its period. Fires when the gaps are at
    least 10% of the decode periods. Impact: per device, the summed gaps (the GPU idles in
    them), the largest device's. Evidence: the gap per token and what the launching thread did
    in the gaps (synchronize calls, other CUDA calls, neither).

    Example:

        NLE402 medium: Host time between decode iterations: 12.0% of each output token
        - gap before each decode iteration: p50 640 µs of a 5.31 ms period
    """
    s = serving(view)
    ph = s.phase("decode") if s is not None else None
    if s is None or ph is None:
        return
    rows = [r for r in s.of_phase("decode") if r.gap_before_ns is not None and r.period_ns]
    periods = sum(r.period_ns or 0 for r in rows)
    gaps = sum(r.gap_before_ns or 0 for r in rows)
    if not rows or not periods or 100.0 * gaps / periods < GAP_MIN_SHARE_PCT:
        return
    affected = per_device(view, rows, lambda r: r.gap_before_ns or 0,
                          lambda d, rs: f"{len(rs):,} gaps before decode iterations")
    top = largest(affected)
    if top is None or band(top[1]) is None:
        return
    share = 100.0 * gaps / periods
    sync = sum(r.gap_host.sync_ns for r in rows if r.gap_host)
    cuda = sum(r.gap_host.cuda_ns for r in rows if r.gap_host)
    other = sum(r.gap_host.other_ns for r in rows if r.gap_host)
    gap_sorted = sorted(r.gap_before_ns or 0 for r in rows)
    evidence = [
        f"gap before each decode iteration: p50 {dur(gap_sorted[len(gap_sorted) // 2])} of a "
        f"{dur(ph.period_p50_ns or 0)} period; {dur(gaps)} over {len(rows):,} iterations",
        f"in the gaps the launching thread was in synchronize calls {pct(100.0 * sync / gaps)}, other CUDA calls "
        f"{pct(100.0 * cuda / gaps)}, no CUDA call {pct(100.0 * other / gaps)}",
    ]
    yield rule.finding(
        severity=band(top[1]),  # type: ignore[arg-type]
        confidence=Confidence.HIGH,
        evidence=evidence,
        recommendation=[engine_advice(s, ENGINE_GAP_ADVICE, GENERIC_GAP_ADVICE)],
        title=f"Host time between decode iterations: {pct(share)} of each output token",
        affected=affected,
        impact=top,
        cause=Cause.HOST,
    )


NLE402 = Rule(
    id="NLE402",
    name="host-between-iterations",
    title="Host time between decode iterations",
    check=host_between_iterations,
    metric_ids=("serving",),
)


FUSED_SHARE_PCT = 1.0  # attention-category kernels below this share of the prefill's kernel time


def unfused_prefill_attention(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """A prefill computes attention as separate kernels (matrix products and a softmax), not
    one fused attention kernel.

    Fires when the prefill iterations run softmax kernels outside the attention class (the
    serving metric's softmax_kernels) while attention kernels (the categories metric's
    attention class: FlashAttention, FlashInfer, SDPA's fused kernels) hold under 1% of their
    kernel time. A fused kernel never writes the score matrix to memory, so the softmax passes
    over it disappear: their time is the impact, a lower bound (the score GEMMs shrink too),
    per device, the largest device's.

    Example:

        NLE403 low: Prefill attention is not a fused kernel: 4 softmax kernels per prefill
    """
    s = serving(view)
    ph = s.phase("prefill") if s is not None else None
    if s is None or ph is None:
        return
    total = sum(ph.categories.values())
    if not total or 100.0 * ph.categories.get("attention", 0) / total >= FUSED_SHARE_PCT:
        return
    rows = s.of_phase("prefill")
    calls = sum(r.softmax_kernels for r in rows)
    if not calls:
        return
    affected = per_device(view, rows, lambda r: r.softmax_ns)
    top = largest(affected)
    if top is None or band(top[1]) is None:
        return
    per = calls / len(rows)
    yield rule.finding(
        severity=band(top[1]),  # type: ignore[arg-type]
        confidence=Confidence.MEDIUM,
        evidence=[f"{per:,.0f} softmax kernels per prefill iteration, {dur(sum(r.softmax_ns for r in rows))} in all; "
                  f"attention kernels hold {pct(100.0 * ph.categories.get('attention', 0) / total)} of the prefill's "
                  "kernel time"],
        recommendation=["Use a fused attention kernel for prefill: `torch.nn.functional.scaled_dot_product_attention` "
                        "(FlashAttention backend), FlashAttention or FlashInfer; the engine's attention backend "
                        "setting where there is one."],
        title=f"Prefill attention is not a fused kernel: {per:,.0f} softmax kernels per prefill",
        affected=affected,
        impact=top,
        cause=Cause.COMPUTE,
    )


NLE403 = Rule(
    id="NLE403",
    name="unfused-prefill-attention",
    title="Prefill attention not fused",
    check=unfused_prefill_attention,
    metric_ids=("serving",),
)


ALL_REDUCE_MIN_SHARE_PCT = 10.0  # communication's share of a phase's kernel time


def phase_all_reduce(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Tensor-parallel communication takes a large share of a serving phase.

    Reads the serving metric's phases of a run with collectives (tensor_parallel): per phase,
    communication kernels' share of its kernel time. Fires (a note) per phase at 10% or more:
    the GPU time communication costs is NLE307's (exposed communication, one finding per
    cause); this says which phase it belongs to. Decode all-reduces are small messages, where
    latency dominates; prefill all-reduces are large ones, where bandwidth does.

    Example:

        NLE404 info: All-reduce takes 35.0% of decode's kernel time (tensor parallel, 8 ranks)
    """
    s = serving(view)
    if s is None or s.tensor_parallel is None:
        return
    world = s.tensor_parallel.world_size
    for ph in s.phases:
        total = sum(ph.categories.values())
        comm = ph.categories.get("communication", 0)
        if not total or 100.0 * comm / total < ALL_REDUCE_MIN_SHARE_PCT:
            continue
        size = "small messages: latency-bound" if ph.phase == "decode" else "large messages: bandwidth-bound"
        yield rule.note(
            confidence=Confidence.HIGH,
            evidence=[f"{ph.phase}: communication {dur(comm)} of {dur(total)} kernel time over "
                      f"{ph.iterations:,} iteration{'s' * (ph.iterations != 1)} ({size}); its GPU cost is in NLE307"],
            recommendation=list(advice("communication", "llm_inference")),
            title=(f"All-reduce takes {pct(100.0 * comm / total)} of {ph.phase}'s kernel time"
                   + (f" (tensor parallel, {world} ranks)" if world else "")),
        )


NLE404 = Rule(
    id="NLE404",
    name="phase-all-reduce",
    title="Tensor-parallel communication share of a serving phase",
    check=phase_all_reduce,
    metric_ids=("serving", "communication"),
)


def one_rank_captured(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Only part of a tensor-parallel serving job was captured.

    Fires (a note) when the trace records a world size larger than the processes whose
    iterations it holds: a collective that waits on another rank shows as communication time
    here, and a straggler rank is invisible. Capture every rank in the same window and compare
    them with `nsys-llm-explain fleet`.

    Example:

        NLE405 info: 1 of 8 tensor-parallel ranks captured
    """
    s = serving(view)
    tp = s.tensor_parallel if s is not None else None
    if tp is None or tp.world_size is None:
        return
    world, got = int(tp.world_size), tp.processes_captured
    if world <= got:
        return
    rank = f" (rank {tp.rank})" if tp.rank is not None else ""
    yield rule.note(
        confidence=Confidence.HIGH,
        evidence=[f"world size {world}; iterations of {got} process{'es' * (got != 1)}{rank} in the trace"],
        recommendation=["Capture every rank in the same window and run `nsys-llm-explain fleet` on the captures "
                        "to see whether one rank holds the others back at each all-reduce."],
        title=f"{got} of {world} tensor-parallel ranks captured",
    )


NLE405 = Rule(
    id="NLE405",
    name="one-rank-captured",
    title="Part of a tensor-parallel job captured",
    check=one_rank_captured,
    metric_ids=("serving",),
)


PROFILER_HOST_SHARE_PCT = 50.0


def serving_profiler_overhead(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """A serving capture that looks host-bound was made with profiler options that inflate
    host time.

    Fires (a note) when the serving metric lists profiler overhead (Python stack tracing,
    memory profiling, shape recording) and the main phase (decode, else mixed, else prefill)
    has a host share of at least 50%: the host-side figures are an upper bound, and a capture
    without those options says how much of the host time is the engine's own.

    Example:

        NLE406 info: Host-bound serving captured with Python stack tracing (15,230 Python function events)
    """
    s = serving(view)
    if s is None or not s.profiler_overhead or not s.phases:
        return
    main = s.phase("decode") or s.phase("mixed") or s.phase("prefill")
    if main is None or (main.host_share_pct or 0.0) < PROFILER_HOST_SHARE_PCT:
        return
    yield rule.note(
        confidence=Confidence.HIGH,
        evidence=[f"{main.phase}: the host holds {pct(main.host_share_pct or 0.0)} of its time",
                  f"captured with {' and '.join(s.profiler_overhead)}"],
        recommendation=["Capture again without `with_stack`, `profile_memory` and `record_shapes` (or with "
                        "Nsight Systems and NVTX only) before acting on the host-bound figures."],
        title=f"Host-bound serving captured with {s.profiler_overhead[0]}",
    )


NLE406 = Rule(
    id="NLE406",
    name="serving-profiler-overhead",
    title="Serving capture with host-inflating profiler options",
    check=serving_profiler_overhead,
    metric_ids=("serving",),
)


RULES = (NLE401, NLE402, NLE403, NLE404, NLE405, NLE406)
