"""Metric data for the compute rules (NLE320-NLE323): a GEMM operation under its roof, a
model_utilization phase, GEMM math modes."""

from __future__ import annotations

from typing import Any


def gemm_op(pct_of_roof: float, kernel_ns: int, device: int = 0, m: int = 16, n: int = 4096,
            k: int = 4096, source: str = "stated", family: str = "gemm") -> dict[str, Any]:
    return {
        "operator": "aten::mm", "label": f"mm [[{m},{k}],[{k},{n}]]", "family": family,
        "compute_dtype": "bf16", "dtype_source": source, "device_id": device, "calls": 10,
        "flops": 2 * m * n * k * 10, "kernel_ns": kernel_ns, "tflops": 21.3, "roof_tflops": 53.2,
        "pct_of_roof": pct_of_roof, "flop_per_byte": 15.9, "bound": "memory", "implausible": False,
        "m": m, "n": n, "k": k,
    }


def efficiency(*ops: dict[str, Any], memory_pct: float = 40.0) -> dict[str, Any]:
    return {
        "operations": list(ops),
        "by_family": [{"family": "memory", "pct_of_kernel_time": memory_pct}],
    }


def phase(kind: str, time_ns: int, mfu: float | None = None, mbu: float | None = None,
          devices: tuple[int, ...] = (0,), name: str = "p") -> dict[str, Any]:
    return {
        "phase": name, "kind": kind, "compute_heavy": kind in ("prefill", "training", "forward"),
        "steps": 4, "time_ns": time_ns, "mfu_pct": mfu, "mfu_min_pct": mfu, "mfu_max_pct": mfu,
        "mbu_pct": mbu, "hfu_pct": None, "device_ids": list(devices),
        "inputs": ["tokens per step: --tokens-per-step", "FLOPs per token: --model-flops-per-token"],
    }


def utilization(*phases: dict[str, Any]) -> dict[str, Any]:
    steps = [{"phase": p["phase"], "mbu_pct": p["mbu_pct"]} for p in phases]
    return {"phases": list(phases), "steps": steps}


def precision(fp32_ns: int, gemm_ns: int, device: int = 0) -> dict[str, Any]:
    return {
        "by_device": [{"device_id": device, "gemm_ns": gemm_ns, "fp32_cuda_core_ns": fp32_ns,
                       "fp32_cuda_core_pct": round(100.0 * fp32_ns / gemm_ns, 2)}],
        "fp32_kernels": [{"name": "ampere_sgemm_128x64_nn", "device_id": device, "family": "gemm", "calls": 7,
                          "kernel_ns": fp32_ns, "dtype_token": "sgemm"}],
    }
