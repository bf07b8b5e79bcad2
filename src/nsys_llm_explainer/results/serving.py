"""The serving metric's result (metrics/serving.py): iterations, phases and the latency model.
report.json `metrics.serving` is Serving.to_json(); schema/metrics/serving.json documents it."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import asdict, field
from typing import ClassVar, Protocol, TypedDict

import numpy as np

from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.model import JsonObject, JsonValue

CATEGORY_GROUPS = ("gemm", "attention", "moe", "communication", "norm_elementwise", "sampling", "other")

# A phase's MFU / MBU / HFU where known: "from" says where the figures came from, "missing"
# why they are not known (None when they are).
Utilization = TypedDict("Utilization", {
    "mfu_pct": float | None, "mbu_pct": float | None, "hfu_pct": float | None,
    "from": str | None, "missing": str | None,
})


@frozen
class TensorParallel:
    """The run's collectives: world size and rank as the trace states them, the processes
    this capture holds, and the communication kernel time of the iterations."""

    world_size: int | None
    rank: JsonValue
    processes_captured: int
    communication_ns: int


class FitPoint(Protocol):
    """What a latency fit reads of an iteration (IterationRow, or a run's iteration in fleet)."""

    @property
    def sequences(self) -> int | None: ...
    @property
    def tokens(self) -> int | None: ...
    @property
    def kv_tokens(self) -> int | None: ...
    @property
    def gpu_span_ns(self) -> int: ...


@frozen
class HostGap:
    """What the launching thread did between the previous iteration's GPU end and this
    iteration's first kernel: in synchronizing calls, in other CUDA calls, in none."""

    sync_ns: int
    cuda_ns: int
    other_ns: int


@frozen
class IterationRow:
    iteration: int
    pid: int
    device: int  # the device most of its kernel time ran on
    name: str
    outer: str | None
    phase: str | None
    sequences: int | None
    tokens: int | None
    kv_tokens: int | None
    prefill_sequences: int | None
    prefill_tokens: int | None
    decode_sequences: int | None
    decode_tokens: int | None
    numbers_from: str | None
    host_start_ns: int
    host_end_ns: int
    gpu_start_ns: int
    gpu_end_ns: int
    gpu_busy_ns: int
    kernel_ns: int
    kernels: int
    launches: int
    gap_before_ns: int | None
    gap_host: HostGap | None
    period_ns: int | None  # to the next iteration's first kernel (same process), None for the last
    graph_replays: int
    layers: int | None
    categories: dict[str, int]  # kernel ns per CATEGORY_GROUPS entry (non-zero only)
    softmax_kernels: int = 0  # softmax kernels outside the attention class (attention not fused)
    softmax_ns: int = 0

    @property
    def gpu_span_ns(self) -> int:
        return self.gpu_end_ns - self.gpu_start_ns

    @property
    def host_ns(self) -> int:
        return self.host_end_ns - self.host_start_ns


@frozen
class PhaseRow:
    phase: str
    iterations: int
    sequences_p50: int | None
    tokens: int | None  # new tokens over the phase's iterations (None: not known for all)
    kv_tokens_p50: int | None
    gpu_span_p50_ns: int
    gpu_span_p90_ns: int
    gpu_busy_p50_ns: int
    gpu_busy_p90_ns: int
    kernels_per_iteration: float
    launches_per_iteration: float
    period_p50_ns: int | None  # decode: the inter-token latency each sequence sees
    period_p90_ns: int | None
    ns_per_token: float | None  # GPU span per new token (prefill: over all its tokens)
    tokens_per_s: float | None
    categories: dict[str, int]  # kernel ns per CATEGORY_GROUPS entry
    gap_ns: int  # host gaps before the phase's iterations (the first iteration has none)
    idle_in_span_ns: int  # GPU idle inside the iterations' spans
    host_share_pct: float | None  # (gaps + idle in spans) / (gaps + spans)
    graph_iterations: int  # iterations that replayed a CUDA graph
    graph_kernel_pct: float  # of the phase's kernels, those a graph replay ran
    utilization: Utilization | None = None  # MFU (prefill) / MBU (decode), where known


@frozen
class LatencyFit:
    phase: str
    target: str  # what is fitted: "gpu_span_ns"
    terms: dict[str, float] | None  # name -> coefficient (ns, ns per token, ...)
    iterations: int
    configurations: int
    rmse_ns: float | None
    max_error_pct: float | None
    reason: str | None = None  # why no fit was made

    @classmethod
    def of(cls, phase: str, rows: Sequence[FitPoint]) -> LatencyFit:
        """The phase's GPU span fitted by least squares: prefill against its new tokens, decode
        against its sequences and KV tokens (docs/metrics/serving.md), or why no fit was made."""
        xs: list[tuple[int | None, ...]]
        if phase == "prefill":
            names = ["intercept_ns", "ns_per_token"]
            xs = [(r.tokens,) for r in rows]
        elif phase == "decode":
            with_kv = all(r.kv_tokens is not None for r in rows)
            names = ["intercept_ns", "ns_per_sequence"] + (["ns_per_kv_token"] if with_kv else [])
            xs = [(r.sequences, r.kv_tokens) if with_kv else (r.sequences,) for r in rows]
        else:
            return cls(phase, "gpu_span_ns", None, len(rows), 0, None, None,
                       "mixed batches are not fitted: each holds two kinds of work")
        known = [(x, r.gpu_span_ns) for x, r in zip(xs, rows, strict=True) if all(v is not None for v in x)]
        configs = len({x for x, _ in known})
        if not known:
            what = "new tokens" if phase == "prefill" else "sequences"
            return cls(phase, "gpu_span_ns", None, len(rows), 0, None, None,
                       f"no iteration states its {what}: there is nothing to fit the GPU span against")
        if len(known) < len(names) + 1 or configs < len(names):
            what = "tokens" if phase == "prefill" else "sequences and KV tokens"
            return cls(phase, "gpu_span_ns", None, len(rows), configs, None, None,
                       f"{configs} distinct configuration{'s' * (configs != 1)} of {what} among {len(known)} "
                       f"iteration{'s' * (len(known) != 1)} with known numbers: a fit of {len(names)} terms "
                       "needs more")
        a = np.array([[1.0, *(float(v or 0) for v in x)] for x, _ in known])
        y = np.array([float(v) for _, v in known])
        if np.linalg.matrix_rank(a) < len(names):
            what = "tokens" if phase == "prefill" else "sequences and KV tokens"
            return cls(phase, "gpu_span_ns", None, len(rows), configs, None, None,
                       f"the {what} of its {configs} configurations do not vary independently: a fit of "
                       f"{len(names)} terms cannot tell them apart")
        coef, *_ = np.linalg.lstsq(a, y, rcond=None)
        pred = a @ coef
        err = pred - y
        rel = np.abs(err) / np.maximum(y, 1.0)
        return cls(phase, "gpu_span_ns", {n: round(float(c), 3) for n, c in zip(names, coef, strict=True)},
                   len(rows), configs, round(float(np.sqrt(np.mean(err ** 2))), 1), round(100.0 * float(rel.max()), 2))


@frozen
class Serving:
    METRIC_ID: ClassVar[str] = "serving"

    source: str
    engine: str | None
    detail: str
    span_from: str  # what a GPU span is measured from
    iterations: tuple[IterationRow, ...]
    phases: tuple[PhaseRow, ...]
    fits: tuple[LatencyFit, ...]
    empty_marks: int
    loops: tuple[str, ...]
    merged: tuple[str, ...]
    profiler_overhead: tuple[str, ...] = ()
    tensor_parallel: TensorParallel | None = None
    carried_kernels: int = 0
    window_ns: int = 0  # first to last GPU work of the iterations' processes (summed per process)
    unassigned_kernels: int = 0
    notes: tuple[str, ...] = field(default=(), compare=False)

    def phase(self, name: str) -> PhaseRow | None:
        return next((p for p in self.phases if p.phase == name), None)

    def of_phase(self, name: str) -> list[IterationRow]:
        return [it for it in self.iterations if it.phase == name]

    def to_json(self) -> JsonObject:
        return {
            "source": self.source,
            "engine": self.engine,
            "detail": self.detail,
            "span_from": self.span_from,
            "iteration_count": len(self.iterations),
            "empty_marks": self.empty_marks,
            "loops": list(self.loops),
            "merged": list(self.merged),
            "carried_kernels": self.carried_kernels,
            "window_ns": self.window_ns,
            "unassigned_kernels": self.unassigned_kernels,
            "profiler_overhead": list(self.profiler_overhead),
            "tensor_parallel": None if self.tensor_parallel is None else asdict(self.tensor_parallel),
            "phases": [asdict(p) for p in self.phases],
            "fits": [asdict(f) for f in self.fits],
            "iterations": [_iteration_json(it) for it in self.iterations],
        }


_ITERATION_FIELDS = tuple(f.name for f in dataclasses.fields(IterationRow))


def _iteration_json(it: IterationRow) -> JsonObject:
    """asdict(it) and the span, built directly (asdict deep-copies every value: seconds at
    tens of thousands of iterations)."""
    values = vars(it)  # a @frozen record holds exactly its fields there, in field order
    out: JsonObject = values.copy() if len(values) == len(_ITERATION_FIELDS) else {
        name: getattr(it, name) for name in _ITERATION_FIELDS}
    gap = it.gap_host
    out["gap_host"] = None if gap is None else {"sync_ns": gap.sync_ns, "cuda_ns": gap.cuda_ns,
                                                "other_ns": gap.other_ns}
    out["categories"] = dict(it.categories)
    out["gpu_span_ns"] = it.gpu_span_ns
    return out
