"""Names as every trace source gives them to the analysis: API-name normalization, and the
bound on the length of a name the analysis reads."""

from __future__ import annotations

import hashlib
import re

# The longest name the analysis reads, in characters. Real kernel names reach a few thousand
# (templated CUDA kernels: 5,123 in one of the shared PyTorch profiler traces). Reading a name
# (kernel categories, labels, the Nsight Compute filter) takes time in proportion to its
# length, several seconds per megabyte, so a longer name is cut to its first NAME_LIMIT
# characters plus a note of its length and a digest of the whole, which keeps names that
# differ only past the cut apart.
NAME_LIMIT = 16_384

_VERSION_SUFFIX = re.compile(r"_v\d+$")


def api_base_name(name: str) -> str:
    """`cudaLaunchKernel_v7000` -> `cudaLaunchKernel` (version suffixes are noise for readers)."""
    return _VERSION_SUFFIX.sub("", name)


def bounded(name: str) -> str:
    """`name` itself, or cut to NAME_LIMIT characters with its length and SHA-1 after it."""
    if len(name) <= NAME_LIMIT:
        return name
    digest = hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{name[:NAME_LIMIT]}... (name cut: {len(name):,} characters, sha1 {digest})"


def cut_warning(what: str, lengths: list[int]) -> str:
    """The report's warning for the texts of `what` ("event names") that bounded() cut."""
    return (
        f"{what}: {len(lengths):,} longer than {NAME_LIMIT:,} characters (the longest {max(lengths):,}) "
        f"cut to their first {NAME_LIMIT:,}; the rest of each is not analyzed"
    )
