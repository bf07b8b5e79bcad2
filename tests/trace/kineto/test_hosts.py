"""PyTorch profiler traces: which process a GPU event belongs to, joins through ac2g flows
(also for copies and memsets), duplicate events, the wall-clock origin and capture info."""

from __future__ import annotations

import json

import pytest

from nsys_llm_explainer.trace.data import Unavailable
from nsys_llm_explainer.trace.formats import open_trace
from tests.conftest import analyze, ok, run_cli
from tests.fixtures.kineto.builder import HOST_PID, KinetoBuilder

BASE_NS = 1_751_410_836_000_000_000  # a baseTimeNanoseconds as PyTorch writes it (whole seconds)


def with_tqdm_thread(b: KinetoBuilder) -> KinetoBuilder:
    """python_function events of a monitor thread written under pid 0, tid 0 (the pid of
    GPU 0's events), as in real Hugging Face traces."""
    for i in range(5):
        b.python("tqdm/_monitor.py(60): run", 100 * i, 100 * i + 50, py_id=i, parent=None, pid=0, tid=0)
    return b


def test_python_events_under_a_gpu_pid_make_no_host_process(tmp_path):
    b = with_tqdm_thread(KinetoBuilder())
    b.op("aten::mm", 1_000, 9_000, ext=5)
    b.launch("gemm", 2_000, 3_000, 10_000, 14_000, corr=7, ext=5)
    b.kernel("early", 500, 2_500, corr=3)  # launched before the capture: no call in the trace
    b.kernel("early", 2_600, 4_500, corr=4)
    path = b.write(tmp_path / "t.json")
    data = open_trace(path)
    assert data.kernels().pid.tolist() == [HOST_PID] * 3
    report = analyze(path)
    pp = ok(report, "per_process")
    assert [(p["pid"], p["kernel_count"], p["kernel_ns"]) for p in pp["processes"]] == [
        (HOST_PID, 3, 4_000 + 2_000 + 1_900)]
    assert pp["pid_warning"] is None
    assert [p.pid for p in report.trace.processes] == [HOST_PID]


def test_kernels_without_a_call_in_a_two_process_trace_say_why(tmp_path):
    b = KinetoBuilder()
    b.runtime("cudaLaunchKernel", 1_000, 2_000, corr=5, pid=100, tid=100)
    b.runtime("cudaLaunchKernel", 1_000, 2_000, corr=6, pid=200, tid=201)
    b.kernel("a", 3_000, 4_000, corr=6, device=1)
    b.kernel("b", 4_000, 4_500, corr=5, device=1)
    b.kernel("c", 5_000, 6_000, corr=77, device=1)
    b.kernel("d", 6_000, 6_300, corr=78, device=1)
    report = analyze(b.write(tmp_path / "t.json"))
    pp = ok(report, "per_process")
    assert sorted((p["pid"], p["kernel_count"]) for p in pp["processes"]) == [(-1, 2), (100, 1), (200, 1)]
    assert pp["pid_warning"] == (
        "2 kernels have no launch call in the trace, and the trace has 2 host processes, so they "
        "belong to none of them (pid -1)")
    assert "globalPid" not in " ".join(report.limitations)


def test_flows_join_copies_and_memsets_and_bring_rocm_call_bytes(tmp_path):
    """Old roctracer traces write GPU events with no args: the correlation comes from the
    ac2g flow, the byte count from the hipMemcpy/hipMemset call."""
    b = KinetoBuilder()
    copy_call = b.runtime("hipMemcpyAsync", 1_000, 2_000, corr=None)
    copy_call["args"]["bytes"] = "4096"  # roctracer writes it as text
    set_call = b.runtime("hipMemsetAsync", 2_100, 2_300, corr=None)
    set_call["args"]["size"] = 256
    copy = b.x("gpu_memcpy", "Memcpy HtoD (Host -> Device)", 3_000, 4_000, 0, 7, {})
    memset = b.x("gpu_memset", "Memset (Device)", 4_500, 4_600, 0, 7, {})
    b.memcpy("Memcpy DtoH (Device -> Pinned)", 5_000, 5_100, 64, corr=None)  # no call, no flow
    for fid, call, gpu in ((41, copy_call, copy), (42, set_call, memset)):
        b.flow(fid, "s", call)
        b.flow(fid, "f", gpu)
    b.runtime("cudaLaunchKernel", 9_000, 9_100, corr=1, pid=HOST_PID + 1, tid=1)  # a second host
    data = open_trace(b.write(tmp_path / "t.json"))
    mc, ms = data.memcpy(), data.memset()
    assert mc.corr.tolist() == [41, -1] and mc.pid.tolist() == [HOST_PID, -1]
    assert mc.bytes.tolist() == [4096, 64]
    assert (ms.corr.tolist(), ms.pid.tolist(), ms.bytes.tolist()) == ([42], [HOST_PID], [256])


def test_exact_duplicates_count_once_but_graph_nodes_stay_distinct(tmp_path):
    b = KinetoBuilder()
    b.runtime("cudaGraphLaunch", 1_000, 2_000, corr=9)
    for _ in range(3):  # one kernel written three times
        b.kernel("dup", 3_000, 4_000, corr=9, ext=1)
    # zero-duration node kernels of the same graph launch: same stream, time and correlation
    b.kernel("node_a", 5_000, 5_000, corr=9, ext=1)
    b.kernel("node_b", 5_000, 5_000, corr=9, ext=1)
    b.kernel("node_a", 5_000, 5_000, corr=9, ext=2)
    data = open_trace(b.write(tmp_path / "t.json"))
    k = data.kernels()
    names = data.kernel_names(k.name_id)
    assert sorted(names[int(i)] for i in k.name_id) == ["dup", "node_a", "node_a", "node_b"]
    assert int(k.dur.sum()) == 1_000
    assert any("2 duplicated kernel rows" in w for w in data.warnings)


@pytest.mark.parametrize(
    ("base", "shift_ns", "want"),
    [
        (BASE_NS, 0, (BASE_NS, "baseTimeNanoseconds")),
        (None, 1_700_000_000_123_456_789, (0, "absolute epoch timestamps")),
        (BASE_NS, 1_700_000_000_123_456_789, (0, "absolute epoch timestamps")),  # epoch times win
    ],
)
def test_clock_origin(tmp_path, base, shift_ns, want):
    b = KinetoBuilder(base_ns=shift_ns)
    b.launch("k", 1_000, 2_000, 3_000, 4_000, corr=1)
    if base is not None:
        b.top["baseTimeNanoseconds"] = base
    origin = open_trace(b.write(tmp_path / "t.json")).clock_origin()
    assert (origin.epoch_ns, origin.source) == want


def test_no_clock_origin_without_base_or_epoch_times(tmp_path):
    b = KinetoBuilder()
    b.launch("k", 1_000, 2_000, 3_000, 4_000, corr=1)
    with pytest.raises(Unavailable, match="no baseTimeNanoseconds"):
        open_trace(b.write(tmp_path / "t.json")).clock_origin()


def test_capture_info_shows_profiler_settings_and_never_user_metadata(tmp_path):
    """Capture info lists the profiler's own settings only. Of the user metadata, a field that
    names the command line gives the program's base name and nothing else (the capture
    metric's captured.program): never the environment, a path or a flag's value."""
    b = KinetoBuilder()
    b.launch("k", 1_000, 2_000, 3_000, 4_000, corr=1)
    b.meta(HOST_PID, "python3")
    b.top.update({
        "record_shapes": 1, "with_stack": 0, "cupti_version": 22, "displayTimeUnit": "ms",
        "traceName": "/home/alice/run/trace.json",
        "metadata": {"env": {"HF_TOKEN": "hf_s3cr3t"}, "argv": "python train.py --password=hunter2"},
    })
    out = tmp_path / "out"
    res = run_cli(b.write(tmp_path / "t.json"), "--out", out, "--include-capture-info")
    assert res.exit_code == 0, res.stderr
    doc = json.loads((out / "report.json").read_text())
    assert doc["capture_info"] == {
        "processes": [{"pid": HOST_PID, "name": "python3"}],
        "settings": [{"name": "schemaVersion", "value": "1"}, {"name": "cupti_version", "value": "22"},
                     {"name": "displayTimeUnit", "value": "ms"}, {"name": "record_shapes", "value": "1"},
                     {"name": "with_stack", "value": "0"}],
        "environment": [],
        "redacted_values": 0,
    }
    md = (out / "report.md").read_text()
    assert "| record\\_shapes | 1 |" in md and f"| {HOST_PID} | python3 |" in md
    for f in out.rglob("*"):
        if f.is_file():
            text = f.read_text(errors="replace")
            assert not any(s in text for s in ("hf_s3cr3t", "hunter2", "alice", "password", "HF_TOKEN")), f
    program = doc["metrics"]["capture"]["captured"]["program"]
    assert (program["shown"], program["source"], program["launchers"]) == ("train.py", "metadata", ["python"])


def test_external_id_fallback_needs_an_operator_that_started_before_the_kernel(tmp_path):
    """Kernels without a launch call are placed by External id only in an operator that had
    started by the time the kernel ran (older traces number GPU events' ids separately)."""
    b = KinetoBuilder()
    b.op("aten::relu", 1_000, 3_000, ext=5)
    b.launch("relu_kernel", 1_500, 2_000, 4_000, 5_000, corr=1, ext=5)
    b.kernel("relu_kernel", 5_100, 5_600, corr=None, ext=5)  # placed by External id: 500 ns
    b.kernel("distribution_kernel", 6_000, 6_700, corr=218, ext=218)  # id 218 ...
    b.op("aten::clamp_min_", 9_000_000_000, 9_000_001_000, ext=218)  # ... is an operator's 9 s later
    report = analyze(b.write(tmp_path / "t.json"))
    m = ok(report, "operators")
    assert m["kernels_via_external_id"] == 1
    pairs = {(p["operator"], p["kernel"]): (p["kernel_ns"], p["kernel_count"]) for p in m["operator_kernels"]}
    assert pairs == {("aten::relu", "relu_kernel"): (1_000 + 500, 2),
                     ("(no operator)", "distribution_kernel"): (700, 1)}
