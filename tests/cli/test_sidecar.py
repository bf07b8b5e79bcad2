"""The command line's sidecar process (cli/sidecar.py): the same report whether it helps, fails or
is not there.

A sidecar is forked only by a process with one thread, which a pytest process (numpy's BLAS
pool, other tests' threads) is not; each case runs in a fresh interpreter that starts the
sidecar before it imports the analysis, as the command line does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.builder import TraceBuilder
from tests.fixtures.kineto import workload as wl

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sidecar is forked on Linux only")

SCRIPT = r"""
import json, os, pickle, signal, sys, threading
from pathlib import Path
from nsys_llm_explainer.cli import sidecar
from nsys_llm_explainer.render import Format

ALL = Format.parse("md,json,csv,html,ncu")
case, trace = sys.argv[1], Path(sys.argv[2])
out = {}
if case == "one-job":
    out["started"] = sidecar.start(trace, 1, ALL) is not None
elif case == "nothing-to-render":
    s = sidecar.start(trace, 2, (Format.MD, Format.HTML))
    out["started"] = s is not None
    if s is not None:
        out["events"] = s.kineto_events() is not None
        s.close()
elif case == "thread":
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    out["started"] = sidecar.start(trace, 2, ALL) is not None
    stop.set()
    t.join()
elif case == "reaped":
    with sidecar.started(trace, 2, ALL) as s:
        pid = s.pid
    try:
        os.waitpid(pid, os.WNOHANG)
        out["reaped"] = False
    except ChildProcessError:
        out["reaped"] = True
elif case == "input-error":
    s = sidecar.start(trace, 2, ALL)
    from nsys_llm_explainer.errors import InputError
    from nsys_llm_explainer.trace.kineto.events import read_events
    try:
        s.kineto_events()
    except InputError as exc:
        out["sidecar"] = exc.message
    try:
        read_events(trace)
    except InputError as exc:
        out["here"] = exc.message
    s.close()
else:
    s = sidecar.start(trace, 2, ALL)
    out["started"] = s is not None
    out["reading"] = s.reading
    from nsys_llm_explainer.api import explain
    from nsys_llm_explainer.render import Format, files
    from nsys_llm_explainer.trace.kineto.events import read_events

    if case == "events":
        top, got = s.kineto_events()
        top_here, here = read_events(trace)
        out["top"] = top == top_here
        out["tables"] = [
            [getattr(a, f).tobytes() == getattr(b, f).tobytes() for f in vars(a)]
            for a, b in zip(got.tables, here.tables)
        ]
        out["names"] = list(got.names) == list(here.names)
        out["flows"] = got.flow_ends.id.tobytes() == here.flow_ends.id.tobytes()
        s.close()
    else:
        report = explain(trace, jobs=2, kineto_events=s.kineto_events)
        formats = ALL
        if case == "killed":
            os.kill(s.pid, signal.SIGKILL)
            os.waitpid(s.pid, 0)
        if case == "unpicklable":
            object.__setattr__(report, "held", lambda: None)  # pickle refuses lambdas
        built = []
        real_build = files.build
        def build(report, formats, md="compact"):
            built.append([str(f) for f in formats])
            return real_build(report, formats, md=md)
        files.build = build
        got = s.build(report, formats, "compact")
        files.build = real_build
        expected = files.build(report, formats, md="compact")
        out["same"] = got == expected
        out["files"] = len(got)
        out["built_here"] = built
        s.close()
print(json.dumps(out))
"""


def run_case(case: str, trace: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, case, str(trace)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def kineto(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path, _ = wl.write(tmp_path_factory.mktemp("kineto") / "trace.json.gz")
    return path


@pytest.fixture(scope="module")
def nsys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    b = TraceBuilder("2024.6")
    b.process(100)
    for i in range(40):
        b.kernel(1_000 + i * 10_000, 6_000 + i * 10_000, name=f"gemm_{i % 3}")
    return b.write(tmp_path_factory.mktemp("nsys") / "trace.sqlite")


def test_the_sidecar_reads_the_same_events(kineto: Path) -> None:
    out = run_case("events", kineto)
    assert out["started"] and out["reading"]
    assert out["top"] and out["names"] and out["flows"]
    assert out["tables"] and all(all(same) for same in out["tables"])


@pytest.mark.parametrize("which", ["kineto", "nsys"])
def test_the_sidecar_renders_its_formats_and_the_files_are_the_same(which: str, request) -> None:
    trace = request.getfixturevalue(which)
    out = run_case("build", trace)
    assert out["started"] and out["reading"] == (which == "kineto")
    assert out["same"] and out["files"] > 20
    assert out["built_here"] == [["md", "html"]]  # csv, json and ncu came from the sidecar


@pytest.mark.parametrize(
    ("case", "built_here"),
    [
        ("killed", [["md", "html"], ["json", "csv", "ncu"]]),  # sent, no answer: rendered after
        ("unpicklable", [["md", "json", "csv", "html", "ncu"]]),  # never sent: all at once
    ],
)
def test_what_the_sidecar_cannot_do_is_done_here(case: str, built_here: list, kineto: Path) -> None:
    out = run_case(case, kineto)
    assert out["same"]
    assert out["built_here"] == built_here


def test_an_unreadable_trace_gives_the_same_error(tmp_path: Path, kineto: Path) -> None:
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(kineto.read_bytes()[: kineto.stat().st_size // 2])
    out = run_case("input-error", cut)
    assert out["sidecar"] == out["here"]
    assert out["here"].startswith(f"{cut}: ")


@pytest.mark.parametrize("case", ["one-job", "thread"])
def test_no_sidecar_with_one_job_or_a_second_thread(case: str, kineto: Path) -> None:
    assert run_case(case, kineto) == {"started": False}


def test_without_formats_to_render_it_only_reads(kineto: Path, nsys: Path) -> None:
    assert run_case("nothing-to-render", nsys) == {"started": False}  # nothing to read either
    assert run_case("nothing-to-render", kineto) == {"started": True, "events": True}


def test_the_sidecar_is_reaped(kineto: Path) -> None:
    assert run_case("reaped", kineto) == {"reaped": True}


@pytest.mark.slow
def test_the_command_line_writes_the_same_report_with_and_without_it(kineto: Path, tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("nsys-llm-explain")
    if not script.exists():
        pytest.skip("the console script is not installed beside this interpreter")
    outs = []
    for jobs in ("1", "2"):
        out = tmp_path / f"jobs{jobs}"
        proc = subprocess.run([str(script), str(kineto), "--out", str(out), "-q", "--jobs", jobs],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        outs.append({p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()})
    assert outs[0] == outs[1] and len(outs[0]) > 20
