"""The Nsight Compute plan: the regex selects exactly one kernel, the launch window skips the
warm-up, the sections fit the question, and the shell text is inert for hostile names (the
script is run under sh with a stand-in ncu that records the arguments it receives)."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.compute import ncu_plan
from nsys_llm_explainer.compute.ncu_plan import KernelTarget, launch_window, name_regex, plan
from tests.compute.test_shapes import kineto_events

HOSTILE = [
    "it's a kernel",
    'say "hi" \\ there',
    "$(touch PWNED) ${HOME} `touch PWNED2`",
    "line one\nrm -rf / # line two\r\n",
    "tab\there; semi; && || | > out < in",
    "regex .* [a-z]+ (group) {2} ^start end$ a|b ? +",
    "unicode \u00e9\u4e2d\u2028sep \U0001f600",
    "nul\x00byte and \x7f",
]


def _fake_ncu(tmp_path: Path) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    ncu = bindir / "ncu"
    # One file per run: every argument NUL-terminated, so newlines inside arguments survive.
    ncu.write_text(
        '#!/bin/sh\nn=$(ls "$NCU_LOG_DIR" | wc -l)\nprintf \'%s\\0\' "$@" > "$NCU_LOG_DIR/run$n"\n',
        encoding="utf-8",
    )
    ncu.chmod(ncu.stat().st_mode | stat.S_IEXEC)
    return bindir


def run_script(tmp_path: Path, script: str, *app: str) -> list[list[str]]:
    bindir = _fake_ncu(tmp_path)
    logs = tmp_path / "logs"
    logs.mkdir()
    path = tmp_path / "ncu_plan.sh"
    path.write_text(script, encoding="utf-8")
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "NCU_LOG_DIR": str(logs)}
    proc = subprocess.run(
        ["sh", str(path), *app], cwd=tmp_path, env=env, capture_output=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    runs = sorted(logs.iterdir(), key=lambda p: int(p.name[3:]))
    return [p.read_bytes().decode("utf-8", "surrogateescape").split("\0")[:-1] for p in runs]


def target(name: str, **kw) -> KernelTarget:
    base = dict(
        device=0,
        calls=100,
        total_ns=5_000_000,
        call_order=list(range(0, 1000, 10)),
        category="gemm",
    )
    return KernelTarget(name=name, **{**base, **kw})


def test_regex_matches_each_real_kernel_name_and_no_other():
    names = sorted(
        {
            e["name"]
            for e in kineto_events("hf_qwen1.5_0.5b_h100.json.gz")
            if e.get("cat") == "kernel"
        }
    )
    assert len(names) > 20
    for name in names:
        rx = re.compile(name_regex(name))
        assert [n for n in names if rx.search(n)] == [name]


def test_regex_escapes_every_metacharacter():
    for name in HOSTILE:
        if "\x00" in name:
            continue
        rx = re.compile(name_regex(name))
        assert rx.search(name) and not rx.search(name + "x") and not rx.search("x" + name)
    assert name_regex("a.b") == r"^a\.b$" and name_regex("x\ny") == r"^x\x0ay$"


def test_launch_window():
    assert launch_window([7]) == (0, 1, "a single launch: nothing to skip")
    skip, count, why = launch_window(list(range(100)))
    assert (skip, count) == (10, 1) and "first 10%" in why  # ordinals 0..9 are warm-up
    assert launch_window(list(range(0, 1000, 10)), total_launches=1000)[0] == 10
    assert launch_window(list(range(100)), steady_from=50)[0] == 50
    assert launch_window([1, 2, 3], steady_from=500)[:2] == (2, 1)  # never skips the last launch
    assert launch_window([900, 950, 990], total_launches=1000)[0] == 1  # always past the first
    # a kernel used only after a long warm-up elsewhere: nothing of it is in the first 10%
    first = launch_window([500, 501, 502, 503])
    assert first[0] == 1 and "first launch" in first[2]


def test_sections_fit_the_question():
    gemm = ncu_plan.sections_for("gemm", None)[0]
    assert (
        "SpeedOfLight_RooflineChart" in gemm
        and "SpeedOfLight_HierarchicalTensorRooflineChart" in gemm
    )
    assert ncu_plan.sections_for("attention", "compute")[0] == gemm
    assert "MemoryWorkloadAnalysis" in ncu_plan.sections_for("norm", None)[0]
    assert "MemoryWorkloadAnalysis" in ncu_plan.sections_for("gemm", "memory")[0]  # bound wins
    assert ncu_plan.sections_for("other", None)[0] == ncu_plan.OTHER_SECTIONS


def test_plan_json_and_script_commands(tmp_path):
    kernels = [
        target("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_kernel", share_pct=41.2),
        target("void at::native::vectorized_elementwise_kernel<4, Foo>(int)", category="activation_elementwise",
               device=1, mangled_name="_ZN2at6native29vectorized_elementwise_kernelILi4E3FooEEviT0_"),
        target("ncclKernel_AllReduce_RING_LL_Sum_float", category="communication"),
    ]  # fmt: skip
    p = plan(kernels)
    doc = json.loads(ncu_plan.targets_json(p))
    assert [t["rank"] for t in doc["targets"]] == [1, 2] and doc["skipped"][0]["name"].startswith(
        "nccl"
    )
    first, second = doc["targets"]
    assert first["kernel_name_base"] == "demangled" and first["launch_skip"] == 10
    assert "41.2% of kernel time" in first["why"] and first["export"] == "ncu_01_gemm"
    assert (
        second["kernel_name_base"] == "mangled"
        and second["regex"] == "^" + kernels[1].mangled_name + "$"
    )
    assert second["export"] == "ncu_02_activation_elementwise"
    runs = run_script(tmp_path, ncu_plan.plan_script(p), "python", "serve.py", "--port", "8000")
    assert len(runs) == 2
    argv = runs[0]
    assert argv[-4:] == ["python", "serve.py", "--port", "8000"]
    expect = ["--kernel-name-base", "demangled", "--kernel-name", "regex:" + first["regex"],
              "--launch-skip", "10", "--launch-count", "1"]  # fmt: skip
    assert all(a in argv for a in expect) and argv[argv.index("--devices") + 1] == "0"
    assert runs[1][runs[1].index("--devices") + 1] == "1"
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--section"] == first["sections"]


def test_script_needs_the_application_command(tmp_path):
    path = tmp_path / "plan.sh"
    path.write_text(ncu_plan.plan_script(plan([target("k")])), encoding="utf-8")
    proc = subprocess.run(["sh", str(path)], capture_output=True, timeout=30)
    assert proc.returncode == 2 and b"usage" in proc.stderr


def test_hostile_names_reach_ncu_verbatim_and_run_nothing(tmp_path):
    kernels = [target(n) for n in HOSTILE]
    p = plan(kernels)
    script = ncu_plan.plan_script(p)
    ours = re.compile(r"rm -f (ncu_\d{2}_[a-z0-9_]+)\.ncu-rep \1\.csv")  # the plan's own clean-up
    for line in script.splitlines():
        assert (not line.startswith("rm ") or ours.fullmatch(line)) and "\u2028" not in line
    runs = run_script(tmp_path, script, "app")
    assert len(runs) == len(HOSTILE)
    for argv, t in zip(runs, p["targets"], strict=True):
        assert argv[argv.index("--kernel-name") + 1] == "regex:" + t["regex"]
    assert not list(tmp_path.glob("PWNED*")) and not (tmp_path / "out").exists()


@settings(
    max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(min_size=1, max_size=40).filter(lambda s: "\x00" not in s))
def test_any_name_is_passed_through_unchanged(tmp_path_factory, name):
    tmp = tmp_path_factory.mktemp("ncu")
    p = plan([target(name)])
    (argv,) = run_script(tmp, ncu_plan.plan_script(p), "app")
    rx = argv[argv.index("--kernel-name") + 1]
    assert rx == "regex:" + name_regex(name)
    assert re.fullmatch(rx[len("regex:") :], name)
    assert not list(tmp.glob("PWNED*"))


@pytest.mark.parametrize("name", ["", "x" * 5000])
def test_edge_names(name):
    t = plan([target(name)])["targets"][0]
    assert re.fullmatch(t["regex"], name)


def test_non_ascii_names_match_as_characters_and_as_utf8_bytes():
    # printable non-ASCII characters stay as they are; invisible ones (U+2028) become a
    # wildcard over their UTF-8 length; both kinds of matcher accept the name, and only it
    assert name_regex("caf\u00e9") == "^caf\u00e9$"
    assert name_regex("a\u2028b") == "^a.{1,3}b$" and name_regex("x\u202ey") == "^x.{1,3}y$"
    for name in HOSTILE:
        if "\x00" in name:
            continue
        rx = name_regex(name)
        raw = name.encode("utf-8")
        byte_rx = re.compile(rx.encode("utf-8"), re.DOTALL)  # a byte-oriented engine
        assert byte_rx.fullmatch(raw) and not byte_rx.fullmatch(raw + b"x"), name
        assert re.fullmatch(rx, name) and not re.fullmatch(rx, name + "x"), name


def test_nvtx_include_expressions():
    assert ncu_plan.nvtx_include("step", push_pop=True) == "step/"
    assert ncu_plan.nvtx_include("ProfilerStep#3", push_pop=False) == "ProfilerStep#3"
    for bad in ("a/b", "dom@range", "[x]", "it's", ""):
        assert ncu_plan.nvtx_include(bad, push_pop=True) is None


def test_launch_counting_adds_the_steps_before_the_capture_or_offers_an_nvtx_filter():
    # 100 launches at ordinals 0, 10, ..., 990 in 2 captured steps: 50 per step; 6 steps ran
    # before the capture, so about 300 more launches precede it: skip 10 + 300
    k = target("k")
    (t,) = plan([k], counting=ncu_plan.Counting(steps_before=6, captured_steps=2))["targets"]
    assert (t["launch_skip"], t["launches_before_capture"]) == (10, 300)
    assert t["counting"] == (
        "6 profiler steps ran before the captured ones: if each launched it as often as the "
        "captured steps (50 per step), add about 300, i.e. --launch-skip 310"
    )
    # with an NVTX filter: the 50 launches inside the ranges (ordinals 500-990) are all past
    # the first 10% of the 1,000 launches, so only the first is skipped
    inside = ncu_plan.KernelTarget(**{**k.__dict__, "in_ranges": list(range(500, 1000, 10))})
    (u,) = plan([inside], total_launches=1000, counting=ncu_plan.Counting("step/"))["targets"]
    assert (u["launch_skip"], u["nvtx_include"], u["nvtx_launch_skip"]) == (10, "step/", 1)
    script = ncu_plan.plan_script(plan([inside], total_launches=1000, counting=ncu_plan.Counting("step/")))
    assert "ncu counts launches\n# from the start of the process" in script
    assert ("# launch counting: add the launches that ran before the capture, if it began after "
            "the process started; or count only launches inside the step ranges: --nvtx "
            "--nvtx-include 'step/' --launch-skip 1") in script
