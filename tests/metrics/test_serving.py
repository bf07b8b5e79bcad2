"""serving: iterations, phases, tokens and costs, on synthetic captures with planted answers
(tests/fixtures/serving_synth.py, both formats) and on the shared real serving captures.

Expected values come from the generator's own plan and event list (serving_synth.simulate),
never from the metric."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nsys_llm_explainer.api import explain
from nsys_llm_explainer.options import Options
from tests.conftest import SHARED_TRACES
from tests.fixtures import serving_synth as ss

FORMATS = ("nsys", "kineto")
SUFFIX = {"nsys": ".sqlite", "kineto": ".json"}
LAYERS = 4
# Prefills of 2 sequences with different prompt lengths (their fit needs several token
# counts at one batch size), decodes of 2 and 3 sequences with growing KV caches.
BATCHES = (
    ss.prefill(2, 256),
    *(ss.decode(2, 2 * 256 + 2 * i) for i in range(1, 6)),
    ss.prefill(2, 128),
    *(ss.decode(3, 3 * 200 + 3 * i) for i in range(1, 6)),
    ss.prefill(2, 64),
    *(ss.decode(2, 2 * 64 + 2 * i) for i in range(1, 4)),
)


def run(tmp_path: Path, plan: ss.Plan, fmt: str, **options: Any) -> dict[str, Any]:
    path = ss.write(plan, tmp_path / f"serving{SUFFIX[fmt]}", fmt)
    return explain(path, Options(**options)).document


def serving(doc: dict[str, Any]) -> dict[str, Any]:
    s = doc["metrics"]["serving"]
    assert s["status"] == "ok", s.get("reason")
    return s


def expected_graph_replays(b: ss.Batch, plan: ss.Plan) -> int:
    if plan.graphs == "full":
        return int(b.phase == "decode")
    if plan.graphs == "piecewise":
        return 2 * plan.layers
    return 0


CASES = [("vllm", "none"), ("vllm", "full"), ("sglang", "piecewise"), ("user", "full"), ("none", "none"),
         ("none", "piecewise")]
SOURCE = {"vllm": "engine_marks", "sglang": "engine_marks", "user": "user_marks", "none": "model_structure"}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("marks", "graphs"), CASES)
def test_planted_iterations_are_found_exactly(tmp_path: Path, fmt: str, marks: str, graphs: str) -> None:
    # Nsight Systems: two tensor-parallel ranks in one export; PyTorch profiler: one rank's file.
    plan = ss.Plan(BATCHES, layers=LAYERS, marks=marks, graphs=graphs, tp=2 if fmt == "nsys" else 1,
                   world_size=None if fmt == "nsys" else 2)
    s = serving(run(tmp_path, plan, fmt))
    assert s["source"] == SOURCE[marks]
    its = s["iterations"]
    planted = list(BATCHES) * plan.tp
    assert s["iteration_count"] == len(its) == len(planted)
    assert [it["pid"] for it in its] == [ss.PID0 + r for r in range(plan.tp) for _ in BATCHES]
    for it, b in zip(its, planted, strict=True):
        assert it["phase"] == b.phase
        assert it["gpu_span_ns"] == ss.span(b, plan)
        assert it["graph_replays"] == expected_graph_replays(b, plan)
        assert it["layers"] == LAYERS
        assert it["kernels"] == len(ss.kernels_of(b, plan))
        if marks in ("vllm", "sglang") or (marks == "none" and fmt == "kineto"):
            assert (it["sequences"], it["tokens"]) == (b.seqs, b.tokens)
        else:  # the marks carry no numbers and nothing records the inputs: nothing is guessed
            assert (it["sequences"], it["tokens"]) == (None, None)
        if marks == "vllm":
            assert it["kv_tokens"] == b.kv
    phases = {p["phase"]: p for p in s["phases"]}
    assert phases["prefill"]["iterations"] == 3 * plan.tp and phases["decode"]["iterations"] == 13 * plan.tp


def reference_fit(points: list[tuple[list[float], float]]) -> list[float]:
    """Least squares by the normal equations, written out (no numpy): the reference."""
    n = len(points[0][0]) + 1
    ata = [[0.0] * n for _ in range(n)]
    aty = [0.0] * n
    for x, y in points:
        row = [1.0, *x]
        for i in range(n):
            aty[i] += row[i] * y
            for j in range(n):
                ata[i][j] += row[i] * row[j]
    # Gauss-Jordan elimination
    for i in range(n):
        piv = ata[i][i]
        for j in range(n):
            ata[i][j] /= piv
        aty[i] /= piv
        for r in range(n):
            if r != i:
                f = ata[r][i]
                for j in range(n):
                    ata[r][j] -= f * ata[i][j]
                aty[r] -= f * aty[i]
    return aty


@pytest.mark.parametrize("fmt", FORMATS)
def test_latency_fits_recover_the_planted_slopes(tmp_path: Path, fmt: str) -> None:
    plan = ss.Plan(BATCHES, layers=LAYERS, marks="vllm")
    s = serving(run(tmp_path, plan, fmt))
    fits = {f["phase"]: f for f in s["fits"]}
    # prefill: kv = tokens, 2 sequences each: span = fixed + 50 x 2 + L x (30 + 2 + 4 + 1) x tokens
    per_token = LAYERS * (ss.GEMM_PER_TOKEN + ss.ROPE_PER_TOKEN + ss.ATTN_PER_TOKEN + ss.ATTN_PER_KV)
    pre = fits["prefill"]
    assert pre["terms"]["ns_per_token"] == pytest.approx(per_token, abs=1e-6)
    assert pre["terms"]["intercept_ns"] == pytest.approx(ss.fixed_ns(plan) + ss.HEAD_PER_SEQ * 2, abs=1e-3)
    assert pre["rmse_ns"] == pytest.approx(0.0, abs=1e-3) and pre["configurations"] == 3
    dec = fits["decode"]
    assert dec["terms"]["ns_per_sequence"] == pytest.approx(
        LAYERS * (ss.GEMM_PER_TOKEN + ss.ROPE_PER_TOKEN + ss.ATTN_PER_TOKEN) + ss.HEAD_PER_SEQ, abs=1e-6)
    assert dec["terms"]["ns_per_kv_token"] == pytest.approx(LAYERS * ss.ATTN_PER_KV, abs=1e-6)
    assert dec["terms"]["intercept_ns"] == pytest.approx(ss.fixed_ns(plan), abs=1e-3)
    # against the reference solver on the planted spans
    points = [([float(b.seqs), float(b.kv)], float(ss.span(b, plan))) for b in BATCHES if b.phase == "decode"]
    ref = reference_fit(points)
    assert [dec["terms"][k] for k in ("intercept_ns", "ns_per_sequence", "ns_per_kv_token")] == pytest.approx(ref)


def test_one_configuration_says_no_fit_can_be_made(tmp_path: Path) -> None:
    plan = ss.Plan((ss.prefill(2, 64), *(ss.decode(2, 130) for _ in range(4))), marks="vllm")
    fits = {f["phase"]: f for f in serving(run(tmp_path, plan, "kineto"))["fits"]}
    assert fits["decode"]["terms"] is None and fits["decode"]["configurations"] == 1
    assert "1 distinct configuration" in fits["decode"]["reason"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_mixed_batches_give_both_parts(tmp_path: Path, fmt: str) -> None:
    batches = (ss.prefill(1, 100), ss.mixed(1, 64, 3, 500), ss.decode(4, 600), ss.decode(4, 604))
    s = serving(run(tmp_path, ss.Plan(batches, marks="vllm"), fmt))
    it = s["iterations"][1]
    assert it["phase"] == "mixed" and (it["sequences"], it["tokens"]) == (4, 67)
    assert (it["prefill_sequences"], it["prefill_tokens"], it["decode_sequences"], it["decode_tokens"]) == (1, 64, 3, 3)
    assert [p["phase"] for p in s["phases"]] == ["prefill", "mixed", "decode"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_per_phase_figures(tmp_path: Path, fmt: str) -> None:
    plan = ss.Plan(BATCHES, marks="vllm")
    ev = ss.simulate(plan)
    s = serving(run(tmp_path, plan, fmt))
    dec = next(p for p in s["phases"] if p["phase"] == "decode")
    spans = sorted(ss.span(b, plan) for b in BATCHES if b.phase == "decode")
    assert dec["gpu_span_p50_ns"] == spans[(len(spans) + 1) // 2 - 1]  # nearest rank
    # periods: from one iteration's first kernel to the next's, for decodes followed by another
    firsts = []
    for i in range(len(BATCHES)):
        n_before = sum(len(ss.kernels_of(b, plan)) for b in BATCHES[:i])
        firsts.append(ev.kernels[n_before][2])
    periods = sorted(firsts[i + 1] - firsts[i] for i, b in enumerate(BATCHES[:-1]) if b.phase == "decode")
    assert dec["period_p50_ns"] == periods[(len(periods) + 1) // 2 - 1]
    assert dec["tokens"] == sum(b.tokens for b in BATCHES if b.phase == "decode")
    pre = next(p for p in s["phases"] if p["phase"] == "prefill")
    pre_spans = sum(ss.span(b, plan) for b in BATCHES if b.phase == "prefill")
    pre_tokens = sum(b.tokens for b in BATCHES if b.phase == "prefill")
    assert pre["ns_per_token"] == pytest.approx(pre_spans / pre_tokens, abs=0.01)
    # categories: the GEMMs of the decode iterations, from the planted durations
    gemm = sum(ss.dur(k, b) * plan.layers for b in BATCHES if b.phase == "decode"
               for k in (ss.QKV, ss.OPROJ, ss.UP, ss.DOWN)) + sum(
        ss.dur(ss.HEAD, b) for b in BATCHES if b.phase == "decode")
    assert dec["categories"]["gemm"] == gemm


def test_kernel_dat_and_op_times(tmp_path: Path) -> None:
    plan = ss.Plan(BATCHES, marks="none", layers=LAYERS)
    path = ss.write(plan, tmp_path / "s.json", "kineto")
    report = explain(path)
    kd = report.table("kernel_dat")
    b = BATCHES[0]
    row = kd[(kd["phase"] == "prefill") & (kd["tokens"] == b.tokens) & (kd["kernel"] == ss.QKV)].iloc[0]
    assert row["calls_per_iteration"] == LAYERS and row["iterations"] == 1
    assert row["ns_per_iteration_mean"] == LAYERS * ss.dur(ss.QKV, b) == row["ns_per_iteration_p50"]
    assert row["category"] == "gemm"
    ops = report.table("op_times")
    emb = ops[(ops["operator"] == "aten::embedding") & (ops["tokens"] == b.tokens)].iloc[0]
    assert emb["calls_per_iteration"] == 1 and emb["ns_per_iteration_mean"] == ss.dur(ss.EMBED, b)


@pytest.mark.parametrize("fmt", FORMATS)
def test_steps_are_the_iterations_and_a_prefill_is_never_a_slow_decode(tmp_path: Path, fmt: str) -> None:
    # decodes of 2 sequences, one prefill far longer than any decode, one more decode of 40
    batches = (ss.prefill(4, 1024), *(ss.decode(2, 2100 + 2 * i) for i in range(8)))
    doc = run(tmp_path, ss.Plan(batches, marks="vllm"), fmt)
    steps = doc["metrics"]["steps"]
    assert steps["method"] == "serving_iterations"
    assert {p["phase"]: p["steps"] for p in steps["phases"]} == {"prefill": 1, "decode": 8}
    assert all(p["outliers"] == 0 for p in steps["phases"])
    assert not any(f["rule_id"] == "NLE212" for f in doc["findings"])


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_loop_around_decode_marks_is_not_an_iteration(tmp_path: Path, fmt: str) -> None:
    plan = ss.Plan((ss.prefill(1, 200), *(ss.decode(1, 200 + i) for i in range(1, 7))), marks="user")
    s = serving(run(tmp_path, plan, fmt))
    assert s["loops"] == ["DECODE_LOOP"]
    assert [it["name"] for it in s["iterations"]] == ["PREFILL"] + [f"DECODE_STEP_{i:03d}" for i in range(1, 7)]
    assert [it["phase"] for it in s["iterations"]] == ["prefill"] + ["decode"] * 6


def test_first_token_sampler_is_merged_and_a_mark_without_work_is_not_counted(tmp_path: Path) -> None:
    b = ss.KinetoBuilder()
    b.top["deviceProperties"] = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}]
    t, corr = 1_000_000, 1
    names = ss.kernels_of(ss.prefill(1, 64), ss.Plan((), layers=LAYERS))
    b.user("PREFILL", t, t + 200_000, pid=10, tid=10)
    for i, n in enumerate(names):
        s0 = t + 1_000 + i * 2_000
        b.runtime("cudaLaunchKernel", s0, s0 + 500, corr, pid=10, tid=10)
        b.kernel(ss.ATTN_PREFILL if n == "attn" else n, s0 + 1_000, s0 + 2_500, corr=corr)
        corr += 1
    t2 = t + 210_000
    b.user("FIRST_TOKEN_FROM_PREFILL", t2, t2 + 20_000, pid=10, tid=10)
    b.runtime("cudaLaunchKernel", t2 + 1_000, t2 + 1_500, corr, pid=10, tid=10)
    b.kernel(ss.SAMPLE, t2 + 2_000, t2 + 4_000, corr=corr)
    corr += 1
    b.user("DECODE_STEP_000", t2 + 30_000, t2 + 40_000, pid=10, tid=10)  # launches nothing
    path = b.write(tmp_path / "t.json")
    s = serving(explain(path).document)
    assert s["iteration_count"] == 1 and s["merged"] == ["FIRST_TOKEN_FROM_PREFILL"] and s["empty_marks"] == 1
    it = s["iterations"][0]
    assert it["kernels"] == len(names) + 1 and it["gpu_end_ns"] == t2 + 4_000 and it["host_end_ns"] == t2 + 20_000


def test_decode_mbu_from_the_weight_bytes_its_gemms_read(tmp_path: Path) -> None:
    """Without a model config, decode MBU is the bytes of the weight matrices the decode GEMMs
    read (their recorded shapes, bf16) over the decode GPU spans x the H100's 3,350 GB/s."""
    plan = ss.Plan(BATCHES, marks="vllm", shapes=True)
    s = serving(run(tmp_path, plan, "kineto"))
    dec = next(p for p in s["phases"] if p["phase"] == "decode")
    per_iteration = plan.layers * sum(2 * k * n for name, (k, n) in ss.WEIGHTS.items() if name != ss.HEAD)
    per_iteration += 2 * ss.HIDDEN * ss.VOCAB
    decodes = [b for b in BATCHES if b.phase == "decode"]
    want = 100.0 * per_iteration * len(decodes) / (sum(ss.span(b, plan) for b in decodes) / 1e9 * 3350e9)
    assert dec["utilization"]["mbu_pct"] == pytest.approx(want, abs=0.01)
    assert dec["utilization"]["from"].startswith("the weight bytes the decode GEMMs read")


def test_tensor_parallel_ranks_and_one_rank_captured(tmp_path: Path) -> None:
    plan = ss.Plan(BATCHES[:6], marks="vllm", tp=1, world_size=4)
    doc = run(tmp_path, plan, "kineto")
    tp = serving(doc)["tensor_parallel"]
    ars = 2 * LAYERS * len(plan.batches)
    assert tp["world_size"] == 4 and tp["processes_captured"] == 1
    assert tp["communication_ns"] == ars * ss.FIXED[ss.ALLREDUCE]
    note = next(f for f in doc["findings"] if f["rule_id"] == "NLE405")
    assert note["severity"] == "info" and note["title"] == "1 of 4 tensor-parallel ranks captured"


def test_not_serving_is_skipped_with_the_reason(tmp_path: Path) -> None:
    from tests.fixtures.diff_workloads import workload

    doc = explain(workload(tmp_path / "w.sqlite")).document
    s = doc["metrics"]["serving"]
    assert s["status"] == "skipped" and "not LLM" in s["reason"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_eager_host_bound_decode_is_named_with_its_idle_time(tmp_path: Path, fmt: str) -> None:
    """Launches every 20 µs, kernels of 1.5-8 µs: the GPU idles between kernels inside each
    decode iteration; NLE401's time at stake is that idle, summed from the event list."""
    plan = ss.Plan((ss.prefill(1, 32), *(ss.decode(1, 33 + i) for i in range(20))), marks="vllm",
                   launch_every_ns=20_000, host_gap_ns=100_000)
    ev = ss.simulate(plan)
    doc = run(tmp_path, plan, fmt)
    idle = 0
    pos = 0
    for b in plan.batches:
        n = len(ss.kernels_of(b, plan))
        ks = ev.kernels[pos:pos + n]
        pos += n
        if b.phase == "decode":
            idle += (ks[-1][3] - ks[0][2]) - sum(k[3] - k[2] for k in ks)  # no two kernels overlap
    f = next(f for f in doc["findings"] if f["rule_id"] == "NLE401")
    assert f["impact_ns"] == idle
    assert "CUDA graph" in f["recommendation"][0] and "--enforce-eager" in f["recommendation"][0]
    assert doc["diagnosis"]["summary"].split(": ", 1)[1].startswith("21 iterations: 1 prefill")
    assert "decode is host-bound" in doc["diagnosis"]["summary"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_host_gaps_between_decode_iterations(tmp_path: Path, fmt: str) -> None:
    plan = ss.Plan((ss.prefill(1, 32), *(ss.decode(1, 33 + i) for i in range(25))), marks="sglang",
                   host_gap_ns=400_000)
    ev = ss.simulate(plan)
    doc = run(tmp_path, plan, fmt)
    bounds = []
    pos = 0
    for b in plan.batches:
        n = len(ss.kernels_of(b, plan))
        bounds.append((ev.kernels[pos][2], ev.kernels[pos + n - 1][3]))
        pos += n
    # the gaps before the decode iterations that have a period (a next iteration): all but the last
    gaps = sum(bounds[i][0] - bounds[i - 1][1] for i in range(1, len(bounds) - 1))
    f = next(f for f in doc["findings"] if f["rule_id"] == "NLE402")
    assert f["impact_ns"] == gaps
    assert "overlap scheduler" in f["recommendation"][0]


def test_key_numbers_speak_of_iterations(tmp_path: Path) -> None:
    from nsys_llm_explainer.fmt import dur
    from nsys_llm_explainer.render import Format, writers
    from tests.conftest import md_open_lines
    from tests.render.test_report_layout import key_table

    path = ss.write(ss.Plan(BATCHES, marks="vllm"), tmp_path / "k.json", "kineto")
    report = explain(path)
    keys = key_table(md_open_lines(writers.build(report, (Format.MD,))["report.md"]))
    dec = next(p for p in report.document["metrics"]["serving"]["phases"] if p["phase"] == "decode")
    assert keys["Iterations"] == "16 (3 prefill, 13 decode), from vLLM's marks"
    assert keys["Decode"].startswith(f"{dur(dec['period_p50_ns'])} per output token (p50; p90 "
                                     f"{dur(dec['period_p90_ns'])})")
    assert "Step latency" not in keys


# -- the shared real serving captures -------------------------------------------------------

KINETO = SHARED_TRACES / "kineto"
NSYS = SHARED_TRACES / "nsys"


def shared(name: str) -> Path:
    path = (KINETO if name.endswith(".json.gz") else NSYS) / name
    if not path.exists():
        pytest.skip(f"shared trace {path} is absent")
    return path


def test_sglang_prefill_on_mi300x() -> None:
    s = serving(explain(shared("sglang_qwen3_8b_extend_mi300x.json.gz")).document)
    assert s["source"] == "engine_marks" and s["engine"] == "sglang" and s["iteration_count"] == 1
    it = s["iterations"][0]
    assert (it["phase"], it["sequences"], it["tokens"], it["layers"]) == ("prefill", 15, 15_360, 36)
    assert it["name"] == "step[EXTEND bs=15 toks=15360]" and it["outer"].startswith("execute_15360_context_15(")
    # counted from the kernels launched inside step[...]: 493.5 ms; 492.7 ms busy
    assert it["gpu_span_ns"] == pytest.approx(493.5e6, rel=0.05)
    assert it["gpu_busy_ns"] == pytest.approx(492.7e6, rel=0.05)


def test_vllm_moe_eager_prefill() -> None:
    doc = explain(shared("vllm_moe_b200_tp8_eager.json.gz")).document
    s = serving(doc)
    it = s["iterations"][0]
    assert s["iteration_count"] == 1 and (it["phase"], it["sequences"], it["tokens"], it["layers"]) == (
        "prefill", 1, 888, 36)
    assert it["gpu_span_ns"] == pytest.approx(83.4e6, rel=0.05)
    assert it["gpu_busy_ns"] == pytest.approx(10.8e6, rel=0.05)
    assert s["profiler_overhead"][0] == "Python stack tracing (15,230 Python function events)"
    assert s["tensor_parallel"]["world_size"] == 8 and s["tensor_parallel"]["processes_captured"] == 1


def test_flashinference_decode_loop() -> None:
    doc = explain(shared("flashinference_kvdecode_a10g.sqlite")).document
    s = serving(doc)
    its = s["iterations"]
    assert s["source"] == "user_marks" and len(its) == 51
    assert s["loops"] == ["DECODE_LOOP"] and s["merged"] == ["FIRST_TOKEN_FROM_PREFILL"]
    assert its[0]["phase"] == "prefill" and {it["phase"] for it in its[1:]} == {"decode"}
    assert all(it["kernels"] == 138 for it in its[1:])
    assert its[0]["gpu_span_ns"] == pytest.approx(6.56e6, rel=0.05)
    dec = next(p for p in s["phases"] if p["phase"] == "decode")
    assert dec["gpu_span_p50_ns"] == pytest.approx(5.25e6, rel=0.05)
    assert dec["gpu_busy_p50_ns"] == pytest.approx(0.32e6, rel=0.05)
    assert doc["metrics"]["steps"]["method"] == "serving_iterations"
    summary = doc["diagnosis"]["summary"]
    assert "51 iterations: 1 prefill" in summary and "then 50 decode at" in summary
    assert "decode is host-bound, 138 launches per token and no CUDA graph" in summary


def test_hf_qwen_forward_pass() -> None:
    s = serving(explain(shared("hf_qwen1.5_0.5b_h100.json.gz")).document)
    it = s["iterations"][0]
    assert s["source"] == "model_forward" and s["iteration_count"] == 1
    assert (it["phase"], it["sequences"], it["tokens"], it["layers"]) == ("prefill", 16, 8_944, 24)
    assert it["numbers_from"] == "aten::embedding input [16, 559]"
    assert it["gpu_span_ns"] == pytest.approx(34.9e6, rel=0.05)
    assert s["carried_kernels"] == 436


def test_per_configuration_p50_counts_iterations_without_the_item_as_zero() -> None:
    """Three decode iterations of one configuration; an operator runs in one of them (1,000 ns,
    2 calls), another in all three (10, 20, 30 ns): means over 3 iterations, nearest-rank p50
    (the 2nd of 3 sorted values: 0 for the first, 20 for the second)."""
    import numpy as np

    from nsys_llm_explainer.metrics.serving import _per_config
    from nsys_llm_explainer.results.serving import IterationRow

    def row(i: int) -> IterationRow:
        return IterationRow(i, 1, 0, f"it{i}", None, "decode", 4, 4, 100, None, None, None, None, None,
                            0, 1, 0, 1, 1, 1, 1, 1, None, None, None, 0, None, {})

    rows = [row(0), row(1), row(2)]
    it = np.array([1, 0, 1, 2])
    item = np.array([0, 1, 1, 1])
    calls = np.array([2, 1, 1, 1])
    ns = np.array([1_000, 10, 20, 30])
    frame = _per_config(rows, it, item, calls, ns, ["rare", "common"], "operator").set_index("operator")
    assert frame.loc["rare", "calls_per_iteration"] == round(2 / 3, 3)
    assert frame.loc["rare", "ns_per_iteration_mean"] == round(1_000 / 3, 1)
    assert frame.loc["rare", "ns_per_iteration_p50"] == 0
    assert frame.loc["common", "ns_per_iteration_mean"] == 20.0 and frame.loc["common", "ns_per_iteration_p50"] == 20
    assert (frame["iterations"] == 3).all() and (frame["phase"] == "decode").all()


@pytest.mark.parametrize(("fmt", "marks", "graphs", "tp"), [
    ("nsys", "vllm", "full", 2), ("kineto", "sglang", "piecewise", 2), ("kineto", "none", "none", 1),
])
def test_blocks_of_iterations_give_the_figures_of_one_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str, marks: str, graphs: str, tp: int
) -> None:
    """The serving metric works a block of iterations at a time (BLOCK_ROWS kernels): blocks
    smaller than one iteration, with the ranks' kernels interleaved, give the result and the
    tables of one block over all kernels (the iteration, operator and kernel rows in the same
    order)."""
    from nsys_llm_explainer.metrics import serving as metric

    plan = ss.Plan(BATCHES, marks=marks, graphs=graphs, tp=tp, shapes=fmt == "kineto")
    path = ss.write(plan, tmp_path / f"s{SUFFIX[fmt]}", fmt)
    outputs = []
    for rows in (1 << 40, 7):
        monkeypatch.setattr(metric, "BLOCK_ROWS", rows)
        report = explain(path)
        outputs.append((report.document["metrics"]["serving"],
                        *(report.table(t) for t in ("iterations", "op_times", "kernel_dat"))))
    (one, *one_tables), (blocks, *block_tables) = outputs
    assert one["status"] == "ok" and one["iteration_count"] >= len(BATCHES)
    assert blocks == one
    for a, b in zip(one_tables, block_tables, strict=True):
        assert len(a) > 0
        assert a.equals(b)


def test_iteration_table_and_json_hold_every_field_with_the_types_a_row_dict_frame_gets() -> None:
    """tables/iterations.csv's frame (built a column at a time) against a frame of one dict per
    row, and an iteration's JSON against dataclasses.asdict: same values, same dtypes, with
    missing and present token counts and host gaps mixed across rows."""
    import dataclasses

    import pandas as pd

    from nsys_llm_explainer.metrics.serving import ITERATION_COLUMNS, _iteration_frame
    from nsys_llm_explainer.results.serving import HostGap, IterationRow, _iteration_json

    def row(i: int) -> IterationRow:
        gap = None if i == 0 else HostGap(i, 2 * i, 3 * i)
        return IterationRow(i, 7, i % 2, f"it{i}", None if i else "outer", "prefill" if i == 0 else "decode",
                            None if i == 1 else 4, 4 * i, None, None, None, None, None, None if i else "marks",
                            10 * i, 10 * i + 5, 10 * i + 1, 10 * i + 4, 3, 3, 2, 2, None if i == 0 else 6,
                            gap, None if i == 2 else 10, 0, None, {"gemm": i} if i else {}, i, 2 * i)

    rows = [row(i) for i in range(3)]
    reference = pd.DataFrame([
        {c: (None if r.gap_host is None else getattr(r.gap_host, c.removeprefix("gap_host_")))
         if c.startswith("gap_host_") else getattr(r, c) for c in ITERATION_COLUMNS} for r in rows
    ], columns=list(ITERATION_COLUMNS))
    pd.testing.assert_frame_equal(_iteration_frame(rows), reference, check_dtype=True)
    for r in rows:
        expected = dataclasses.asdict(r)
        expected["gpu_span_ns"] = 3
        assert _iteration_json(r) == expected
        assert list(_iteration_json(r)) == list(expected)


def test_kernel_map_packs_and_unpacks_the_codes_exactly() -> None:
    """The cached kernel -> iteration map gives back the codes it was made from, in their
    dtype (int8 and int16 here, as the iteration count chooses), read-only; runs of one
    iteration's kernels pack to a small fraction of the codes' bytes."""
    import numpy as np

    from nsys_llm_explainer.analysis.iterations import KernelMap

    rng = np.random.default_rng(7)
    for n_items, dtype in ((100, np.int8), (12_788, np.int16)):
        runs = rng.integers(1, 400, size=n_items)
        codes = np.repeat(np.arange(n_items), runs).astype(np.min_scalar_type(-n_items))
        codes[rng.choice(len(codes), size=len(codes) // 50, replace=False)] = -1  # unassigned kernels
        assert codes.dtype == dtype
        packed = KernelMap.pack(codes)
        back = packed.unpack()
        assert back.dtype == codes.dtype and np.array_equal(back, codes)
        assert not back.flags.writeable
        assert len(packed.packed) < codes.nbytes / 4
    empty = KernelMap.pack(np.zeros(0, np.int8)).unpack()
    assert len(empty) == 0 and empty.dtype == np.int8


def test_iterations_grouped_and_put_in_launch_order_as_one_sort_each_would() -> None:
    """_group (the codes sorted on the smallest unsigned type: 8-, 16- and 32-bit here) against
    a stable int64 argsort; _tokens_in_launch_order (one order check per block of iterations)
    and _release_kernels' row ranges against a sort and a min/max per iteration, with launch
    time ties broken by start, rows out of order in some iterations and blocks of 64 kernels."""
    from types import SimpleNamespace

    import numpy as np

    from nsys_llm_explainer.analysis import iterations as itmod

    rng = np.random.default_rng(11)
    for n in (5, 300, 70_000):
        codes = rng.integers(-1, n, size=3 * n)
        expected = [np.flatnonzero(codes == i) for i in range(n)]
        got = itmod._group(codes, n)
        assert len(got) == n and all(np.array_equal(a, b) for a, b in zip(got, expected, strict=True))
    rows = 2_000
    kernels = SimpleNamespace(start=rng.integers(0, 50, size=rows), name_id=rng.integers(0, 9, size=rows))
    data = SimpleNamespace(kernels=lambda: kernels)
    t = np.sort(rng.integers(0, 400, size=rows))  # launch times mostly in row order, with ties
    lt = (t, np.ones(rows, dtype=bool))
    owner = rng.integers(0, 40, size=rows)
    items = []
    for i in range(40):
        ks = np.flatnonzero(owner == i)
        if i % 3 == 0:
            ks = rng.permutation(ks)  # out of order: sorted like the others
        items.append(itmod.Iteration(1, 1, 0, 1, f"it{i}", None, kernels=ks))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(itmod, "CHUNK_KERNELS", 64)
        got_tokens = list(itmod._tokens_in_launch_order(data, items, lt))  # type: ignore[arg-type]
    for it, tokens in zip(items, got_tokens, strict=True):
        order = it.kernels[np.lexsort((kernels.start[it.kernels], t[it.kernels]))]
        assert np.array_equal(tokens, kernels.name_id[order].astype(np.int64))
    ranges = [(int(it.kernels.min()), int(it.kernels.max()) + 1, len(it.kernels)) for it in items]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(itmod, "CHUNK_KERNELS", 64)
        itmod._release_kernels(items)
    assert [(*it.row_range, it.kernel_count) for it in items] == ranges


def test_the_calls_near_host_gaps_cover_each_gap_as_all_the_calls_do() -> None:
    """_near keeps, of calls sorted by start (some long, some nested), those that can reach into
    a window: the union of what it keeps covers each window exactly as the union of every
    call does; unsorted calls, or windows that reach a quarter of the calls, give None."""
    import numpy as np

    from nsys_llm_explainer.analysis import intervals
    from nsys_llm_explainer.metrics.serving import _near

    rng = np.random.default_rng(5)
    kept = 0
    for trial in range(60):
        n = int(rng.integers(50, 400))
        start = np.sort(rng.integers(0, 100_000, size=n))
        end = start + np.where(rng.random(n) < 0.03, rng.integers(0, 30_000, size=n), rng.integers(0, 300, size=n))
        lo = rng.integers(0, 100_000, size=int(rng.integers(1, 6)))
        hi = lo + rng.integers(1, 2_000 if trial % 2 else 40_000, size=len(lo))
        near = _near(start, end, lo, hi)
        full = intervals.overlap_with_union(lo, hi, *intervals.merge(start, end))
        if near is None:
            continue
        kept += 1
        assert len(near) * 4 < n and np.all(np.diff(near) > 0)
        assert np.array_equal(intervals.overlap_with_union(lo, hi, *intervals.merge(start[near], end[near])), full)
    assert kept >= 10
    start = np.array([5, 1, 9])
    assert _near(start, start + 1, np.array([0]), np.array([2])) is None
    wide = np.arange(100)
    assert _near(wide, wide + 1, np.array([0]), np.array([30])) is None  # 30 of 100 calls: a quarter or more
    assert np.array_equal(_near(wide, wide + 1, np.array([10]), np.array([12])), [10, 11])
