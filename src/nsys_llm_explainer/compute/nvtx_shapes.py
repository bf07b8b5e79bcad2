"""Operator shapes from the NVTX range names PyTorch emits under Nsight Systems.

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
kernel the range launched, see kernel_dtype.py) and marks it assumed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nsys_llm_explainer.compute import dtypes
from nsys_llm_explainer.compute.shapes import MAX_DIM, MAX_RANK, Arg, OpShapes, Uncounted

MAX_NAME_CHARS = 1 << 16
_KEY = re.compile(r",\s*(stashed seq|seq|op_id|sizes|input_op_ids)\s*=\s*")
_LEADING_INT = re.compile(r"-?\d+")
_LIST = re.compile(r"\[([^\[\]]*)\]")
_PAIR = re.compile(r"\(\s*(-?\d+)\s*,\s*(-?\d+)\s*\)")


@dataclass(frozen=True)
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
