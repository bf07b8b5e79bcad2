"""compute_efficiency: how close each operation and kernel comes to the GPU's roof.

Shapes come from the PyTorch profiler's record_shapes (Input Dims / Input type) or from the
NVTX range names PyTorch emits with shapes under Nsight Systems (compute/sources.py; their
dtype is assumed from the kernels' names). Each counted call (compute/count.py: composite
operators or their children, never both) gets FLOPs and compulsory bytes (docs/compute.md)
and the time of its kernels; per operation (operator, input sizes, dtype, device) and per
kernel: achieved TFLOP/s and GB/s, arithmetic intensity, the bound against the ridge point of
its dtype, and the share of the roof it reaches (compute/efficiency.py). Peaks: compute/peaks.py.
"""


from __future__ import annotations

from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.compute import efficiency as compute_report
from nsys_llm_explainer.compute.efficiency import KERNEL_COLUMNS, OPERATION_COLUMNS
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome, Skipped
from nsys_llm_explainer.results.efficiency import ComputeEfficiency


def run(ctx: Context) -> Outcome:
    out = compute_report.run(ctx, METRIC.id)
    if isinstance(out, Skipped):
        return out
    result: ComputeEfficiency = out[0]
    return MetricResult(METRIC.id, result.to_json(), out[1], out[2], typed=result)


METRIC = Metric(
    id="compute_efficiency",
    # after operators, nvtx_attribution, steps (shares their caches), workload
    order=260,
    title="How close to the hardware: FLOPs, bytes and roofline",
    run=run,
    tables={"compute_operations": OPERATION_COLUMNS, "compute_kernels": KERNEL_COLUMNS},
    description=(
        "FLOPs and bytes of each operator call from its recorded shapes (PyTorch profiler or "
        "PyTorch NVTX ranges), per operation and per kernel: achieved TFLOP/s and GB/s, "
        "arithmetic intensity, compute- or memory-bound against the GPU's ridge point, share of the roof."
    ),
    after=("workload",),  # what to capture when shapes are missing depends on it
    reads=(
        "runtime", "kernel_launch_index", "kernel_attribution", "operator_attribution",
        "compute_instances", "compute_view", "compute_peaks:", "nvtx_normalized",
    ),
)
