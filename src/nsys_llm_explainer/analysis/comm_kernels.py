"""Which kernels are communication (NCCL/RCCL and the like), by the built-in category table's
communication pattern."""

from __future__ import annotations

import re

import numpy as np

from nsys_llm_explainer.kernels.categories import BUILTIN
from nsys_llm_explainer.trace.columns import factorize
from nsys_llm_explainer.trace.data import TraceData

COMM_PATTERN = next(r.pattern for r in BUILTIN if r.category == "communication")


def comm_mask(data: TraceData) -> np.ndarray:
    """Per kernel: True for communication kernels (cached)."""

    def build() -> np.ndarray:
        k = data.kernels()
        codes, uniq = factorize(k.name_id)
        lookup = data.kernel_names(np.asarray(uniq))
        rx = re.compile(COMM_PATTERN, re.IGNORECASE)
        is_comm = np.array(
            [rx.search(lookup.get(int(i), "")) is not None for i in uniq], dtype=bool
        )
        return is_comm[codes] if len(codes) else np.zeros(0, bool)

    return data.cached("comm_mask", build)
