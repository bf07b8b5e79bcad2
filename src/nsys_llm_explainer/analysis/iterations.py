"""Serving iterations: which GPU work belongs to which scheduler step of an LLM engine.

An iteration is one scheduler step: one forward pass of the model over the batch, with its
sampling. They are found from what the capture says, in this order (the first that finds
any wins; `source` says which):

1. "engine_marks" / "user_marks": annotation ranges (NVTX; PyTorch profiler
   user_annotation) that mark iterations, read by iteration_marks.parse_mark: vLLM's
   execute_context_..., SGLang's step[...], TensorRT-LLM's _forward_step, user ranges such as
   PREFILL and DECODE_STEP_007.
2. "model_runner": Python frames of an engine's model runner (vLLM execute_model, SGLang
   forward_extend / forward_decode), in PyTorch profiler traces with Python stacks.
3. "model_forward": the outermost model module frame (`nn.Module: Qwen2Model_0`, with_modules).
4. "model_structure": one pass through the layer stack is one iteration (passes()): the
   kernels in launch order, a unit of kernels that repeats back to back at least MIN_LAYERS
   times is the layer; each maximal run of it is one pass's layers; the kernels between two
   runs (the vocabulary GEMM and sampling of one pass, the embedding of the next) are cut at
   the longest launch gap between them. Everything a CUDA graph replays inside a pass
   belongs to it (its kernels are in the sequence).

Marks that nest (per thread): a mark that holds exactly one other mark is that iteration
(SGLang's step[...] inside execute_...: the inner mark's range is used, its numbers completed
from the outer one, `outer` names it); a mark that holds several is a loop, not an iteration
(DECODE_LOOP around DECODE_STEP_*), and so is a mark whose name says `loop`; a loop that holds
no mark is cut into passes by the structure rule. A mark that launches no GPU work is not
counted (`empty`). A mark right after an iteration whose phase is not decode, with at most
SAMPLER_MAX_KERNELS kernels and less than SAMPLER_SHARE of that iteration's, and no
decode phase of its own, samples that iteration's first token (FIRST_TOKEN_FROM_PREFILL):
it is merged into it.

A kernel belongs to an iteration when its launch call starts inside the iteration's host
range on the same process (kernels without a launch call in the capture: to none); work
queued before the capture (analysis/carried.py) belongs to none.

Numbers (sequences, new tokens, key/value tokens) come from the marks; where a mark has none,
from the input shapes of the iteration's `aten::embedding` call (PyTorch profiler traces
with record_shapes: [B, S] gives B sequences of S tokens, [T] gives T tokens); `numbers_from`
says which. Where neither tells, they stay None: nothing is guessed. The phase comes from the
mark, else from the numbers (one new token per sequence: decode; more: prefill), else it is
None.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

import numpy as np

from nsys_llm_explainer.analysis.blocking import sync_kinds
from nsys_llm_explainer.analysis.carried import carried
from nsys_llm_explainer.analysis.groups import group_codes
from nsys_llm_explainer.analysis.iteration_marks import DECODE, MIXED, PREFILL, Mark, parse_frame, parse_mark
from nsys_llm_explainer.analysis.join import kernel_launch_index
from nsys_llm_explainer.trace.data import TraceData, Unavailable

KEY = "serving_iterations"
STRUCTURE_KEY = "serving_iterations:structure"
MIN_LAYERS = 3
SAMPLER_MAX_KERNELS = 8
SAMPLER_SHARE = 0.1
MAX_CANDIDATE_PERIODS = 24  # layer lengths tried by the structure rule
PASS_PAUSE_RATIO = 3.0  # a launch gap this many times the typical one between two passes
HALF_ALIKE = 0.75  # share of positions alike for a unit to be two layers
MAX_STRUCTURE_KERNELS = 2_000_000  # kernels the structure rule reads per process
EMBEDDING_OPS = ("aten::embedding",)
EMBEDDING_LOOKBACK = 2  # embedding calls started before an iteration that may still overlap it
MARK_SOURCES = ("engine_marks", "user_marks", "model_runner")


@dataclass
class Iteration:
    pid: int
    tkey: int
    start: int  # host range
    end: int
    name: str
    mark: Mark | None
    outer: str | None = None
    kernels: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    layers: int | None = None
    numbers_from: str | None = None
    sequences: int | None = None
    tokens: int | None = None
    kv_tokens: int | None = None
    phase: str | None = None


@dataclass(frozen=True)
class Iterations:
    source: str
    engine: str | None
    detail: str
    items: tuple[Iteration, ...]
    kernel_iter: np.ndarray  # per kernel: index into items, or -1
    empty: tuple[str, ...] = ()  # marks that launched no GPU work
    loops: tuple[str, ...] = ()  # marks that hold several iterations
    merged: tuple[str, ...] = ()  # first-token marks merged into the iteration before

    @property
    def from_marks(self) -> bool:
        return self.source in MARK_SOURCES


# -- marks ----------------------------------------------------------------------------


@dataclass
class _Cand:
    row: int
    start: int
    end: int
    pid: int
    tkey: int
    name: str
    mark: Mark
    children: list[_Cand] = field(default_factory=list)
    outer: str | None = None


def _candidates(start: np.ndarray, end: np.ndarray, pid: np.ndarray, tkey: np.ndarray, name: np.ndarray,
                names: list[str], parse: object) -> list[_Cand]:
    parsed = {i: parse(n) for i, n in enumerate(names)}  # type: ignore[operator]
    ok = np.array([parsed[i] is not None for i in range(len(names))] or [False])
    rows = np.flatnonzero(ok[name] & (end >= start) & (end >= 0)) if len(name) else np.empty(0, np.int64)
    return [_Cand(int(r), int(start[r]), int(end[r]), int(pid[r]), int(tkey[r]), names[int(name[r])],
                  parsed[int(name[r])]) for r in rows.tolist()]


def _nest(cands: list[_Cand]) -> tuple[list[_Cand], list[_Cand]]:
    """(iterations, loops) from the candidates of one thread (module docstring)."""
    cands = sorted(cands, key=lambda c: (c.start, -c.end, c.row))
    stack: list[_Cand] = []
    roots: list[_Cand] = []
    for c in cands:
        while stack and not (c.start >= stack[-1].start and c.end <= stack[-1].end):
            stack.pop()
        (stack[-1].children if stack else roots).append(c)
        stack.append(c)
    out: list[_Cand] = []
    loops: list[_Cand] = []

    def walk(c: _Cand) -> None:
        if c.mark.loop or len(c.children) >= 2:
            loops.append(c)
            for ch in c.children:
                walk(ch)
            return
        if len(c.children) == 1:
            ch = c.children[0]
            ch.mark = ch.mark.merged(c.mark)
            ch.outer = ch.outer or c.name
            walk(ch)
            return
        out.append(c)

    for r in roots:
        walk(r)
    return out, loops


def _mark_iterations(data: TraceData) -> tuple[str, list[_Cand], list[_Cand]] | None:
    try:
        nv = data.nvtx()
        names = data.nvtx_names()
    except Unavailable:
        nv, names = None, []
    if nv is not None and len(nv) and names:
        cands = _candidates(nv.start, nv.end, nv.pid, nv.tkey, nv.name, names, parse_mark)
        if cands:
            source = "engine_marks" if any(c.mark.engine != "user" for c in cands) else "user_marks"
            return source, *_nest_all(cands)
    try:
        py = data.python_functions()
        pnames = data.operator_names()
    except Unavailable:
        return None
    if not len(py):
        return None
    cands = _candidates(py.start, py.end, py.pid, py.tkey, py.name, pnames, parse_frame)
    runner = [c for c in cands if c.mark.engine == "model_runner"]
    if runner:
        return "model_runner", *_nest_all(runner)
    model = [c for c in cands if c.mark.engine == "model_forward"]
    if model:
        # the outermost module frames only (a model module inside another is not a pass)
        its, _ = _nest_all(model, keep_outer=True)
        return "model_forward", its, []
    return None


def _nest_all(cands: list[_Cand], keep_outer: bool = False) -> tuple[list[_Cand], list[_Cand]]:
    by_thread: dict[tuple[int, int], list[_Cand]] = {}
    for c in cands:
        by_thread.setdefault((c.pid, c.tkey), []).append(c)
    its: list[_Cand] = []
    loops: list[_Cand] = []
    for group in by_thread.values():
        if keep_outer:
            group = sorted(group, key=lambda c: (c.start, -c.end, c.row))
            reach = -1
            for c in group:
                if c.start >= reach:
                    its.append(c)
                    reach = c.end
            continue
        a, b = _nest(group)
        its += a
        loops += b
    return its, loops


# -- kernels of each iteration -------------------------------------------------------------


def _launch_times(data: TraceData) -> tuple[np.ndarray, np.ndarray]:
    """Per kernel: launch call start, and whether it may belong to an iteration (it has a
    launch call in the capture and is not carried)."""
    call = kernel_launch_index(data)
    try:
        rt_start = data.runtime().start
    except Unavailable:
        rt_start = np.empty(0, np.int64)
    ok = (call >= 0) & ~carried(data).mask
    t = np.where(ok, rt_start[np.maximum(call, 0)] if len(rt_start) else 0, -1)
    return t, ok


LaunchTimes = tuple[np.ndarray, np.ndarray]  # _launch_times(): per kernel, launch start and usable


def _assign(data: TraceData, items: list[Iteration], lt: LaunchTimes) -> np.ndarray:
    k = data.kernels()
    out = np.full(len(k), -1, dtype=np.int64)
    if not items:
        return out
    t, ok = lt
    pids = np.array([it.pid for it in items])
    starts = np.array([it.start for it in items])
    ends = np.array([it.end for it in items])
    for pid in np.unique(pids).tolist():
        rows = np.flatnonzero(pids == pid)
        rows = rows[np.argsort(starts[rows], kind="stable")]
        mine = np.flatnonzero((k.pid == pid) & ok)
        pos = np.searchsorted(starts[rows], t[mine], side="right") - 1
        hit = rows[np.maximum(pos, 0)]
        inside = (pos >= 0) & (t[mine] < ends[hit])
        out[mine[inside]] = hit[inside]
    return out


def _group(kernel_iter: np.ndarray, n: int) -> list[np.ndarray]:
    idx = np.flatnonzero(kernel_iter >= 0)
    order = idx[np.argsort(kernel_iter[idx], kind="stable")]
    cut = np.searchsorted(kernel_iter[order], np.arange(n + 1))
    return [order[cut[i]:cut[i + 1]] for i in range(n)]


def _in_launch_order(data: TraceData, kidx: np.ndarray, lt: LaunchTimes) -> np.ndarray:
    k = data.kernels()
    t, _ = lt
    return kidx[np.lexsort((k.start[kidx], t[kidx]))]


# -- the layer structure -------------------------------------------------------------------


def _candidate_periods(tokens: np.ndarray) -> list[int]:
    """The layer lengths to try: each token's most common distance to its next occurrence
    (a kernel that runs once per layer recurs at the layer's length), the MAX_CANDIDATE_PERIODS
    held by the most tokens."""
    n = len(tokens)
    if n < 2 * MIN_LAYERS:
        return []
    order = np.lexsort((np.arange(n), tokens))
    same = tokens[order][1:] == tokens[order][:-1]
    dist, tok = np.diff(order)[same], tokens[order][1:][same]
    if len(dist) == 0:
        return []
    codes, (t_of, d_of) = group_codes(tok, dist)
    pair = np.bincount(codes)
    o = np.lexsort((d_of, -pair, t_of))
    first = np.r_[True, t_of[o][1:] != t_of[o][:-1]]
    per_token = d_of[o][first]
    values, held = np.unique(per_token[per_token >= 1], return_counts=True)
    keep = values[np.argsort(-held, kind="stable")[:MAX_CANDIDATE_PERIODS]]
    return sorted(int(v) for v in keep)


def layer_blocks(tokens: np.ndarray) -> tuple[int, list[tuple[int, int]]] | None:
    """(layer length, [(first, end) of each run of at least MIN_LAYERS back-to-back repeats])
    for the layer length whose runs cover the most of `tokens` (ties: the shorter), or None."""
    best: tuple[int, int, list[tuple[int, int]]] | None = None
    for p in _candidate_periods(tokens):
        if p * MIN_LAYERS > len(tokens):
            continue
        match = np.r_[tokens[p:] == tokens[:-p], False]
        edges = np.diff(np.r_[0, match.astype(np.int8)])
        starts = np.flatnonzero(edges == 1)
        ends = np.flatnonzero(edges == -1)
        runs = [(int(a), int(b) + p) for a, b in zip(starts, ends, strict=False) if b - a >= (MIN_LAYERS - 1) * p]
        if not runs:
            continue
        covered = sum(b - a for a, b in runs)
        if best is None or covered > best[0] or (covered == best[0] and p < best[1]):
            best = (covered, p, runs)
    if best is None:
        return None
    _, p, runs = best
    # A unit of two alike halves is two layers (alternating attention: sliding window, full):
    # the layer is the half, when most positions of the runs match half a unit on.
    while p % 2 == 0 and p >= 4:
        h = p // 2
        alike = [float((tokens[a + h:b] == tokens[a:b - h]).mean()) for a, b in runs if b - a > h]
        if not alike or min(alike) < HALF_ALIKE:
            break
        p = h
    return p, runs


def layers_in(tokens: np.ndarray) -> int | None:
    """Layers of one pass: the repeats of its longest run of the layer unit."""
    found = layer_blocks(tokens)
    if found is None:
        return None
    p, runs = found
    return max((b - a) // p for a, b in runs)


def passes(data: TraceData, kidx: np.ndarray, lt: LaunchTimes) -> list[tuple[np.ndarray, int]]:
    """The passes through the layer stack among kernels `kidx` of one process, each as
    (its kernels, layers) (module docstring, rule 4); [] when no layer unit repeats."""
    order = _in_launch_order(data, kidx, lt)[:MAX_STRUCTURE_KERNELS]
    if len(order) == 0:
        return []
    k = data.kernels()
    tokens = k.name_id[order].astype(np.int64)
    found = layer_blocks(tokens)
    if found is None:
        return []
    p, runs = found
    t, ok = lt
    when = np.where(ok[order], t[order], k.start[order])
    gaps = np.diff(when)
    inside = np.concatenate([gaps[a:b - 1] for a, b in runs]) if runs else gaps
    typical = float(np.median(inside)) if len(inside) else 0.0
    syncs = _blocking_sync_ends(data, int(k.pid[order[0]]))
    # Runs are one stack unless the host paused or synchronized between them (a layer that
    # differs in the middle of the stack breaks a run without either).
    merged: list[list[int]] = []
    cut_at: list[int] = []
    for a, b in runs:
        if merged:
            b0 = merged[-1][1]
            seg = gaps[max(b0 - 1, 0):a]
            pos = max(b0 - 1, 0) + int(np.argmax(seg)) if len(seg) else a
            paused = len(seg) and float(seg.max()) >= PASS_PAUSE_RATIO * max(typical, 1.0)
            synced = bool(((syncs > when[max(b0 - 1, 0)]) & (syncs <= when[min(a, len(when) - 1)])).any())
            if not (paused or synced):
                merged[-1][1] = b
                continue
            cut_at.append(pos + 1)
        merged.append([a, b])
    cuts = [0, *cut_at, len(order)]
    return [(order[cuts[i]:cuts[i + 1]], (merged[i][1] - merged[i][0]) // p) for i in range(len(merged))]


def _blocking_sync_ends(data: TraceData, pid: int) -> np.ndarray:
    try:
        rt = data.runtime()
    except Unavailable:
        return np.empty(0, np.int64)
    blocking = (rt.pid == pid) & (sync_kinds(data.runtime_api_names())[rt.api] == 1)
    return np.sort(rt.end[blocking])


def _structure(data: TraceData, kidx_by_pid: dict[int, np.ndarray], lt: LaunchTimes) -> list[Iteration]:
    k = data.kernels()
    t, ok = lt
    items: list[Iteration] = []
    for pid, kidx in kidx_by_pid.items():
        for i, (ks, layers) in enumerate(passes(data, kidx, lt)):
            times = np.where(ok[ks], t[ks], k.start[ks])
            items.append(Iteration(pid, -1, int(times.min()), int(times.max()) + 1, f"pass {i + 1}", None,
                                   kernels=ks, layers=layers))
    return items


# -- numbers ----------------------------------------------------------------------------


def _embedding_inputs(data: TraceData, items: list[Iteration]) -> list[tuple[int, ...] | None]:
    """Per iteration: the index sizes of its first aten::embedding call, from the recorded
    input shapes; None where none is recorded."""
    out: list[tuple[int, ...] | None] = [None] * len(items)
    try:
        ops = data.operators()
        names = data.operator_names()
        shapes = data.operator_shapes()
    except Unavailable:
        return out
    if not len(ops) or not shapes:
        return out
    wanted = [i for i, n in enumerate(names) if n in EMBEDDING_OPS]
    if not wanted:
        return out
    rows = np.flatnonzero(np.isin(ops.name, wanted) & (ops.shape >= 0))
    rows = rows[np.argsort(ops.start[rows], kind="stable")]
    dims_of: dict[int, tuple[int, ...] | None] = {}
    by_pid = {int(p): rows[ops.pid[rows] == p] for p in np.unique(ops.pid[rows]).tolist()}
    for j, it in enumerate(items):
        mine = by_pid.get(it.pid)
        if mine is None or not len(mine):
            continue
        # an embedding call that overlaps the iteration's host range (a pass found from its
        # kernels starts at its first launch, inside the embedding call): the first of them
        lo = int(np.searchsorted(ops.start[mine], it.start, side="left"))
        hi = int(np.searchsorted(ops.start[mine], it.end, side="left"))
        for r in [*mine[max(lo - EMBEDDING_LOOKBACK, 0):lo].tolist(), *mine[lo:hi].tolist()]:
            if ops.end[r] <= it.start:
                continue
            shape = int(ops.shape[r])
            if shape not in dims_of:
                dims_of[shape] = _index_dims(shapes[shape][0])
            if dims_of[shape]:
                out[j] = dims_of[shape]
                break
    return out


def _index_dims(text: str) -> tuple[int, ...] | None:
    try:
        dims = json.loads(text)
    except (ValueError, TypeError):
        return None
    if not isinstance(dims, list) or len(dims) < 2 or not isinstance(dims[1], list):
        return None
    idx = dims[1]
    if not idx or not all(isinstance(d, int) and d > 0 for d in idx) or len(idx) > 2:
        return None
    return tuple(idx)


def _numbers(data: TraceData, items: list[Iteration]) -> None:
    shapes = _embedding_inputs(data, items)
    for it, dims in zip(items, shapes, strict=True):
        m = it.mark
        if m is not None and m.new_tokens is not None:
            it.sequences, it.tokens, it.kv_tokens = m.sequences, m.new_tokens, m.kv_tokens
            it.numbers_from = f"{m.engine} mark"
        elif dims is not None:
            it.tokens = math.prod(dims)
            it.sequences = dims[0] if len(dims) == 2 else (m.sequences if m is not None else None)
            it.numbers_from = f"aten::embedding input {list(dims)}"
        elif m is not None and m.sequences is not None:
            it.sequences = m.sequences
            it.numbers_from = f"{m.engine} mark"
        phase = m.phase if m is not None else None
        if phase is None and it.tokens is not None and it.sequences:
            phase = DECODE if it.tokens == it.sequences else PREFILL
        it.phase = phase
        if it.phase == PREFILL and it.kv_tokens is None and it.tokens is not None and m is not None \
                and m.prefill_kv is not None:
            it.kv_tokens = m.prefill_kv


def _phase_from_attention(data: TraceData, items: list[Iteration]) -> None:
    """Phase of an iteration nothing else tells, from its attention kernels' names: decode
    kernels (split-KV, paged, flash-decoding, `decode` in the name) only: decode; prefill
    kernels (`prefill`, `varlen`, a plain flash forward) only: prefill; both or neither: None."""
    todo = [it for it in items if it.phase is None]
    if not todo:
        return
    k = data.kernels()
    ids = np.unique(np.concatenate([k.name_id[it.kernels] for it in todo]))
    names = data.kernel_names(ids.astype(np.int64))
    kind = {int(i): _attention_kind(names.get(int(i), "")) for i in ids.tolist()}
    for it in todo:
        kinds = {kind[int(i)] for i in np.unique(k.name_id[it.kernels]).tolist()} - {None}
        if len(kinds) == 1:
            it.phase = kinds.pop()
            it.numbers_from = it.numbers_from or "phase from attention kernel names"


_DECODE_ATTN = re.compile(r"splitkv|split_kv|paged_?attention|flash_?decoding|decode|\bmmha|xqa", re.IGNORECASE)
_PREFILL_ATTN = re.compile(r"prefill|varlen|flash_fwd_kernel|fmha|context_?attention", re.IGNORECASE)


_ATTN_NAME = re.compile(r"flash|attn|attention|fmha|mha|xqa|mla", re.IGNORECASE)


def _attention_kind(name: str) -> str | None:
    if not _ATTN_NAME.search(name):
        return None
    if _DECODE_ATTN.search(name):
        return DECODE
    if _PREFILL_ATTN.search(name):
        return PREFILL
    return None


# -- the finder -------------------------------------------------------------------------


def _from_cands(data: TraceData, cands: list[_Cand]) -> list[Iteration]:
    return [Iteration(c.pid, c.tkey, c.start, c.end, c.name, c.mark, c.outer) for c in cands]


def _merge_samplers(items: list[Iteration]) -> tuple[list[Iteration], list[str]]:
    out: list[Iteration] = []
    merged: list[str] = []
    for it in items:
        prev = out[-1] if out else None
        phase = it.mark.phase if it.mark is not None else None
        if (prev is not None and prev.pid == it.pid and phase != DECODE and MIXED != phase
                and (prev.mark is None or prev.mark.phase != DECODE)
                and len(it.kernels) <= SAMPLER_MAX_KERNELS
                and len(it.kernels) < SAMPLER_SHARE * len(prev.kernels)):
            prev.end = max(prev.end, it.end)
            prev.kernels = np.concatenate([prev.kernels, it.kernels])
            merged.append(it.name)
            continue
        out.append(it)
    return out, merged


def find(data: TraceData, structure: bool = False) -> Iterations | None:
    """The iterations the capture marks (cached), or None when none is found; with
    `structure`, else those of the model's structure (rule 4: costly on large captures, so
    asked for only where the workload is LLM inference)."""
    marked = data.cached(KEY, lambda: _find(data, False))
    if marked is not None or not structure:
        return marked
    return data.cached(STRUCTURE_KEY, lambda: _find(data, True))


def _find(data: TraceData, structure: bool) -> Iterations | None:
    k = data.kernels()
    if len(k) == 0:
        return None
    found = _mark_iterations(data)
    loops: list[_Cand] = []
    if found is None and not structure:
        return None
    lt = _launch_times(data)
    if found is not None:
        source, cands, loops = found
        items = _from_cands(data, cands)
        kernel_iter = _assign(data, items, lt)
        for it, ks in zip(items, _group(kernel_iter, len(items)), strict=True):
            it.kernels = ks
        # A loop that holds no iteration mark: cut into passes by the structure rule.
        loop_items: list[Iteration] = []
        for lp in loops:
            if lp.children:
                continue
            inside = _assign(data, [Iteration(lp.pid, lp.tkey, lp.start, lp.end, lp.name, lp.mark)], lt)
            kidx = np.flatnonzero((inside == 0) & (kernel_iter < 0))
            for it in _structure(data, {lp.pid: kidx}, lt):
                it.mark, it.outer = Mark("user", lp.mark.phase), lp.name
                loop_items.append(it)
        items += loop_items
    else:
        ok = lt[1]
        by_pid = {int(p): np.flatnonzero((k.pid == p) & ok) for p in np.unique(k.pid[ok]).tolist()}
        items = _structure(data, by_pid, lt)
        source = "model_structure"
    empty = [it.name for it in items if len(it.kernels) == 0]
    items = sorted((it for it in items if len(it.kernels)), key=lambda it: (it.pid, it.start, it.end))
    items, merged = _merge_samplers(items)
    if not items:
        return None
    kernel_iter = np.full(len(k), -1, dtype=np.int64)
    seen: dict[bytes, int | None] = {}  # iterations that launch the same kernels have the same layers
    for i, it in enumerate(items):
        kernel_iter[it.kernels] = i
        if it.layers is None:
            tokens = k.name_id[_in_launch_order(data, it.kernels, lt)].astype(np.int64)
            key = tokens.tobytes()
            if key not in seen:
                seen[key] = layers_in(tokens)
            it.layers = seen[key]
    _numbers(data, items)
    _phase_from_attention(data, items)
    engines = sorted({it.mark.engine for it in items if it.mark is not None})
    detail = _detail(source, engines, items, empty, loops, merged)
    return Iterations(source, engines[0] if len(engines) == 1 else None, detail, tuple(items), kernel_iter,
                      tuple(empty), tuple(dict.fromkeys(lp.name for lp in loops)), tuple(merged))


def _detail(source: str, engines: list[str], items: list[Iteration], empty: list[str], loops: list[_Cand],
            merged: list[str]) -> str:
    what = {
        "engine_marks": f"{', '.join(engines)} iteration marks",
        "user_marks": "user annotation ranges named for prefill and decode",
        "model_runner": "model-runner Python frames (one call per iteration)",
        "model_forward": "the outermost model module frame (one per forward pass)",
        "model_structure": "the model's structure (one pass through the repeating layer stack per iteration)",
    }[source]
    parts = [f"{len(items)} iteration{'s' * (len(items) != 1)} from {what}"]
    if loops:
        names = sorted({lp.name for lp in loops})
        parts.append(f"{len(loops)} loop range{'s' * (len(loops) != 1)} around iterations not counted "
                     f"({', '.join(names[:3])})")
    if merged:
        parts.append(f"{len(merged)} first-token mark{'s' * (len(merged) != 1)} merged into the iteration before "
                     f"({', '.join(sorted(set(merged))[:3])})")
    if empty:
        parts.append(f"{len(empty)} mark{'s' * (len(empty) != 1)} launched no GPU work and "
                     f"{'are' if len(empty) != 1 else 'is'} not counted")
    return "; ".join(parts)
