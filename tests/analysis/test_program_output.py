"""How a program's captured output says its run ended (analysis/program.py)."""

from __future__ import annotations

import pytest

from nsys_llm_explainer.analysis.program import StreamText, classify, ending, lines_of, scrub


def out(stdout: str = "", stderr: str = "", pid: int = 7) -> list[StreamText]:
    return [StreamText(pid, "stdout", stdout), StreamText(pid, "stderr", stderr)]


def test_the_exception_closing_the_last_traceback_is_decisive() -> None:
    stderr = (
        "Traceback (most recent call last):\n"
        '  File "/home/bob/a.py", line 3, in <module>\n'
        "    f()\n"
        "ValueError: first\n"
        "During handling of the above exception, another exception occurred:\n"
        "Traceback (most recent call last):\n"
        '  File "/home/bob/a.py", line 5, in <module>\n'
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total)\n"
    )
    e = ending(out(stderr=stderr))
    assert e is not None and (e.kind, e.stream, e.pid) == ("error", "stderr", 7)
    assert e.line == "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total)"


def test_an_error_line_in_stdout_with_its_indented_continuation() -> None:
    stdout = " Loading dataset\n ERROR: Input streaming file not found!\n   Missing: data_dir/inputs_train.bin\n"
    e = ending(out(stdout=stdout, stderr="Warning: ieee_inexact is signaling\n"))
    assert e is not None and (e.kind, e.line, e.context) == ("error", "ERROR: Input streaming file not found!",
                                                              "Missing: inputs_train.bin")


def test_the_profiler_failing_to_attach_wins() -> None:
    stderr = ("/home/u/env/bin/python: symbol lookup error: /opt/x/libToolsInjectionProxy64.so: undefined "
              "symbol: __libc_dlclose, version GLIBC_PRIVATE\nRuntimeError: later\n")
    e = ending(out(stderr=stderr))
    assert e is not None and e.kind == "profiler"
    assert e.line == ("python: symbol lookup error: libToolsInjectionProxy64.so: undefined symbol: __libc_dlclose, "
                      "version GLIBC_PRIVATE")


@pytest.mark.parametrize("line", [
    "UserWarning: floor_divide is deprecated, and will raise an error in a future version",
    "/x/geometry.py:149: NumbaDeprecationWarning: The keyword argument 'nopython=False' was supplied.",
    "[W reducer.cpp:1300] Warning: find_unused_parameters=True was specified",
    "mean squared error 0.031 after 5 epochs",
    "[==========] 1 test from 1 test suite ran. (1367 ms total)",
    "Rank 0 => Correct results! it: 4",
])
def test_warnings_and_ordinary_output_are_not_failures(line: str) -> None:
    assert classify(line) in (None, "warning")
    assert ending(out(stdout=line + "\n", stderr=line + "\n")) is None


@pytest.mark.parametrize(("line", "kind"), [
    ("Killed", "killed"),
    ("Segmentation fault (core dumped)", "killed"),
    ("terminate called after throwing an instance of 'c10::Error'", "killed"),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "error"),
    ("error: no kernel image is available for execution on the device", "error"),
    ("Failed to open the engine file", "error"),
])
def test_failure_lines(line: str, kind: str) -> None:
    assert classify(line) == kind
    e = ending(out(stderr="starting\n" + line + "\n"))
    assert e is not None and e.kind == kind


def test_progress_bars_and_rank_prefixes_are_split_into_lines() -> None:
    assert lines_of("a 1/10\rb 2/10\r\n[rank3]: RuntimeError: boom\n\n") == ["a 1/10", "b 2/10", "RuntimeError: boom"]


@pytest.mark.parametrize(("raw", "safe"), [
    ("FileNotFoundError: No such file: '/home/alice/data/x.bin'", "FileNotFoundError: No such file: 'x.bin'"),
    (r"C:\Users\bob\run.py failed", "run.py failed"),
    ("see https://user:pw@host.example/x?token=1 now", "see <url> now"),
    ("HF_TOKEN=hf_abcdefghijklmnopqrstu and PATH=/usr/bin", "HF_TOKEN=<redacted> and PATH=<redacted>"),
    ("connect to 10.1.2.3:29500 as bob@gpu-node-7 failed", "connect to <address> as <user@host> failed"),
    ("mail alice@example.com", "mail <email>"),
    ("key ghp_0123456789abcdefABCDEF0123456789abcd", "key <redacted>"),
])
def test_scrub_keeps_nothing_from_the_environment(raw: str, safe: str) -> None:
    assert scrub(raw) == safe


def test_scrub_bounds_the_length() -> None:
    assert len(scrub("RuntimeError: " + "x " * 500)) == 200
