"""gemm_precision: the math mode of the GEMM and convolution kernels (operand type apart from
the accumulator, tensor cores or not), read from their names (kernels/math_mode.py), with the
GPU time of each mode per device, and the GPU architecture precision advice is keyed by.

The kernels are those the categories table puts in "gemm" or "conv" (cuDNN `scudnn`, implicit
GEMM `fprop`/`dgrad`/`wgrad`, `implicit_convolve_sgemm`). A float32 GEMM or convolution that does
not run on tensor cores (`sgemm`, `scudnn`, `..._f32f32_..._ffma`, `simt`) runs at the FP32
CUDA-core peak, a small fraction of what TF32 or BF16 tensor cores give (H100: 67 vs 494.5 and
989.5 TFLOPS); NLE323 reports their time. An FP32 accumulator is not an FP32 GEMM: BF16, FP16,
FP8 and block-scaled FP4/FP8 (MX, NVFP4) kernels accumulate in FP32 on tensor cores.

`arch` (compute/arch.py resolve): the GPU family from the GPU's name in the peak table, else
its compute capability, else the oldest architecture its kernel names run on (a lower bound).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis.context import NO_KERNELS, Context
from nsys_llm_explainer.analysis.groups import group_codes, group_sum
from nsys_llm_explainer.analysis.join import kernel_categories
from nsys_llm_explainer.compute import peaks
from nsys_llm_explainer.compute.arch import GpuArch, resolve
from nsys_llm_explainer.errors import UsageError
from nsys_llm_explainer.kernels.categories import load_table
from nsys_llm_explainer.kernels.math_mode import math_mode
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome, Table
from nsys_llm_explainer.results.kernels import Arch, GemmDevice, GemmKernel, GemmMode, GemmPrecision

COLUMNS = ("name", "device_id", "family", "math_dtype", "accumulator", "scaling", "tensor_cores", "dtype_token",
           "calls", "kernel_ns", "pct_of_gemm_time")
FAMILIES = ("gemm", "conv")
LISTED = 20


def is_fp32_cuda_core(dtype: Any, tensor_cores: Any) -> bool:
    """fp32 operands multiplied without tensor cores (TF32 would be reported as tf32)."""
    return dtype == "fp32" and tensor_cores is not True


def architecture(ctx: Context, devices: set[int], names: list[str]) -> GpuArch:
    """The architecture of the devices that ran the GEMMs and convolutions (compute/arch.py)."""
    gpus = [g for g in ctx.data.gpus() if g.device_id in devices] or list(ctx.data.gpus())

    def family(name: str) -> str | None:
        spec = peaks.lookup(name)
        return spec.arch or None if spec is not None else None

    return resolve(gpus, names, family)


def run(ctx: Context) -> Outcome:
    k = ctx.data.kernels()
    if len(k) == 0:
        return METRIC.skipped(NO_KERNELS)
    try:
        kc = kernel_categories(ctx.data, load_table(ctx.options.kernel_categories))
    except UsageError as exc:
        return METRIC.skipped(exc.message)
    codes = [kc.categories.index(f) for f in FAMILIES if f in kc.categories]
    if not codes:
        return METRIC.skipped("the kernel category table has no gemm or conv category")
    rows = np.flatnonzero(np.isin(kc.code, codes))
    if not len(rows):
        return METRIC.skipped("no kernel is a GEMM or a convolution (categories)")
    g, (g_code, g_dev) = group_codes(kc.name_code[rows], k.device[rows])
    n = int(g.max()) + 1
    names = [kc.names[int(c)] for c in g_code]
    modes = [math_mode(nm) for nm in names]
    ns = group_sum(k.dur[rows], g, n)
    dev_total: dict[int, int] = {}
    for d, t in zip(g_dev.tolist(), ns.tolist(), strict=True):
        dev_total[d] = dev_total.get(d, 0) + int(t)
    frame = pd.DataFrame({
        "name": names, "device_id": g_dev,
        "family": [kc.categories[int(c)] for c in kc.code[rows][np.unique(g, return_index=True)[1]]],
        "math_dtype": [m.dtype for m in modes], "accumulator": [m.accumulator for m in modes],
        "scaling": [m.scaling for m in modes],
        "tensor_cores": [m.tensor_cores for m in modes], "dtype_token": [m.dtype_token for m in modes],
        "calls": np.bincount(g, minlength=n), "kernel_ns": ns,
        "pct_of_gemm_time": [round(100.0 * t / dev_total[d], 2) if dev_total[d] else 0.0
                             for d, t in zip(g_dev.tolist(), ns.tolist(), strict=True)],
    }).sort_values(["kernel_ns", "name"], ascending=[False, True], kind="stable").reset_index(drop=True)
    fp32 = frame[[is_fp32_cuda_core(d, t) for d, t in zip(frame["math_dtype"], frame["tensor_cores"], strict=True)]]
    by_device = []
    for dev in sorted(dev_total):
        f = int(fp32.loc[fp32["device_id"] == dev, "kernel_ns"].sum())
        by_device.append(GemmDevice(dev, dev_total[dev], f,
                                    round(100.0 * f / dev_total[dev], 2) if dev_total[dev] else 0.0))
    mode_rows: list[GemmMode] = []
    tc = frame["tensor_cores"].map({True: "yes", False: "no"}).fillna("unknown")
    key = frame["math_dtype"].fillna("unknown") + "|" + tc
    gemm_ns = int(frame["kernel_ns"].sum())
    for mode, part in frame.groupby(key, sort=False):
        dtype, tc = str(mode).split("|")
        t = int(part["kernel_ns"].sum())
        mode_rows.append(GemmMode(math_dtype=dtype, tensor_cores=tc, kernels=int(len(part)),
                                  calls=int(part["calls"].sum()), kernel_ns=t,
                                  pct_of_gemm_time=round(100.0 * t / gemm_ns, 2) if gemm_ns else 0.0))
    arch = architecture(ctx, set(dev_total), names)
    result = GemmPrecision(
        gemm_ns=gemm_ns,
        kernel_names=int(len(frame)),
        modes=tuple(sorted(mode_rows, key=lambda r: -r.kernel_ns)),
        by_device=tuple(by_device),
        fp32_kernels=tuple(GemmKernel(**r) for r in fp32.head(LISTED).to_dict("records")),
        arch=Arch(arch.vendor, arch.family, arch.exact, arch.why),
    )
    return MetricResult(METRIC.id, result.to_json(), (Table("gemm_precision", COLUMNS, frame),), typed=result)


METRIC = Metric(
    id="gemm_precision",
    order=290,
    title="GEMM and convolution math modes",
    run=run,
    tables={"gemm_precision": COLUMNS},
    description=(
        "GEMM and convolution kernel time per math mode read from kernel names: operand type apart "
        "from the accumulator, tensor cores or not; float32 ones on CUDA cores per device; the GPU "
        "architecture."
    ),
    reads=("kernel_categories:",),
)
