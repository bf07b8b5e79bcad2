"""Serving iterations: which GPU work belongs to which scheduler step of an LLM engine.

An iteration is one scheduler step: one forward pass of the model over the batch, with its
sampling. They are found from what the capture says, in this order (the first that finds
any wins; `source` says which):

1. "engine_marks" / "user_marks": annotation ranges (NVTX; PyTorch profiler
   user_annotation) that mark iterations, read by parse_mark (below): vLLM's
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

What an annotation says about one serving iteration: engine marks and user marks, read.

A serving iteration is one scheduler step: one forward pass over the batch, with its
sampling. Engines mark them, and the marks carry the batch's numbers:

- vLLM V1 (`annotate_profile`): `execute_context_<n>(<tokens>)_generation_<m>(<tokens>)`,
  where the first group is the context (prefill) requests and their scheduled tokens, the
  second the generation (decode) requests and theirs. The detailed form writes each group as
  `(sq<tokens>sk<context>sqsq<sum q^2>sqsk<sum q*k>)`, where sk is the key/value length the
  requests attend to; some builds write `(<tokens>_<sum q^2>)`, and SGLang's variant puts the
  batch's total tokens first: `execute_<total>_context_<n>(...)_generation_<m>(...)`.
- SGLang: `step[<MODE> bs=<sequences> toks=<tokens>]`, MODE EXTEND (prefill), DECODE, MIXED,
  IDLE (no work), or a speculative mode (TARGET_VERIFY, DRAFT_EXTEND: decode-side).
- TensorRT-LLM: `[Executor] _forward_step <iter>: <n> ctx reqs[, <t> ctx tokens], <m> gen reqs`.
- User NVTX ranges around the prefill and each decode step (`PREFILL`, `DECODE_STEP_007`,
  `prefill`, `decode step 3`): the phase from the words in the name (prefill/prompt;
  decode/decoding), and `bs=`/`batch=` and `toks=`/`tokens=` where given. A name with the word
  `loop` (`DECODE_LOOP`) is a loop around iterations, never one itself.

parse_mark() returns what a name says (None: not an iteration mark). Numbers a mark does not
carry are None: nothing is guessed here."""

from __future__ import annotations

import json
import math
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from nsys_llm_explainer.analysis.blocking import sync_kinds
from nsys_llm_explainer.analysis.carried import carried
from nsys_llm_explainer.analysis.groups import group_codes
from nsys_llm_explainer.analysis.join import kernel_launch_index
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.trace.data import TraceData, Unavailable

PREFILL, DECODE, MIXED = "prefill", "decode", "mixed"
PHASES = (PREFILL, DECODE, MIXED)


@frozen
class Mark:
    """What one iteration mark says; None where it says nothing."""

    engine: str  # vllm, sglang, tensorrt_llm, user
    phase: str | None
    prefill_seqs: int | None = None
    prefill_tokens: int | None = None
    prefill_kv: int | None = None  # key/value tokens the prefill attends to (its context)
    decode_seqs: int | None = None
    decode_tokens: int | None = None
    decode_kv: int | None = None
    seqs: int | None = None  # a batch whose split is not given (SGLang MIXED)
    tokens: int | None = None
    loop: bool = False  # a loop around iterations (its name says so)
    idle: bool = False  # the engine says the step does no work

    def merged(self, outer: Mark) -> Mark:
        """This mark with the fields it leaves None taken from an enclosing mark of the same
        iteration (SGLang's step[...] inside execute_...)."""
        fields = {f: getattr(outer, f) for f in ("prefill_seqs", "prefill_tokens", "prefill_kv", "decode_seqs",
                                                  "decode_tokens", "decode_kv", "seqs", "tokens")
                  if getattr(self, f) is None}
        return replace(self, phase=self.phase or outer.phase, **fields)

    @property
    def sequences(self) -> int | None:
        if self.seqs is not None:
            return self.seqs
        parts = [x for x in (self.prefill_seqs, self.decode_seqs) if x is not None]
        return sum(parts) if parts else None

    @property
    def new_tokens(self) -> int | None:
        if self.tokens is not None:
            return self.tokens
        if self.phase == DECODE and self.decode_tokens is None and self.decode_seqs is not None:
            return self.decode_seqs  # one new token per sequence
        parts = [x for x in (self.prefill_tokens, self.decode_tokens) if x is not None]
        return sum(parts) if parts else None

    @property
    def kv_tokens(self) -> int | None:
        if self.phase == PREFILL:
            return self.prefill_kv
        if self.phase == DECODE:
            return self.decode_kv
        if self.prefill_kv is not None and self.decode_kv is not None:
            return self.prefill_kv + self.decode_kv
        return None


def _phase(prefill_seqs: int, decode_seqs: int) -> str | None:
    if prefill_seqs and decode_seqs:
        return MIXED
    if prefill_seqs:
        return PREFILL
    if decode_seqs:
        return DECODE
    return None


_VLLM = re.compile(
    r"^execute_(?:(?P<total>\d+)_)?context_(?P<nc>\d+)\((?P<c>[^()]*)\)_generation_(?P<ng>\d+)\((?P<g>[^()]*)\)"
)
_DETAILED = re.compile(r"^sq(?P<sq>\d+)sk(?P<sk>\d+)(?:sqsq\d+)?(?:sqsk\d+)?$")
_PLAIN = re.compile(r"^(?P<sq>\d+)(?:_\d+)*$")


def _mark_group(text: str) -> tuple[int | None, int | None]:
    """(tokens, key/value tokens) of one vLLM group's parentheses."""
    m = _DETAILED.match(text)
    if m:
        return int(m["sq"]), int(m["sk"])
    m = _PLAIN.match(text)
    return (int(m["sq"]), None) if m else (None, None)


def _vllm(m: re.Match[str]) -> Mark:
    nc, ng = int(m["nc"]), int(m["ng"])
    ct, ckv = _mark_group(m["c"])
    gt, gkv = _mark_group(m["g"])
    phase = _phase(nc, ng)
    return Mark("vllm", phase, prefill_seqs=nc, prefill_tokens=ct, prefill_kv=ckv if nc else None,
                decode_seqs=ng, decode_tokens=gt, decode_kv=gkv if ng else None, idle=phase is None)


_SGLANG = re.compile(r"^step\[(?P<mode>[A-Z_]+)(?P<rest>[^\]]*)\]")
_SGLANG_MODES = {"EXTEND": PREFILL, "PREFILL": PREFILL, "DECODE": DECODE, "MIXED": MIXED,
                 "TARGET_VERIFY": DECODE, "DRAFT_EXTEND": DECODE, "DRAFT_EXTEND_V2": DECODE, "IDLE": None,
                 "SPLIT_PREFILL": PREFILL, "DUMMY_FIRST": None}
_KV = re.compile(r"(?P<key>[A-Za-z_]+)\s*=\s*(?P<value>\d+)")
_SEQ_KEYS = ("bs", "batch", "batch_size", "seqs", "num_seqs", "reqs")
_TOKEN_KEYS = ("toks", "tokens", "num_tokens", "ntok")
_KV_KEYS = ("kv", "kv_tokens", "ctx", "context_len", "seq_len")


def _mark_numbers(text: str) -> dict[str, int]:
    return {m["key"].lower(): int(m["value"]) for m in _KV.finditer(text)}


def _pick(values: dict[str, int], keys: tuple[str, ...]) -> int | None:
    return next((values[k] for k in keys if k in values), None)


def _sglang(m: re.Match[str]) -> Mark | None:
    mode = m["mode"]
    if mode not in _SGLANG_MODES:
        return None
    phase = _SGLANG_MODES[mode]
    nums = _mark_numbers(m["rest"])
    seqs, toks = _pick(nums, _SEQ_KEYS), _pick(nums, _TOKEN_KEYS)
    if phase == PREFILL:
        return Mark("sglang", phase, prefill_seqs=seqs, prefill_tokens=toks)
    if phase == DECODE:
        return Mark("sglang", phase, decode_seqs=seqs, decode_tokens=toks)
    return Mark("sglang", phase, seqs=seqs, tokens=toks, idle=phase is None)


_TRTLLM = re.compile(
    r"_forward_step\s*\d*:\s*(?P<nc>\d+) ctx reqs(?:,\s*(?P<ct>\d+) ctx tokens)?,\s*(?P<ng>\d+) gen reqs"
)


def _trtllm(m: re.Match[str]) -> Mark:
    nc, ng = int(m["nc"]), int(m["ng"])
    phase = _phase(nc, ng)
    return Mark("tensorrt_llm", phase, prefill_seqs=nc, prefill_tokens=int(m["ct"]) if m["ct"] else None,
                decode_seqs=ng, decode_tokens=ng, idle=phase is None)


_WORD = re.compile(r"[A-Za-z]+")
PREFILL_WORDS = frozenset({"prefill", "prompt", "prefilling"})
DECODE_WORDS = frozenset({"decode", "decoding"})
LOOP_WORDS = frozenset({"loop"})


def _words(name: str) -> set[str]:
    # camelCase splits too (DecodeStep -> decode, step)
    spaced = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name)
    return {w.lower() for w in _WORD.findall(spaced)}


def _user(name: str) -> Mark | None:
    if len(name) > 120 or "::" in name:
        return None  # operator and call ranges (aten::, c10d::) are not iteration marks
    words = _words(name)
    prefill, decode = bool(words & PREFILL_WORDS), bool(words & DECODE_WORDS)
    if not (prefill or decode):
        return None
    loop = bool(words & LOOP_WORDS)
    phase = MIXED if prefill and decode else PREFILL if prefill else DECODE
    nums = _mark_numbers(name)
    seqs, toks, kv = _pick(nums, _SEQ_KEYS), _pick(nums, _TOKEN_KEYS), _pick(nums, _KV_KEYS)
    if phase == PREFILL:
        return Mark("user", phase, prefill_seqs=seqs, prefill_tokens=toks, prefill_kv=kv, loop=loop)
    if phase == DECODE:
        return Mark("user", phase, decode_seqs=seqs, decode_tokens=toks, decode_kv=kv, loop=loop)
    return Mark("user", phase, seqs=seqs, tokens=toks, loop=loop)


def parse_mark(name: str) -> Mark | None:
    """What `name` says about a serving iteration; None when it is not an iteration mark."""
    s = name.strip()
    if s.startswith("execute_"):
        m = _VLLM.match(s)
        if m:
            return _vllm(m)
    if s.startswith("step["):
        m = _SGLANG.match(s)
        if m:
            return _sglang(m)
    m = _TRTLLM.search(s)
    if m:
        return _trtllm(m)
    return _user(s)


# Python frames that are one iteration of an engine's model runner (PyTorch profiler traces
# with Python stacks), used when no annotation marks iterations: vLLM's execute_model, SGLang's
# forward_extend / forward_decode / forward_idle.
_RUNNER = re.compile(
    r"(?:^|[/\\])(?:gpu_model_runner|model_runner|cpu_model_runner|tpu_model_runner)\.py\(\d+\): "
    r"(?P<fn>execute_model|forward_extend|forward_decode|forward_idle|forward_mixed)$"
)
_RUNNER_PHASE = {"forward_extend": PREFILL, "forward_decode": DECODE, "forward_mixed": MIXED}
# The outermost model module of a Hugging Face-style forward pass (with_modules).
_MODEL_MODULE = re.compile(r"^nn\.Module: \w*(?:ForCausalLM|LMHeadModel|ForConditionalGeneration|Model)_\d+$")


def parse_frame(name: str) -> Mark | None:
    """A Python frame that is one model-runner iteration or one model forward pass."""
    m = _RUNNER.search(name)
    if m:
        fn = m["fn"]
        return Mark("model_runner", _RUNNER_PHASE.get(fn), idle=fn == "forward_idle")
    if _MODEL_MODULE.match(name):
        return Mark("model_forward", None)
    return None


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
PACK_LEVEL = 1  # zlib's fastest: the map's runs compress well at any level


@dataclass(slots=True)  # thousands are cached from steps to serving
class Iteration:
    pid: int
    tkey: int
    start: int  # host range
    end: int
    name: str
    mark: Mark | None
    outer: str | None = None
    # Its kernel rows while iterations are found; once found, find() keeps only how many there
    # were and the range of rows they lie in (Iterations.rows), to hold less per kernel
    kernels: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    kernel_count: int = 0
    row_range: tuple[int, int] = (0, 0)  # first row, last row + 1
    layers: int | None = None
    numbers_from: str | None = None
    sequences: int | None = None
    tokens: int | None = None
    kv_tokens: int | None = None
    phase: str | None = None


@frozen
class KernelMap:
    """Per kernel row: the index of its iteration, or -1, kept compressed. The map is cached
    from the steps metric to the serving one, and runs of one iteration's kernels compress
    to almost nothing, so the metrics between them (the run's memory peak) do not hold a code
    per kernel. Each reader unpacks it once (unpack)."""

    packed: bytes  # zlib of the codes
    dtype: str  # the smallest signed integer that holds every iteration's index
    rows: int

    @classmethod
    def pack(cls, codes: np.ndarray) -> KernelMap:
        return cls(zlib.compress(codes.tobytes(), PACK_LEVEL), codes.dtype.str, len(codes))

    def unpack(self) -> np.ndarray:
        """The codes, a new read-only array."""
        codes = np.frombuffer(zlib.decompress(self.packed), dtype=np.dtype(self.dtype))
        assert len(codes) == self.rows
        return codes


@frozen
class Iterations:
    source: str
    engine: str | None
    detail: str
    items: tuple[Iteration, ...]
    kernels: KernelMap  # per kernel: index into items, or -1
    empty: tuple[str, ...] = ()  # marks that launched no GPU work
    loops: tuple[str, ...] = ()  # marks that hold several iterations
    merged: tuple[str, ...] = ()  # first-token marks merged into the iteration before

    @property
    def from_marks(self) -> bool:
        return self.source in MARK_SOURCES

    def rows(self, kernel_iter: np.ndarray, first: int, end: int) -> np.ndarray:
        """The rows of the kernels of iterations [first, end), ascending (each iteration's
        kernels in their order): those `kernel_iter` (kernels.unpack()) maps there, searched
        within the rows the iterations' kernels span."""
        spans = [self.items[i].row_range for i in range(first, end)]
        lo, hi = min(a for a, _ in spans), max(b for _, b in spans)
        part = kernel_iter[lo:hi]
        return lo + np.flatnonzero((part >= first) & (part < end))


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
    """Per iteration 0..n-1: its kernel rows (kernel_iter), ascending."""
    idx = np.flatnonzero(kernel_iter >= 0)
    # the codes in the smallest unsigned type that holds them: numpy sorts 8- and 16-bit
    # keys stably by radix, several times faster than int64 ones at millions of kernels
    codes = kernel_iter[idx].astype(np.min_scalar_type(max(n - 1, 0)))
    order = np.argsort(codes, kind="stable")
    cut = np.searchsorted(codes[order], np.arange(n + 1))
    order = idx[order]
    return [order[cut[i]:cut[i + 1]] for i in range(n)]


def _in_launch_order(data: TraceData, kidx: np.ndarray, lt: LaunchTimes) -> np.ndarray:
    k = data.kernels()
    t, _ = lt
    return kidx[np.lexsort((k.start[kidx], t[kidx]))]


def size_blocks(sizes: list[int], limit: int) -> list[tuple[int, int]]:
    """Consecutive ranges [a, b) of the items whose sizes are `sizes`, holding about `limit`
    in all each (at least one item): a pass over a block's rows at once keeps its
    temporaries at a block's size however many rows there are."""
    ends = np.cumsum(sizes)
    out = []
    a = 0
    while a < len(sizes):
        done = int(ends[a - 1]) if a else 0
        b = min(max(a + 1, int(np.searchsorted(ends, done + limit, side="right"))), len(sizes))
        out.append((a, b))
        a = b
    return out


CHUNK_KERNELS = 1 << 20


def _chunks(items: list[Iteration]) -> list[tuple[int, int]]:
    """size_blocks of the iterations' kernel rows, CHUNK_KERNELS at a time."""
    return size_blocks([len(it.kernels) for it in items], CHUNK_KERNELS)


def _tokens_in_launch_order(data: TraceData, items: list[Iteration], lt: LaunchTimes) -> Iterator[np.ndarray]:
    """Per iteration: its kernels' name ids (int64) in launch order (_in_launch_order), the
    iterations whose rows are already in that order (most) checked at once, not sorted."""
    k = data.kernels()
    t, _ = lt
    for a, b in _chunks(items):
        part = items[a:b]
        rows = np.concatenate([it.kernels for it in part])
        cut = np.cumsum([0] + [len(it.kernels) for it in part])
        tr, sr = t[rows], k.start[rows]
        # a pair of neighbours out of (launch time, start) order, within one iteration
        bad = (tr[1:] < tr[:-1]) | ((tr[1:] == tr[:-1]) & (sr[1:] < sr[:-1]))
        del tr, sr
        bad[cut[1:-1] - 1] = False  # the last kernel of one iteration and the first of the next
        for i in np.unique(np.searchsorted(cut, np.flatnonzero(bad), side="right") - 1).tolist():
            rows[cut[i]:cut[i + 1]] = _in_launch_order(data, part[i].kernels, lt)
        names = k.name_id[rows].astype(np.int64)
        del rows
        for i in range(len(part)):
            yield names[cut[i]:cut[i + 1]]


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
    # The smallest signed integer that holds every iteration's index (chosen by the count, so
    # nothing wraps): a code per kernel, cached packed (KernelMap) from steps to serving
    kernel_iter = np.full(len(k), -1, dtype=np.min_scalar_type(-len(items)))
    for i, it in enumerate(items):
        kernel_iter[it.kernels] = i
    seen: dict[bytes, int | None] = {}  # iterations that launch the same kernels have the same layers
    todo = [it for it in items if it.layers is None]
    for it, tokens in zip(todo, _tokens_in_launch_order(data, todo, lt), strict=True):
        key = tokens.tobytes()
        if key not in seen:
            seen[key] = layers_in(tokens)
        it.layers = seen[key]
    _numbers(data, items)
    _phase_from_attention(data, items)
    _release_kernels(items)
    engines = sorted({it.mark.engine for it in items if it.mark is not None})
    detail = _detail(source, engines, items, empty, loops, merged)
    return Iterations(source, engines[0] if len(engines) == 1 else None, detail, tuple(items),
                      KernelMap.pack(kernel_iter), tuple(empty), tuple(dict.fromkeys(lp.name for lp in loops)),
                      tuple(merged))


def _release_kernels(items: list[Iteration]) -> None:
    """Keep each iteration's kernel count and row range, not its rows: the iterations stay
    cached from the steps metric to the serving one, and their kernel map already says which rows
    are whose (a row array per iteration would double that at millions of kernels)."""
    for a, b in _chunks(items):
        part = items[a:b]
        counts = [len(it.kernels) for it in part]  # none is empty (find keeps those with kernels)
        rows = np.concatenate([it.kernels for it in part])
        at = np.cumsum([0] + counts[:-1])
        lo, hi = np.minimum.reduceat(rows, at).tolist(), np.maximum.reduceat(rows, at).tolist()
        del rows
        for it, n, first, last in zip(part, counts, lo, hi, strict=True):
            it.kernel_count = n
            it.row_range = (first, last + 1)
            it.kernels = _NO_ROWS


_NO_ROWS = np.empty(0, np.int64)


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
