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

Innermost enclosing NVTX range per thread, by sort-and-sweep.

Ranges of one thread are sorted by (start, -end). For a query interval [t0, t1] the
candidate is the last range starting at or before t0; if it ends before t1, the answer
lies on its chain of "previous ranges that end later" (a monotonic-stack array), so the
walk never revisits ranges that cannot enclose the query. The rule: the enclosing range
with the latest start wins; ties go to the earliest end."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence

import numpy as np

from nsys_llm_explainer.analysis.groups import PACK_LIMIT
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.trace.columns import Columns
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
    (analysis/nvtx.grouped), computed once per trace for both NVTX metrics."""
    return data.cached("nvtx_normalized", lambda: grouped(data.nvtx_names()))


def name_mask(data: TraceData, pattern: re.Pattern[str], anchored: bool = False) -> np.ndarray:
    """Per raw NVTX name code: does the pattern hit its normalized name? (One regex per
    distinct normalized name: PyTorch's emit_nvtx names are unique per call.)"""
    norm, codes = normalized_names(data)
    test = pattern.match if anchored else pattern.search
    hit = np.array([bool(test(n.strip())) for n in norm] or [False], dtype=bool)
    return hit[codes] if len(codes) else np.zeros(0, dtype=bool)


@frozen
class RangeIndex:
    order: np.ndarray  # sorted position -> row in the NVTX columns
    start: np.ndarray
    end: np.ndarray
    tkey: np.ndarray
    chain: np.ndarray  # previous range of the same thread with a strictly later end, or -1
    parent: np.ndarray  # innermost range of the same thread enclosing this one, or -1
    seg_keys: np.ndarray  # distinct thread keys, sorted
    seg_lo: np.ndarray
    seg_hi: np.ndarray
    # (segment, start) packed into one ascending int64 per range (segment * span + start -
    # t0), so a query finds its candidate in every segment with one binary search; None
    # when the packed keys would not fit in int64.
    packed: np.ndarray | None = None
    t0: int = 0
    span: int = 0


def _previous_greater(end: np.ndarray, seg_first: np.ndarray, strict: bool) -> np.ndarray:
    """Per position, the nearest earlier position of its segment whose end is greater
    (strict) or greater-or-equal, else -1.

    Pointer jumping instead of a per-row stack walk: every candidate that ends too early
    is replaced by its own current candidate; everything between a position and its
    candidate ends no later than it, so the jump never skips the answer. All positions
    advance together, in O(log n) vectorized rounds for nested data.
    """
    cand = np.arange(-1, len(end) - 1, dtype=np.int64)
    cand[seg_first] = -1
    active = np.flatnonzero(cand >= 0)
    while len(active):
        c = cand[active]
        skip = end[c] <= end[active] if strict else end[c] < end[active]
        active = active[skip]
        cand[active] = cand[c[skip]]
        active = active[cand[active] >= 0]
    return cand


def build(nvtx: Columns) -> RangeIndex:
    """Index the ended ranges of `nvtx` (columns start, end, tkey; end < 0 means unended)."""
    rows = np.flatnonzero((nvtx.end >= 0) & (nvtx.tkey >= 0))
    order = rows[np.lexsort((-nvtx.end[rows], nvtx.start[rows], nvtx.tkey[rows]))]
    start, end, tkey = nvtx.start[order], nvtx.end[order], nvtx.tkey[order]
    seg_keys, seg_lo = np.unique(tkey, return_index=True)
    # No ended range at all (every end NULL) must give zero segments, not one empty one.
    seg_hi = np.r_[seg_lo[1:], len(tkey)].astype(np.int64)[: len(seg_lo)]
    chain = _previous_greater(end, seg_lo, strict=True)
    parent = _previous_greater(end, seg_lo, strict=False)
    packed, t0, span = None, 0, 0
    if len(start):
        t0, span = int(start.min()), int(start.max()) - int(start.min()) + 1
        if span * len(seg_keys) < PACK_LIMIT:
            packed = np.repeat(np.arange(len(seg_keys), dtype=np.int64) * span, seg_hi - seg_lo)
            packed += start - t0
    return RangeIndex(order, start, end, tkey, chain, parent, seg_keys, seg_lo, seg_hi, packed, t0, span)


def innermost(index: RangeIndex, q_tkey: np.ndarray, q_start: np.ndarray, q_end: np.ndarray) -> np.ndarray:
    """Sorted-position of the innermost range enclosing each query, or -1."""
    result = np.full(len(q_tkey), -1, dtype=np.int64)
    if len(q_tkey) == 0 or len(index.order) == 0:
        return result
    seg = np.searchsorted(index.seg_keys, q_tkey)
    np.minimum(seg, len(index.seg_keys) - 1, out=seg)
    qi = np.flatnonzero(index.seg_keys[seg] == q_tkey)  # queries on threads with ranges
    seg = seg[qi]
    if index.packed is not None:
        # Offsets before the first range start become -1: below every key of the segment.
        offset = np.clip(q_start[qi] - index.t0, -1, index.span - 1)
        cand = np.searchsorted(index.packed, seg * index.span + offset, "right") - 1
    else:
        cand, qi, seg = _candidates_by_segment(index, qi, seg, q_start)
    found = cand >= index.seg_lo[seg]  # some range of the thread starts early enough
    active, c = qi[found], cand[found]
    del qi, seg, cand, found
    while len(active):
        good = index.end[c] >= q_end[active]
        result[active[good]] = c[good]
        nxt = index.chain[c[~good]]
        keep = nxt >= 0
        active = active[~good][keep]
        c = nxt[keep]
    return result


def _candidates_by_segment(
    index: RangeIndex, qi: np.ndarray, seg: np.ndarray, q_start: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per query (reordered by segment): the last range of its segment starting at or
    before it, with one binary search per segment; returns (cand, qi, seg) reordered."""
    by_seg = np.argsort(seg, kind="stable")
    qi, seg = qi[by_seg], seg[by_seg]
    del by_seg
    bounds = np.searchsorted(seg, np.arange(len(index.seg_keys) + 1))
    cand = np.empty(len(qi), dtype=np.int64)
    for s in np.flatnonzero(np.diff(bounds)).tolist():
        sel = slice(int(bounds[s]), int(bounds[s + 1]))
        a, b = int(index.seg_lo[s]), int(index.seg_hi[s])
        cand[sel] = a + np.searchsorted(index.start[a:b], q_start[qi[sel]], "right") - 1
    return cand, qi, seg


def depths(index: RangeIndex) -> np.ndarray:
    """Nesting depth of each sorted range (0 = outermost), by pointer jumping on `parent`."""
    parent = index.parent
    depth = (parent >= 0).astype(np.int64)  # distance to `anc`
    anc = parent.copy()
    live = np.flatnonzero(anc >= 0)
    while len(live):
        a = anc[live]
        depth[live] += depth[a]
        anc[live] = anc[a]
        live = live[anc[live] >= 0]
    return depth


def containers(index: RangeIndex, ranges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (range, container) pair for the sorted positions `ranges`, self included.

    A container is a range of the same thread that starts no later and ends no earlier.
    This is containment, not the parent tree: a range inside two crossing start/end ranges
    has both as containers, though only one can be its parent. The containers of r are the
    earlier positions of its segment with end >= end[r]; after each one found the walk goes
    on just before it, and skips along `chain` past ranges that end too early (everything
    a chain step jumps over ends no later than the range it left).
    """
    ranges = np.asarray(ranges, dtype=np.int64)
    found_r, found_c = [ranges], [ranges]
    lo = index.seg_lo[np.searchsorted(index.seg_keys, index.tkey[ranges])]
    cur = ranges - 1
    live = cur >= lo
    r, cur, lo = ranges[live], cur[live], lo[live]
    need = index.end[r]
    while len(r):
        hit = index.end[cur] >= need
        found_r.append(r[hit])
        found_c.append(cur[hit])
        nxt = np.where(hit, cur - 1, index.chain[cur])
        live = nxt >= lo
        r, cur, lo, need = r[live], nxt[live], lo[live], need[live]
    return np.concatenate(found_r), np.concatenate(found_c)


def climb(index: RangeIndex, pos: np.ndarray, stop: np.ndarray,
          fold: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """From each sorted position in `pos` (-1: none) up its chain of parents, as long as the
    range is not a `stop` one (per sorted range): (the outermost range reached, the range just
    below it on the chain, the minimum of `fold` over the ranges passed, -1 when none is >= 0).
    A position that is itself a stop range reaches nothing (-1)."""
    top = np.where((pos >= 0) & ~stop[np.maximum(pos, 0)], pos, -1)
    below = top.copy()
    big = np.iinfo(np.int64).max
    values = fold if fold is not None else np.full(len(stop), -1, np.int64)
    best = np.where(top >= 0, values[np.maximum(top, 0)], -1)
    best = np.where(best < 0, big, best)
    live = np.flatnonzero(top >= 0)
    while len(live):
        p = index.parent[top[live]]
        move = (p >= 0) & ~stop[np.maximum(p, 0)]
        live = live[move]
        below[live] = top[live]
        top[live] = p[move]
        v = values[top[live]]
        best[live] = np.where((v >= 0) & (v < best[live]), v, best[live])
    return top, below, np.where(best == big, -1, best)
