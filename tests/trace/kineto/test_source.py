"""PyTorch profiler (Kineto) traces: detection by content, exact timestamps, format quirks,
and one-line errors (exit 3) for JSON that is not a profiler trace."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.model import TraceFormat
from nsys_llm_explainer.trace.formats import open_trace
from nsys_llm_explainer.trace.kineto.collect import us_to_ns
from tests.conftest import run_cli
from tests.fixtures.kineto.builder import KinetoBuilder, us_text


def simple(b: KinetoBuilder) -> KinetoBuilder:
    b.launch("gemm", 1_000, 2_500, 3_000, 7_123, corr=11)
    b.launch("relu", 2_600, 3_100, 7_500, 7_500, corr=12)  # zero-duration kernel
    return b


def kernels_of(path: Path):
    data = open_trace(path)
    try:
        return data.kernels(), data
    finally:
        data.close()


@pytest.mark.parametrize("name", ["t.json", "t.pt.trace.json", "trace.txt", "noext"])
def test_detected_by_content_under_any_name(tmp_path, name):
    path = simple(KinetoBuilder()).write(tmp_path / name)
    k, data = kernels_of(path)
    assert data.format is TraceFormat.KINETO and data.format_name == "PyTorch profiler trace (Kineto JSON)"
    assert k.dur.tolist() == [4_123, 0]


@pytest.mark.parametrize("name", ["t.json.gz", "t.pt.trace.json.gz", "t.bin"])
def test_gzip_detected_by_content(tmp_path, name):
    path = simple(KinetoBuilder()).write(tmp_path / name, compress=True)
    k, _ = kernels_of(path)
    assert k.start.tolist() == [3_000, 7_500]


def test_epoch_timestamp_is_exact_to_the_nanosecond(tmp_path):
    b = KinetoBuilder()
    b.x("kernel", "k", 0, 0, 0, 7, {"device": 0, "stream": 7, "correlation": 1})
    b.events[-1]["ts"] = "\u0000num:1700000000123456.789"
    b.events[-1]["dur"] = "\u0000num:0.001"
    path = b.write(tmp_path / "t.json")
    assert '"ts": 1700000000123456.789' in path.read_text()
    k, _ = kernels_of(path)
    assert k.start.tolist() == [1700000000123456789]
    assert k.end.tolist() == [1700000000123456790]


def test_integer_microseconds_and_display_unit(tmp_path):
    b = KinetoBuilder(ts_style="int", base_ns=1_695_835_542_514_261_000)
    b.launch("gemm", 1_000, 2_000, 3_000, 7_000, corr=11)
    b.top["displayTimeUnit"] = "ms"  # labels the viewer's axis; ts stays in microseconds
    b.top["baseTimeNanoseconds"] = 1_695_835_000_000_000_000
    path = b.write(tmp_path / "t.json")
    assert '"ts": 1695835542514264,' in path.read_text()
    k, data = kernels_of(path)
    assert k.start.tolist() == [1_695_835_542_514_264_000]
    assert k.dur.tolist() == [4_000]
    assert data.format_details()["displayTimeUnit"] == "ms"
    assert data.format_details()["baseTimeNanoseconds"] == 1_695_835_000_000_000_000


def test_one_line_file_and_string_thread_ids(tmp_path):
    b = KinetoBuilder()
    b.runtime("cudaLaunchKernel", 1_000, 2_000, corr=3, tid="thread 3 (python)")
    b.kernel("k", 2_500, 3_500, corr=3, tid="stream 7", stream=7)
    b.kernel("k", 4_000, 5_000, corr=None, tid="stream 9")
    for e in b.events:
        if e["cat"] == "kernel":
            del e["args"]["stream"]
    path = b.write(tmp_path / "t.json", one_line=True)
    assert path.read_text().count("\n") == 0
    k, data = kernels_of(path)
    assert k.stream.tolist() == [7, 9]
    assert k.pid.tolist() == [4242, 4242]  # one host process: kernels without a call go to it
    rt = data.runtime()
    assert len(rt) == 1 and rt.tkey[0] >= 0


def test_old_categories_and_external_id_spelling(tmp_path):
    b = KinetoBuilder(old_names=True)
    b.op("aten::mm", 500, 4_000, ext=9)
    b.launch("gemm", 1_000, 2_000, 3_000, 5_000, corr=4, ext=9)
    path = b.write(tmp_path / "t.json")
    data = open_trace(path)
    assert len(data.kernels()) == 1 and len(data.runtime()) == 1
    assert data.operators().ext.tolist() == [9]
    assert data.kernels().ext.tolist() == [9]
    assert data.table_counts() == {"Kernel": 1, "Operator": 1, "Runtime": 1}


def test_launch_pid_follows_the_runtime_call_across_processes(tmp_path):
    b = KinetoBuilder()
    b.runtime("cudaLaunchKernel", 1_000, 2_000, corr=5, pid=100, tid=100)
    b.runtime("cudaLaunchKernel", 1_000, 2_000, corr=6, pid=200, tid=201)
    b.kernel("a", 3_000, 4_000, corr=6, device=3)
    b.kernel("b", 3_000, 4_500, corr=5, device=1)
    b.kernel("c", 5_000, 6_000, corr=77, device=1)  # no call: two hosts, pid unknown
    k, _ = kernels_of(b.write(tmp_path / "t.json"))
    assert k.pid.tolist() == [200, 100, -1]
    assert k.device.tolist() == [3, 1, 1]


def test_flows_join_when_events_carry_no_correlation(tmp_path):
    b = KinetoBuilder()
    call = b.runtime("cudaLaunchKernel", 1_000, 2_000, corr=None)
    kern = b.kernel("k", 3_000, 4_000, corr=None)
    b.flow(31, "s", call)
    b.flow(31, "f", kern)
    data = open_trace(b.write(tmp_path / "t.json"))
    assert data.kernels().corr.tolist() == [31]
    assert data.runtime().corr.tolist() == [31]


def test_flows_kept_only_for_the_side_whose_rows_lack_a_correlation(tmp_path):
    """The calls carry their ids, the kernel does not: the flow ends stay (they give the
    kernel its id), the flow starts, which no row needs, are dropped."""
    b = KinetoBuilder()
    call = b.runtime("cudaLaunchKernel", 1_000, 2_000, corr=31)
    kern = b.kernel("k", 3_000, 4_000, corr=None)
    b.flow(31, "s", call)
    b.flow(31, "f", kern)
    b.flow(32, "s", b.runtime("cudaLaunchKernel", 5_000, 5_500, corr=32))
    data = open_trace(b.write(tmp_path / "t.json"))
    assert (len(data.c.flow_starts), len(data.c.flow_ends)) == (0, 1)
    assert data.kernels().corr.tolist() == [31]
    assert data.runtime().corr.tolist() == [31, 32]


def test_flows_dropped_when_every_row_carries_its_correlation(tmp_path):
    b = KinetoBuilder()
    call = b.runtime("cudaLaunchKernel", 1_000, 2_000, corr=7)
    kern = b.kernel("k", 3_000, 4_000, corr=7)
    b.flow(99, "s", call)  # a flow id that differs from the args': the args win
    b.flow(99, "f", kern)
    data = open_trace(b.write(tmp_path / "t.json"))
    assert (len(data.c.flow_starts), len(data.c.flow_ends)) == (0, 0)
    assert data.kernels().corr.tolist() == [7] and data.runtime().corr.tolist() == [7]


# (values, the array type they fit in): each range at the edge of a type and one past it
@pytest.mark.parametrize(("values", "code"), [
    ([-128, 127], "b"), ([0, 255], "B"), ([-129, 0], "h"), ([-1, 255], "h"), ([0, 65_535], "H"),
    ([-1, 65_535], "i"), ([-(2**31), 2**31 - 1], "i"), ([0, 2**32 - 1], "I"), ([-1, 2**32 - 1], "q"),
    ([0, 2**62], "q"), ([-(2**63), 2**63 - 1], "q"),
])
def test_collected_columns_narrowed_to_the_smallest_type_that_holds_them(values, code):
    from array import array

    from nsys_llm_explainer.trace.kineto.load import _arr, _narrowed

    out = _narrowed(array("q", values))
    assert out.typecode == code and out.tolist() == values
    assert _arr(out).dtype == np.int64 and _arr(out).tolist() == values
    assert _narrowed(array("q")).typecode == "q"
    assert _narrowed(array("i", [3, 5])).typecode == "b"  # a 32-bit column narrows as well


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=40))
def test_narrowed_columns_read_back_the_same_int64_values(values):
    from array import array

    from nsys_llm_explainer.trace.kineto.load import _arr, _narrowed

    out = _narrowed(array("q", values))
    assert _arr(out).tolist() == values
    # the smallest of the six narrow types that holds the range (reference: by hand)
    lo, hi = min(values), max(values)
    fits = [c for c, (a, z) in (("b", (-128, 127)), ("B", (0, 255)), ("h", (-(2**15), 2**15 - 1)),
            ("H", (0, 2**16 - 1)), ("i", (-(2**31), 2**31 - 1)), ("I", (0, 2**32 - 1)))
            if a <= lo and hi <= z]
    assert out.typecode == (fits[0] if fits else "q")


def test_memcpy_kinds_from_event_names(tmp_path):
    b = KinetoBuilder()
    b.memcpy("Memcpy HtoD (Pageable -> Device)", 1_000, 2_000, 4096, corr=1)
    b.memcpy("Memcpy DtoH (Device -> Pinned)", 3_000, 3_500, 8, corr=2)
    b.memcpy("Memcpy DtoD (Device -> Device)", 4_000, 4_100, 64, corr=3)
    b.memset(5_000, 5_010, 16, corr=4)
    b.sync("Stream Sync", 6_000, 6_900, corr=5)
    b.sync("Context Sync", 7_000, 7_100)
    b.sync("Event Sync", 7_200, 7_300)
    b.sync("Stream Wait Event", 7_400, 7_400)
    data = open_trace(b.write(tmp_path / "t.json"))
    mc = data.memcpy()
    assert mc.copy_kind.tolist() == [1, 2, 8]
    assert mc.src_kind.tolist() == [0, 2, 2] and mc.dst_kind.tolist() == [2, 1, 2]
    assert mc.bytes.tolist() == [4096, 8, 64]
    assert data.memset().mem_kind.tolist() == [2]
    assert data.sync().sync_type.tolist() == [3, 4, 1, 2]
    assert data.sync().dur.tolist() == [900, 100, 100, 0]


def test_device_properties_as_list_or_python_literal(tmp_path):
    props = [{"id": 0, "name": "", "numSms": 132, "totalGlobalMem": 85018279936},
             {"id": 2, "name": "NVIDIA A100-SXM4-80GB", "numSms": 108, "totalGlobalMem": 84990623744}]
    for i, value in enumerate((props, repr(props))):
        b = simple(KinetoBuilder())
        b.top["deviceProperties"] = value
        b.top["distributedInfo"] = {"backend": "nccl", "rank": 3, "world_size": 8}
        data = open_trace(b.write(tmp_path / f"t{i}.json"))
        gpus = data.gpus()
        assert [(g.device_id, g.name, g.sm_count, g.total_memory_bytes) for g in gpus] == [
            (0, None, 132, 85018279936), (2, "NVIDIA A100-SXM4-80GB", 108, 84990623744)]
        assert data.distributed() == {"rank": 3, "world_size": 8, "backend": "nccl"}


def test_rocm_trace_reuses_cuda_categories(tmp_path):
    b = KinetoBuilder()
    b.launch("Cijk_Ailk_Bljk_HHS_BH_MT128x128x32", 1_000, 2_000, 3_000, 9_000, corr=1, api="hipLaunchKernel")
    b.launch("elementwise", 2_100, 2_600, 9_500, 9_900, corr=2, api="hipExtLaunchKernel")
    b.runtime("hipMemcpyAsync", 3_000, 3_500, corr=3)
    b.runtime("hipStreamSynchronize", 4_000, 10_000, corr=4)
    data = open_trace(b.write(tmp_path / "t.json"))
    assert data.runtime_api_names() == ["hipExtLaunchKernel", "hipLaunchKernel", "hipMemcpyAsync",
                                        "hipStreamSynchronize"]


def test_invalid_runtime_names_and_bad_events_are_counted(tmp_path):
    b = simple(KinetoBuilder())
    b.runtime("INVALID", 9_000, 9_100, corr=None)
    b.add({"ph": "X", "cat": "kernel", "name": "no_ts", "pid": 0, "tid": 7, "args": {}})
    b.add({"ph": "X", "cat": "kernel", "name": "neg", "pid": 0, "tid": 7, "ts": 5, "dur": -1, "args": {}})
    data = open_trace(b.write(tmp_path / "t.json"))
    assert len(data.kernels()) == 2
    assert "INVALID" in data.runtime_api_names()
    assert any("kernel: 2 events ignored" in w for w in data.warnings)


@pytest.mark.parametrize(
    "content, needle",
    [
        (b"{}", "without a traceEvents array"),
        (b"[]", "a JSON array"),
        (b'[{"ph": "X"}]', "a JSON array"),
        (b'{"foo": 1, "bar": [1, 2]}', "without a traceEvents array"),
        (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1,', "invalid JSON"),
        (b'{"traceEvents": [1, 2] "x"}', "invalid JSON"),
        (b'{"traceEvents": [{"ph": "X", "cat": "other", "ts": 1, "dur": 1}]}', "none of them a PyTorch profiler"),
        (b"   \n", None),
        (b"{not json", "invalid JSON"),
    ],
)
def test_not_a_trace_exits_3_with_one_line(tmp_path, content, needle):
    path = tmp_path / "x.json"
    path.write_bytes(content)
    result = run_cli(path, "--out", tmp_path / "out")
    assert result.exit_code == 3, result.stdout + result.stderr
    line = result.stderr.strip()
    assert "\n" not in line and "Traceback" not in result.stderr
    if needle:
        assert needle in line
    assert not (tmp_path / "out").exists()


def test_truncated_gzip_exits_3(tmp_path):
    data = gzip.compress(simple(KinetoBuilder()).text().encode() * 1)
    path = tmp_path / "t.json.gz"
    path.write_bytes(data[: len(data) // 2])
    result = run_cli(path, "--out", tmp_path / "out")
    assert result.exit_code == 3
    assert "truncated" in result.stderr or "invalid JSON" in result.stderr
    assert result.stderr.strip().count("\n") == 0


def test_empty_profiler_trace_is_a_report_not_an_error(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": []}))
    result = run_cli(path, "--out", tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    assert doc["trace"]["format"] == "kineto-json"
    assert doc["metrics"]["top_kernels"]["status"] == "skipped"


@settings(max_examples=200)
@given(st.integers(min_value=0, max_value=(1 << 62) - 1))
def test_us_text_round_trips_exactly(ns):
    assert us_to_ns(us_text(ns)) == ns


@given(st.integers(min_value=0, max_value=10**15), st.integers(min_value=0, max_value=9999))
def test_extra_digits_round_half_even(whole, frac4):
    text = f"{whole}.{frac4:04d}"
    tenths = whole * 10_000 + frac4  # in 0.1 ns
    q, r = divmod(tenths, 10)
    expected = q + (1 if r > 5 or (r == 5 and q % 2) else 0)
    assert us_to_ns(text) == expected


@pytest.mark.parametrize(
    ("text", "ns"),
    [("123.456", 123_456), ("-5.5", -5_500), ("1e3", 1_000_000), ("0.001", 1), ("-0.5", -500),
     ("12.3456", 12_346)],
)
def test_number_texts(text, ns):
    assert us_to_ns(text) == ns


@pytest.mark.parametrize("text", ["ab.5", "1_0.5", " 1.5", "1.5 ", "\u00b23.5", "\u0663.5", "-.5x", "1.2.3"])
def test_texts_that_are_not_numbers_are_bad_times(text):
    from nsys_llm_explainer.trace.kineto.collect import BadTime

    with pytest.raises(BadTime):
        us_to_ns(text)


def test_chunk_boundaries_do_not_change_the_result(tmp_path, monkeypatch):
    from nsys_llm_explainer.trace.kineto import collect

    b = KinetoBuilder()
    for i in range(300):
        b.launch(f"k{i % 7}", 10_000 * i, 10_000 * i + 900, 10_000 * i + 1_000, 10_000 * i + 1_000 + i, corr=i + 1)
    path = b.write(tmp_path / "t.json")
    want = open_trace(path).kernels().dur.tolist()
    for chunk, tail in ((97, 13), (1000, 1), (4096, 500)):
        monkeypatch.setattr(collect, "CHUNK_CHARS", chunk)
        monkeypatch.setattr(collect, "SAFE_TAIL", tail)
        assert open_trace(path).kernels().dur.tolist() == want
    assert sum(want) == sum(range(300)) and len(np.unique(want)) == 300


@settings(max_examples=60)
@given(cut=st.integers(min_value=1, max_value=10_000), noise=st.binary(max_size=8))
def test_damaged_files_fail_with_input_error_never_a_crash(tmp_path_factory, cut, noise):
    from nsys_llm_explainer.errors import InputError

    text = simple(KinetoBuilder()).text().encode()
    damaged = text[: cut % len(text)] + noise
    path = tmp_path_factory.mktemp("fuzz") / "t.json"
    path.write_bytes(damaged)
    try:
        data = open_trace(path)
    except InputError as exc:
        assert "\n" not in exc.message
        return
    assert data.format in (TraceFormat.KINETO, TraceFormat.NSYS)  # a cut that still parses


def _ref_dims(value):
    """A kernel's grid or block as (x, y, z), or (-1, -1, -1) unless three ints CUDA allows."""
    if isinstance(value, list) and len(value) == 3 and all(type(v) is int for v in value):
        x, y, z = value
        if 0 <= x < 2**31 and 0 <= y < 2**16 and 0 <= z < 2**16:
            return (x, y, z)
    return (-1, -1, -1)


_dim = st.one_of(st.integers(0, 2**31 - 1), st.integers(0, 70_000), st.integers(-3, 3), st.just("1"),
                 st.just([1]), st.none(), st.floats(allow_nan=False, allow_infinity=False))
_dims = st.one_of(st.lists(_dim, min_size=3, max_size=3), st.lists(_dim, max_size=4), st.none(), st.just("256"),
                  st.just({"x": 1}))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(_dims, _dims), min_size=1, max_size=12))
def test_kernel_grid_and_block_read_exactly_as_written(tmp_path_factory, launches):
    """kernel_dims (the grid and block --ncu matches on) per kernel, against a plain reading of
    each event's args: shared launch shapes, malformed and out-of-range dims alike."""
    b = KinetoBuilder()
    for i, (grid, block) in enumerate(launches):
        args = {"device": 0, "stream": 7, "correlation": i + 1}
        if grid is not None:
            args["grid"] = grid
        if block is not None:
            args["block"] = block
        b.x("kernel", f"k{i}", 0, 0, 1_000 * i, 10, args)
    path = b.write(tmp_path_factory.mktemp("dims") / "t.json")
    data = open_trace(path)
    try:
        expected = [_ref_dims(g) + _ref_dims(bl) for g, bl in launches]
        if all(-1 in e[:3] or -1 in e[3:] for e in expected):
            with pytest.raises(Exception, match="no grid and block sizes"):
                data.kernel_dims()
            return
        c = data.kernel_dims()
        got = list(zip(c.grid_x.tolist(), c.grid_y.tolist(), c.grid_z.tolist(), c.block_x.tolist(),
                       c.block_y.tolist(), c.block_z.tolist(), strict=True))
        assert got == expected
    finally:
        data.close()
