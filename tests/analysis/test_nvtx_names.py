"""NVTX name normalization: the rule on constructed and real names, and the NVTX metrics
aggregating by normalized name (checked against a brute-force reference)."""

from __future__ import annotations

import itertools
import re
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.analysis.nvtx import grouped, input_sizes, normalize
from tests import reference
from tests.conftest import NSYS_TRACES, analyze, ok, require_nsys_traces, table
from tests.fixtures.builder import TraceBuilder

SLOW = settings(max_examples=25,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

ADDMM = "aten::addmm, seq = 12, op_id = 34, sizes = [[1024], [8, 512], [512, 1024]], input_op_ids = [(1,0), (2,0)]"
PYPROF_ARGS = (
    "{'mod': 'torch.nn.functional', 'op': 'linear', 'args': [{'name': '', 'type': 'tensor', 'shape': (32, 1024), "
    "'dtype': 'float32'}, {'name': '', 'type': 'tensor', 'shape': (4096, 1024), 'dtype': 'float32'}, "
    "{'name': 'bias', 'type': 'NoneType', 'value': None}]}"
)


@pytest.mark.parametrize(("raw", "expected"), [
    (ADDMM, "aten::addmm"),
    ("aten::view, op_id = 314290", "aten::view"),
    ("aten::mm, seq = 4", "aten::mm"),
    ("autograd::engine::evaluate_function: AddmmBackward0, seq = 5, op_id = 9",
     "autograd::engine::evaluate_function: AddmmBackward0"),
    ("aten::conv2d, stack = ['model.py(12): forward']", "aten::conv2d"),
    ("FSDP::pre_forward (encoder.block.14.layer.1), op_id = 315285", "FSDP::pre_forward (encoder.block.14.layer.1)"),
    (PYPROF_ARGS, "linear"),
    ("{'traceMarker': 'linear', 'funcStack': '/main/forward/linear', 'seq': 3}", "linear"),
    ("{'traceMarker': ['/a/train.py:10', '/a/model.py:42'], 'funcStack': '/main/forward/relu'}", "relu"),
    ("{'traceMarker': ['/a/train.py:10', '/a/model.py:42']}", "model.py:42"),
    ("{'mod': 'Linear', 'strRepr': 'in_features=3, out_features=4, bias=True'}", "Linear"),
    ('{"op": "it\'s", "mod": "torch"}', "it's"),
    ("  decode_step  ", "decode_step"),
    ("step 3, phase = decode", "step 3, phase = decode"),  # not a PyTorch annotation key
    (", seq = 3", ", seq = 3"),  # never empty
    ("{}", "{}"),
    # A user range shaped like a dict is not a pyprof marker without one of its keys.
    ("{'a': 1}", "{'a': 1}"),
    ('{"step": 3, "phase": "decode"}', '{"step": 3, "phase": "decode"}'),
    ("{'mode': 'eval'}", "{'mode': 'eval'}"),
])
def test_normalize(raw: str, expected: str) -> None:
    assert normalize(raw) == expected


def test_input_sizes_keep_the_shapes():
    assert input_sizes(ADDMM) == [(1024,), (8, 512), (512, 1024)]
    assert input_sizes("aten::add, seq = 1, op_id = 2, sizes = [[8, 512], [], [1]]") == [(8, 512), (), (1,)]
    assert input_sizes(PYPROF_ARGS) == [(32, 1024), (4096, 1024)]
    assert input_sizes("aten::view, op_id = 3") is None
    assert input_sizes("aten::add, sizes = [[8, 5") is None  # cut short: no guess
    assert input_sizes("decode") is None


def test_grouped_codes_map_raw_names_to_normalized_ones():
    names, codes = grouped(["aten::mm, op_id = 1", "fwd", "aten::mm, op_id = 2", " fwd"])
    assert names == ["aten::mm", "fwd"]
    assert codes.tolist() == [0, 1, 0, 1]


def _names(path: Path) -> list[str]:
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    con.text_factory = lambda raw: raw.decode("utf-8", "replace")
    try:
        sql = ("SELECT DISTINCT coalesce(e.text, s.value) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
               "WHERE e.eventType IN (59, 60)")
        return [r[0] for r in con.execute(sql) if r[0] is not None]
    finally:
        con.close()


def test_real_pytorch_names_collapse_to_their_operators():
    require_nsys_traces()
    trace = NSYS_TRACES / "nsysai_h100_2gpu_1s.sqlite"
    if not trace.is_file():
        pytest.skip(f"{trace.name} not among the shared traces")
    names = _names(trace)
    annotated = re.compile(r"(.*), op_id = \d+")
    expected = {n: (m.group(1) if (m := annotated.fullmatch(n)) else n) for n in names}
    assert sum(1 for n in names if annotated.fullmatch(n)) > len(names) // 2  # the trace is what we think
    assert {n: normalize(n) for n in names} == expected
    assert len(set(expected.values())) < len(names) // 10


def test_plain_real_names_are_left_alone():
    require_nsys_traces()
    trace = NSYS_TRACES / "centerformer_baseline.sqlite"
    if not trace.is_file():
        pytest.skip(f"{trace.name} not among the shared traces")
    names = _names(trace)
    assert names and all(normalize(n) == n.strip() for n in names)


# --- the NVTX metrics aggregate by normalized name -------------------------------------

ANNOTATED = ["aten::mm, op_id = 1", "aten::mm, seq = 2, op_id = 7", "aten::add, op_id = 3",
             "{'mod': 'torch.nn.functional', 'op': 'aten::mm', 'args': []}", "fwd", "fwd, op_id = 9"]


def simple_normalize(name: str) -> str:
    """Reference for the names above (written independently of the module's rules)."""
    if name.startswith("{"):
        return name.split("'op': '")[1].split("'")[0]
    return name.split(", ")[0]


spec_rows = st.fixed_dictionaries({
    "kernels": st.lists(st.tuples(st.integers(0, 50_000), st.integers(1, 3_000)), min_size=1, max_size=20),
    "ranges": st.lists(st.tuples(st.integers(0, 50_000), st.integers(1, 20_000), st.sampled_from(ANNOTATED)),
                       min_size=1, max_size=12, unique_by=lambda r: (r[0], r[1])),
    "launch_offsets": st.lists(st.integers(0, 60_000), min_size=20, max_size=20),
})
_counter = itertools.count()


@SLOW
@given(spec_rows)
def test_nvtx_metrics_aggregate_by_normalized_name(tmp_path, spec):
    b = TraceBuilder("2024.6")
    kernels, launches, ranges = [], [], []
    for i, (start, dur) in enumerate(spec["kernels"]):
        t = spec["launch_offsets"][i]
        b.runtime(start=t, end=t + 5, pid=100, corr=i + 1)
        b.kernel(start=start, end=start + dur, device=0, pid=100, corr=i + 1, name="k")
        kernels.append(reference.Kernel(start, start + dur, 100, i + 1))
        launches.append(reference.Launch(t, t + 5, 100, 100, i + 1))
    for start, dur, name in spec["ranges"]:
        b.nvtx(start=start, end=start + dur, text=name, pid=100)
        ranges.append(reference.Range(simple_normalize(name), start, start + dur, 100, 100))
    report = analyze(b.write(tmp_path / f"t{next(_counter)}.sqlite"))
    ref = reference.attribution(kernels, launches, ranges)

    att = ok(report, "nvtx_attribution")
    assert {r["name"]: (r["kernel_count"], r["kernel_ns"]) for r in att["ranges"] if r["kernel_count"]} == ref["own"]
    assert {r["name"]: r["inclusive_kernel_ns"] for r in att["ranges"] if r["inclusive_kernel_ns"]} == ref["inclusive"]

    nr = ok(report, "nvtx_ranges")
    expected = pd.DataFrame([(r.name, r.end - r.start) for r in ranges], columns=["name", "dur"])
    by_name = expected.groupby("name")["dur"].agg(["count", "sum"])
    assert {r["name"]: (r["count"], r["total_ns"]) for r in nr["ranges"]} == {
        n: (int(c), int(s)) for n, (c, s) in by_name.iterrows()
    }
    assert nr["distinct_normalized_names"] == len(by_name)
    raw = table(report, "nvtx_ranges", "nvtx_ranges")
    assert set(raw["name"]) == {name for _, _, name in spec["ranges"]}
    assert all(simple_normalize(n) == m for n, m in zip(raw["name"], raw["normalized_name"], strict=True))
    assert nr["distinct_names"] == len(raw)


# --- ranges quoted by other metrics are normalized too; CSVs keep the raw names -----------

READBACK_STEPS = 10
READBACK_LOCAL = 7  # steps whose read-back sits in `aten::_local_scalar_dense, op_id = i`


def _readback_trace(tmp_path: Path) -> Path:
    """tests/fixtures/planted.scalar_readbacks, each step's copy and sync inside one PyTorch
    range: 7 named `aten::_local_scalar_dense, op_id = i`, 3 `aten::copy_, op_id = i`. The
    gap after step i (kernels end at T+23, the next starts at T+58) has its middle inside
    step i's range [T+15, T+50] on the launching thread."""
    from tests.fixtures import planted

    b = TraceBuilder("2024.6")
    b.process(100)
    s = planted.Sim(b)
    for i in range(READBACK_STEPS):
        for _ in range(3):
            s.launch(5 * planted.US)
        start = s.host
        s.copy(2 * planted.US, 4, planted.D2H, planted.DEVICE, planted.PINNED)
        s.sync(wake_ns=20 * planted.US)
        op = "aten::_local_scalar_dense" if i < READBACK_LOCAL else "aten::copy_"
        b.nvtx(start, s.host, text=f"{op}, op_id = {i}", pid=100)
    return b.write(tmp_path / "readbacks.sqlite")


def test_readback_ranges_and_gap_ranges_are_normalized(tmp_path):
    from nsys_llm_explainer.render import Format, writers

    report = analyze(_readback_trace(tmp_path))
    rb = ok(report, "host_patterns")["scalar_readbacks"]
    assert rb["count"] == READBACK_STEPS
    assert rb["ranges"] == [{"range": "aten::_local_scalar_dense", "count": 7}, {"range": "aten::copy_", "count": 3}]
    gaps = ok(report, "idle_causes")["top_gaps"]
    # 9 equal gaps, listed in time order: the ranges of steps 0-8.
    assert [g["nvtx_range"] for g in gaps] == ["aten::_local_scalar_dense"] * 7 + ["aten::copy_"] * 2
    doc = report.to_dict()
    assert doc["metrics"]["host_patterns"]["scalar_readbacks"]["ranges"] == rb["ranges"]
    assert [g["nvtx_range"] for g in doc["metrics"]["idle_causes"]["top_gaps"]] == [g["nvtx_range"] for g in gaps]
    text = writers.build(report, (Format.MD,), md="full")["report.md"]
    assert "| aten::\\_local\\_scalar\\_dense | 7 |\n| aten::copy\\_ | 3 |\n" in text
    raw = table(report, "nvtx_ranges", "nvtx_ranges")
    assert sorted(raw["name"]) == sorted(
        f"{'aten::_local_scalar_dense' if i < READBACK_LOCAL else 'aten::copy_'}, op_id = {i}"
        for i in range(READBACK_STEPS)
    )
