"""The prefetch helper (trace/kineto/prefetch.py): a PyTorch profiler trace read in another
process gives exactly what reading it here gives, and anything unusual (a changed file, a
file that is not a trace, a helper that dies) falls back to reading it here."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from nsys_llm_explainer.trace.kineto import prefetch
from nsys_llm_explainer.trace.kineto.collect import read_events
from tests.conftest import run_cli
from tests.fixtures.kineto.builder import KinetoBuilder


def trace(path: Path, compress: bool = False) -> Path:
    b = KinetoBuilder()
    step = b.user("ProfilerStep#1", 0, 90_000)
    assert step
    for i in range(40):
        t = 1_000 + i * 2_000
        b.op("aten::mm", t, t + 900, ext=i + 1)
        b.launch(f"gemm_{i % 3}", t + 100, t + 400, t + 500, t + 1_700, corr=100 + i)
    b.memcpy("Memcpy DtoH (Device -> Pageable)", 85_000, 86_000, 4096, corr=999)
    b.meta(4242, "python3")
    return b.write(path, compress=compress)


@pytest.fixture(autouse=True)
def _no_leftover(monkeypatch):
    monkeypatch.setattr(prefetch, "MIN_TEXT_BYTES", 0)  # the traces here are small
    yield
    prefetch.cancel()


@pytest.mark.parametrize("compress", [False, True])
def test_prefetched_events_equal_those_read_here(tmp_path, compress):
    path = trace(tmp_path / "t.json", compress)
    assert prefetch.start(path)
    got = prefetch.take(path)
    assert got is not None
    top, collected = read_events(path)
    assert got[0] == top
    assert got[1] == collected  # every column, interned name, counter and flow
    assert len(collected.tables[0]) == 40  # the kernels are really there


def test_take_of_another_path_reads_here(tmp_path):
    a, b = trace(tmp_path / "a.json"), trace(tmp_path / "b.json")
    assert prefetch.start(a)
    assert prefetch.take(b) is None
    assert prefetch.take(a) is None  # the prefetch was dropped, not kept for later


def test_a_file_changed_after_the_start_is_read_here(tmp_path):
    path = trace(tmp_path / "t.json")
    assert prefetch.start(path)
    with path.open("a") as fh:
        fh.write("\n")
    assert prefetch.take(path) is None


@pytest.mark.parametrize("text, error", [
    ('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1', "invalid JSON"),
    ('{"traceEvents": [{"ph": "X", "cat": "other", "name": "x", "ts": 1, "dur": 1}]}', "not a PyTorch profiler trace"),
])
def test_a_file_that_fails_gives_the_same_error(tmp_path, monkeypatch, text, error):
    path = tmp_path / "t.json"
    path.write_text(text)
    with_prefetch = run_cli(path, "--out", tmp_path / "a", "--jobs", "2")
    monkeypatch.setenv(prefetch.OFF_VAR, "1")
    without = run_cli(path, "--out", tmp_path / "b", "--jobs", "2")
    assert with_prefetch.exit_code == without.exit_code == 3
    assert with_prefetch.stderr == without.stderr
    assert error in without.stderr


def test_a_read_that_fails_in_the_helper_is_read_here(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel"')
    assert prefetch.start(path)
    assert prefetch.take(path) is None


def test_a_helper_that_dies_is_read_here(tmp_path, monkeypatch):
    path = trace(tmp_path / "t.json")
    monkeypatch.setattr(prefetch, "FORK", False)  # _BOOT is the fresh interpreter's program
    monkeypatch.setattr(prefetch, "_BOOT", "import sys; sys.stdout.buffer.write(b'junk'); sys.exit(0)")
    assert prefetch.start(path)
    assert prefetch.take(path) is None
    monkeypatch.setattr(prefetch, "_BOOT", "import sys; sys.exit(1)")
    assert prefetch.start(path)
    assert prefetch.take(path) is None


def test_cancel_stops_the_helper(tmp_path, monkeypatch):
    path = trace(tmp_path / "t.json")
    monkeypatch.setattr(prefetch, "FORK", False)
    monkeypatch.setattr(prefetch, "_BOOT", "import time; time.sleep(60)")
    assert prefetch.start(path)
    job = prefetch._pending
    assert job is not None and job.proc.poll() is None
    prefetch.cancel()
    assert job.proc.poll() is not None
    assert prefetch._pending is None


def test_large_and_small_traces_and_the_switch_are_read_here(tmp_path, monkeypatch):
    path = trace(tmp_path / "t.json.gz", compress=True)
    text = len(gzip.decompress(path.read_bytes()))
    assert prefetch._text_bytes(path, path.stat().st_size) == text
    monkeypatch.setattr(prefetch, "MAX_TEXT_BYTES", text - 1)
    assert not prefetch.start(path)
    monkeypatch.setattr(prefetch, "MAX_TEXT_BYTES", text)
    monkeypatch.setattr(prefetch, "MIN_TEXT_BYTES", text + 1)
    assert not prefetch.start(path)  # small: read here
    monkeypatch.setattr(prefetch, "MIN_TEXT_BYTES", text)
    monkeypatch.setenv(prefetch.OFF_VAR, "1")
    assert not prefetch.start(path)
    assert not prefetch.start(tmp_path / "missing.json")


def test_a_gzip_size_field_below_the_file_size_says_nothing(tmp_path):
    """The field holds the length modulo 4 GiB: one below the file's size has wrapped."""
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(os.urandom(4096)))
    raw = bytearray(path.read_bytes())
    raw[-4:] = (16).to_bytes(4, "little")
    path.write_bytes(bytes(raw))
    assert prefetch._text_bytes(path, len(raw)) is None


def test_the_report_is_the_same_with_and_without_it(tmp_path, monkeypatch):
    path = trace(tmp_path / "t.json.gz", compress=True)
    taken = []
    original = prefetch.take

    def spy(p):
        got = original(p)
        taken.append(got is not None)
        return got

    monkeypatch.setattr(prefetch, "take", spy)
    on = run_cli(path, "--out", tmp_path / "on", "--jobs", "2")
    assert on.exit_code == 0, on.stderr
    assert taken == [True]  # the helper's events were used
    monkeypatch.setenv(prefetch.OFF_VAR, "1")
    off = run_cli(path, "--out", tmp_path / "off", "--jobs", "2")
    assert off.exit_code == 0 and taken == [True, False]
    for name in ("report.md", "report.json"):
        assert (tmp_path / "on" / name).read_bytes() == (tmp_path / "off" / name).read_bytes()


def test_one_job_reads_here(tmp_path, monkeypatch):
    path = trace(tmp_path / "t.json")
    started = []
    monkeypatch.setattr(prefetch, "start", lambda p: started.append(p) or False)
    assert run_cli(path, "--out", tmp_path / "o", "--jobs", "1").exit_code == 0
    assert started == []
    assert run_cli(path, "--out", tmp_path / "o2", "--jobs", "2").exit_code == 0
    assert started == [path]


FRESH_PROCESS = """
import sys
from pathlib import Path
from nsys_llm_explainer.trace.kineto import prefetch
from nsys_llm_explainer.trace.kineto.collect import read_events
prefetch.FORK = sys.argv[2] == "fork"
prefetch.MIN_TEXT_BYTES = 0
path = Path(sys.argv[1])
assert prefetch.start(path)
kind = type(prefetch._pending.proc).__name__
got = prefetch.take(path)
assert got is not None and got == read_events(path), "different events"
print(kind)
"""


@pytest.mark.parametrize("how, kind", [("fork", "Forked"), ("spawn", "Popen")])
def test_a_fork_and_a_fresh_interpreter_give_the_same_events(tmp_path, how, kind):
    """In a new single-threaded process (as the command line is when it starts the helper),
    on Linux: a fork where allowed, a fresh interpreter otherwise; the same events either way."""
    import subprocess
    import sys

    if how == "fork" and not sys.platform.startswith("linux"):
        pytest.skip("the helper is forked on Linux only")
    path = trace(tmp_path / "t.json.gz", compress=True)
    done = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(path), how], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == kind


FORK_FAILURES = """
import signal, sys, time
from pathlib import Path
from nsys_llm_explainer.trace.kineto import prefetch
prefetch.MIN_TEXT_BYTES = 0
path = Path(sys.argv[1])
case = sys.argv[2]
if case == "raises":
    def serve(p, out):
        raise RuntimeError("in the helper")
    prefetch.serve = serve
elif case == "hangs":
    prefetch.serve = lambda p, out: time.sleep(60)
elif case == "sigchld_ignored":
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the system reaps the child: no status
assert prefetch.start(path)
job = prefetch._pending
assert type(job.proc).__name__ == "Forked", type(job.proc)
if case == "hangs":
    t0 = time.monotonic()
    prefetch.cancel()
    assert job.proc.returncode is not None and time.monotonic() - t0 < 5
    print("stopped")
else:
    got = prefetch.take(path)
    print("read here" if got is None else "prefetched")
"""


@pytest.mark.parametrize("case, said", [("raises", "read here"), ("hangs", "stopped"),
                                         ("sigchld_ignored", "read here")])
def test_a_forked_helper_that_fails_or_hangs(tmp_path, case, said):
    """The fork path, in a new single-threaded process: a helper that raises is read here,
    one that hangs is stopped by cancel, and one whose status the system took (SIGCHLD
    ignored by whoever started the command line) is read here, not an error."""
    import subprocess
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("the helper is forked on Linux only")
    path = trace(tmp_path / "t.json")
    done = subprocess.run([sys.executable, "-c", FORK_FAILURES, str(path), case], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == said
