"""Operator shapes: the inputs of one PyTorch operator call, from a Kineto cpu_op event.

Kineto (PyTorch profiler with record_shapes=True) writes, per operator event, parallel lists:

- "Input Dims": one entry per argument: a tensor's sizes ([8, 4096]), [] for a 0-dim tensor,
  a scalar, None or a non-tensor argument, and a list of size lists for a TensorList
  ([[1, 559, 32], [1, 559, 32]]; older PyTorch writes [] there).
- "Input type": the tensor dtype's C++ name ("c10::BFloat16", "float", "long int") or the
  argument kind ("Scalar", "ScalarList", "TensorList", "" for None).
- "Concrete Inputs" (PyTorch 2.1+): the printed value of scalar arguments ("True", "[1, 1]",
  "0.125", "15"), "" for tensors and None.

Nsight Systems NVTX names carry sizes but no dtype (shapes_from_nvtx below), so an OpShapes holds
one op-level dtype for tensors whose own dtype is unknown, and says whether it was stated by
the trace or assumed by the caller. Parsing never raises on malformed input: it returns
Uncounted with the reason.

Operator shapes from the NVTX range names PyTorch emits under Nsight Systems.

`torch.autograd.profiler.emit_nvtx(record_shapes=True)` (what `nsys profile
--pytorch=autograd-shapes-nvtx` turns on) names each operator range:

    aten::addmm, seq = 12, op_id = 5, sizes = [[4096], [8, 4096], [4096, 4096], [], []],
        input_op_ids = [(3,0), (4,0), (0,-1)]

(one line). Every part after the name is optional: "seq" is the autograd sequence number,
"op_id" the record-function handle, "sizes" one size list per argument ([] for scalars, None
and non-tensors; the tensors of a TensorList are flattened into the list), "input_op_ids" the
(op_id, output index) that produced each tensor input. Older PyTorch wrote "seq=12" without
spaces, backward ranges carry "stashed seq=N", and without record_shapes there are no sizes.
Other "key = value" parts (stack text, future keys) are kept as text, not interpreted.

The name carries no dtype: shapes_from_nvtx takes the dtype the caller inferred (from the
kernel the range launched, see compute/dtypes.py) and marks it assumed."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from nsys_llm_explainer.compute import dtypes
from nsys_llm_explainer.frozen import frozen

MAX_RANK = 16
MAX_DIM = 1 << 48  # larger sizes are corrupt data, not tensors
_INT = re.compile(r"^\s*-?\d+\s*$")


@frozen
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


@frozen
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


@frozen
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


MAX_NAME_CHARS = 1 << 16
_KEY = re.compile(r",\s*(stashed seq|seq|op_id|sizes|input_op_ids)\s*=\s*")
_LEADING_INT = re.compile(r"-?\d+")
_LIST = re.compile(r"\[([^\[\]]*)\]")
_PAIR = re.compile(r"\(\s*(-?\d+)\s*,\s*(-?\d+)\s*\)")


@frozen
class NvtxOp:
    name: str
    seq: int | None = None
    stashed_seq: int | None = None  # backward ranges: the seq of the forward op
    op_id: int | None = None
    sizes: tuple[tuple[int, ...], ...] | None = None  # None: the name has no sizes
    input_op_ids: tuple[tuple[int, int], ...] = ()
    extras: tuple[str, ...] = ()  # text the parser did not interpret

    @property
    def is_backward(self) -> bool:
        return self.stashed_seq is not None or "backward" in self.name.lower()


def _bracket_end(text: str, start: int) -> int:
    """Index after the bracket that closes the one at `start`, or -1."""
    depth = 0
    for i in range(start, len(text)):
        ch = text[i]
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth == 0:
                return i + 1
    return -1


def _sizes(body: str) -> tuple[tuple[int, ...], ...] | None:
    inner = body.strip()[1:-1]
    out = []
    for m in _LIST.finditer(inner):
        parts = [p.strip() for p in m.group(1).split(",") if p.strip()]
        if len(parts) > MAX_RANK or not all(p.isdigit() for p in parts):
            return None
        dims = tuple(int(p) for p in parts)
        if any(d > MAX_DIM for d in dims):
            return None
        out.append(dims)
    rest = _LIST.sub("", inner).replace(",", "").strip()
    return tuple(out) if not rest else None


def parse_nvtx_name(text: str) -> NvtxOp | None:
    """The parts of a PyTorch operator range name; None when it has none of the known keys."""
    if not isinstance(text, str) or len(text) > MAX_NAME_CHARS:
        return None
    first = _KEY.search(text)
    if first is None:
        return None
    fields: dict[str, object] = {}
    extras: list[str] = []
    pos = first.start()
    while pos < len(text):
        m = _KEY.match(text, pos)
        if m is None:  # text between known keys that we do not interpret
            nxt = _KEY.search(text, pos + 1)
            end = nxt.start() if nxt else len(text)
            extras.append(text[pos:end].strip(", "))
            pos = end
            continue
        key, vstart = m.group(1), m.end()
        if key in ("sizes", "input_op_ids") and text.startswith("[", vstart):
            vend = _bracket_end(text, vstart)
            if vend < 0:
                return NvtxOp(text[: first.start()].strip(), extras=(text[pos:],))
            value = text[vstart:vend]
            if key == "sizes":
                fields["sizes"] = _sizes(value)
                if fields["sizes"] is None:
                    extras.append(f"sizes = {value}")
            else:
                fields["input_op_ids"] = tuple((int(a), int(b)) for a, b in _PAIR.findall(value))
            pos = vend
            continue
        num = _LEADING_INT.match(text, vstart)
        if num is not None:
            fields[key.replace(" ", "_")] = int(num.group(0))
            pos = num.end()
        else:
            nxt = _KEY.search(text, vstart)
            end = nxt.start() if nxt else len(text)
            extras.append(text[pos:end].strip(", "))
            pos = end
    return NvtxOp(
        name=text[: first.start()].strip(),
        seq=fields.get("seq"),  # type: ignore[arg-type]
        stashed_seq=fields.get("stashed_seq"),  # type: ignore[arg-type]
        op_id=fields.get("op_id"),  # type: ignore[arg-type]
        sizes=fields.get("sizes"),  # type: ignore[arg-type]
        input_op_ids=fields.get("input_op_ids", ()),  # type: ignore[arg-type]
        extras=tuple(e for e in extras if e),
    )


def shapes_from_nvtx(
    name_or_op: str | NvtxOp, dtype: str, dtype_evidence: str = "given by the caller"
) -> OpShapes | Uncounted:
    """OpShapes from an NVTX range name; every tensor gets `dtype`, marked assumed.

    A size list [] is read as a non-tensor argument (NVTX cannot tell a 0-dim tensor, a scalar
    and None apart; a 0-dim tensor moves a few bytes at most).
    """
    op = parse_nvtx_name(name_or_op) if isinstance(name_or_op, str) else name_or_op
    if op is None:
        return Uncounted(str(name_or_op)[:200], "not a PyTorch operator range name")
    if op.sizes is None:
        return Uncounted(
            op.name, "the range name has no sizes (record_shapes / autograd-shapes-nvtx was off)"
        )
    args = tuple(Arg(dims=d) if d else Arg() for d in op.sizes)
    return OpShapes(op.name, args, dtypes.normalize(dtype), "assumed", dtype_evidence, "nvtx")
