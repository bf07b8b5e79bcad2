"""fleet on Dask for real: a `dask scheduler` and two `dask worker` processes on 127.0.0.1
(free ports, bounded start-up, always stopped), and a LocalCluster. The result must equal
the local one byte for byte, apart from fleet_timing.json."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nsys_llm_explainer.cli import run as cli_run
from tests.fleet_support import make_set, output_files

distributed = pytest.importorskip(
    "distributed", reason="Dask is not installed (pip install 'nsys-llm-explain[distributed]')"
)

START_TIMEOUT_S = 45


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _dask_cli() -> list[str]:
    exe = shutil.which("dask", path=os.path.dirname(sys.executable))
    return [exe] if exe else [sys.executable, "-m", "distributed.cli.dask_scheduler"]


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """Workers first (a worker whose scheduler is gone retries for a while), then the scheduler."""
    for p in reversed(procs):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 1
    for p in reversed(procs):
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=5)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """tcp://127.0.0.1:PORT of a scheduler with two single-threaded workers."""
    exe = shutil.which("dask", path=os.path.dirname(sys.executable))
    if exe is None:
        pytest.skip("the `dask` command is not installed beside this Python")
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    logs = tmp_path_factory.mktemp("dask-logs")
    quiet = {"stdout": subprocess.DEVNULL}
    procs = [subprocess.Popen([exe, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--no-dashboard"], stderr=(logs / "scheduler.log").open("wb"), **quiet)]
    try:
        for i in range(2):
            procs.append(subprocess.Popen(
                [exe, "worker", address, "--nthreads", "1", "--no-dashboard", "--no-nanny",
                 "--host", "127.0.0.1", "--name", f"w{i}"],
                stderr=(logs / f"worker{i}.log").open("wb"), **quiet))
        client = distributed.Client(address, timeout=START_TIMEOUT_S)
        try:
            client.wait_for_workers(2, timeout=START_TIMEOUT_S)
        finally:
            client.close()
        yield address
    finally:
        _stop(procs)


@pytest.fixture(scope="module")
def rank_set(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root, _ = make_set(tmp_path_factory.mktemp("set"), ranks=6)
    local = root.parent / "local"
    assert cli_run(["fleet", str(root), "--out", str(local), "--no-cache", "-j", "1", "-q"]) == 0
    return root, local


def test_cluster_result_equals_local_result(cluster: str, rank_set: Any) -> None:
    root, local = rank_set
    out = root.parent / "dask"
    assert cli_run(["fleet", str(root), "--out", str(out), "--no-cache", "--scheduler", cluster, "-q"]) == 0
    assert output_files(out) == output_files(local)
    timing = (out / "fleet_timing.json").read_text()
    assert f"dask {cluster}" in timing


def test_cluster_refuses_traces_its_workers_cannot_read(cluster: str, tmp_path: Path, capsys: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    root, _ = make_set(tmp_path / "set", ranks=2)
    from nsys_llm_explainer.fleet import inputs

    real = inputs.collect

    def collect_then_hide(*a: Any, **kw: Any) -> Any:
        found = real(*a, **kw)
        (root / "report_1.sqlite").rename(root / "moved.bin")  # gone before any worker looks
        return found

    monkeypatch.setattr(inputs, "collect", collect_then_hide)
    code = cli_run(["fleet", str(root), "--out", str(tmp_path / "o"), "--no-cache", "--scheduler", cluster])
    assert code == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a worker cannot read 1 of 2 traces" in err[0]


def test_local_cluster_result_equals_local_result(rank_set: Any) -> None:
    root, local = rank_set
    out = root.parent / "localcluster"
    assert cli_run(["fleet", str(root), "--out", str(out), "--no-cache", "--scheduler", "local",
                    "-j", "2", "-q"]) == 0
    assert output_files(out) == output_files(local)


def test_unreachable_scheduler_is_one_line(tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from nsys_llm_explainer.fleet import execute

    root, _ = make_set(tmp_path / "set", ranks=2)
    port = _free_port()  # nothing listens there
    monkeypatch.setattr(execute, "CONNECT_TIMEOUT_S", 1)
    code = cli_run(["fleet", str(root), "--out", str(tmp_path / "o"), "--scheduler", f"tcp://127.0.0.1:{port}"])
    assert code == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot connect" in err[0]
