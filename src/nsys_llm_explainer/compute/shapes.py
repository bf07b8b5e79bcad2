"""Operator shapes: the inputs of one PyTorch operator call, from a Kineto cpu_op event.

Kineto (PyTorch profiler with record_shapes=True) writes, per operator event, parallel lists:

- "Input Dims": one entry per argument: a tensor's sizes ([8, 4096]), [] for a 0-dim tensor,
  a scalar, None or a non-tensor argument, and a list of size lists for a TensorList
  ([[1, 559, 32], [1, 559, 32]]; older PyTorch writes [] there).
- "Input type": the tensor dtype's C++ name ("c10::BFloat16", "float", "long int") or the
  argument kind ("Scalar", "ScalarList", "TensorList", "" for None).
- "Concrete Inputs" (PyTorch 2.1+): the printed value of scalar arguments ("True", "[1, 1]",
  "0.125", "15"), "" for tensors and None.

Nsight Systems NVTX names carry sizes but no dtype (see nvtx_shapes.py), so an OpShapes holds
one op-level dtype for tensors whose own dtype is unknown, and says whether it was stated by
the trace or assumed by the caller. Parsing never raises on malformed input: it returns
Uncounted with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from nsys_llm_explainer.compute import dtypes

MAX_RANK = 16
MAX_DIM = 1 << 48  # larger sizes are corrupt data, not tensors
_INT = re.compile(r"^\s*-?\d+\s*$")


@dataclass(frozen=True)
class Arg:
    """One operator argument. `dims` is set for a tensor ([] is a 0-dim tensor)."""

    dims: tuple[int, ...] | None = None
    dtype: str | None = None  # canonical dtype of this tensor when the trace states it
    value: str | None = None  # printed value of a non-tensor argument (Concrete Inputs)
    items: tuple[tuple[int, ...], ...] = ()  # sizes of each tensor of a TensorList
    type_name: str = ""  # as recorded ("c10::BFloat16", "Scalar", "")

    @property
    def is_tensor(self) -> bool:
        return self.dims is not None


@dataclass(frozen=True)
class OpShapes:
    """The recorded inputs of one operator call."""

    op: str  # as recorded, e.g. "aten::addmm"
    args: tuple[Arg, ...]
    dtype: str  # dtype for tensors without their own (canonical)
    dtype_source: Literal["stated", "assumed"]
    dtype_evidence: str  # where the dtype came from, in words
    source: Literal["kineto", "nvtx"]
    concrete: bool = False  # whether the values of scalar arguments were recorded

    def arg(self, i: int) -> Arg:
        """Argument i, or an empty (None) argument when the op recorded fewer."""
        return self.args[i] if 0 <= i < len(self.args) else Arg()

    def tensor(self, i: int) -> tuple[int, ...] | None:
        return self.arg(i).dims

    def tensor_dtype(self, i: int) -> str:
        return self.arg(i).dtype or self.dtype

    def tensors(self) -> list[tuple[tuple[int, ...], str]]:
        """Every tensor input (TensorList members included) with its dtype, in order."""
        out = []
        for a in self.args:
            if a.dims is not None:
                out.append((a.dims, a.dtype or self.dtype))
            out.extend((d, a.dtype or self.dtype) for d in a.items)
        return out


@dataclass(frozen=True)
class Uncounted:
    """An operator call whose cost cannot be computed, and why (shown to the user)."""

    op: str
    reason: str


def _dims(value: Any) -> tuple[int, ...] | None:
    """A size list as a tuple, or None when it is not a list of sane non-negative ints."""
    if not isinstance(value, list | tuple) or len(value) > MAX_RANK:
        return None
    out = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_DIM:
            return None
        out.append(v)
    return tuple(out)


def _kineto_arg(dims: Any, type_name: Any, concrete: Any) -> Arg | str:
    """One argument; `type_name` None means the event has no Input type list at all."""
    tname = type_name if isinstance(type_name, str) else ""
    value = concrete if isinstance(concrete, str) and concrete != "" else None
    if tname == "TensorList" or (
        isinstance(dims, list) and dims and all(isinstance(d, list) for d in dims)
    ):
        items = [_dims(d) for d in dims] if isinstance(dims, list) else []
        if any(d is None for d in items):
            return "a TensorList entry of Input Dims is not a list of sizes"
        return Arg(items=tuple(d for d in items if d is not None), type_name=tname)
    parsed = _dims(dims)
    if parsed is None:
        return f"Input Dims entry {dims!r:.60} is not a list of sizes"
    dtype = dtypes.from_kineto(tname)
    if dtype is not None:
        return Arg(dims=parsed, dtype=dtype, type_name=tname)
    if type_name is None and parsed:
        return Arg(dims=parsed)  # no types recorded: sizes alone say it is a tensor
    if tname in dtypes.NON_TENSOR_TYPES:
        return Arg(value=value, type_name=tname)
    # A tensor of a dtype we do not know: keep the sizes, the size per element is assumed.
    return Arg(dims=parsed, type_name=tname)


def from_kineto(
    name: str, args: Mapping[str, Any], fallback_dtype: str = "bf16"
) -> OpShapes | Uncounted:
    """The shapes of a Kineto cpu_op event's `args`; Uncounted when they are missing or bad.

    The op-level dtype is the first tensor's stated dtype; `fallback_dtype` is used (and
    marked assumed) only when no tensor states one.
    """
    if not isinstance(args, Mapping):
        return Uncounted(name, "the event has no args")
    dims, types = args.get("Input Dims"), args.get("Input type")
    if not isinstance(dims, list):
        return Uncounted(name, "the event has no Input Dims (record_shapes was off)")
    if not isinstance(types, list):
        types = None
    concrete = args.get("Concrete Inputs")
    has_values = isinstance(concrete, list)
    if not isinstance(concrete, list):
        concrete = []
    parsed: list[Arg] = []
    for i, d in enumerate(dims):
        t = None if types is None else (types[i] if i < len(types) else "")
        c = concrete[i] if i < len(concrete) else None
        arg = _kineto_arg(d, t, c)
        if isinstance(arg, str):
            return Uncounted(name, arg)
        parsed.append(arg)
    stated = next((a.dtype for a in parsed if a.dtype is not None), None)
    if stated is not None:
        return OpShapes(name, tuple(parsed), stated, "stated", "Input type", "kineto", has_values)
    fallback = dtypes.normalize(fallback_dtype)
    return OpShapes(
        name,
        tuple(parsed),
        fallback,
        "assumed",
        "no tensor input states its dtype",
        "kineto",
        has_values,
    )


# ----- printed argument values (Concrete Inputs) -------------------------------------------


def parse_bool(text: str | None) -> bool | None:
    if text is None:
        return None
    t = text.strip()
    return True if t in ("True", "true", "1") else False if t in ("False", "false", "0") else None


def parse_int(text: str | None) -> int | None:
    return int(text) if text is not None and _INT.match(text) else None


def parse_int_list(text: str | None) -> tuple[int, ...] | None:
    """ "[1, 2]" or "2" -> (1, 2) / (2,); None when the text is not an int list."""
    if text is None:
        return None
    t = text.strip()
    if _INT.match(t):
        return (int(t),)
    if not (t.startswith("[") and t.endswith("]")):
        return None
    body = t[1:-1].strip()
    if not body:
        return ()
    parts = [p.strip() for p in body.split(",")]
    if not all(_INT.match(p) for p in parts) or len(parts) > MAX_RANK:
        return None
    return tuple(int(p) for p in parts)
