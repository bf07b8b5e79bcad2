"""What an annotation says about one serving iteration: engine marks and user marks, read.

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
carry are None: nothing is guessed here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

PREFILL, DECODE, MIXED = "prefill", "decode", "mixed"
PHASES = (PREFILL, DECODE, MIXED)


@dataclass(frozen=True)
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


def _group(text: str) -> tuple[int | None, int | None]:
    """(tokens, key/value tokens) of one vLLM group's parentheses."""
    m = _DETAILED.match(text)
    if m:
        return int(m["sq"]), int(m["sk"])
    m = _PLAIN.match(text)
    return (int(m["sq"]), None) if m else (None, None)


def _vllm(m: re.Match[str]) -> Mark:
    nc, ng = int(m["nc"]), int(m["ng"])
    ct, ckv = _group(m["c"])
    gt, gkv = _group(m["g"])
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


def _numbers(text: str) -> dict[str, int]:
    return {m["key"].lower(): int(m["value"]) for m in _KV.finditer(text)}


def _pick(values: dict[str, int], keys: tuple[str, ...]) -> int | None:
    return next((values[k] for k in keys if k in values), None)


def _sglang(m: re.Match[str]) -> Mark | None:
    mode = m["mode"]
    if mode not in _SGLANG_MODES:
        return None
    phase = _SGLANG_MODES[mode]
    nums = _numbers(m["rest"])
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
    nums = _numbers(name)
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
