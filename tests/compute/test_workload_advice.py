"""What compute_efficiency and model_utilization ask for follows the workload: a CUDA program
outside PyTorch is not told about Hugging Face configs, tokens or PyTorch capture options."""

from __future__ import annotations

import pytest

from nsys_llm_explainer.compute.sources import hfu_missing, model_inputs, shapes_missing
from nsys_llm_explainer.model import TraceFormat
from tests.conftest import SHARED_TRACES, analyze, ok, skipped
from tests.fixtures.builder import TraceBuilder

PYTORCH_WORDS = ("Hugging Face", "config.json", "PyTorch profiler", "record_shapes", "autograd", "--pytorch", "torch")
STENCIL = ("void stencil_kernel(double*, int)", "void flux_kernel(double*, int)", "void reduce_dt(double*)")


def hpc_trace() -> TraceBuilder:
    """A plain CUDA code: 12 iterations of three double-precision kernels, no NVTX."""
    b = TraceBuilder("2024.6")
    b.process(100)
    b.gpu(0, name="NVIDIA A100-SXM4-80GB")
    t, corr = 1_000, 0
    for _ in range(12):
        for name in STENCIL:
            corr += 1
            b.runtime(t, t + 2_000, corr=corr)
            b.kernel(t + 3_000, t + 40_000, corr=corr, name=name)
            t += 45_000
        t += 100_000
    return b


def test_plain_cuda_gets_no_pytorch_or_llm_advice(build) -> None:
    report = analyze(build(hpc_trace()))
    assert ok(report, "workload")["kind"] == "generic_cuda"
    ce = skipped(report, "compute_efficiency")
    assert ce.startswith("FLOPs and bytes per operation need operator shapes: no NVTX range names an operator")
    assert "a CUDA program outside PyTorch records no operator shapes in its trace" in ce
    assert "Nsight Compute measures each kernel's FLOPs and bytes (ncu_plan.sh" in ce
    mu = skipped(report, "model_utilization")
    assert mu.startswith("no model FLOPs and no operator FLOPs: pass the FLOPs one step must compute "
                         "as --model-flops-per-token F with --tokens-per-step 1")
    for text in (ce, mu):
        assert not any(w in text.replace("outside PyTorch", "") for w in PYTORCH_WORDS), text
    # with the work per step given, MFU runs and HFU's reason stays generic too
    with_model = analyze(build(hpc_trace()), model_flops_per_token=1e9, tokens_per_step=1)
    missing = ok(with_model, "model_utilization")["missing"]
    assert missing == ["HFU: a CUDA program outside PyTorch records no operator shapes in its trace"]


@pytest.mark.parametrize(
    "workload, fmt, capture, model",
    [
        ("llm_inference", TraceFormat.NSYS, "nsys profile --pytorch=autograd-shapes-nvtx",
         "a Hugging Face config.json"),
        ("pytorch_training", TraceFormat.NSYS, "emit_nvtx(record_shapes=True)", "FLOPs per token or sample"),
        ("generic_cuda", TraceFormat.KINETO, "torch.profiler.profile(record_shapes=True)", "FLOPs per token or sample"),
        ("tensorrt_inference", TraceFormat.NSYS, "a TensorRT engine's trace carries no operator shapes",
         "--model-flops-per-token F with --tokens-per-step 1"),
    ],
)
def test_advice_per_workload_and_format(workload, fmt, capture, model) -> None:
    assert capture in shapes_missing("no shapes", workload, fmt)
    assert model in model_inputs(workload, fmt)
    framework = workload.startswith(("llm", "pytorch")) or fmt is TraceFormat.KINETO
    assert ("record_shapes=True" in hfu_missing(workload, fmt)) == framework


def test_cloverleaf_reasons_name_no_pytorch_option() -> None:
    trace = SHARED_TRACES / "nsys" / "pipit_cloverleaf.sqlite"
    if not trace.is_file():
        pytest.skip(f"shared real trace not found at {trace}")
    report = analyze(trace)
    assert ok(report, "workload")["kind"] == "generic_cuda"
    for metric in ("compute_efficiency", "model_utilization"):
        reason = skipped(report, metric)
        assert "Hugging Face" not in reason and "--pytorch" not in reason and "record_shapes" not in reason
        assert "Nsight Compute" in reason
