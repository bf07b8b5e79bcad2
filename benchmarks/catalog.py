"""What a synthetic vLLM serving step looks like: kernel names, durations and host events.

Kernel names follow what vLLM on an Ampere/Hopper GPU really launches (cuBLAS/CUTLASS
GEMMs, FlashAttention, vLLM's own norm/activation/cache kernels, NCCL all-reduce for
tensor parallelism, ATen sampling kernels). Durations are typical small-batch decode
figures in nanoseconds; prefill multiplies the compute-bound ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

BF16 = "c10::BFloat16"


@dataclass(frozen=True)
class KernelKind:
    name: str
    decode_ns: int
    prefill_scale: float  # prefill duration = decode_ns * prefill_scale
    grid: int
    block: int
    registers: int


KERNELS: dict[str, KernelKind] = {
    k.name: k
    for k in (
        KernelKind(
            "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, "
            "unsigned int, 2, 2, -2, true>("
            "at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, "
            "at::cuda::detail::TensorInfo<c10::BFloat16 const, unsigned int>, "
            "at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, "
            "unsigned int, long)", 3_000, 8.0, 1024, 128, 32),
        KernelKind(
            f"void vllm::rms_norm_kernel<{BF16}>({BF16}*, {BF16} const*, {BF16} const*, float, "
            "int, int)", 3_200, 6.0, 8, 1024, 28),
        KernelKind(
            f"void vllm::fused_add_rms_norm_kernel<{BF16}, 8>({BF16}*, {BF16}*, {BF16} const*, "
            "float, int, int)", 3_600, 6.0, 8, 1024, 30),
        KernelKind(
            "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_stage3_warpsize2x2x1_"
            "tensor16x8x16_kernel", 12_000, 20.0, 192, 128, 168),
        KernelKind(
            f"void vllm::rotary_embedding_kernel<{BF16}, true>(long const*, {BF16}*, {BF16}*, "
            f"{BF16} const*, int, long, long, int, int, int)", 2_600, 5.0, 8, 256, 40),
        KernelKind(
            "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, "
            "(vllm::Fp8KVCacheDataType)0>(__nv_bfloat16 const*, __nv_bfloat16 const*, "
            "__nv_bfloat16*, __nv_bfloat16*, long const*, int, int, int, int, int, int, "
            "float const*, float const*)", 2_500, 6.0, 8, 512, 32),
        KernelKind(
            "void flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, "
            "cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, "
            "false, false, false, false, true, true, false, false>(Flash_fwd_params)",
            16_000, 1.0, 64, 128, 255),
        KernelKind(
            "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
            "cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, "
            "false, true, false, false, true, true, false, false>(Flash_fwd_params)",
            0, 1.0, 256, 128, 255),
        KernelKind(
            "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_"
            "tn_align8>(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8::"
            "Params)", 8_000, 18.0, 128, 128, 94),
        KernelKind(
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
            11_000, 6.0, 2, 640, 96),
        KernelKind(
            "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn", 26_000, 22.0, 264,
            128, 232),
        KernelKind(
            f"void vllm::act_and_mul_kernel<{BF16}, &(c10::BFloat16 vllm::silu_kernel<{BF16}>"
            f"({BF16} const&)), true>({BF16}*, {BF16} const*, int)", 3_000, 10.0, 8, 1024, 24),
        KernelKind(
            "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
            "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
            6_500, 1.0, 8, 1024, 40),
        KernelKind(
            "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
            "at::native::ArgMaxOps<float>, unsigned int, long, 4> >(at::native::ReduceOp<float, "
            "at::native::ArgMaxOps<float>, unsigned int, long, 4>)", 5_000, 1.0, 8, 512, 32),
        KernelKind(
            "void vllm::copy_blocks_kernel<c10::BFloat16>(long*, long*, long const*, int)",
            18_000, 1.0, 64, 1024, 32),
        KernelKind(
            "void vllm::advance_step_flashattn_kernel<256, 16>(int, int, int, long*, long const*, "
            "int*, long*, int const*, long, int const*)", 2_400, 1.0, 1, 256, 24),
    )
}


def short_of(full: str) -> str:
    """nsys' shortName: the bare function name."""
    head = full.split("(", 1)[0].split("<", 1)[0].strip().split()[-1]
    return head.rsplit("::", 1)[-1]


def kernel(prefix: str) -> str:
    """Full demangled name of the catalog kernel whose name starts with `prefix`."""
    for key, kind in KERNELS.items():
        if prefix in key:
            return kind.name
    raise KeyError(prefix)


EMBED = kernel("indexSelectLargeIndex")
RMS = kernel("vllm::rms_norm_kernel")
ADD_RMS = kernel("fused_add_rms_norm")
QKV = kernel("sm80_xmma_gemm")
ROPE = kernel("rotary_embedding")
CACHE = kernel("reshape_and_cache")
ATTN_DECODE = kernel("flash_fwd_splitkv")
ATTN_PREFILL = kernel("void flash_fwd_kernel")
OPROJ = kernel("cutlass::Kernel2")
ALLREDUCE = kernel("ncclDevKernel_AllReduce")
GATE_UP = kernel("ampere_bf16_s16816gemm")
SILU = kernel("act_and_mul_kernel")
SOFTMAX = kernel("cunn_SoftMaxForward")
ARGMAX = kernel("ArgMaxOps")
COPY_BLOCKS = kernel("copy_blocks_kernel")  # KV-cache block copies, on a side stream
ADVANCE = kernel("advance_step_flashattn")

PREFILL_ATTN_NS = 180_000  # FlashAttention over a whole prompt


def kernel_ns(name: str, prefill: bool) -> int:
    if name == ATTN_PREFILL:
        return PREFILL_ATTN_NS
    kind = KERNELS[name]
    return int(kind.decode_ns * (kind.prefill_scale if prefill else 1.0))


class Ev(IntEnum):
    """Host-side events of one step, in the order the launch thread issues them."""

    PUSH = 0
    POP = 1
    LAUNCH = 2
    H2D = 3
    D2H = 4
    SYNC = 5
    GRAPH = 6


API_NAMES: dict[Ev, str] = {
    Ev.LAUNCH: "cudaLaunchKernel_v7000",
    Ev.H2D: "cudaMemcpyAsync_v3020",
    Ev.D2H: "cudaMemcpyAsync_v3020",
    Ev.SYNC: "cudaStreamSynchronize_v3020",
    Ev.GRAPH: "cudaGraphLaunch_v10000",
}
# Host cost before each event (Python overhead) and of the call itself, in ns.
HOST_GAP_NS: dict[Ev, int] = {Ev.PUSH: 1_500, Ev.POP: 800, Ev.LAUNCH: 9_000, Ev.H2D: 20_000,
                              Ev.D2H: 6_000, Ev.SYNC: 2_000, Ev.GRAPH: 15_000}
CALL_NS: dict[Ev, int] = {Ev.PUSH: 300, Ev.POP: 300, Ev.LAUNCH: 3_800, Ev.H2D: 9_000,
                          Ev.D2H: 7_000, Ev.SYNC: 1_500, Ev.GRAPH: 24_000}
STEP_GAP_NS = 120_000  # scheduler work between steps
H2D_BYTES = 4_096
D2H_BYTES = 1_024
