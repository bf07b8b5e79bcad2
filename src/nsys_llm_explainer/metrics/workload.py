"""workload: what ran, so that advice fits it (LLM serving advice is noise for a C++ HPC code).

Signals are looked for in kernel names (weighted by kernel time) and in range names (NVTX
ranges; for PyTorch profiler traces, annotations and operators). Each SIGNALS entry names a
pattern and what it means. The decision, in order:

1. llm_inference / llm_training for TensorRT-LLM (`tensorrt_llm::` kernels or ranges,
   `trtllm` kernels): an LLM engine built on TensorRT is LLM serving, with TensorRT among its
   evidence, not a plain TensorRT engine.
2. tensorrt_inference: TensorRT kernels (`trt_*`, `*_trt`, tactics, myelin, reformat) or
   TensorRT ranges (`ExecutionContext::enqueue`/`execute`, TensorRT layer names such as
   `(Unnamed Layer* 3) [Convolution]` or `{ForeignNode[...]}`), whatever else ran beside them;
   `sm*_xmma_*` kernels count as TensorRT only together with TensorRT ranges (cuBLAS and cuDNN
   use them too).
3. llm_training / llm_inference: LLM evidence: LLM serving stacks (vLLM, SGLang,
   FlashInfer), attention over a KV cache (paged/flash decode, reshape_and_cache), or LLM
   building blocks (rotary embedding, RMSNorm, SiLU-and-mul, fused MoE) with attention;
   training when the training evidence below is present.
4. pytorch_training / pytorch_inference: PyTorch kernels (at::native, Inductor's Triton
   kernels) or aten:: ranges; training as above.
5. generic_cuda: kernels ran, and none of the frameworks above left a trace; or the program
   is a native unit-test binary (a Google Test or CTest binary, analysis/program.py),
   whatever libraries it links: a test of its kernels, not a PyTorch program, even when
   ATen's kernels prepare its inputs.
6. unknown: no kernels and no telling ranges.

Training evidence is backward kernels or operators (`*Backward*`, autograd ranges) or an
optimizer step (optimizer kernels or ranges). Collectives alone are not: tensor- and
sequence-parallel inference runs them too. `model` names what kind of model ran when the
trace shows it and it is not an LLM: a recommendation model (embedding-bag kernels, FBGEMM,
TorchRec ranges such as sparse_data_dist), a convolutional network (convolution kernels
holding at least CONV_PCT of kernel time), else none.

Names longer than MAX_NAME_CHARS are classified by their first MAX_NAME_CHARS characters.
A signal counts when its kernels take at least MIN_KERNEL_PCT of kernel time or its ranges
are at least MIN_RANGE_COUNT. Confidence is high for a serving stack, TensorRT-LLM or
TensorRT, medium for building blocks together with attention, low otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

import numpy as np

from nsys_llm_explainer.analysis import program as prog
from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.analysis.groups import group_sum
from nsys_llm_explainer.analysis.nvtx import normalized_names
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome
from nsys_llm_explainer.render.escape import shorten
from nsys_llm_explainer.results.run import KernelSignal, RangeSignal, Workload
from nsys_llm_explainer.trace.columns import factorize
from nsys_llm_explainer.trace.data import TraceData, Unavailable

KINDS = (
    "llm_inference", "llm_training", "pytorch_training", "pytorch_inference",
    "tensorrt_inference", "generic_cuda", "unknown",
)
MIN_KERNEL_PCT = 0.5
MIN_RANGE_COUNT = 2
CONV_PCT = 30.0
MAX_EXAMPLES = 3
# Names are classified by their first MAX_NAME_CHARS characters: real kernel and range names
# are far shorter, and a damaged trace's megabyte-long name must not stall the patterns.
MAX_NAME_CHARS = 4096
# signal -> (kernel-name pattern or None, range-name pattern or None, what it means)
SIGNALS: dict[str, tuple[str | None, str | None, str]] = {
    "tensorrt_llm": (r"tensorrt_llm|trtllm", r"tensorrt_llm|trtllm", "TensorRT-LLM (an LLM engine built on TensorRT)"),
    "tensorrt": (
        r"(^|[^a-z])trt_|[a-z0-9]_trt($|[^a-z])|myelin|__myl_|genericreformat|copypackedkernel|nvinfer1|"
        r"tensorrt(?!_?llm)",
        r"tensorrt(?!_?llm)|\btrt\b|executioncontext|enqueuev\d|myelin|unnamed layer\*|foreignnode|"
        r"reformatting copynode|\[(convolution|fully ?connected|activation|pooling|shuffle|elementwise|"
        r"matrix ?multiply|softmax|scale|concatenation|slice|gather|reduce)\]",
        "TensorRT engine",
    ),
    "xmma": (r"^sm\d+_xmma_", None, "xmma tactic kernels (TensorRT, cuBLAS or cuDNN)"),
    "recsys": (
        r"embedding_?bag|fbgemm|split_embedding|jagged|batched_unary_embedding|keyed_jagged",
        r"torchrec|sparse_data_dist|keyedjaggedtensor|embeddingbag|kjt|input_dist|embedding_lookup",
        "recommendation model (embedding bags, FBGEMM, TorchRec)",
    ),
    "conv": (
        r"convolve|convolution|implicit_gemm|fprop|dgrad|wgrad|winograd|scudnn|cudnn",
        r"aten::(cudnn_)?convolution|conv\dd",
        "convolutions",
    ),
    "llm_serving": (
        r"vllm::|sglang|flashinfer|paged_?attention|reshape_and_cache|xqa|mmha|"
        r"batch_?(prefill|decode)|unified_attention|merge_attn_states",
        r"vllm|sglang|execute_model|model_runner|engine_?core|schedule_batch|llm_engine|"
        r"\b(prefill|decode)\b",
        "LLM serving stack (vLLM, SGLang, FlashInfer, paged attention)",
    ),
    "attention": (
        r"flash_?(fwd|bwd|attn|attention)|fmha|flash::|mha_|fused_multi_head|attention",
        r"scaled_dot_product|flash_attention|_efficient_attention|attention",
        "fused attention (FlashAttention, FMHA, SDPA)",
    ),
    "llm_blocks": (
        r"rotary|rms_?norm|silu_and_mul|act_and_mul|swiglu|fused_moe|moe_align|topk_softmax|"
        r"marlin|awq|gptq|top_?k_?top_?p",
        r"rotary|rms_?norm|silu|swiglu|\bmoe\b|lm_head|embed_tokens|qwen|llama|mistral|gpt|"
        r"modeling_\w+|generate",
        "LLM building blocks (rotary embedding, RMSNorm, SiLU-and-mul, MoE, quantized GEMM)",
    ),
    "backward": (
        r"backward|_bwd|bwd_|dgrad|wgrad|grad_input|grad_weight|backprop",
        r"backward|autograd::engine|evaluate_function",  # "backward" also finds MulBackward0 (any case)
        "backward pass",
    ),
    "optimizer": (
        r"multi_tensor_apply|(?<![a-z])adam|(?<![a-z])lamb(?![a-z])|lion_|(?<![a-z])sgd(?![a-z])|"
        r"fused_?optim|l2norm|clip_grad",
        r"optimizer|\.step\b|zero_grad|adam",
        "optimizer step",
    ),
    "pytorch": (
        r"at::native|at::cuda|c10::|triton_(poi|red|per|tem)_|pytorch_flash",
        r"^aten::|profilerstep#|^torch[./]|nn\.module|autograd::",
        "PyTorch (ATen kernels, Inductor/Triton kernels, aten:: ranges)",
    ),
    "nccl": (r"nccl|rccl", r"nccl|c10d::|all_?reduce", "NCCL collectives"),
}


def _kernel_signals(data: TraceData) -> tuple[dict[str, KernelSignal], int]:
    k = data.kernels()
    total = int(k.dur.sum())
    codes, uniq = factorize(k.name_id)
    time = group_sum(k.dur, codes, len(uniq))
    lookup = data.kernel_names(np.asarray(uniq))
    names = [lookup.get(int(i), "")[:MAX_NAME_CHARS] for i in uniq]
    out: dict[str, KernelSignal] = {}
    for sid, (kpat, _, _) in SIGNALS.items():
        if kpat is None:
            continue
        rx = re.compile(kpat, re.IGNORECASE)
        hit = [i for i, n in enumerate(names) if rx.search(n)]
        ns = int(time[hit].sum()) if hit else 0
        pct = 100.0 * ns / total if total else 0.0
        if hit and pct >= MIN_KERNEL_PCT:
            top = sorted(hit, key=lambda i: -time[i])[:MAX_EXAMPLES]
            out[sid] = KernelSignal(ns, round(pct, 2), [names[i] for i in top])
    return out, total


def _range_signals(data: TraceData) -> dict[str, RangeSignal]:
    try:
        nv = data.nvtx()
    except Unavailable:
        return {}
    names, codes = normalized_names(data)  # emit_nvtx names are unique per call: test each op once
    names = [n[:MAX_NAME_CHARS] for n in names]
    raw = np.bincount(nv.name, minlength=len(codes)) if len(nv) else np.zeros(len(codes), np.int64)
    counts = np.bincount(codes, weights=raw, minlength=len(names)).astype(np.int64) if len(codes) else raw
    out: dict[str, RangeSignal] = {}
    for sid, (_, rpat, _) in SIGNALS.items():
        if rpat is None:
            continue
        rx = re.compile(rpat, re.IGNORECASE)
        hit = [i for i, n in enumerate(names) if rx.search(n)]
        n = int(counts[hit].sum()) if hit else 0
        if n >= MIN_RANGE_COUNT:
            top = sorted(hit, key=lambda i: -counts[i])[:MAX_EXAMPLES]
            out[sid] = RangeSignal(n, [names[i][:120] for i in top])
    return out


def decide(kernels: Collection[str], ranges: Collection[str], have_kernels: bool) -> tuple[str, str]:
    """(kind, confidence) from the ids of the signals found (see the module docstring)."""
    has = set(kernels) | set(ranges)
    training = bool({"backward", "optimizer"} & has)
    if "tensorrt_llm" in has:
        return ("llm_training" if training else "llm_inference"), "high"
    if "tensorrt" in has or ("xmma" in kernels and "tensorrt" in ranges):
        return "tensorrt_inference", "high" if "tensorrt" in kernels else "medium"
    if "llm_serving" in has:
        return ("llm_training" if training else "llm_inference"), "high"
    if "attention" in has and "llm_blocks" in has:
        return ("llm_training" if training else "llm_inference"), "medium"
    if "llm_blocks" in ranges and ("attention" in has or "pytorch" in has) and "recsys" not in has:
        return ("llm_training" if training else "llm_inference"), "low"
    if "pytorch" in has or "attention" in has:
        return ("pytorch_training" if training else "pytorch_inference"), "medium"
    if have_kernels:
        return "generic_cuda", "medium" if ranges or kernels else "high"
    return "unknown", "low"


def model_of(kind: str, kernels: Mapping[str, KernelSignal], ranges: Collection[str]) -> str | None:
    """What kind of model ran, when the trace shows it and it is not an LLM (module docstring)."""
    if kind.startswith("llm") or kind == "tensorrt_inference" and "recsys" not in kernels:
        return None
    if "recsys" in kernels or "recsys" in ranges:
        return "recommendation"
    conv = kernels.get("conv")
    if conv is not None and conv.pct_of_kernel_time >= CONV_PCT:
        return "cnn"
    return None


def _evidence(kernels: Mapping[str, KernelSignal], ranges: Mapping[str, RangeSignal], kind: str,
              kernel_ns: int) -> list[str]:
    lines = []
    for sid, krow in kernels.items():
        lines.append(f"{SIGNALS[sid][2]}: {krow.pct_of_kernel_time:.1f}% of kernel time, "
                     f"e.g. {shorten(krow.examples[0], 120)}")
    for sid, rrow in ranges.items():
        lines.append(f"{SIGNALS[sid][2]}: {rrow.ranges:,} ranges, e.g. {rrow.examples[0]!r}")
    if kind == "generic_cuda" and not kernels and not ranges:
        lines.append("no framework kernels or ranges (PyTorch, TensorRT, LLM serving stacks)")
    if kind.endswith("_inference") and not kind.startswith("tensorrt") and "nccl" in kernels.keys() | ranges.keys():
        lines.append("collectives ran, but no backward pass or optimizer step: inference with collectives "
                     "(tensor or sequence parallel), not training")
    if kind == "unknown":
        lines.append("no kernels were captured and no range names identify a framework")
    return lines


def _native_test(program: prog.Program | None) -> str | None:
    """The evidence line when the program is a native unit-test binary (module docstring)."""
    if program is None or program.kind != "test" or program.language != "native":
        return None
    runner = {"gtest": "Google Test", "ctest": "CTest"}.get(program.runner or "", "a test binary")
    return (f"the program is {program.text()!r}, a native unit test ({runner}): a test of its kernels, not a "
            "framework's inference or training, whatever libraries it links")


def run(ctx: Context) -> Outcome:
    try:
        kernels, kernel_ns = _kernel_signals(ctx.data)
        have_kernels = kernel_ns > 0 or len(ctx.data.kernels()) > 0
    except Unavailable:
        kernels, kernel_ns, have_kernels = {}, 0, False
    ranges = _range_signals(ctx.data)
    kind, confidence = decide(kernels, ranges, have_kernels)
    program = prog.program(ctx.data)
    test = _native_test(program) if have_kernels and kind not in ("tensorrt_inference",) else None
    if test is not None:
        kind, confidence = "generic_cuda", "high"
    model = model_of(kind, kernels, ranges)
    if kind != "tensorrt_inference":  # xmma tactics are TensorRT evidence only beside TensorRT ranges
        kernels.pop("xmma", None)
    result = Workload(
        kind=kind,
        confidence=confidence,
        model=model,
        evidence=tuple(([test] if test else []) + _evidence(kernels, ranges, kind, kernel_ns)),
        kernel_signals=kernels,
        range_signals=ranges,
    )
    return MetricResult(METRIC.id, result.to_json(), typed=result)


METRIC = Metric(
    id="workload",
    # before capture: TensorRT engines skip the autotuning check
    order=100,
    title="What ran",
    run=run,
    description="Workload kind (LLM inference/training, PyTorch, TensorRT, generic CUDA) and, where shown, "
    "the model kind (recommendation, CNN), from kernel and range names, with the evidence.",
    reads=("nvtx_normalized",),
)
