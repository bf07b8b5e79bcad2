"""Which CUDA/HIP API calls synchronize the host with the GPU: blocking calls (device,
stream and event synchronize, synchronous memcpy) apart from non-blocking waits and queries."""

from __future__ import annotations

import re

import numpy as np

BLOCKING_APIS = frozenset({
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
    "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize",
    "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize",  # ROCm (Kineto)
})
NON_BLOCKING_APIS = frozenset({
    "cudaStreamWaitEvent", "cudaEventQuery", "cudaStreamQuery",
    "cuStreamWaitEvent", "cuEventQuery", "cuStreamQuery", "cudaStreamWaitValue32",
    "cuStreamWaitValue32", "cuStreamWaitValue64",
    "hipStreamWaitEvent", "hipEventQuery", "hipStreamQuery",
})


# cudaMemcpy, cudaMemcpy2D, cudaMemcpyToSymbol, cuMemcpyDtoH ... but not the *Async forms.
_SYNC_MEMCPY = re.compile(r"^(cu(da)?|hip)Memcpy\w*$")


def classify(api: str) -> str | None:
    """'blocking', 'non_blocking', or None for APIs that are not synchronization."""
    if api in BLOCKING_APIS:
        return "blocking"
    if _SYNC_MEMCPY.match(api) and "Async" not in api:
        return "blocking"
    if api in NON_BLOCKING_APIS:
        return "non_blocking"
    return None


def sync_kinds(api_names: list[str]) -> np.ndarray:
    """Per API code: 1 blocking, 2 non-blocking, 0 other."""
    kinds = {"blocking": 1, "non_blocking": 2, None: 0}
    return np.array([kinds[classify(n)] for n in api_names], dtype=np.int64)
