"""A decoder-only transformer described by its Hugging Face config.json, and its parameter
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
no hidden_size. docs/compute.md lists the per-layer parameter arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nsys_llm_explainer.errors import UsageError
from nsys_llm_explainer.options import read_json_file

MAX_FILE_BYTES = 4 << 20
# Architectures whose MLP is up -> activation -> down (two matrices), not gated (three).
NON_GATED = frozenset(
    "gpt2 gpt_neox gptj opt bloom falcon phi gpt_bigcode starcoder2 bert roberta".split()
)
# Qwen2 modelling code always puts a bias on q/k/v (its config has no attention_bias key).
QKV_BIAS_TYPES = frozenset({"qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl"})
QK_NORM_TYPES = frozenset({"qwen3", "qwen3_moe"})  # RMSNorm(head_dim) on q and on k


@dataclass(frozen=True)
class MoeSpec:
    num_experts: int
    experts_per_token: int
    expert_intermediate: int
    shared_experts: int  # experts every token uses (DeepSeek n_shared_experts, Qwen2-MoE 1)
    shared_intermediate: int
    shared_gate: bool  # Qwen2-MoE: a Linear(hidden, 1) gate on the shared expert
    layers: tuple[bool, ...]  # per layer: True when its MLP is the MoE block


@dataclass(frozen=True)
class MlaSpec:
    kv_lora_rank: int
    q_lora_rank: int | None
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True)
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
    cfg: dict[str, Any],
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


def _moe(cfg: dict[str, Any], layers: int, hidden_i: int, source: str) -> MoeSpec | None:
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


def _mla(cfg: dict[str, Any], source: str) -> MlaSpec | None:
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
    cfg = obj
    if "hidden_size" not in cfg and isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg["text_config"], "tie_word_embeddings": obj.get("tie_word_embeddings", True)}
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
