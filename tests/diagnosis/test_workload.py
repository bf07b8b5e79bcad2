"""Workload detection (metrics/workload.py): what ran decides which advice fits."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from nsys_llm_explainer.api import explain
from nsys_llm_explainer.metrics.workload import decide
from tests.fixtures import planted
from tests.fixtures.builder import TraceBuilder

US = planted.US
Build = Callable[[TraceBuilder], Path]
TRTLLM_MMHA = (
    "void tensorrt_llm::kernels::mmha::masked_multihead_attention_kernel<__nv_bfloat16, __nv_bfloat16, "
    "tensorrt_llm::kernels::KVBlockArray, 128, 256, 4, false>(tensorrt_llm::kernels::Multihead_attention_params)"
)
TRTLLM_GEMM = "void tensorrt_llm::kernels::cutlass_kernels::gemm_kernel<cutlass::bfloat16_t>(GemmParams)"


def test_tensorrt_llm_is_llm_inference_with_tensorrt_evidence(build: Build) -> None:
    """Decode steps of a TensorRT-LLM engine: its attention and GEMM kernels, a TensorRT
    reformat kernel, and the engine's enqueue range."""
    b = TraceBuilder("2024.6")
    b.process(100)
    s = planted.Sim(b)
    for _ in range(50):
        t0 = s.host
        s.launch(30 * US, TRTLLM_MMHA)
        s.launch(60 * US, TRTLLM_GEMM)
        s.launch(5 * US, "void genericReformat::copyPackedKernel<float, __half, true>(unsigned int)")
        b.nvtx(t0, s.host, text="ExecutionContext::enqueueV3", pid=100)
    s.sync()
    r = explain(build(b))
    w = r.diagnosis.workload
    assert (w.kind, w.confidence.value) == ("llm_inference", "high")
    signals = r.ok("workload").data["kernel_signals"]
    # 50 x 90 us of TensorRT-LLM kernels in 50 x 95 us of kernel time.
    assert signals["tensorrt_llm"]["pct_of_kernel_time"] == round(100 * 90 / 95, 2)
    assert signals["tensorrt"]["pct_of_kernel_time"] == round(100 * 5 / 95, 2)
    assert any(e.startswith("TensorRT-LLM") for e in w.evidence)
    assert any(e.startswith("TensorRT engine") for e in w.evidence)


def test_decide_order() -> None:
    row = {"kernel_ns": 1, "pct_of_kernel_time": 50.0, "examples": ["k"]}
    assert decide({"tensorrt": row, "tensorrt_llm": row}, {}, True) == ("llm_inference", "high")
    assert decide({"tensorrt": row}, {"llm_serving": {"ranges": 5}}, True) == ("tensorrt_inference", "high")
    # A TensorRT engine is TensorRT whatever ran beside it; TensorRT-LLM stays an LLM engine.
    assert decide({"tensorrt": row, "llm_serving": row}, {}, True) == ("tensorrt_inference", "high")
    assert decide({"tensorrt_llm": row, "backward": row}, {}, True) == ("llm_training", "high")
    assert decide({}, {}, True) == ("generic_cuda", "high")
