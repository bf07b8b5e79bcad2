"""NVTX range names as the operations they are.

Profilers that annotate every operator write one-off range names: PyTorch's emit_nvtx
appends `, seq = N, op_id = N` (and, with record_shapes, `, sizes = [[...], ...]` and
`, input_op_ids = [...]`; older builds `, stack = ...`) to the operator name, and pyprof /
DLProf push Python dict strings such as
`{'mod': 'torch.nn.functional', 'op': 'linear', 'args': [...]}` or
`{'traceMarker': [...], 'funcStack': '/forward/linear'}`. normalize() maps each to the
operation (`aten::addmm`, `linear`) so thousands of names collapse into the few that a
reader compares; every other name is returned unchanged (apart from surrounding blanks).

The annotations carry information too: input_sizes() returns the tensor shapes of a name
(PyTorch `sizes = [...]`, or the tensor arguments of a pyprof argument marker).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence

import numpy as np

from nsys_llm_explainer.trace.data import TraceData

# Annotation keys PyTorch appends as ", key = value"; everything from the first one is cut.
ANNOTATION_KEYS = ("seq", "op_id", "sizes", "input_op_ids", "stack")
_ANNOTATION = re.compile(r",\s*(?:" + "|".join(ANNOTATION_KEYS) + r")\s*=\s*")
_SIZES = re.compile(r",\s*sizes\s*=\s*(?=\[)")
_STRING = r"""(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")"""
_KEYS = {key: re.compile(rf"""['"]{key}['"]\s*:\s*{_STRING}""") for key in ("op", "funcStack", "traceMarker", "mod")}
_LAST_FRAME = re.compile(r"""['"]traceMarker['"]\s*:\s*\[.*['"]([^'"]*?)['"]\s*\]""", re.S)
_SHAPE = re.compile(r"""['"]shape['"]\s*:\s*[(\[]([^()\[\]]*)[)\]]""")
_PYPROF_KEY = re.compile(r"""['"](?:op|mod|traceMarker|funcStack)['"]\s*:""")
PYPROF_MARKER = "(pyprof marker)"


def _value(key: str, text: str) -> str | None:
    m = _KEYS[key].search(text)
    if m is None:
        return None
    value = m.group(1) if m.group(1) is not None else m.group(2)
    return value.strip() or None


def _pyprof(text: str) -> str:
    """The operation a pyprof/DLProf dict marker stands for: its `op`, else a string
    `traceMarker`, else the last `funcStack` component, else the innermost frame of a
    list `traceMarker`, else `mod` (a module marker's class)."""
    for key in ("op", "traceMarker"):  # an argument marker's op; a string trace marker
        value = _value(key, text)
        if value:
            return value
    stack = _value("funcStack", text)  # DLProf: "/caller/.../op"
    if stack:
        last = stack.rstrip("/").rsplit("/", 1)[-1].strip()
        if last:
            return last
    frame = _LAST_FRAME.search(text)
    if frame and frame.group(1).strip():
        # A call-stack marker: its innermost frame (file:line, the file's base name).
        return frame.group(1).strip().replace("\\", "/").rsplit("/", 1)[-1]
    mod = _value("mod", text)
    return mod or PYPROF_MARKER


def is_pyprof(name: str) -> bool:
    """A pyprof/DLProf dict marker: a `{...}` string with one of their keys (`op`, `mod`,
    `traceMarker`, `funcStack`); a user range merely shaped like a dict is not one."""
    s = name.strip()
    return s.startswith("{") and s.endswith("}") and _PYPROF_KEY.search(s) is not None


def normalize(name: str) -> str:
    """The operation a range name stands for; names of other shapes come back stripped."""
    s = name.strip()
    if s.startswith("{"):
        if is_pyprof(s):
            return _pyprof(s)
    elif "=" not in s:  # every PyTorch annotation has one
        return s
    m = _ANNOTATION.search(s)
    if m is None:
        return s
    head = s[: m.start()].strip()
    return head or s


def input_sizes(name: str) -> list[tuple[int, ...]] | None:
    """Input tensor shapes carried by a range name, in argument order (`()` for a scalar
    or non-tensor argument); None when the name carries none or they do not parse."""
    s = name.strip()
    if is_pyprof(s):
        shapes = []
        for m in _SHAPE.finditer(s):
            dims = [d.strip() for d in m.group(1).split(",") if d.strip()]
            if not all(d.lstrip("-").isdigit() for d in dims):
                return None
            shapes.append(tuple(int(d) for d in dims))
        return shapes or None
    found = _SIZES.search(s)
    if found is None:
        return None
    text = _bracketed(s, found.end())
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, list) or not all(
        isinstance(v, list) and all(isinstance(d, int) and not isinstance(d, bool) for d in v) for v in value
    ):
        return None
    return [tuple(v) for v in value]


def grouped(names: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The distinct normalized names (in order of first appearance) and, per raw name code
    (index into `names`), the code of its normalized name."""
    index: dict[str, int] = {}
    codes = np.fromiter((index.setdefault(normalize(n), len(index)) for n in names), np.int64, len(names))
    return list(index), codes


def group_phases(
    names: Sequence[str], codes: np.ndarray, n_groups: int, phase_of: Callable[[str], str | None],
    order: Sequence[str],
) -> list[str | None]:
    """Per normalized name: the phases of its raw names (`phase_of`), distinct, in `order`
    (the phase map's), joined by " + "; None when none of them has a phase."""
    found: list[set[str]] = [set() for _ in range(n_groups)]
    for raw, code in zip(names, codes.tolist(), strict=True):
        phase = phase_of(raw)
        if phase is not None:
            found[code].add(phase)
    return [" + ".join(p for p in order if p in f) or None for f in found]


def _bracketed(s: str, start: int) -> str | None:
    """The balanced `[...]` starting at s[start]."""
    depth = 0
    for i in range(start, len(s)):
        if s[i] == "[":
            depth += 1
        elif s[i] == "]":
            depth -= 1
            if depth == 0:
                return s[start : i + 1]
    return None


__all__ = ["ANNOTATION_KEYS", "group_phases", "grouped", "input_sizes", "is_pyprof", "normalize"]


def normalized_names(data: TraceData) -> tuple[list[str], np.ndarray]:
    """The distinct normalized NVTX names, and per raw name code its normalized code
    (analysis/nvtx_names.grouped), computed once per trace for both NVTX metrics."""
    return data.cached("nvtx_normalized", lambda: grouped(data.nvtx_names()))


def name_mask(data: TraceData, pattern: re.Pattern[str], anchored: bool = False) -> np.ndarray:
    """Per raw NVTX name code: does the pattern hit its normalized name? (One regex per
    distinct normalized name: PyTorch's emit_nvtx names are unique per call.)"""
    norm, codes = normalized_names(data)
    test = pattern.match if anchored else pattern.search
    hit = np.array([bool(test(n.strip())) for n in norm] or [False], dtype=bool)
    return hit[codes] if len(codes) else np.zeros(0, dtype=bool)
