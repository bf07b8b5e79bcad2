"""Recommendations keyed by workload, so that advice fits what ran: decode-loop, scheduler and
tokenization advice only for LLM inference, TensorRT advice for TensorRT engines, plain CUDA
advice for generic CUDA codes.

advice(topic, workload) returns the lines for that workload's group, falling back to
"generic". Groups: llm_inference, llm_prefill (LLM inference whose serving iterations are all
prefills: rules/engine.advice_workload; it falls back to llm_inference), llm_training, pytorch
(pytorch_training, pytorch_inference), tensorrt (tensorrt_inference), generic (generic_cuda,
unknown).
"""

from __future__ import annotations

import re

GROUP = {
    "llm_inference": "llm_inference",
    "llm_prefill": "llm_prefill",  # LLM inference whose serving iterations are all prefills
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
        "llm_prefill": (
            "Find what the prefill waits for: no `.item()`, `.cpu()` or `.tolist()` on device tensors while "
            "the batch is prepared; build the batch's inputs in pinned memory and copy them with "
            "`non_blocking=True`.",
            "Queue the next batch's work before waiting on this one (the engine's overlap or async "
            "scheduling).",
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
        "llm_prefill": (
            "A prefill launches every kernel of every layer once: fuse small kernels (fused norm, rotary and "
            "activation kernels, `torch.compile`), or use the engine's piecewise CUDA graphs for prefill "
            "(vLLM compiles and graphs prefill pieces unless `--enforce-eager`).",
            "Batch more prompt tokens per prefill (chunked prefill size, `--max-num-batched-tokens`) so each "
            "launch does more work.",
        ),
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
            "Python stacks) to find the Python work between launches, and move it off the thread that "
            "launches GPU work.",
        ),
        "generic": (
            "Profile the host code between kernel launches (`nsys --sample=process-tree`, perf) and "
            "overlap it with GPU work (streams, a second host thread).",
        ),
    },
    "peer_wait": {
        "generic": (
            "Part of this wait is on the other ranks (the GPU idled with the next kernel queued behind a "
            "collective): capture every rank in the same window and run `nsys-llm-explain fleet` on them "
            "to see whether one rank arrives late at each collective (a straggler) before overlapping.",
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
    "communication_overlap": {
        "llm_inference": (
            "Overlap tensor-parallel collectives with compute, or use a custom all-reduce for small "
            "messages (vLLM/SGLang custom all-reduce, TensorRT-LLM one-shot/two-shot).",
        ),
        "llm_training": (
            "Overlap gradient all-reduce with backward (DDP/FSDP bucketing, `overlap_grad_reduce`); the "
            "collectives already run on their own streams, so what is left is starting them earlier and "
            "making them fewer and larger.",
        ),
        "generic": (
            "The collectives already run on their own streams: overlap them with independent compute by "
            "starting each as soon as its input is ready, and use fewer, larger collectives to amortize "
            "their latency.",
        ),
    },
    "gemm_roof": {
        "llm_inference": (
            "Batch more requests per step (continuous batching, a larger max batch or max tokens): in "
            "decode M is the batch, and a GEMM with a tiny M streams the whole weight matrix for a few rows.",
            "Where M must stay small, weight-only quantization (INT8/INT4/FP8 weights) cuts the bytes that "
            "bound it; pad hidden sizes to multiples of 64 so the kernels' tiles fit.",
            "Profile the GEMM with Nsight Compute (ncu_plan.sh in the report directory) to see the tile "
            "shape and wave quantization cuBLAS picked.",
        ),
        "pytorch": (
            "Grow M (batch or sequence per call) or merge small GEMMs (torch.compile, a grouped GEMM); pad "
            "dimensions to multiples of 64 (8 at least) so tensor-core tiles fit.",
            "Profile the GEMM with Nsight Compute (ncu_plan.sh in the report directory) for its tile "
            "shape, occupancy and wave quantization.",
        ),
        "generic": (
            "Give each GEMM more work (a larger M, batched or grouped GEMMs) and pad dimensions to "
            "multiples of 64 so tensor-core tiles fit; profile it with Nsight Compute (ncu_plan.sh).",
        ),
    },
    "mfu": {
        "llm_inference": (
            "Prefill more tokens per step (larger prefill chunks, more prompts batched together) so the "
            "matrix products dominate the step.",
            "Fuse the memory-bound operators around the GEMMs (RMSNorm, rotary embedding, SiLU-and-mul, "
            "residual adds): fused kernels from vLLM/FlashInfer, or torch.compile.",
            "Use FlashAttention or FlashInfer kernels for prefill attention, and CUDA graphs where steps are short.",
        ),
        "llm_training": (
            "Raise the micro-batch or sequence length per GPU until memory allows; use FlashAttention and "
            "fused optimizers (fused Adam); compile the model (torch.compile).",
            "Check that GEMMs run in BF16 or FP8 (Transformer Engine) and that communication overlaps "
            "compute (FSDP/DDP bucketing).",
        ),
        "pytorch": (
            "Fuse the memory-bound operators between the matrix products (torch.compile) and give each "
            "step more work (a larger batch).",
        ),
        "generic": (
            "Give each step more arithmetic per byte moved: larger batches, fused kernels, "
            "tensor-core precisions (BF16/FP16/TF32).",
        ),
    },
    "mbu": {
        "llm_inference": (
            "A decode step should stream its weights and KV cache at near-peak bandwidth; low MBU means "
            "time goes elsewhere: capture decode in CUDA graphs, remove per-step host syncs, and fuse "
            "the small kernels (norms, rotary, sampling).",
            "Use paged/flash decode attention kernels (FlashInfer, vLLM) that read the KV cache at full "
            "bandwidth; batch more sequences per step to amortize the weight reads.",
        ),
        "pytorch": (
            "Capture the decode loop in a CUDA graph (torch.compile mode='reduce-overhead') and fuse "
            "its small kernels so the step time is spent reading weights.",
        ),
        "generic": (
            "Cut launch and host overhead between the memory-bound kernels (CUDA graphs, fused kernels) "
            "so they stream memory back to back.",
        ),
    },
}


ADVICE["nvtx"] = {
    "llm_inference": (
        "Add NVTX ranges around prefill and decode steps on the launching thread "
        "(`torch.cuda.nvtx.range_push('decode')` ... `range_pop()`), capture with `--trace=cuda,nvtx`, "
        'then pass `--phase-map` with `{"prefill": ["prefill"], "decode": ["decode"]}`.',
    ),
    "pytorch": (
        "Add NVTX ranges around the steps and the parts you care about (`torch.cuda.nvtx.range_push` / "
        "`range_pop`, or `torch.autograd.profiler.emit_nvtx()` for every operator), capture with "
        "`--trace=cuda,nvtx`.",
    ),
    "generic": (
        "Add NVTX ranges (`nvtxRangePushA` / `nvtxRangePop` from nvToolsExt, or the NVTX3 C++ API) around "
        "the iterations and phases of the code, capture with `--trace=cuda,nvtx`.",
    ),
}
ADVICE["steps"] = {
    "llm_inference": (
        "Wrap each serving step in an NVTX range on the launching thread "
        "(`torch.cuda.nvtx.range('decode_step')`) and pass `--step-range decode_step`, or map range "
        "names to phases with `--phase-map`.",
    ),
    "pytorch": (
        "Wrap each iteration in an NVTX range (`torch.cuda.nvtx.range('step')`) and pass `--step-range "
        "step`; with the PyTorch profiler, call `prof.step()` once per iteration.",
    ),
    "generic": (
        "Wrap each iteration of the main loop in an NVTX range and pass its name with `--step-range`.",
    ),
}
ADVICE["sync_copy"] = {
    "pytorch": (
        "Replace `.item()`, `.cpu()` and `.tolist()` in the loop with non-blocking copies into pinned "
        "buffers read after an event, or move them off the launching thread.",
    ),
    "generic": (
        "Use `cudaMemcpyAsync` from pinned memory (`cudaHostAlloc`) and wait on an event only where the "
        "data is used, instead of synchronous `cudaMemcpy` between launches.",
    ),
}
ADVICE["fusion"] = {
    "llm_inference": (
        "Fuse the chains: fused RMSNorm+residual, SiLU-and-mul and rotary kernels (vLLM/FlashInfer/"
        "TensorRT-LLM ship them), or `torch.compile`; fusion_candidates.csv lists the chains.",
    ),
    "pytorch": (
        "Fuse the chains with `torch.compile` (or a custom Triton kernel); fusion_candidates.csv "
        "lists the most frequent chains of short kernels.",
    ),
    "tensorrt": (
        "Check why TensorRT did not fuse these layers (unsupported op or plugin boundary, "
        "`trtexec --verbose` layer info) and rebuild the engine.",
    ),
    "generic": (
        "Merge the short kernels of each chain into one kernel (kernel fusion) so intermediates stay in "
        "registers or shared memory; fusion_candidates.csv lists the chains.",
    ),
}
ADVICE["pinned"] = {
    "pytorch": (
        "Allocate the host buffers pinned (`pin_memory=True` in the DataLoader, `tensor.pin_memory()`) "
        "so async copies stay asynchronous.",
    ),
    "generic": (
        "Allocate the host buffers pinned (`cudaHostAlloc` / `cudaHostRegister`) so `cudaMemcpyAsync` "
        "stays asynchronous.",
    ),
}
ADVICE["host_communication"] = {
    "pytorch": (
        "Use non-blocking collectives (`async_op=True`, waiting on the work handle only where the result "
        "is needed) and keep GPU work queued while the host communicates.",
    ),
    "generic": (
        "Post non-blocking transfers (`MPI_Isend`/`MPI_Irecv`) and queue independent GPU work before "
        "waiting on them; with a CUDA-aware MPI or NCCL, send device buffers directly instead of staging "
        "them through host copies.",
    ),
}
ADVICE["comm_stream"] = {
    "llm_inference": (
        "The collectives run on the compute stream, and in tensor-parallel inference the next layer needs "
        "each all-reduce's result, so moving them to their own stream gains nothing by itself: make them "
        "shorter (vLLM/SGLang custom all-reduce or one-shot/two-shot all-reduce for small messages, "
        "NVLink SHARP), fuse the all-reduce with the norm after it (all-reduce + RMSNorm), or overlap it "
        "with independent work (two micro-batches in flight).",
    ),
    "llm_training": (
        "Run gradient collectives on their own stream (DDP/FSDP do so; with custom code a "
        "`torch.cuda.Stream()` per process group, the optimizer waiting on an event) and start them as "
        "gradient buckets fill, so backward overlaps them.",
        "Tensor-parallel collectives whose result the next layer needs overlap only when the work is "
        "split (sequence-parallel or async tensor-parallel overlap in Megatron/Transformer Engine).",
    ),
    "pytorch": (
        "Where the compute after a collective does not need its result (gradient all-reduce), run it on "
        "its own stream (DDP/FSDP do; custom code: a `torch.cuda.Stream()` and an event the consumer "
        "waits on); where it does, overlap it with independent work by splitting the batch.",
    ),
    "generic": (
        "Where the compute after a collective does not need its result, run the collective on its own "
        "stream and make the consumer wait on an event (`cudaStreamWaitEvent`); where it does, overlap it "
        "with independent work by splitting the data into chunks and pipelining them.",
    ),
}
ADVICE["transfer_peer"] = {
    "generic": (
        "Check that peer access is on (`cudaDeviceEnablePeerAccess`) and that the devices share NVLink "
        "(`nvidia-smi topo -m`): peer copies staged through host memory are several times slower.",
        "Overlap peer copies with compute on a separate stream, or let NCCL move the data over NVLink/NVSwitch.",
    ),
}
ADVICE["transfer_d2h"] = {
    "pytorch": (
        "Read results back asynchronously: `.to('cpu', non_blocking=True)` into a pinned buffer, and wait on an "
        "event only where the host uses the values.",
        "Reduce on the GPU before reading back (sum, argmax, top-k) and read back only what the host needs.",
    ),
    "generic": (
        "Copy results back asynchronously: `cudaMemcpyAsync` into pinned memory (`cudaHostAlloc`) on a separate "
        "stream, waited on with an event only where the host reads them.",
        "Copy back less: reduce on the GPU first and read back only what the host needs.",
    ),
}
# What the launching thread was doing in the host-caused idle time (diagnosis/evidence.py
# families) -> the advice that fits it.
ADVICE["host_data_loading"] = {
    "pytorch": (
        "Load batches in DataLoader worker processes so the next batch is ready when the step starts: "
        "`DataLoader(..., num_workers=N, pin_memory=True, persistent_workers=True, prefetch_factor=2)`; move "
        "decoding and augmentation out of the training loop (or onto the GPU: NVIDIA DALI).",
        "Copy the batch with `.to('cuda', non_blocking=True)` from pinned memory so the copy overlaps compute.",
    ),
    "generic": (
        "Prepare the next input on another thread or process while the GPU runs this one (double "
        "buffering), and copy it with `cudaMemcpyAsync` from pinned memory.",
    ),
}
ADVICE["host_optimizer"] = {
    "pytorch": (
        "Use a fused or multi-tensor optimizer: `torch.optim.AdamW(params, fused=True)` (or `foreach=True`), "
        "apex `FusedAdam`: a few kernels for all parameters instead of a launch per parameter.",
        "Capture the optimizer step in a CUDA graph (`torch.compile` the step, or `capturable=True` with "
        "`torch.cuda.graphs`), and call `optimizer.zero_grad(set_to_none=True)`.",
    ),
    "generic": (
        "Update all parameters in one fused kernel (a multi-tensor apply) instead of one launch per parameter, "
        "and capture the update in a CUDA graph.",
    ),
}
ADVICE["host_allocation"] = {
    "pytorch": (
        "Keep allocation out of the loop: reuse tensors (preallocated buffers, `out=` arguments), do not call "
        "`torch.cuda.empty_cache()` in the loop, and set `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` "
        "if fragmentation forces new segments.",
    ),
    "generic": (
        "Allocate device and pinned host memory once, before the loop, or from a pool (`cudaMallocAsync` "
        "with a memory pool): cudaMalloc/cudaFree and cudaHostAlloc synchronize and take milliseconds.",
    ),
}
ADVICE["host_io"] = {
    "generic": (
        "The launching thread waits for file or network I/O: read ahead on another thread or process "
        "(or memory-map the data) so the thread that launches GPU work never blocks on I/O.",
    ),
}
ADVICE["host_waiting"] = {
    "generic": (
        "The launching thread waits on a poll, a lock or a sleep: find the thread or process it waits for "
        "(the OS runtime rows name the call) and keep that wait off the thread that launches GPU work.",
    ),
}
ADVICE["host_logging"] = {
    "pytorch": (
        "Log and checkpoint less often or in the background (`torch.distributed.checkpoint.async_save`, a "
        "logging thread), and read GPU values for logging every N steps, not every step.",
    ),
    "generic": (
        "Write logs and checkpoints less often, or from another thread, so the launching thread keeps the "
        "GPU fed.",
    ),
}
ADVICE["host_framework"] = {
    "pytorch": (
        "The gaps are spent dispatching operators on the host (Python and framework overhead per launch): "
        "capture the step in a CUDA graph (`torch.compile(mode='reduce-overhead')`, `torch.cuda.graphs`) "
        "and fuse small operators (`torch.compile`) so fewer launches need the host.",
    ),
    "generic": (
        "Cut the host work per launch: fuse small kernels and capture the repeated launch sequence in a "
        "CUDA graph.",
    ),
}
# host family -> advice topic (sync, communication and serving use the existing topics).
HOST_FAMILY_TOPIC = {
    "data_loading": "host_data_loading",
    "optimizer": "host_optimizer",
    "sync": "sync",
    "allocation": "host_allocation",
    "communication": "host_communication",
    "file_io": "host_io",
    "waiting": "host_waiting",
    "serving_host": "host",
    "logging_checkpoint": "host_logging",
    "framework": "host_framework",
}
FAILED_ADVICE = (
    "Fix the failure first: the program's output ends in an error, so this capture shows the run up to "
    "that error, not its steady loop (the capture section quotes the line).",
)
CONFLICT_ADVICE = (
    "Run the program's own profiler or timer outside Nsight Systems, or turn it off while capturing: the "
    "program failed because that profiler found nothing while Nsight Systems held CUPTI, so this capture shows "
    "the run up to that failure, and capturing again as it is would fail the same way.",
)
UNSTEADY_ADVICE = (
    "Capture again in steady state before acting on this: in this capture the time is start-up "
    "(the capture section says what, and how to capture the steady loop).",
)
TOO_LITTLE_ADVICE = (
    "Capture more before acting on this: the capture holds too little GPU work to tell a pattern "
    "from a one-off (the capture section says what it holds, and how to capture several steady steps).",
)


# Nsight Compute profiles NVIDIA GPUs only: on AMD GPUs, advice names the ROCm profilers.
NVIDIA_PROFILER = re.compile(r"Nsight Compute(?: \(ncu_plan\.sh[^)]*\))?")
ROCM_PROFILERS = ("the ROCm profilers (rocprofv3 `--kernel-include-regex NAME --pmc ...`, or ROCm Compute "
                  "Profiler, formerly Omniperf: `rocprof-compute profile -k NAME -- <command>`)")


def for_amd(lines: tuple[str, ...]) -> tuple[str, ...]:
    """Advice lines with Nsight Compute replaced by the ROCm profilers, cuBLAS by hipBLASLt."""
    return tuple(NVIDIA_PROFILER.sub(ROCM_PROFILERS, line).replace("cuBLAS", "hipBLASLt") for line in lines)


def advice(topic: str, workload: str) -> tuple[str, ...]:
    table = ADVICE[topic]
    group = GROUP.get(workload, "generic")
    if group in table:
        return table[group]
    if group == "llm_prefill":
        group = "llm_inference"
        if group in table:
            return table[group]
    if group in ("llm_inference", "llm_training") and "pytorch" in table:
        return table["pytorch"]
    return table["generic"]
