"""Model-level figures from Hugging Face configs: parameters, FLOPs per token, decode bytes,
MFU and MBU, with the arithmetic written out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.compute.model_flops import (
    attention_flops_per_token,
    decode_step_bytes,
    forward_flops_per_token,
    load_model_config,
    mbu,
    mfu,
    param_counts,
    parse_count,
    parse_model_config,
    parse_model_flops_per_token,
    parse_tokens_per_step,
    training_flops_per_token,
)
from nsys_llm_explainer.errors import UsageError

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "hf_configs"
QWEN = load_model_config(CONFIGS / "qwen1.5-0.5b.json")
MIXTRAL = load_model_config(CONFIGS / "mixtral-8x7b.json")


def test_qwen_config_fields():
    c = QWEN
    assert (c.hidden_size, c.num_layers, c.num_heads, c.num_kv_heads, c.head_dim) == (
        1024,
        24,
        16,
        16,
        64,
    )
    assert (c.intermediate_size, c.vocab_size, c.tie_word_embeddings) == (2816, 151936, True)
    assert c.qkv_bias and not c.o_bias and c.gated_mlp and c.moe is None and c.mla is None
    assert c.sliding_window is None  # use_sliding_window is false


def test_qwen_parameter_count():
    p = param_counts(QWEN)
    embedding = 151936 * 1024  # 155,582,464
    attention = 4 * 1024 * 1024  # q, k, v, o: 4,194,304 per layer
    qkv_bias = 3 * 1024
    mlp = 3 * 1024 * 2816  # gate, up, down: 8,650,752 per layer
    norms = 2 * 1024
    per_layer = attention + qkv_bias + mlp + norms  # 12,850,176
    total = embedding + 24 * per_layer + 1024  # tied lm_head adds nothing; 1024: final norm
    assert p.total == total == 463_987_712
    assert 0.46e9 <= p.total <= 0.62e9  # published: 0.5B class (0.46B, 0.62B with the head untied)
    assert p.total + embedding == 619_570_176  # what an untied output projection would add
    assert (p.embedding, p.lm_head, p.attention, p.mlp) == (embedding, 0, 24 * attention, 24 * mlp)
    assert p.active == p.total and p.experts == 0
    assert p.matmul_active == 24 * (attention + mlp) + embedding == 463_863_808


def test_qwen_flops_per_token():
    n = 463_863_808
    assert forward_flops_per_token(QWEN, 0) == 2 * n == 927_727_616
    attn = 2 * 24 * 16 * (64 + 64) * 1024  # QK^T and PV for 1,024 keys: 100,663,296
    assert attention_flops_per_token(QWEN, 1024) == attn
    assert forward_flops_per_token(QWEN, 1024) == 2 * n + attn == 1_028_390_912
    # training at sequence 2048 is 3x forward, i.e. PaLM's 6N + 12*L*H*D*S
    assert training_flops_per_token(QWEN, 2048) == 6 * n + 12 * 24 * 16 * 64 * 2048 == 3_387_162_624


def test_qwen_decode_bytes_and_utilisation():
    d = decode_step_bytes(QWEN, batch=16, context=1024, weight_dtype="bf16")
    # every parameter once (the tied table is the output projection), plus 16 looked-up rows
    assert d.weights == 463_987_712 * 2 + 16 * 1024 * 2 == 928_008_192
    # K and V: 16 sequences x 1,024 tokens x 24 layers x 2 x 16 heads x 64 x 2 bytes
    assert d.kv_cache == 16 * 1024 * 24 * 2 * 16 * 64 * 2 == 1_610_612_736
    assert d.total == 2_538_620_928 and d.kv_write == 16 * 24 * 2 * 16 * 64 * 2
    fp8_kv = decode_step_bytes(QWEN, 16, 1024, "bf16", kv_dtype="fp8")
    assert fp8_kv.kv_cache == d.kv_cache // 2
    step_flops = 16 * forward_flops_per_token(QWEN, 1024)  # 16 tokens per step
    assert mfu(step_flops, 2e-3, 989.5e12) == pytest.approx(16_454_254_592 / (2e-3 * 989.5e12))
    assert (
        mbu(d.total, 2e-3, 3350e9)
        == pytest.approx(2_538_620_928 / 6.7e9)
        == pytest.approx(0.3789, abs=1e-4)
    )
    assert mbu(d.total, 2e-3, 3350e9, gpus=2) == pytest.approx(0.3789 / 2, abs=1e-4)
    with pytest.raises(ValueError):
        mfu(1, 0, 1)


def test_mixtral_eight_experts():
    c = MIXTRAL
    assert c.moe.num_experts == 8 and c.moe.experts_per_token == 2 and all(c.moe.layers)
    p = param_counts(c)
    embed = 32000 * 4096  # 131,072,000, and the same again for the untied output projection
    attention = 2 * 4096 * 4096 + 2 * 4096 * 1024  # q, o: 16,777,216 each; k, v: 4,194,304 each
    expert = 3 * 4096 * 14336  # 176,160,768
    router, norms = 4096 * 8, 2 * 4096
    assert p.total == 2 * embed + 32 * (attention + 8 * expert + router + norms) + 4096
    assert p.total == 46_702_792_704  # published: 46.7B
    assert p.active == 2 * embed + 32 * (attention + 2 * expert + router + norms) + 4096
    assert p.active == 12_879_925_248  # published: 12.9B active
    assert p.matmul_active == 32 * (attention + 2 * expert + router) + embed
    one = decode_step_bytes(c, batch=1, context=0)
    assert one.experts_read == 2  # a single token reads exactly its two experts
    assert one.weights == (p.total - embed - 32 * 8 * expert + 32 * 2 * expert) * 2 + 4096 * 2
    many = decode_step_bytes(c, batch=64, context=0)
    assert 7.99 < many.experts_read < 8 and "uniform" in many.notes[0]


def test_moe_layer_selection_shared_experts_and_mla():
    deepseek = parse_model_config({
        "model_type": "deepseek_v3", "hidden_size": 64, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 256,
        "vocab_size": 100, "tie_word_embeddings": False, "n_routed_experts": 8,
        "num_experts_per_tok": 2, "moe_intermediate_size": 32, "n_shared_experts": 1,
        "first_k_dense_replace": 1, "moe_layer_freq": 1, "kv_lora_rank": 16,
        "q_lora_rank": 24, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8,
    })  # fmt: skip
    assert deepseek.moe.layers == (False, True, True, True)
    p = param_counts(deepseek)
    # MLA per layer: q 64*24 + 24*4*(8+4); kv 64*(16+4) + 16*4*(8+8); o 4*8*64
    mla = 64 * 24 + 24 * 4 * 12 + 64 * 20 + 16 * 4 * 16 + 4 * 8 * 64
    assert p.attention == 4 * mla
    expert = 3 * 64 * 32
    assert p.experts == 3 * 8 * expert and p.experts_active == 3 * 2 * expert
    assert p.mlp == 3 * 64 * 256 + 3 * 1 * expert  # one dense layer, a shared expert per MoE layer
    assert p.router == 3 * 64 * 8
    kv = decode_step_bytes(deepseek, 1, 10).kv_cache
    assert kv == 10 * 4 * (16 + 4) * 2  # the latent and the rope key per token and layer
    assert attention_flops_per_token(deepseek, 10) == 2 * 4 * 4 * (12 + 8) * 10
    qwen_moe = parse_model_config({
        "model_type": "qwen2_moe", "hidden_size": 64, "num_hidden_layers": 4,
        "num_attention_heads": 4, "intermediate_size": 256, "vocab_size": 100,
        "num_experts": 4, "num_experts_per_tok": 1, "moe_intermediate_size": 16,
        "shared_expert_intermediate_size": 48, "decoder_sparse_step": 2, "mlp_only_layers": [3],
    })  # fmt: skip
    assert qwen_moe.moe.layers == (False, True, False, False)  # (i+1) % 2 == 0, layer 3 dense
    q = param_counts(qwen_moe)
    assert q.mlp == 3 * (3 * 64 * 256) + 3 * 64 * 48 and q.router == 64 * 4 + 64  # + shared gate
    assert "tie_word_embeddings not set" in qwen_moe.notes[0] and q.lm_head == 0


BASE = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 10}
BAD = [
    ([], "expected a JSON object"),
    ({"num_hidden_layers": 2}, "missing hidden_size"),
    ({**BASE, "num_attention_heads": 6}, "not a multiple"),
    ({**BASE, "num_hidden_layers": True}, "must be an integer"),
    ({**BASE, "num_key_value_heads": 3}, "KV heads"),
    ({**BASE, "num_local_experts": 2, "num_experts_per_tok": 3}, "exceeds"),
    ({**BASE, "num_local_experts": 2}, "missing num_experts_per_tok"),
    (
        {**BASE, "num_experts": 2, "num_experts_per_tok": 1, "mlp_only_layers": "0"},
        "must be a list",
    ),
]


@pytest.mark.parametrize(("obj", "message"), BAD)
def test_bad_configs_are_one_line_usage_errors(obj, message):
    with pytest.raises(UsageError) as err:
        parse_model_config(obj, "config.json")
    assert message in err.value.message and "\n" not in err.value.message


def test_unreadable_config_files(tmp_path):
    with pytest.raises(UsageError, match="cannot read model config"):
        load_model_config(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(UsageError, match="not valid JSON"):
        load_model_config(bad)
    nested = tmp_path / "vl.json"
    nested.write_text(
        json.dumps({"text_config": json.loads((CONFIGS / "qwen1.5-0.5b.json").read_text())})
    )
    assert param_counts(load_model_config(nested)).total == 463_987_712


def test_cli_value_parsers():
    assert parse_model_flops_per_token("1.2e9") == 1.2e9 == parse_count("1.2G", "x")
    assert parse_tokens_per_step("4k") == 4000 and parse_tokens_per_step("256") == 256
    for bad in ("0", "-3", "abc", "inf", "nan", "", "1e400"):
        with pytest.raises(UsageError) as err:
            parse_model_flops_per_token(bad)
        assert "--model-flops-per-token" in err.value.message
    with pytest.raises(UsageError, match="whole number"):
        parse_tokens_per_step("1.5")


@settings(max_examples=100)
@given(
    c1=st.integers(0, 10**6), c2=st.integers(0, 10**6), b=st.integers(1, 256), k=st.integers(1, 8)
)
def test_model_figures_are_linear_where_they_should_be(c1, c2, b, k):
    diff = forward_flops_per_token(QWEN, c2) - forward_flops_per_token(QWEN, c1)
    assert diff == 2 * 24 * 16 * 128 * (c2 - c1)
    one, many = decode_step_bytes(QWEN, b, c1), decode_step_bytes(QWEN, b * k, c1)
    assert many.kv_cache == k * one.kv_cache
    assert many.weights - one.weights == (b * k - b) * 1024 * 2  # only the looked-up rows grow
