"""compute_efficiency, model_utilization and the Nsight Compute plan on the shared PyTorch
profiler traces, against a deliberately simple reference over the raw JSON (the operator's
shapes, the kernels of the launches inside it, the ProfilerStep range)."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from nsys_llm_explainer.schema import validate
from tests import kineto_reference as ref
from tests.conftest import SHARED_TRACES, analyze, ok, run_cli, table

KINETO = SHARED_TRACES / "kineto"
QWEN = KINETO / "hf_qwen1.5_0.5b_h100.json.gz"
HTA = KINETO / "hta_a100_80gb_rank0.json.gz"
QWEN_CONFIG = Path(__file__).resolve().parents[1] / "fixtures" / "hf_configs" / "qwen1.5-0.5b.json"
H100_BF16 = 989.5e12


def need(path: Path) -> Path:
    if not path.is_file():
        pytest.skip(f"shared real trace not found at {path} (a clone outside /work)")
    return path


def op_kernels(doc: dict[str, Any], op: str) -> dict[tuple[str, str], tuple[int, int]]:
    """Per (Input Dims, Input type) of `op` (a leaf operator): calls that launched kernels,
    and the time of those kernels (launches on the op's thread inside its interval)."""
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    kernel_ns = {e["args"]["correlation"]: ref.ns(e["dur"]) for e in events if e.get("cat") == "kernel"}
    launches = defaultdict(list)
    for e in events:
        if e.get("cat") == "cuda_runtime" and e["args"].get("correlation") in kernel_ns:
            launches[e["tid"]].append((ref.ns(e["ts"]), e["args"]["correlation"]))
    out: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for e in events:
        if e.get("cat") != "cpu_op" or e["name"] != op:
            continue
        t0, t1 = ref.ns(e["ts"]), ref.ns(e["ts"]) + ref.ns(e["dur"])
        mine = [kernel_ns[c] for t, c in launches[e["tid"]] if t0 <= t <= t1]
        if mine:
            key = (json.dumps(e["args"]["Input Dims"]), json.dumps(e["args"]["Input type"]))
            out[key][0] += 1
            out[key][1] += sum(mine)
    return {k: (v[0], v[1]) for k, v in out.items()}


@pytest.fixture(scope="module")
def qwen() -> tuple[Any, dict[str, Any]]:
    report = analyze(need(QWEN), model_config=str(QWEN_CONFIG))
    return report, ref.load(QWEN)


def test_qwen_gemm_flops_and_tflops_match_the_raw_trace(qwen) -> None:
    report, doc = qwen
    ops = {(o["operator"], o["shapes"].replace(" ", "")): o for o in ok(report, "compute_efficiency")["operations"]}
    checked = 0
    for op in ("aten::mm", "aten::addmm"):
        for (dims, types), (calls, kernel_ns) in op_kernels(doc, op).items():
            d = json.loads(dims)
            a, b = (d[0], d[1]) if op == "aten::mm" else (d[1], d[2])
            flops = 2 * a[0] * a[1] * b[1] * calls
            row = ops[(op, dims.replace(" ", ""))]
            assert json.loads(types)[0] == "c10::BFloat16" and row["compute_dtype"] == "bf16"
            assert (row["calls"], row["flops"]) == (calls, flops)
            assert abs(row["kernel_ns"] - kernel_ns) <= calls  # us -> ns rounding per kernel
            assert row["tflops"] == pytest.approx(flops / kernel_ns / 1e3, rel=1e-4)
            assert row["bound"] == "compute" and row["ridge_flop_per_byte"] == pytest.approx(295.4)
            assert row["roof_tflops"] == pytest.approx(989.5)
            assert row["pct_of_roof"] == pytest.approx(100 * flops / kernel_ns / 1e3 / 989.5, abs=0.06)
            checked += 1
    assert checked == 4  # three mm shapes (q/k/v+o, gate/up, down) and the biased addmm
    totals = ok(report, "compute_efficiency")["totals"]
    assert totals["implausible_operations"] == 0


def test_qwen_attention_is_causal_from_concrete_inputs(qwen) -> None:
    report, _ = qwen
    att = next(o for o in ok(report, "compute_efficiency")["operations"] if o["family"] == "attention")
    assert att["flops"] == 24 * 16 * 16 * 559 * 559 * 128  # 2*B*H*L*L*(64+64) / 2, 24 layers
    assert "(causal)" in att["formula"]


def test_qwen_mfu_per_step_states_its_inputs(qwen) -> None:
    report, doc = qwen
    # The step's own GPU time: its GPU-side annotation (34.9 ms), not its 47.2 ms host range,
    # which begins with a 14.1 ms cudaDeviceSynchronize waiting for the previous step's kernels.
    step = next(e for e in doc["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")
                and e.get("cat") == "gpu_user_annotation")
    latency_s = ref.ns(step["dur"]) / 1e9
    # The trace runs Qwen2Model, without the LM head (no product has the 151,936-word
    # vocabulary): 2 x (463,863,808 - 151,936 x 1,024) + causal attention over 559 keys,
    # half of them per token on average.
    per_token = 2 * (463_863_808 - 151_936 * 1024) + 2 * 24 * 16 * (64 + 64) * 559 // 2
    assert per_token == 644_038_656
    mfu = 100 * per_token * 16 * 559 / (latency_s * H100_BF16)
    mu = ok(report, "model_utilization")
    (s,) = mu["steps"]
    assert (s["kind"], s["tokens"], s["context"], s["flops_per_token"]) == ("prefill", 8944, 559, per_token)
    assert s["mfu_pct"] == pytest.approx(mfu, abs=0.006) == 16.68  # 17.4% in PaLM's convention
    # measured: the 5,514.5 GFLOP of projections and the causal attention (245.7 GFLOP): the
    # step ran exactly the model's work, counted the same way, so HFU is MFU
    hfu = 100 * (2 * 308_281_344 * 8944 + 24 * 16 * 16 * 559 * 559 * 128) / (latency_s * H100_BF16)
    assert s["hfu_pct"] == pytest.approx(hfu, abs=0.006) and s["hfu_pct"] == s["mfu_pct"]  # 16.68%
    assert "PaLM's convention counts all of them: 27,475,968 FLOPs per token more" in s["flops_from"]
    assert s["mbu_pct"] is None and s["peak_tflops"] == 989.5
    phase = mu["phases"][0]
    inputs = " | ".join(phase["inputs"])
    assert "the token embedding's input [16, 559]" in inputs and "qwen1.5-0.5b.json" in inputs
    assert "H100 SXM5 80GB (table)" in inputs
    assert "LM head: left out: no matrix product of the step has the vocabulary dimension 151,936" in inputs
    # HFU is below MFU only by the causal half of the attention the convention counts
    assert phase["warnings"] == [] and report.warnings == ()


def test_qwen_report_validates_and_draws_the_roofline(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = run_cli(need(QWEN), "--out", out, "-q", "--model", QWEN_CONFIG)
    assert res.exit_code == 0, res.stderr
    doc = json.loads((out / "report.json").read_text(encoding="utf-8"))
    validate(doc)
    svg = (out / "plots" / "roofline.svg").read_text(encoding="utf-8")
    assert svg.count("<circle") >= 6 and "BF16 roof" in svg
    assert 'data-plot="roofline"' in (out / "report.html").read_text(encoding="utf-8")
    plan = json.loads((out / "ncu_targets.json").read_text(encoding="utf-8"))
    first = plan["targets"][0]
    assert first["category"] == "gemm" and first["bound"] == "compute"
    assert first["name"].startswith("sm90_xmma_gemm_bf16bf16")
    script = (out / "ncu_plan.sh").read_text(encoding="utf-8")
    assert script.count("\nncu --target-processes all") == len(plan["targets"])
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "## How close to the hardware" in md and "plots/roofline.svg" in md


def test_hta_operator_flops_from_recorded_shapes_and_missing_inputs() -> None:
    before = hashlib.sha256(need(HTA).read_bytes()).hexdigest()
    report = analyze(HTA)
    d = ok(report, "compute_efficiency")
    doc = ref.load(HTA)
    expected = op_kernels(doc, "aten::mm")
    rows = {o["shapes"]: o for o in d["operations"] if o["operator"] == "aten::mm"}
    assert expected and len(rows) == len(expected)
    for (dims, _), (calls, kernel_ns) in expected.items():
        (m, k), (_, n) = json.loads(dims)
        row = rows[dims.replace(" ", "")]
        assert (row["calls"], row["flops"]) == (calls, 2 * m * n * k * calls)
        assert abs(row["kernel_ns"] - kernel_ns) <= calls
    # float32 products measured against the mode their kernel shows (TF32 s1688gemm, or SIMT)
    assert {r["compute_dtype"] for r in rows.values()} <= {"tf32", "fp32"}
    assert any(r["compute_dtype"] == "tf32" for r in rows.values())
    # mul.out (DDP's gradient scaling): the out tensor is written, not read: 15 calls of
    # 4 x 2798 x 2798 fp32 in, the 8-byte double scalar, and the same tensor out
    (mul_out,) = [o for o in d["operations"]
                  if o["operator"] == "aten::mul" and o["shapes"] == "[[4,2798,2798],[],[4,2798,2798]]"]
    per_call = 2 * 4 * 2798 * 2798 * 4 + 8
    assert mul_out["calls"] == 15 and mul_out["bytes"] == 15 * per_call
    assert mul_out["gbps"] == pytest.approx(15 * per_call / mul_out["kernel_ns"], abs=0.05)  # 1,730 GB/s
    assert mul_out["gbps"] < 2039 and mul_out["above_bandwidth"] is False
    reasons = {u["operator"]: u["reason"] for u in d["uncovered"]}
    assert "torch.compile" in reasons["CompiledFunctionBackward"]
    mu = ok(report, "model_utilization")
    assert all(s["mfu_pct"] is None and s["hfu_pct"] is not None for s in mu["steps"])
    # a PyTorch training workload that is not an LLM: FLOPs per sample, not a config.json
    assert any(line.startswith("MFU: pass --model-flops-per-token N with --tokens-per-step N")
               for line in mu["missing"])
    assert mu["phases"][0]["kind"] == "training"
    assert hashlib.sha256(HTA.read_bytes()).hexdigest() == before


def test_qwen_kernel_rows_name_every_launching_operator(qwen) -> None:
    """The cuBLAS GEMM kernel is launched by aten::mm and by aten::addmm, and by calls no
    counted operator encloses: its row names both operators with their kernel counts and counts
    the rest, as a scan of the raw JSON finds them."""
    report, doc = qwen
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    gemm = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off"
    kernels = [e for e in events if e.get("cat") == "kernel" and e["name"].startswith(gemm)]
    corrs = {e["args"]["correlation"] for e in kernels}
    launches = [(e["tid"], ref.ns(e["ts"])) for e in events
                if e.get("cat") == "cuda_runtime" and e["args"].get("correlation") in corrs]
    by_op: dict[str, int] = defaultdict(int)
    for tid, t in launches:
        around = [e["name"] for e in events if e.get("cat") == "cpu_op" and e["tid"] == tid
                  and e["name"] in ("aten::mm", "aten::addmm")
                  and ref.ns(e["ts"]) <= t <= ref.ns(e["ts"]) + ref.ns(e["dur"])]
        by_op[around[0] if around else "(none)"] += 1
    # The rest: launched outside both operators, or with no launch call in the trace.
    by_op["(none)"] += len(kernels) - len(launches)
    assert by_op["aten::mm"] and by_op["aten::addmm"] and by_op["(none)"]
    rows = [k for k in ok(report, "compute_efficiency")["kernels"] if k["name"].startswith(gemm)]
    assert len(rows) == 1
    row = rows[0]
    assert row["operator"] == f"aten::mm ({by_op['aten::mm']}), aten::addmm ({by_op['aten::addmm']})"
    assert row["calls"] == by_op["aten::mm"] + by_op["aten::addmm"]
    assert row["unclaimed_calls"] == by_op["(none)"] == len(kernels) - row["calls"]


def test_qwen_cat_takes_its_element_size_from_the_kernel(qwen) -> None:
    """A cat of a tensor list records no dtype; its CatArrayBatchedCopy kernel states the element
    size (OpaqueType<4u>: the float32 rotary tables of a bf16 model). The bytes are 2 x (read
    and written) x the listed tensors' elements x that size, from the raw JSON."""
    report, doc = qwen
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    opaque = {e["args"]["correlation"]: int(re.search(r"OpaqueType<(\d+)u?>", e["name"]).group(1))
              for e in events if e.get("cat") == "kernel" and "CatArrayBatchedCopy" in e["name"]}
    launches = [(e["tid"], ref.ns(e["ts"]), opaque[e["args"]["correlation"]]) for e in events
                if e.get("cat") == "cuda_runtime" and e["args"].get("correlation") in opaque]
    want: dict[str, int] = {}
    for e in events:
        if e.get("cat") != "cpu_op" or e["name"] != "aten::cat":
            continue
        t0, t1 = ref.ns(e["ts"]), ref.ns(e["ts"]) + ref.ns(e["dur"])
        sizes = {b for tid, t, b in launches if tid == e["tid"] and t0 <= t <= t1}
        if len(sizes) == 1:
            dims = e["args"]["Input Dims"][0]
            elements = sum(math.prod(d) for d in dims)
            want[json.dumps(e["args"]["Input Dims"]).replace(" ", "")] = 2 * elements * sizes.pop()
    assert 4 in set(opaque.values()) and 2 in set(opaque.values())  # both kinds occur
    frame = table(report, "compute_efficiency", "compute_operations")
    rows = frame[frame["operator"] == "aten::cat"].to_dict("records")
    got = {r["shapes"].replace(" ", ""): (r["bytes"], r["calls"]) for r in rows}
    assert want and all(shape in got for shape in want)
    for shape, nbytes in want.items():
        assert got[shape][0] == nbytes * got[shape][1], shape
