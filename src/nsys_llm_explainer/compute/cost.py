"""The cost record every formula returns, and the size arithmetic they share.

Conventions (docs/compute.md states them for users):

- FLOPs = 2 x multiply-accumulates (MACs) of the op's matrix products. Bias adds, alpha/beta
  scaling, softmax and normalisation arithmetic are not counted (as in PyTorch's flop
  counter), so elementwise, normalisation and memory ops are bytes-only (flops = 0).
- Bytes are the compulsory traffic: every input tensor read once and the output written
  once, as if caches were perfect. Real kernels move at least this much.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import field
from typing import Literal

from nsys_llm_explainer.compute import dtypes
from nsys_llm_explainer.frozen import frozen

Family = Literal["gemm", "conv", "attention", "memory", "view"]
Direction = Literal["forward", "backward"]


@frozen
class OpCost:
    op: str  # the operator as recorded ("aten::addmm")
    family: Family
    direction: Direction
    flops: int  # 2 x MACs; 0 for bytes-only ops
    bytes_read: int
    bytes_written: int
    dtype: str  # storage dtype of the main inputs (canonical, see dtypes.py)
    compute_dtype: str | None  # peak-table class the math runs at ("bf16", "tf32"), or None
    dtype_source: Literal["stated", "assumed"]
    formula: str  # the arithmetic, e.g. "2*M*N*K = 2*8944*1024*1024"
    assumptions: tuple[str, ...] = ()
    # True when PyTorch runs this op by calling another op that has its own formula
    # (aten::linear -> aten::addmm): count the composite or its children, never both.
    composite: bool = False
    extra: dict[str, object] = field(default_factory=dict, compare=False)

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float:
        """Arithmetic intensity in FLOP per byte (0 for bytes-only ops)."""
        return self.flops / self.bytes if self.bytes else 0.0


def numel(dims: Iterable[int]) -> int:
    return math.prod(dims)


def nbytes(dims: Iterable[int], dtype: str) -> int:
    return numel(dims) * dtypes.size(dtype)


def broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...] | None:
    """NumPy/PyTorch broadcast of shapes, or None when they do not broadcast."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(rank):
        sizes = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def direction_of(op: str) -> Direction:
    """Backward when the op name says so (aten::convolution_backward, MmBackward0)."""
    return "backward" if "backward" in op.lower() else "forward"


def short_name(op: str) -> str:
    """ "aten::addmm" -> "addmm"; overload suffixes (".default") dropped."""
    base = op.strip().rsplit("::", 1)[-1]
    return base.split(".", 1)[0]
