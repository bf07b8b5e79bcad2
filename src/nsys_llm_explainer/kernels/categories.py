"""Kernel categories: an ordered first-match regex table from kernel names to the classes
users think in (GEMM, attention, convolution, norms, communication ...).

A kernel is judged by its own function name, not by the text of its template arguments or
parameter list (`fft2d_r2c_32x32<float, ..., cudnn::reduced_divisor>(...)` is an FFT, not a
reduction). kernel_subject.subjects() gives the texts tried, in order: for a generic
launcher (PyTorch's `vectorized_elementwise_kernel<4, FillFunctor<float>, ...>`,
`reduce_kernel<..., ReduceOp<float, MeanOps<...>>>`, CUTLASS's `cutlass::Kernel<Op>`) the
functor it runs, then the function name, then the enclosing namespaces. The first text that
any rule matches decides, and within a text the first rule in table order. Each rule is
(category, pattern, why); a pattern is a Python regular expression searched in the text,
case-insensitively. A name nothing matches is "other". Order matters where names overlap:
communication and MoE come before GEMM (TensorRT-LLM MoE GEMMs say "gemm"), KV-cache writes
before attention ("flash" in reshape_and_cache_flash), attention before convolution and
GEMM (FlashAttention-3 is a CUTLASS kernel), convolution and pooling before GEMM (cuDNN's
implicit-GEMM convolutions and xmma pooling kernels), index kernels before sampling
("index_put_with_sort"), layout and generic memory kernels before casts and copies
(`CatArrayBatchedCopy` is a concatenation).

User file (--kernel-categories FILE.json):

    {"mode": "extend",
     "rules": [{"category": "attention", "pattern": "my_attn_fwd"},
               {"category": "gemm", "pattern": "^my_gemm_", "why": "in-house GEMM"},
               {"category": "gemm", "pattern": "MyOp<", "match": "full"}]}

"mode" is "extend" (default: the user rules are tried first, then the built-in table) or
"override" (only the user rules). "match" is "function" (default: the texts above) or
"full" (the whole name as shown, template arguments and parameters included). Category
names are lower-case identifiers ([a-z][a-z0-9_]*, at most 40 characters); "other" is
allowed and forces a name into "other". Unknown keys, bad regular expressions, empty
patterns and more than MAX_USER_RULES rules are usage errors.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from nsys_llm_explainer.errors import UsageError
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.kernels.demangled import parse, subjects
from nsys_llm_explainer.options import read_json_file

OTHER = "other"
MAX_USER_RULES = 1000
MAX_FILE_BYTES = 1 << 20
_CATEGORY_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


MATCH_MODES = ("function", "full")


@frozen
class CategoryRule:
    category: str
    pattern: str
    why: str = ""
    match: str = "function"  # "function": kernel_subject.subjects(); "full": the whole name


# The built-in table, in match order. The "why" column is the documentation.
BUILTIN: tuple[CategoryRule, ...] = (
    CategoryRule(
        "gemm",
        r"^(custom_)?cijk_a|^wvsplitk|^llgemm|(^|_)gemm_(xdl|wmma|dl)(_|$)|^kernel_gemm_|^(ck_tile::)?gemm_?kernel$",
        "AMD GEMMs first: Tensile/hipBLASLt (`Cijk_Ailk_Bljk_BBS_BH_Bias_...`, whose option tokens "
        "say Bias, SAV, MT, MI and would match the rules below), vLLM ROCm skinny GEMMs (wvSplitK, "
        "LLGemm1), composable-kernel XDL/WMMA GEMMs",
    ),
    CategoryRule(
        "communication",
        r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|sendrecv|"
        r"cross_device_reduce|custom_?all_?reduce|lamport|mscclpp|nvshmem|deep_?ep|quick_?reduce",
        "NCCL/RCCL collectives, vLLM/SGLang custom all-reduce, TensorRT-LLM "
        "one/two-shot and Lamport all-reduce, DeepEP/NVSHMEM expert dispatch",
    ),
    CategoryRule(
        "moe",
        r"moe|expert|topk_?gating|grouped_?gemm|group_gemm|permute_?rows|"
        r"expand_?input_?rows|finalize_?moe",
        "fused MoE kernels, expert routing and grouped GEMMs for experts "
        "(before GEMM: MoE GEMMs are GEMMs too)",
    ),
    CategoryRule(
        "memory",
        r"reshape_and_cache|concat_and_cache|store_?kv_?cache|kv_?cache_?(copy|write|store)|"
        r"copy_?blocks|swap_?blocks",
        "KV-cache writes and block copies (before attention: some say 'flash')",
    ),
    CategoryRule(
        "attention",
        r"flash(?!infer)|fmha|attention|attn|xformers|paged_?att|mha|mla|xqa|"
        r"(batch|single)_?(prefill|decode)|(prefill|decode)_?with|merge_?states|"
        r"^_?fwd_(grouped_)?kernel|decode_?(splitkv|kernel)",
        "FlashAttention 2/3, FlashInfer, FlashMLA, xFormers, TensorRT-LLM FMHA/XQA/MMHA, "
        "vLLM paged attention, SGLang/vLLM Triton attention",
    ),
    CategoryRule(
        "conv",
        r"conv(?!ert)|scudnn|[hsdi]\d{3,5}cudnn|implicit_?(gemm|convolve|precomp)|fprop|dgrad|"
        r"wgrad|winograd|depthwise|im2col|col2im|vol2col|computeoffsets",
        "cuDNN/TensorRT convolutions (scudnn, h884cudnn, xmma fprop/dgrad/wgrad implicit "
        "GEMM, winograd), implicit_convolve_sgemm, depthwise, im2col (before GEMM: "
        "implicit-GEMM convolutions say 'gemm')",
    ),
    CategoryRule(
        "pooling",
        r"(max|avg|average|adaptive|lp|global)_?pool|pooling|"
        r"pool_?(fwd|bwd|forward|backward|kernel|nchw|nhwc|[123]d)|roi_?(align|pool)",
        "max/average/adaptive pooling, cuDNN and xmma pooling kernels (before GEMM: "
        "sm50_xmma_pooling says 'xmma')",
    ),
    CategoryRule(
        "fft",
        r"fft|(^|_)(r2c|c2r|c2c|z2d|d2z|z2z)(_|$)",
        "cuFFT and cuDNN FFT kernels (fft2d_r2c, regular_fft, vector_fft)",
    ),
    CategoryRule(
        "gemm",
        r"(?<!fb)gemm|gemv|cublas|cutlass|xmma|nvjet|matmul|tensorop|wgmma|marlin|scaled_mm|"
        r"(^|_)b?mm(_|$)|splitkreduce",
        "cuBLAS/cuBLASLt (sm80/sm90 xmma, nvjet, ampere/hopper gemm, gemv, split-K reduce), "
        "CUTLASS, Marlin/AWQ/GPTQ, FP8 scaled_mm, DeepGEMM, Triton matmul (not FBGEMM's "
        "namespace, which holds sparse-feature kernels too)",
    ),
    CategoryRule(
        "compiler_fused",
        r"^(triton_(poi|red|per)_|triton__\d|nvfuser_)|^(input_|loop_)?fusion(_\d+)?$",
        "kernels generated by a compiler (Inductor/Triton pointwise-reduction-persistent, "
        "nvFuser, XLA) whose names list fused ops, not one class",
    ),
    CategoryRule(
        "norm",
        r"(layer|rms|group|batch|instance)_?norm|norm_?(kernel|fwd|bwd|forward|backward)|"
        r"rowwisemoments|computefusedparams|welford|cuapplylayernorm|cuapplyrmsnorm|bn_(fw|bw)",
        "LayerNorm/RMSNorm (PyTorch, vLLM, FlashInfer, Apex, TensorRT-LLM), fused add+norm, "
        "cuDNN batch norm",
    ),
    CategoryRule(
        "memory",
        r"index_?(put|select|add|copy|kernel|elementwise)|indexselect|indexfunc|scatter_gather|"
        r"(?<!rotary_)(?<!rotary)embedding",
        "index/embedding kernels (before sampling: 'index_put_with_sort')",
    ),
    CategoryRule(
        "sampling",
        r"top_?k|top_?p|argmax|argmin|sampling|multinomial|gumbel|radix_?sort|"
        r"radixfindkth|bitonic_?sort|segmented_?sort|sort_?(kernel|pairs|keys)|"
        r"penalt|logits?_?(processor|proc)",
        "top-k/top-p/argmax sampling, sorts (top-p and routing), logit penalties",
    ),
    CategoryRule(
        "reduction",
        r"reduce|softmax|scan|cumsum|cumprod|sum_kernel|mean_kernel|max_?kernel",
        "reductions, softmax, scans (cumsum)",
    ),
    CategoryRule(
        "layout",
        r"nchw|nhwc|ncdhw|ndhwc|reformat|transpose|permute|copy_?packed|channels_?last|"
        r"contiguous",
        "NCHW<->NHWC conversions (cuDNN nchwToNhwc, TensorRT reformat), transposes, permutes",
    ),
    CategoryRule(
        "memory",
        r"memset|(?<!pre)fill|catarray|concat|gather|scatter|(^|[^a-z])pad|slice|arange",
        "fills, cat/gather/scatter, padding, slicing (before copies: CatArrayBatchedCopy "
        "is a concatenation)",
    ),
    CategoryRule(
        "cast_copy",
        r"copy|memcpy|clone|cast|convert|"
        r"(^|_)to_(float|half|bfloat16|bf16|fp16|fp32|fp8|int8|double|long|int|bool)(_|$)",
        "dtype casts and plain copies (PyTorch direct_copy_kernel_cuda, bfloat16_copy, "
        "clone, convert)",
    ),
    CategoryRule(
        "activation_elementwise",
        r"elementwise|silu|gelu|relu|swiglu|geglu|act_and_mul|sigmoid|tanh|softplus|"
        r"rotary|(?<![a-z])rope|pos_?encoding|bias|quant|dequant|dropout|philox|distribution|"
        r"axpy|unary|binary|pointwise|multi_tensor_apply|adam|clamp",
        "activations, elementwise math (PyTorch elementwise launchers whose functor no rule "
        "above names), rotary embeddings, (de)quantization, optimizer steps",
    ),
)


@frozen
class CategoryTable:
    rules: tuple[CategoryRule, ...]
    source: str  # "built-in", "built-in extended by FILE", "FILE (overrides the built-in table)"

    def categories(self) -> list[str]:
        """Every category this table can produce, in first-rule order, "other" last."""
        return [c for c in dict.fromkeys(r.category for r in self.rules) if c != OTHER] + [OTHER]

    def classify(self, names: list[str]) -> tuple[list[str], np.ndarray]:
        """Category of each name and the index of the rule that matched (-1: none)."""
        cats, rules, _ = self.explain(names)
        return cats, rules

    def explain(self, names: list[str]) -> tuple[list[str], np.ndarray, list[str]]:
        """classify(), and per name the text the deciding rule matched (the function name
        when none did)."""
        compiled = [re.compile(r.pattern, re.IGNORECASE) for r in self.rules]
        texts = [subjects(n) for n in names]
        rule_of = np.full(len(names), -1, dtype=np.int64)
        matched = [parse(n).base_name for n in names]
        for i, (name, tried) in enumerate(zip(names, texts, strict=True)):
            hit = _first_match(compiled, self.rules, name, tried)
            if hit is not None:
                rule_of[i], matched[i] = hit
        cats = [self.rules[r].category if r >= 0 else OTHER for r in rule_of.tolist()]
        return cats, rule_of, matched


def _first_match(
    compiled: list[re.Pattern[str]], rules: tuple[CategoryRule, ...], name: str,
    tried: tuple[str, ...],
) -> tuple[int, str] | None:
    for text in tried:
        for j, (rx, rule) in enumerate(zip(compiled, rules, strict=True)):
            subject = name if rule.match == "full" else text
            if rx.search(subject):
                return j, subject
    return None


BUILTIN_TABLE = CategoryTable(BUILTIN, "built-in")


def parse_rules(obj: Any, source: str) -> tuple[str, tuple[CategoryRule, ...]]:
    """(mode, rules) from a decoded user file; UsageError with a one-line reason otherwise."""
    if not isinstance(obj, dict):
        raise UsageError(f'{source}: expected a JSON object {{"mode": ..., "rules": [...]}}')
    unknown = sorted(set(obj) - {"mode", "rules"})
    if unknown:
        raise UsageError(f"{source}: unknown key(s) {', '.join(unknown)}; expected mode and rules")
    mode = obj.get("mode", "extend")
    if mode not in ("extend", "override"):
        raise UsageError(f'{source}: mode must be "extend" or "override", not {mode!r}')
    items = obj.get("rules")
    if not isinstance(items, list) or not items:
        raise UsageError(f"{source}: rules must be a non-empty list")
    if len(items) > MAX_USER_RULES:
        raise UsageError(f"{source}: {len(items)} rules; at most {MAX_USER_RULES} are allowed")
    rules = []
    for n, item in enumerate(items, 1):
        if not isinstance(item, dict) or set(item) - {"category", "pattern", "why", "match"}:
            raise UsageError(
                f"{source}: rule {n} must be an object with category, pattern (and why, match)"
            )
        cat, pat, why = item.get("category"), item.get("pattern"), item.get("why", "")
        match = item.get("match", "function")
        if match not in MATCH_MODES:
            raise UsageError(f'{source}: rule {n}: match must be "function" or "full", not {match!r}')
        if not isinstance(cat, str) or not _CATEGORY_NAME.match(cat):
            raise UsageError(
                f"{source}: rule {n}: category must match [a-z][a-z0-9_]* (40 chars max)"
            )
        if not isinstance(pat, str) or not pat:
            raise UsageError(f"{source}: rule {n}: pattern must be a non-empty string")
        if not isinstance(why, str):
            raise UsageError(f"{source}: rule {n}: why must be a string")
        try:
            re.compile(pat, re.IGNORECASE)
        except re.error as exc:
            raise UsageError(
                f"{source}: rule {n}: bad regular expression {pat!r} ({exc})"
            ) from None
        rules.append(CategoryRule(cat, pat, why, match))
    return mode, tuple(rules)


def load_table(path: str | Path | None) -> CategoryTable:
    """The built-in table, or it combined with (or replaced by) the rules in `path`."""
    if path is None:
        return BUILTIN_TABLE
    p = Path(path)
    obj = read_json_file(p, "kernel category file", MAX_FILE_BYTES)
    mode, rules = parse_rules(obj, str(p))
    if mode == "override":
        return CategoryTable(rules, f"{p.name} (overrides the built-in table)")
    return CategoryTable(rules + BUILTIN, f"built-in, extended by {p.name}")
