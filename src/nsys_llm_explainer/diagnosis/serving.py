"""The first sentence of a serving capture's summary, in a serving engineer's terms: the
iterations by phase, the time per output token, and what bounds the main phase.

    "51 iterations: 1 prefill (6.56 ms), then 50 decode at 5.31 ms per output token, of which
    316 µs is kernels: decode is host-bound, 138 launches per token and no CUDA graph"

The main phase is decode when there is one, else mixed, else prefill. A phase is host-bound
when the host holds HOST_BOUND_PCT of its time or more (its share: gaps before its iterations
plus GPU idle inside their spans, metrics/serving.py), else GPU-bound; a prefill-only capture
whose GPU is busy less than half its span is launch-bound. Profiler options that inflate host
time (Python stack tracing, memory profiling) are named before a host-bound judgement.
"""

from __future__ import annotations

from nsys_llm_explainer.fmt import dur, pct
from nsys_llm_explainer.results.serving import PhaseRow, Serving

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
