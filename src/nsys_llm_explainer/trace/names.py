"""API-name normalization shared by every trace source."""

from __future__ import annotations

import re

_VERSION_SUFFIX = re.compile(r"_v\d+$")


def api_base_name(name: str) -> str:
    """`cudaLaunchKernel_v7000` -> `cudaLaunchKernel` (version suffixes are noise for readers)."""
    return _VERSION_SUFFIX.sub("", name)
