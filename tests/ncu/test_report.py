"""Nsight Compute results in the report: the join to the trace's kernels, the time at stake,
the rules, the loop from ncu_plan.sh back to --ncu, the `ncu` command, and no plan for AMD GPUs."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from nsys_llm_explainer import schema
from nsys_llm_explainer.api import explain
from nsys_llm_explainer.cli import run
from nsys_llm_explainer.kernels.demangled import Matcher, canonical, mangled_function
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.render import Format
from nsys_llm_explainer.render.writers import build as build_files
from tests.conftest import ok, skipped
from tests.fixtures.builder import TraceBuilder
from tests.fixtures.kineto.builder import KinetoBuilder
from tests.fixtures.ncu_export import Launch, details_csv

ROOT = Path(__file__).resolve().parents[2]
RAW_FIXTURE = ROOT / "tests" / "fixtures" / "ncu" / "raw_page_prof_crlf.csv"
SCHEMAS = ROOT / "src" / "nsys_llm_explainer" / "schema"
NORM = ("void rms_norm_kernel<c10::BFloat16, float>(c10::BFloat16 *, const c10::BFloat16 *, const c10::BFloat16 *, "
        "float, int, int)")
GEMM = ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel"
        "__5x_cublas")
FLASH = ("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>, true, "
         "false, false>(Flash_fwd_params)")


# The launch shapes (grid, block) of the raw-page fixture's three launches.
RAW_SHAPES = {"void rms_norm_kernel": ((8192, 1, 1), (256, 1, 1)), "sm90_xmma_gemm": ((132, 1, 1), (384, 1, 1)),
              "void flash_fwd_kernel": ((264, 1, 1), (128, 1, 1))}


def h100_trace(
    path: Path, kernels: list[tuple[str, int]], calls: int = 10, mangled: dict[str, str] | None = None,
    shapes: dict[str, tuple[tuple[int, int, int], tuple[int, int, int]]] | None = None,
) -> Path:
    """Kernels back to back on an H100, each `calls` times, 1 us apart; `shapes`: (grid, block)
    by name prefix (default grid (1, 1, 1), block (128, 1, 1))."""
    b = TraceBuilder("2024.6")
    b.process(100)
    b.gpu(0, name="NVIDIA H100 80GB HBM3")
    t, corr = 1_000_000, 1
    for _ in range(calls):
        for name, dur in kernels:
            grid, block = next((v for k, v in (shapes or {}).items() if name.startswith(k)),
                               ((1, 1, 1), (128, 1, 1)))
            b.runtime(t - 3_000, t - 1_000, corr=corr)
            b.kernel(t, t + dur, corr=corr, name=name, mangled=(mangled or {}).get(name), grid=grid, block=block)
            corr += 1
            t += dur + 1_000
    return b.write(path)


def test_merged_report_joins_trace_time_to_ncu_class(tmp_path: Path) -> None:
    trace = h100_trace(tmp_path / "t.sqlite", [(NORM, 1_000_000), (GEMM, 2_300_000), (FLASH, 400_000),
                                               ("void other_kernel<int>(int)", 100_000)], shapes=RAW_SHAPES)
    report = explain(trace, Options(extra={"ncu": (str(RAW_FIXTURE),)}))
    data = ok(report, "ncu")
    assert data["match"] == {"launches": 3, "matched": 3, "by": {"mangled": 0, "demangled": 3, "short": 0},
                             "kernels": 3, "unmatched": [], "duration_factor": 2.0, "shapes": "compared"}
    assert {d["match_detail"] for d in data["launches"]} == {
        f"name, grid and block, duration ({r:.2f}x the trace's median call)" for r in (1.05025, 1.00457, 1.03)}
    rows = {r["name"]: r for r in data["kernels"]}
    for name, trace_ns, roof, ncu_ns in ((NORM, 1_000_000, 88.40, 1_050_250), (GEMM, 2_300_000, 91.20, 2_310_500),
                                         (FLASH, 400_000, 22.00, 412_000)):
        r = rows[name]
        assert (r["calls"], r["total_ns"], r["pct_of_roof"]) == (10, 10 * trace_ns, roof)
        assert r["stake_ns"] == pytest.approx(10 * trace_ns * (1 - roof / 100), abs=1)
        assert r["duration_ratio"] == pytest.approx(ncu_ns / trace_ns, abs=1e-3) and not r["ratio_far"]
    assert [r["name"] for r in data["kernels"]] == [FLASH, GEMM, NORM]  # by time at stake
    assert rows[FLASH]["class"] == "latency-bound" and rows[NORM]["limiter"] == "DRAM at 86% of peak"
    found = [f for f in report.findings if f.rule_id == "NLE330"]
    assert [f.impact_ns for f in found] == [rows[n]["stake_ns"] for n in (FLASH, GEMM, NORM)][: len(found)]
    assert found[0].title.endswith("runs at 22.0% of its roof, latency-bound: occupancy 6% from 255 registers "
                                   "per thread, 1 block per SM")
    assert not [f for f in report.findings if f.rule_id in ("NLE331", "NLE332")]
    schema.validate(report.to_dict())
    files = build_files(report, (Format.MD, Format.CSV, Format.JSON))
    assert "plots/ncu_roofline.svg" in files and "tables/ncu_kernels.csv" in files
    assert "Nsight Compute results" in files["report.md"] and "3 match a kernel of the trace" in files["report.md"]
    plain = explain(trace)
    assert "ncu" not in plain.metrics
    assert not {k for k in build_files(plain, (Format.CSV, Format.MD)) if "ncu_" in k and "plan" not in k}


def test_far_durations_and_unmatched_launches_are_said(tmp_path: Path) -> None:
    trace = h100_trace(tmp_path / "t.sqlite", [(NORM, 100_000)], calls=20, shapes=RAW_SHAPES)
    extra = tmp_path / "extra.csv"
    extra.write_text(details_csv([Launch(0, "void Kernel2<cutlass_80_tensorop_bf16>(Params)")], ["SpeedOfLight"], []))
    report = explain(trace, Options(extra={"ncu": (str(RAW_FIXTURE), str(extra))}))
    data = ok(report, "ncu")
    # the norm's name and shape match, but ncu timed it 10.5x the trace's calls: not the same work,
    # so it is listed as unmatched, not attached (no class, no time at stake on the trace's kernel)
    assert data["match"]["matched"] == 0 and len(data["match"]["unmatched"]) == 4 and data["kernels"] == []
    norm = next(u for u in data["match"]["unmatched"] if u["kernel"] == NORM)
    assert norm["reason"] == ("its duration, 1,050.2 us, is 10.50x the trace's median call with this grid and "
                              "block (100.0 us): not the same work")
    assert next(d for d in data["launches"] if d["kernel"] == NORM)["matched_kernel"] is None
    by_rule = {f.rule_id: f for f in report.findings}
    assert "NLE331" not in by_rule and "NLE330" not in by_rule
    assert by_rule["NLE332"].title == "4 of 4 Nsight Compute launches match no kernel of the trace"


def test_name_matching() -> None:
    nv = "void at::native::<unnamed>::k<float, (int)4, (bool)1, [lambda(int) (instance 2)]>(T1, unsigned int)"
    gnu = "void at::native::(anonymous namespace)::k<float, 4, true, {lambda(int)#2}>(T1, unsigned int)"
    assert canonical(nv) == canonical(gnu)
    vectorized = "_ZN2at6native29vectorized_elementwise_kernelILi4EEEviT0_"
    assert mangled_function(vectorized) == "vectorized_elementwise_kernel"
    assert mangled_function("_Z16flash_fwd_kernelILi128EEvv") == "flash_fwd_kernel"
    m = Matcher([(1, gnu, None), (2, "void Kernel2<a>(Params)", "_Z7Kernel2I1aEvNT_6ParamsE"),
                 (3, "void Kernel2<b>(Params)", None), (4, "ampere_sgemm_128x64_nn", None)])
    assert (m.match(nv).key, m.match(nv).how) == (1, "demangled")
    assert (m.match("_Z7Kernel2I1aEvNT_6ParamsE").key, m.match("_Z7Kernel2I1aEvNT_6ParamsE").how) == (2, "mangled")
    assert m.match("Kernel2").reason == "ambiguous: 2 kernels of the trace are named Kernel2"
    assert m.match("void Kernel2<c>(Params)").key is None  # another instance of the template
    assert (m.match("ampere_sgemm_128x64_nn").key, m.match("k").key) == (4, 1)  # ncu's function name alone


FAKE_NCU = """#!{python}
import json, os, sys
sys.path.insert(0, {root!r})
from tests.fixtures.ncu_export import Launch, details_csv
args = sys.argv[1:]
if args[0] == "--import":
    spec = json.load(open(args[1]))
    sys.stdout.write(details_csv([Launch(0, spec["name"], spec["values"], grid="(1, 1, 1)", block="(128, 1, 1)")],
                                 spec["sections"], spec["metrics"]))
    sys.exit(0)
export = args[args.index("--export") + 1]
targets = {{t["export"]: t for t in json.load(open(os.environ["NCU_TARGETS"]))["targets"]}}
rank = targets[export]["rank"]
values = {{"gpu__time_duration.sum": str(json.loads(os.environ["NCU_DURATIONS"])[targets[export]["name"]]),
          "dram__bytes_read.sum": "1,000,000",
          "dram__bytes_write.sum": "500,000", "sm__sass_thread_inst_executed_op_ffma_pred_on.sum": "1,000",
          "SpeedOfLight:Compute (SM) Throughput": "75.5", "SpeedOfLight:Memory Throughput": "20"}}
print("==PROF== Connected to process 4242")
json.dump({{"name": targets[export]["name"], "values": values,
           "sections": [args[i + 1] for i, a in enumerate(args) if a == "--section"],
           "metrics": args[args.index("--metrics") + 1].split(",")}}, open(export + ".ncu-rep", "w"))
"""


def test_the_plan_writes_exports_that_ncu_merges_as_they_are(tmp_path: Path) -> None:
    names = ["void gemm_kernel<float, 128>(float *, int)", "void rms_norm<float>(float *, int)",
             "void softmax_kernel(float *)"]
    trace = h100_trace(tmp_path / "t.sqlite", [(n, 50_000 * (i + 1)) for i, n in enumerate(names)], calls=30,
                       mangled={names[0]: "_Z11gemm_kernelIfLi128EEvPfi"})
    out = tmp_path / "report"
    files = build_files(explain(trace), (Format.NCU,))
    out.mkdir()
    for name, text in files.items():
        (out / name).write_text(text)
    bindir, work = tmp_path / "bin", tmp_path / "results"
    bindir.mkdir()
    work.mkdir()
    fake = bindir / "ncu"
    fake.write_text(FAKE_NCU.format(python=sys.executable, root=str(ROOT)))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    durations = {n: 50_000 * (i + 1) + 1_000 for i, n in enumerate(names)}  # within 2x of the trace's calls
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "NCU_TARGETS": str(out / "ncu_targets.json"),
           "NCU_DURATIONS": json.dumps(durations)}
    proc = subprocess.run(["sh", str(out / "ncu_plan.sh"), "python", "serve.py"], cwd=work, env=env,
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    targets = json.loads((out / "ncu_targets.json").read_text())["targets"]
    assert sorted(p.name for p in work.glob("*.csv")) == sorted(f"{t['export']}.csv" for t in targets)
    report = explain(trace, Options(extra={"ncu": (str(work),)}))
    data = ok(report, "ncu")
    assert data["match"]["matched"] == len(targets) == 3 and data["classes"]["compute-bound"] == 3
    by_name = {launch["kernel"]: launch for launch in data["launches"]}
    for t in targets:
        launch = by_name[t["name"]]
        assert launch["duration_ns"] == durations[t["name"]] and launch["dram_bytes"] == 1_500_000
        assert launch["flops"]["fp32"] == 2_000 and launch["layouts"] == ["details"]
        assert {"registers_per_thread", "achieved_occupancy_pct", "waves_per_sm"} <= set(launch["sources"])


def test_no_plan_for_amd_gpus(tmp_path: Path) -> None:
    b = KinetoBuilder()
    b.top["deviceProperties"] = [{"id": 0, "name": "AMD Instinct MI300X", "numSms": 304}]
    b.launch("Cijk_Ailk_Bljk_BBS_BH_MT128x128x64", 1_000, 2_000, 3_000, 90_000, corr=1, api="hipLaunchKernel")
    report = explain(b.write(tmp_path / "amd.json"))
    assert skipped(report, "ncu_plan") == (
        "the trace's GPU is AMD Instinct MI300X: Nsight Compute profiles NVIDIA GPUs only")
    assert build_files(report, (Format.NCU,)) == {}
    b2 = KinetoBuilder()
    b2.launch("Cijk_Ailk_Bljk_BBS_BH_MT128x128x64", 1_000, 2_000, 3_000, 90_000, corr=1, api="hipLaunchKernel")
    assert "HIP calls" in skipped(explain(b2.write(tmp_path / "hip.json")), "ncu_plan")


def test_ncu_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "summary"
    assert run(["ncu", str(RAW_FIXTURE), "--out", str(out)]) == 0
    doc = json.loads((out / "ncu.json").read_text())
    jsonschema.Draft202012Validator(json.loads((SCHEMAS / "ncu.schema.json").read_text())).validate(doc)
    assert doc["launch_count"] == 3 and doc["classes"]["memory-bound"] == 1
    assert sorted(p.name for p in out.iterdir()) == ["ncu.csv", "ncu.json", "ncu.md", "ncu_roofline.svg"]
    assert (out / "ncu.csv").read_text().count("\n") == 4
    md = (out / "ncu.md").read_text()
    assert "DRAM at 86% of peak" in md and "![Nsight Compute roofline](ncu_roofline.svg)" in md
    assert run(["ncu", str(RAW_FIXTURE), "--out", str(out)]) == 0  # its own earlier output is replaced
    capsys.readouterr()
    rep = tmp_path / "x.ncu-rep"
    rep.write_bytes(b"\x00")
    for argv in (["ncu", str(rep), "--out", str(tmp_path / "o")],
                 [str(tmp_path / "t.sqlite"), "--out", str(tmp_path / "o2"), "--ncu", str(rep)]):
        assert run(argv) == 3
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "ncu --import" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists() and not (tmp_path / "o2").exists()
    assert run(["ncu", "--out", str(tmp_path / "o")]) == 2
    assert run(["ncu", str(RAW_FIXTURE), "--out", str(out), "--gpu", "No Such GPU"]) == 2


def test_schemas_share_the_launch_object() -> None:
    own = json.loads((SCHEMAS / "ncu.schema.json").read_text())["$defs"]["launch"]
    merged = json.loads((SCHEMAS / "metrics" / "ncu.json").read_text())["$defs"]["launch"]
    extra = {"matched_kernel", "matched_by", "match_detail"}
    assert {k: v for k, v in merged["properties"].items() if k not in extra} == own["properties"]
    assert [k for k in merged["required"] if k not in extra] == own["required"]


def kernel_row(stake_ns: int, ratio: float = 1.1, kind: str = "latency-bound", how: str = "demangled") -> dict:
    """One row of metrics.ncu.kernels (metrics/ncu_results.py), for the rules alone."""
    return {"name": "void k<1>(int)", "devices": [{"device_id": 0, "total_ns": 20_000_000, "stake_ns": stake_ns}],
            "calls": 100, "total_ns": 20_000_000, "p50_ns": 200_000.0, "pct_of_kernel_time": 40.0, "matched_by": how,
            "ncu_kernel": "void k<1>(int)", "ncu_launches": [0], "class": kind, "pct_of_roof": 30.0,
            "stake_ns": stake_ns, "limiter": "SM 30%, memory 20% of peak: occupancy 9% from 200 registers per thread",
            "causes": ["occupancy 9% from 200 registers per thread"], "sm_pct": 30.0, "memory_pct": 20.0,
            "longest_launch": 0, "roofline_pct_of_roof": None, "ncu_p50_ns": 220_000.0 * ratio / 1.1,
            "duration_ratio": ratio, "ratio_far": not 0.5 <= ratio <= 2.0}


def ncu_data(kernels: list[dict], unmatched: int = 0) -> dict:
    gone = [{"index": i, "kernel": f"void gone{i}()", "reason": "no kernel of the trace has this name"}
            for i in range(unmatched)]
    return {"kernels": kernels, "launches": [], "match": {"launches": len(kernels) + unmatched,
                                                           "matched": len(kernels), "unmatched": gone}}


def test_ncu_rules_fire_and_stay_quiet() -> None:
    from tests.rule_inputs import device_metrics, fire

    def run_rule(rid: str, data: dict) -> list:
        return fire(rid, {**device_metrics({0: {}}, window=100_000_000), "ncu": data})

    (f,) = run_rule("NLE330", ncu_data([kernel_row(14_000_000)]))
    assert (f.severity, f.confidence, f.impact_ns, f.impact_pct) == ("medium", "medium", 14_000_000, 14.0)
    assert f.title.endswith("runs at 30.0% of its roof, latency-bound: occupancy 9% from 200 registers per thread")
    assert any("registers" in r for r in f.recommendation)
    assert run_rule("NLE330", ncu_data([kernel_row(500_000)])) == []  # 0.5% of the window: below the bands
    (capped,) = run_rule("NLE330", ncu_data([kernel_row(30_000_000, ratio=3.0)]))
    assert (capped.severity, capped.confidence) == ("low", "low")  # ncu measured another kind of launch
    (note,) = run_rule("NLE331", ncu_data([kernel_row(1, ratio=3.0)]))
    assert note.severity == "info" and "(ratio 3.00)" in note.evidence[0]
    assert run_rule("NLE331", ncu_data([kernel_row(1, ratio=1.9)])) == []
    (gone,) = run_rule("NLE332", ncu_data([kernel_row(1)], unmatched=2))
    assert gone.title == "2 of 3 Nsight Compute launches match no kernel of the trace"
    assert run_rule("NLE332", ncu_data([kernel_row(1)])) == []
