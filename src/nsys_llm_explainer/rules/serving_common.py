"""What the serving rules (NLE401-NLE406) share: the serving result, per-device sums of a
figure over a phase's iterations, and advice that fits the engine that ran."""

from __future__ import annotations

from collections.abc import Callable

from nsys_llm_explainer.model import Affected
from nsys_llm_explainer.results.serving import IterationRow, Serving
from nsys_llm_explainer.rules.base import RuleInput
from nsys_llm_explainer.rules.impact import affected_devices

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
