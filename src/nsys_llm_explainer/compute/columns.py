"""The columns of compute_efficiency's CSV tables (kept apart so that the registry imports
the metric without its formulas: compute/report.py loads them when the metric runs)."""

from __future__ import annotations

DIMS = ("batch", "m", "n", "k")
PLACE_COLUMNS = (
    "tflops", "gbps", "flop_per_byte", "ridge_flop_per_byte", "bound", "roof_tflops", "pct_of_roof",
    "implausible", "above_bandwidth",
)
OPERATION_COLUMNS = (
    "operator", "label", "shapes", "dtype", "compute_dtype", "dtype_source", "family", "direction",
    "device_id", "calls", "flops", "bytes", "kernel_ns", "pct_of_kernel_time", "flops_per_call",
    *PLACE_COLUMNS, *DIMS, "formula", "assumptions",
)
KERNEL_COLUMNS = (
    "name", "device_id", "compute_dtype", "family", "calls", "flops", "bytes", "kernel_ns",
    *PLACE_COLUMNS, "math_dtype", "tensor_cores", "operator", "unclaimed_calls",
)
