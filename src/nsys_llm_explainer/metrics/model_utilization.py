"""model_utilization: MFU, MBU and hardware FLOPs utilisation per step and phase.

Step time is each step's own GPU window (steps metric gpu_latency_ns: first start to last end
of the kernels the step launched, or its GPU-side annotation), not its host range, which can
begin with a synchronize that waits for the previous step's kernels; a step with no kernel
of its own falls back to its host latency.

- MFU = model FLOPs per step / (step time x peak FLOP/s x GPUs); model FLOPs per step =
  FLOPs per token (--model-flops-per-token, or from --model config.json: 2N plus attention
  over the step's context, causal attention of prefill and training counted half as HFU and
  the per-operator FLOPs count it (PaLM's convention, which does not halve, is stated beside),
  x3 for training; the LM head only for the tokens whose logits the step computed) x tokens
  per step (--tokens-per-step, or the element count of the token
  embedding's input in the step).
- MBU (decode steps) = bytes a step must read (weights + KV cache, from --model config.json
  with the step's batch and key length) / (step time x peak bandwidth x GPUs).
- HFU = FLOPs of the operator calls measured in the step (compute_efficiency's counting) /
  (step time x peak x GPUs): a lower bound where operators lack shapes.

Peak: the dtype most GEMM FLOPs ran in, on the step's GPU (compute/peaks.py); GPUs: the
devices the step's process ran kernels on. Every row lists the inputs it used and says which
were assumed; a figure that cannot be computed is null with the missing input named.
Figures no GPU can reach (above 100%) and an HFU below the model's own FLOPs are warnings
that name the inputs to check (compute/model_report.py).
"""

from __future__ import annotations

from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.compute import model_report
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome, Skipped
from nsys_llm_explainer.results.efficiency import ModelUtilization

STEP_COLUMNS = (
    "step", "phase", "pid", "latency_ns", "window_ns", "kind", "tokens", "batch", "context", "gpus",
    "flops_per_token", "model_flops", "mfu_pct", "bytes_per_step", "mbu_pct", "measured_flops",
    "hfu_pct", "peak_tflops", "bandwidth_gbps", "kind_from", "tokens_from", "flops_from", "head_from",
    "bytes_from",
)


def run(ctx: Context) -> Outcome:
    out = model_report.run(ctx, METRIC.id, STEP_COLUMNS)
    if isinstance(out, Skipped):
        return out
    result: ModelUtilization = out[0]
    return MetricResult(METRIC.id, result.to_json(), out[1], out[2], typed=result)


METRIC = Metric(
    id="model_utilization",
    # after steps, workload and compute_efficiency
    order=270,
    title="Model FLOPs and bandwidth utilisation (MFU, MBU)",
    run=run,
    tables={"model_utilization_steps": STEP_COLUMNS},
    description=(
        "Per step and phase: MFU from model FLOPs per token x tokens per step (--model, "
        "--model-flops-per-token, --tokens-per-step or the embedding's recorded input), MBU of "
        "decode steps (weights + KV cache), hardware FLOPs utilisation from measured operator FLOPs."
    ),
    after=("steps", "workload"),
    reads=("compute_instances", "compute_view", "compute_peaks:"),
)
