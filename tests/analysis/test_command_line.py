"""The program a capture ran, named from its command line (analysis/program.py): launchers
unwrapped, the model and the test selection shown, nothing else. Each expected line is
written by hand from the command line."""

from __future__ import annotations

import pytest

from nsys_llm_explainer.analysis.program import describe, safe
from nsys_llm_explainer.trace.data import CommandLine

TOKEN = "hf_QwErTyUiOpAsDfGhJkLzXcVbNm1234"
KEY = "sk-proj-AbCdEfGhIjKlMnOpQrStUv12"


def program(*argv: str, model: str | None = None, source: str = "META_DATA_CAPTURE"):  # type: ignore[no-untyped-def]
    p = describe(CommandLine(None, argv, source, model))
    assert p is not None
    return p


@pytest.mark.parametrize(("argv", "shown", "kind", "runner", "language", "launchers", "one_shot"), [
    # a C++ test of one GEMM (../shared/traces/nsys/fuser_gemm_report1.sqlite's command line)
    (("./bin/test_matmul", "--gtest_filter=HopperMatmulTest.HSH_NT_128BSwizzle"),
     "test_matmul --gtest_filter=HopperMatmulTest.HSH_NT_128BSwizzle", "test", "gtest", "native", (), True),
    # nsysai_h100_2gpu_1s: bash -c around pytest; the test file's base name and -k
    (("bash", "-c", 'pytest -vs --assert=plain ./fastvideo/tests/performance/test_inference_performance.py '
                    '-k "[wan-t2v-1.3b-h100-sp2]"'),
     "test_inference_performance.py -k [wan-t2v-1.3b-h100-sp2]", "test", "pytest", "python", ("bash",), True),
    # a plain binary: its input deck is no model and no test, so only the name
    (("cuda-cloverleaf", "--in", "../CloverLeaf-hip/InputDecks/clover_bm32_prof.in"),
     "cuda-cloverleaf", "program", None, "native", (), False),
    # torchrun's options and their values, then the script; the model's base name; the token never
    (("torchrun", "--nproc_per_node", "8", "--master_port=29500", "train.py", "--model", "/data/models/llama-3-8b",
      "--hf-token", TOKEN),
     "train.py llama-3-8b", "program", None, "python", ("torchrun",), False),
    # python -m: the module; a Hugging Face repository's model name
    (("python3", "-u", "-m", "vllm.entrypoints.openai.api_server", "--model", "meta-llama/Llama-3.1-8B-Instruct",
      "--api-key", KEY),
     "vllm.entrypoints.openai.api_server Llama-3.1-8B-Instruct", "server", None, "python", ("python",), False),
    # vllm serve MODEL
    (("vllm", "serve", "Qwen/Qwen3-8B", "--api-key", KEY), "vllm serve Qwen3-8B", "server", None, "native", (),
     False),
    # mpirun with -x NAME=VALUE; env assignments before the program; a token as the model's value is not shown
    (("mpirun", "-np", "4", "-x", "NCCL_DEBUG=INFO", "python", "train.py", f"--model={TOKEN}"),
     "train.py", "program", None, "python", ("mpirun", "python"), False),
    (("env", "CUDA_VISIBLE_DEVICES=0", f"HF_TOKEN={TOKEN}", "python", "generate.py", "--model", "gpt2",
      "--num-prompts", "1"),
     "generate.py gpt2", "program", None, "python", ("env", "python"), True),
    # trtexec's engine is its model
    (("trtexec", "--loadEngine=/home/u/resnet50.engine"), "trtexec resnet50.engine", "program", None, "native",
     (), False),
    # pytest through python -m; a test node and -k
    (("python", "-m", "pytest", "tests/test_attn.py::test_fwd", "-k", "bf16"), "test_attn.py -k bf16", "test",
     "pytest", "python", ("python",), True),
    # a shell string with set-up steps: the last command; a benchmark by name
    (("sh", "-c", "cd /x && export A=1 && ./run_bench --iters 10"), "run_bench", "benchmark", None, "native",
     ("sh",), False),
    (("sh", "-c", "./run_bench --iters=1"), "run_bench", "benchmark", None, "native", ("sh",), True),
    # Google Benchmark's filter
    (("./gemm_bench", "--benchmark_filter=BM_Gemm/4096"), "gemm_bench", "benchmark", "google-benchmark", "native",
     (), False),
    (("/usr/bin/python3", "-c", "import torch; torch.randn(1).cuda()"), "python -c", "program", None, "python",
     ("python",), False),
])
def test_programs_are_named_by_their_command_line(argv, shown, kind, runner, language, launchers, one_shot) -> None:
    p = program(*argv)
    assert p.text() == shown
    assert (p.kind, p.runner, p.language, p.launchers, p.one_shot) == (kind, runner, language, launchers, one_shot)
    assert TOKEN not in p.text() and KEY not in p.text() and "/" not in p.text()


def test_a_token_next_to_the_model_name_is_never_shown() -> None:
    # a metadata field holding the repository and a token; a one-string command line (a metadata field)
    p = program(f"python serve.py --model Qwen/Qwen2-7B-Instruct --token {TOKEN}", model=f"Qwen/Qwen2-7B {TOKEN}",
                source="metadata")
    assert p.text() == "serve.py Qwen2-7B-Instruct" and p.model == "Qwen2-7B-Instruct"
    only_model = describe(CommandLine(None, (), "metadata", f"{TOKEN} Qwen/Qwen2-7B"))
    assert only_model is not None and only_model.text() == "model Qwen2-7B" and only_model.name is None
    assert describe(CommandLine(None, (), "metadata", TOKEN)) is None


@pytest.mark.parametrize(("value", "shown"), [
    ("/models/llama-3-8b/", "llama-3-8b"),
    ("meta-llama/Llama-3.1-8B-Instruct", "Llama-3.1-8B-Instruct"),
    (f"Qwen/Qwen2-7B?token={TOKEN}", "Qwen2-7B"),
    (f"https://user:{TOKEN}@huggingface.co/Qwen/Qwen2", None),
    ("MODEL=x", None),
    (KEY, None),
])
def test_shown_values_are_names_only(value: str, shown: str | None) -> None:
    assert safe(value) == shown
