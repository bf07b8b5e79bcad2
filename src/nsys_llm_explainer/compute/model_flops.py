"""Model-level figures from a ModelConfig: parameter counts, FLOPs per token, bytes a decode
step must read, and the MFU / MBU ratios.

Conventions (docs/compute.md):

- N (matmul parameters per token) = the active parameters a token multiplies by: every
  attention and MLP weight, the experts it is routed to, the router, the output projection
  (also when tied to the embedding table), but not the input embedding, which is a row
  lookup. Norm weights and biases are counted in the parameter totals, not in N.
- Forward FLOPs per token = 2*N + 2*L*Hq*(Dqk + Dv)*C, where C is the number of keys each
  token attends: the context length for a decode step; for causal prefill and training, half
  the sequence length (`causal=True`): causal attention kernels skip the masked half, and the
  per-operator FLOPs (compute/attention.py) and HFU count it so, so MFU counts it the same way.
  PaLM's convention (Chowdhery et al. 2022, appendix B: 6N + 12*L*H*D*S for training, which
  does not halve for the mask) is `causal=False`; the report names it beside the figure.
  Training = 3 x forward (backward is two matrix products per forward one).
- The LM head (2*V*H FLOPs per token, V the vocabulary, H the hidden size) is part of N, but
  a step computes it only for the tokens whose logits it needs: step_flops takes that row
  count (every token by default; a generate loop that keeps the last position's logits
  only, or a traced module without the head, computes fewer or none).
- MFU = model FLOPs per step / (step time x peak FLOP/s per GPU x GPUs).
- MBU = bytes a step must read / (step time x peak bandwidth per GPU x GPUs).

A decoder-only transformer described by its Hugging Face config.json, and its parameter
count (total and active per token).

Read fields (aliases in brackets): hidden_size [n_embd, d_model], num_hidden_layers [n_layer,
num_layers], num_attention_heads [n_head], num_key_value_heads (default: the attention heads),
head_dim (default hidden_size / heads), intermediate_size [n_inner, ffn_dim; default
4 x hidden], vocab_size, tie_word_embeddings (default true, as transformers' own default),
attention_bias; MoE: num_experts | num_local_experts | n_routed_experts, num_experts_per_tok,
moe_intermediate_size, n_shared_experts, shared_expert_intermediate_size,
first_k_dense_replace, moe_layer_freq, decoder_sparse_step, mlp_only_layers; MLA (DeepSeek):
kv_lora_rank, q_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim; sliding_window
with use_sliding_window. A multimodal config's text_config is used when the top level has
no hidden_size. docs/compute.md lists the per-layer parameter arithmetic."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from nsys_llm_explainer.compute import dtypes
from nsys_llm_explainer.errors import UsageError
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.model import JsonObject
from nsys_llm_explainer.options import read_json_file

MAX_FILE_BYTES = 4 << 20
# Architectures whose MLP is up -> activation -> down (two matrices), not gated (three).
NON_GATED = frozenset(
    "gpt2 gpt_neox gptj opt bloom falcon phi gpt_bigcode starcoder2 bert roberta".split()
)
# Qwen2 modelling code always puts a bias on q/k/v (its config has no attention_bias key).
QKV_BIAS_TYPES = frozenset({"qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl"})
QK_NORM_TYPES = frozenset({"qwen3", "qwen3_moe"})  # RMSNorm(head_dim) on q and on k


@frozen
class MoeSpec:
    num_experts: int
    experts_per_token: int
    expert_intermediate: int
    shared_experts: int  # experts every token uses (DeepSeek n_shared_experts, Qwen2-MoE 1)
    shared_intermediate: int
    shared_gate: bool  # Qwen2-MoE: a Linear(hidden, 1) gate on the shared expert
    layers: tuple[bool, ...]  # per layer: True when its MLP is the MoE block


@frozen
class MlaSpec:
    kv_lora_rank: int
    q_lora_rank: int | None
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@frozen
class ModelConfig:
    model_type: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool
    qkv_bias: bool
    o_bias: bool
    gated_mlp: bool
    qk_norm: bool
    moe: MoeSpec | None
    mla: MlaSpec | None
    sliding_window: int | None
    notes: tuple[str, ...]  # defaults that were assumed

    @property
    def qk_head_dim(self) -> int:
        return self.mla.qk_nope_head_dim + self.mla.qk_rope_head_dim if self.mla else self.head_dim

    @property
    def v_head_dim(self) -> int:
        return self.mla.v_head_dim if self.mla else self.head_dim


def _int(
    cfg: JsonObject,
    keys: tuple[str, ...],
    source: str,
    default: int | None = None,
    minimum: int = 1,
) -> int:
    for k in keys:
        v = cfg.get(k)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise UsageError(f"{source}: {k} must be an integer >= {minimum}, not {v!r:.40}")
        return v
    if default is None:
        raise UsageError(f"{source}: missing {keys[0]}")
    return default


def _moe(cfg: JsonObject, layers: int, hidden_i: int, source: str) -> MoeSpec | None:
    experts = _int(cfg, ("num_experts", "num_local_experts", "n_routed_experts"), source, 0, 0)
    if experts == 0:
        return None
    per_tok = _int(cfg, ("num_experts_per_tok", "moe_topk"), source)
    if per_tok > experts:
        raise UsageError(f"{source}: num_experts_per_tok {per_tok} exceeds the {experts} experts")
    expert_i = _int(cfg, ("moe_intermediate_size",), source, hidden_i)
    shared_i = _int(cfg, ("shared_expert_intermediate_size",), source, 0, 0)
    n_shared = _int(cfg, ("n_shared_experts",), source, 1 if shared_i else 0, 0)
    if not shared_i:
        shared_i = expert_i
    first_dense = _int(cfg, ("first_k_dense_replace",), source, 0, 0)
    freq = _int(cfg, ("moe_layer_freq",), source, 1)
    step = _int(cfg, ("decoder_sparse_step",), source, 1)
    dense_only = cfg.get("mlp_only_layers") or []
    if not isinstance(dense_only, list) or not all(isinstance(i, int) for i in dense_only):
        raise UsageError(f"{source}: mlp_only_layers must be a list of layer indices")
    is_moe = tuple(
        i >= first_dense and i % freq == 0 and (i + 1) % step == 0 and i not in dense_only
        for i in range(layers)
    )
    return MoeSpec(
        experts,
        per_tok,
        expert_i,
        n_shared,
        shared_i,
        "shared_expert_intermediate_size" in cfg,
        is_moe,
    )


def _mla(cfg: JsonObject, source: str) -> MlaSpec | None:
    if cfg.get("kv_lora_rank") is None:
        return None
    q_lora = cfg.get("q_lora_rank")
    return MlaSpec(
        _int(cfg, ("kv_lora_rank",), source),
        _int(cfg, ("q_lora_rank",), source) if q_lora is not None else None,
        _int(cfg, ("qk_nope_head_dim",), source),
        _int(cfg, ("qk_rope_head_dim",), source, 0, 0),
        _int(cfg, ("v_head_dim",), source),
    )


def parse_model_config(obj: Any, source: str = "config.json") -> ModelConfig:
    """A ModelConfig from a decoded config.json; UsageError (one line) when it is unusable."""
    if not isinstance(obj, dict):
        raise UsageError(f"{source}: expected a JSON object")
    cfg: JsonObject = obj
    text = cfg.get("text_config")
    if "hidden_size" not in cfg and isinstance(text, dict):
        cfg = {**text, "tie_word_embeddings": obj.get("tie_word_embeddings", True)}
    model_type = str(cfg.get("model_type", ""))[:64]
    notes: list[str] = []
    hidden = _int(cfg, ("hidden_size", "n_embd", "d_model"), source)
    layers = _int(cfg, ("num_hidden_layers", "n_layer", "num_layers"), source)
    heads = _int(cfg, ("num_attention_heads", "n_head"), source)
    kv_default = 1 if cfg.get("multi_query") else heads
    kv_heads = _int(cfg, ("num_key_value_heads", "num_kv_heads"), source, kv_default)
    if heads % kv_heads:
        raise UsageError(
            f"{source}: {heads} attention heads are not a multiple of {kv_heads} KV heads"
        )
    if cfg.get("head_dim") is not None:
        head_dim = _int(cfg, ("head_dim",), source)
    elif hidden % heads == 0:
        head_dim = hidden // heads
    else:
        raise UsageError(f"{source}: hidden_size {hidden} is not a multiple of {heads} heads")
    inter = _int(cfg, ("intermediate_size", "n_inner", "ffn_dim"), source, 4 * hidden)
    vocab = _int(cfg, ("vocab_size",), source)
    tie = cfg.get("tie_word_embeddings")
    if not isinstance(tie, bool):
        tie = True
        notes.append("tie_word_embeddings not set: true, the transformers default")
    bias = cfg.get("attention_bias")
    qkv_bias = bool(bias) if isinstance(bias, bool) else model_type in QKV_BIAS_TYPES
    window = cfg.get("sliding_window")
    if cfg.get("use_sliding_window") is False or not isinstance(window, int) or window <= 0:
        window = None
    return ModelConfig(
        model_type=model_type,
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=inter,
        vocab_size=vocab,
        tie_word_embeddings=tie,
        qkv_bias=qkv_bias,
        o_bias=bias is True,
        gated_mlp=model_type not in NON_GATED,
        qk_norm=model_type in QK_NORM_TYPES,
        moe=_moe(cfg, layers, inter, source),
        mla=_mla(cfg, source),
        sliding_window=window,
        notes=tuple(notes),
    )


def load_model_config(path: str | Path) -> ModelConfig:
    """Read and parse a config.json (--model); one-line UsageError when it cannot be used."""
    obj = read_json_file(path, "model config", MAX_FILE_BYTES)
    return parse_model_config(obj, Path(path).name)


@frozen
class ParamCounts:
    embedding: int
    lm_head: int  # 0 when tied to the embedding
    attention: int  # all layers
    mlp: int  # dense MLPs plus shared experts, all layers
    experts: int  # routed experts, all layers
    experts_active: int  # routed experts one token uses, all layers
    router: int
    norms: int
    total: int
    active: int  # parameters one token uses
    matmul_active: int  # N: active parameters in matrix products (see module docstring)


def _attention(c: ModelConfig) -> tuple[int, int]:
    """(weights in matrix products, bias and norm parameters) of one attention block."""
    h = c.hidden_size
    if c.mla:
        m, qk = c.mla, c.qk_head_dim
        q = (
            (h * m.q_lora_rank + m.q_lora_rank * c.num_heads * qk)
            if m.q_lora_rank
            else h * c.num_heads * qk
        )
        kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank * c.num_heads * (
            m.qk_nope_head_dim + m.v_head_dim
        )
        o = c.num_heads * m.v_head_dim * h
        return q + kv + o, m.kv_lora_rank + (m.q_lora_rank or 0)  # the two LoRA RMSNorms
    q_out, kv_out = c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim
    weights = h * q_out + 2 * h * kv_out + q_out * h
    extra = (q_out + 2 * kv_out if c.qkv_bias else 0) + (h if c.o_bias else 0)
    extra += 2 * c.head_dim if c.qk_norm else 0
    return weights, extra


def _mlp(c: ModelConfig, inter: int) -> int:
    return (3 if c.gated_mlp else 2) * c.hidden_size * inter


def param_counts(c: ModelConfig) -> ParamCounts:
    h, layers = c.hidden_size, c.num_layers
    embedding = c.vocab_size * h
    lm_head = 0 if c.tie_word_embeddings else c.vocab_size * h
    attn_w, attn_extra = _attention(c)
    norms = layers * (2 * h + attn_extra) + h  # two RMSNorms per layer, the final norm
    mlp = experts = experts_active = router = 0
    for i in range(layers):
        if c.moe and c.moe.layers[i]:
            e = c.moe
            experts += e.num_experts * _mlp(c, e.expert_intermediate)
            experts_active += e.experts_per_token * _mlp(c, e.expert_intermediate)
            mlp += e.shared_experts * _mlp(c, e.shared_intermediate)
            router += h * e.num_experts + (h if e.shared_gate else 0)
        else:
            mlp += _mlp(c, c.intermediate_size)
    attention = layers * attn_w
    total = embedding + lm_head + attention + mlp + experts + router + norms
    active = total - experts + experts_active
    matmul = attention + mlp + experts_active + router + c.vocab_size * h
    return ParamCounts(
        embedding,
        lm_head,
        attention,
        mlp,
        experts,
        experts_active,
        router,
        norms,
        total,
        active,
        matmul,
    )


def attention_flops_per_token(c: ModelConfig, context: int, causal: bool = False) -> int:
    """2*L*Hq*(Dqk + Dv)*C: the QK^T and PV products for one token attending C keys; with
    `causal`, half of that (a causal mask leaves each token half the keys on average)."""
    ctx = min(context, c.sliding_window) if c.sliding_window else context
    full = 2 * c.num_layers * c.num_heads * (c.qk_head_dim + c.v_head_dim) * ctx
    return full // 2 if causal else full


def forward_flops_per_token(c: ModelConfig, context: int, causal: bool = False) -> int:
    if context < 0:
        raise ValueError("context must be non-negative")
    return 2 * param_counts(c).matmul_active + attention_flops_per_token(c, context, causal)


def training_flops_per_token(c: ModelConfig, seq_len: int, causal: bool = False) -> int:
    return 3 * forward_flops_per_token(c, seq_len, causal)


def head_params(c: ModelConfig) -> int:
    """Weights of the LM head (the output projection to the vocabulary), tied or not."""
    return c.vocab_size * c.hidden_size


def step_flops(
    c: ModelConfig, tokens: int, context: int, head_rows: int | None = None, training: bool = False,
    causal: bool = False,
) -> int:
    """Model FLOPs of a step of `tokens` tokens attending `context` keys each (half of them
    with `causal`): tokens x (2 x (N - V*H) + attention) + head_rows x 2 x V*H, where head_rows
    (the tokens whose logits the step computes) defaults to every token; x3 for training."""
    if tokens < 0 or context < 0:
        raise ValueError("tokens and context must be non-negative")
    rows = tokens if head_rows is None else min(head_rows, tokens)
    head = head_params(c)
    body = 2 * (param_counts(c).matmul_active - head) + attention_flops_per_token(c, context, causal)
    forward = tokens * body + rows * 2 * head
    return 3 * forward if training else forward


# Padding of the vocabulary in the LM head (vLLM pads to 64, Megatron to 128 per shard).
VOCAB_PADDING = 128


def is_vocab_dim(size: int, vocab: int) -> bool:
    """Whether a matrix-product dimension is the vocabulary: vocab itself or vocab padded by
    less than VOCAB_PADDING and an eighth of it. A tensor-parallel shard (vocab / TP) is not
    recognised: it can equal the hidden size (Llama-2's 32,000 padded to 32,768 over 8 GPUs
    is 4,096), so a sharded head counts for every token."""
    pad = size - vocab
    return vocab > 0 and 0 <= pad < VOCAB_PADDING and 8 * pad < vocab


@frozen
class DecodeBytes:
    weights: int  # parameters read once per step, in the weight dtype
    kv_cache: int  # cached keys and values read by the step's attention
    total: int  # weights + kv_cache: what MBU divides by
    kv_write: int  # the new token's keys and values (written, not in total)
    experts_read: float  # routed experts read per MoE layer (expected; 0 for dense models)
    notes: tuple[str, ...]


def kv_bytes_per_token(c: ModelConfig, kv_dtype: str) -> int:
    """Cache bytes per token over all layers: 2*Hkv*D per layer (MLA: latent + rope key)."""
    per_layer = (
        (c.mla.kv_lora_rank + c.mla.qk_rope_head_dim) if c.mla else 2 * c.num_kv_heads * c.head_dim
    )
    return c.num_layers * per_layer * dtypes.size(kv_dtype)


def decode_step_bytes(
    c: ModelConfig,
    batch: int,
    context: int,
    weight_dtype: str = "bf16",
    kv_dtype: str | None = None,
) -> DecodeBytes:
    """Bytes one decode step of `batch` sequences, each attending `context` cached tokens,
    must read: every weight it uses once, plus the KV cache. Activations are not counted."""
    if batch < 1 or context < 0:
        raise ValueError("batch must be >= 1 and context >= 0")
    wd = dtypes.normalize(weight_dtype)
    kd = dtypes.normalize(kv_dtype) if kv_dtype else wd
    p = param_counts(c)
    notes: list[str] = []
    params = p.total - p.embedding - p.experts  # the table is only looked up (batch rows)...
    if c.tie_word_embeddings:
        params += p.embedding  # ...unless it is also the output projection, read whole
    experts_read = 0.0
    if c.moe:
        e = c.moe
        # Expected distinct experts per layer if each token picks k of E uniformly at random.
        experts_read = e.num_experts * (1 - (1 - e.experts_per_token / e.num_experts) ** batch)
        moe_layers = sum(e.layers)
        params += round(moe_layers * experts_read * _mlp(c, e.expert_intermediate))
        notes.append(
            f"routing assumed uniform: {experts_read:.1f} of {e.num_experts} experts read per MoE "
            f"layer (between {e.experts_per_token} and {min(e.num_experts, batch * e.experts_per_token)})"
        )
    weights = params * dtypes.size(wd) + batch * c.hidden_size * dtypes.size(wd)  # + looked-up rows
    ctx = min(context, c.sliding_window) if c.sliding_window else context
    kv = batch * ctx * kv_bytes_per_token(c, kd)
    return DecodeBytes(
        weights, kv, weights + kv, batch * kv_bytes_per_token(c, kd), experts_read, tuple(notes)
    )


def mfu(model_flops_per_step: float, step_time_s: float, peak_flops: float, gpus: int = 1) -> float:
    """Model FLOPs utilisation: model FLOPs / (time x peak FLOP/s per GPU x GPUs)."""
    _positive(step_time_s, peak_flops, gpus)
    return model_flops_per_step / (step_time_s * peak_flops * gpus)


def mbu(bytes_per_step: float, step_time_s: float, peak_bandwidth: float, gpus: int = 1) -> float:
    """Model bandwidth utilisation: bytes read / (time x peak bytes/s per GPU x GPUs)."""
    _positive(step_time_s, peak_bandwidth, gpus)
    return bytes_per_step / (step_time_s * peak_bandwidth * gpus)


def _positive(*values: float) -> None:
    if not all(v > 0 and math.isfinite(v) for v in values):
        raise ValueError("step time, peak and GPU count must be positive")


_COUNT = re.compile(r"^\s*(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)\s*([kKMGTP]?)\s*$")
_SCALE = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}


def parse_count(text: str, option: str) -> float:
    """A positive number with an optional SI suffix ("1.2e9", "1.2G"); UsageError otherwise."""
    m = _COUNT.match(text or "")
    value = float(m.group(1)) * _SCALE[m.group(2)] if m else 0.0
    if not m or not math.isfinite(value) or value <= 0:
        raise UsageError(
            f"{option} must be a positive number such as 1.2e9 or 1.2G, not {text!r:.40}"
        )
    return value


def parse_model_flops_per_token(text: str) -> float:
    return parse_count(text, "--model-flops-per-token")


def parse_tokens_per_step(text: str) -> int:
    value = parse_count(text, "--tokens-per-step")
    if value != int(value):
        raise UsageError(f"--tokens-per-step must be a whole number, not {text!r:.40}")
    return int(value)
