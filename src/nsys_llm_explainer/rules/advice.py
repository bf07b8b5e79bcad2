"""Recommendations keyed by workload, so that advice fits what ran: decode-loop, scheduler and
tokenization advice only for LLM inference, TensorRT advice for TensorRT engines, plain CUDA
advice for generic CUDA codes.

advice(topic, workload) returns the lines for that workload's group, falling back to
"generic". Groups: llm_inference, llm_training, pytorch (pytorch_training, pytorch_inference),
tensorrt (tensorrt_inference), generic (generic_cuda, unknown).
"""

from __future__ import annotations

GROUP = {
    "llm_inference": "llm_inference",
    "llm_training": "llm_training",
    "pytorch_training": "pytorch",
    "pytorch_inference": "pytorch",
    "tensorrt_inference": "tensorrt",
    "generic_cuda": "generic",
    "unknown": "generic",
}

ADVICE: dict[str, dict[str, tuple[str, ...]]] = {
    "sync": {
        "llm_inference": (
            "Remove per-step synchronization from the decode loop: no `.item()`, `.cpu()`, `.tolist()` "
            "or printing of tensors between steps; read sampled tokens back once per step, asynchronously.",
            "Keep the next step queued before waiting (async scheduling: launch step N+1 before "
            "reading step N's tokens).",
        ),
        "llm_training": (
            "Avoid host syncs inside the training step: no `.item()` on the loss every step (log every N "
            "steps), no `torch.cuda.synchronize()` in the loop.",
            "Find implicit syncs with `torch.cuda.set_sync_debug_mode('warn')`.",
        ),
        "pytorch": (
            "Find the implicit syncs with `torch.cuda.set_sync_debug_mode('warn')`: `.item()`, `.cpu()`, "
            "`.tolist()`, `torch.nonzero`, boolean-mask indexing and Python `if` on tensors.",
            "Move the read-back out of the loop or make it asynchronous (`non_blocking=True` into pinned "
            "memory plus an event).",
        ),
        "tensorrt": (
            "Do not synchronize after every inference: enqueue several inferences on a stream and "
            "wait on events only where results are consumed.",
        ),
        "generic": (
            "Drop the `cudaDeviceSynchronize()`/`cudaStreamSynchronize()` calls that are not needed for "
            "correctness; kernels on one stream already run in order.",
            "Where the host needs a result, record a `cudaEvent` and wait on it only when the result is "
            "used, or use `cudaStreamAddCallback`/`cudaLaunchHostFunc`.",
        ),
    },
    "transfer": {
        "generic": (
            "Overlap copies with compute: issue them with `cudaMemcpyAsync` from pinned memory on a "
            "separate stream and make the consumer wait on an event, not on the whole stream.",
            "Move less data: keep tensors resident on the GPU, copy once and reuse, compress or use a "
            "lower precision for what must cross the link.",
            "Check the link: host-to-device copies from pinned memory should reach most of the PCIe/NVLink-C2C "
            "bandwidth; much less points to pageable memory or a slow path.",
        ),
        "pytorch": (
            "Overlap host-to-device copies with compute: `tensor.pin_memory()` plus `.to('cuda', "
            "non_blocking=True)` on a side stream, and prefetch the next batch or the next weights while "
            "this one computes.",
            "Keep weights and inputs resident on the GPU instead of moving them every step (CPU offload "
            "moves every layer's weights each forward).",
        ),
    },
    "launch": {
        "llm_inference": (
            "Keep CUDA graphs on for decode (vLLM/SGLang: do not run with enforce-eager; PyTorch: "
            "`torch.compile(mode='reduce-overhead')` or `torch.cuda.graphs`).",
            "Fuse small kernels (fused norm/activation/rotary kernels, `torch.compile`).",
            "Raise the batch size so each launch does more work.",
        ),
        "pytorch": (
            "Capture the steady loop in a CUDA graph (`torch.cuda.graphs`, or `torch.compile(mode="
            "'reduce-overhead')`): one graph launch replaces many kernel launches.",
            "Fuse elementwise chains (`torch.compile`) to cut the kernel count.",
        ),
        "tensorrt": (
            "Use `enqueueV3` with CUDA graphs for the engine, and larger batches per enqueue.",
        ),
        "generic": (
            "Launch fewer, larger kernels: fuse small kernels or give each more work.",
            "Capture the repeated launch sequence in a CUDA graph (stream capture, `cudaGraphLaunch`).",
        ),
    },
    "host": {
        "llm_inference": (
            "Overlap the scheduler, detokenization and sampling bookkeeping with the GPU (async "
            "scheduling / async output processing in vLLM and SGLang).",
            "Profile the host side (py-spy, `nsys --sample=process-tree`) to see what the launching "
            "thread does between steps.",
        ),
        "pytorch": (
            "Profile the host side (py-spy, `nsys --sample=process-tree` or torch.profiler with "
            "Python stacks) to find the Python work between launches; move data loading to "
            "DataLoader workers and keep the launch thread free.",
        ),
        "generic": (
            "Profile the host code between kernel launches (`nsys --sample=process-tree`, perf) and "
            "overlap it with GPU work (streams, a second host thread).",
        ),
    },
    "communication": {
        "llm_inference": (
            "Overlap tensor-parallel collectives with compute, or use a custom all-reduce for small "
            "messages (vLLM/SGLang custom all-reduce, TensorRT-LLM one-shot/two-shot).",
        ),
        "llm_training": (
            "Overlap gradient all-reduce with backward (DDP/FSDP bucketing, `overlap_grad_reduce`), and "
            "check that NCCL runs on its own stream.",
        ),
        "generic": (
            "Run collectives on their own stream and overlap them with independent compute; fewer, "
            "larger collectives amortize their latency.",
        ),
    },
}


def advice(topic: str, workload: str) -> tuple[str, ...]:
    table = ADVICE[topic]
    group = GROUP.get(workload, "generic")
    if group in table:
        return table[group]
    if group in ("llm_inference", "llm_training") and "pytorch" in table:
        return table["pytorch"]
    return table["generic"]
