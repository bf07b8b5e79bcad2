"""Vectorized building blocks shared by metrics: interval unions, grouped percentiles,
the kernel-to-launch join and the NVTX innermost-range sweep."""
