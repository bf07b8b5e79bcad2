"""fleet on Dask for real: a `dask scheduler` and two `dask worker` processes on 127.0.0.1
(free ports, bounded start-up, always stopped), and a LocalCluster. The result must equal
the local one byte for byte, apart from fleet_timing.json."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nsys_llm_explainer.cli import run as cli_run
from tests.fleet_support import make_set, output_files

pytestmark = pytest.mark.slow

distributed = pytest.importorskip(
    "distributed", reason="Dask is not installed (pip install 'nsys-llm-explain[distributed]')"
)

START_TIMEOUT_S = 45
RUN_TIMEOUT_S = 120  # a fleet run over the cluster; 6 small traces take a few seconds


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _fleet_bounded(args: list[str], timeout_s: float = RUN_TIMEOUT_S) -> int:
    """cli_run(args) in a thread; fail the test when it has not finished within timeout_s (a hung
    worker must not hang the suite; the module's teardown then stops the cluster)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["code"] = cli_run(args)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            box["error"] = exc

    t = threading.Thread(target=target, name="fleet-over-dask", daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        pytest.fail(f"fleet over the Dask cluster did not finish within {timeout_s:.0f} s")
    if "error" in box:
        raise box["error"]
    return int(box["code"])


def _dask_exe() -> str:
    exe = shutil.which("dask", path=os.path.dirname(sys.executable))
    if exe is None:
        pytest.skip("the `dask` command is not installed beside this Python")
    return exe


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


@contextlib.contextmanager
def _dask(logs: Path, workers: int) -> Iterator[str]:
    """tcp://127.0.0.1:PORT of a `dask scheduler` with `workers` single-threaded `dask worker`
    processes, all up (bounded) before it yields; stopped and their logs closed afterwards."""
    exe = _dask_exe()
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []
    with contextlib.ExitStack() as files:
        def log(name: str) -> Any:
            return files.enter_context((logs / name).open("wb"))

        try:
            procs.append(subprocess.Popen(
                [exe, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                stdout=subprocess.DEVNULL, stderr=log("scheduler.log")))
            for i in range(workers):
                procs.append(subprocess.Popen(
                    [exe, "worker", address, "--nthreads", "1", "--no-dashboard", "--no-nanny",
                     "--host", "127.0.0.1", "--name", f"w{i}"],
                    stdout=subprocess.DEVNULL, stderr=log(f"worker{i}.log")))
            client = distributed.Client(address, timeout=START_TIMEOUT_S)
            try:
                if workers:
                    client.wait_for_workers(workers, timeout=START_TIMEOUT_S)
            finally:
                client.close()
            yield address
        finally:
            _stop(procs)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """tcp://127.0.0.1:PORT of a scheduler with two single-threaded workers."""
    with _dask(tmp_path_factory.mktemp("dask-logs"), workers=2) as address:
        yield address


@pytest.fixture(scope="module")
def rank_set(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root, _ = make_set(tmp_path_factory.mktemp("set"), ranks=6)
    local = root.parent / "local"
    assert cli_run(["fleet", str(root), "--out", str(local), "--no-cache", "-j", "1", "-q"]) == 0
    return root, local


def test_cluster_result_equals_local_result(cluster: str, rank_set: Any) -> None:
    root, local = rank_set
    out = root.parent / "dask"
    assert _fleet_bounded(["fleet", str(root), "--out", str(out), "--no-cache", "--scheduler", cluster, "-q"]) == 0
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
    code = _fleet_bounded(["fleet", str(root), "--out", str(tmp_path / "o"), "--no-cache", "--scheduler", cluster])
    assert code == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a worker cannot read 1 of 2 traces" in err[0]


def test_local_cluster_result_equals_local_result(rank_set: Any) -> None:
    root, local = rank_set
    out = root.parent / "localcluster"
    with contextlib.ExitStack() as stack:
        # Hold the default dashboard port where it is free: the LocalCluster must not want it.
        held = socket.socket()
        stack.callback(held.close)
        with contextlib.suppress(OSError):
            held.bind(("127.0.0.1", 8787))
            held.listen()
        caught = stack.enter_context(warnings.catch_warnings(record=True))
        warnings.simplefilter("always")
        assert _fleet_bounded(["fleet", str(root), "--out", str(out), "--no-cache", "--scheduler", "local",
                               "-j", "2", "-q"]) == 0
    assert [str(w.message) for w in caught if "8787" in str(w.message) or "in use" in str(w.message)] == []
    assert output_files(out) == output_files(local)


def test_refused_scheduler_fails_at_once_in_one_line(tmp_path: Path, capsys: Any) -> None:
    root, _ = make_set(tmp_path / "set", ranks=2)
    address = f"tcp://127.0.0.1:{_free_port()}"  # nothing listens there
    t0 = time.monotonic()
    code = cli_run(["fleet", str(root), "--out", str(tmp_path / "o"), "--scheduler", address, "-q"])
    assert code == 3 and time.monotonic() - t0 < 5  # not the client's 20 s of retries
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"nsys-llm-explain: error: --scheduler {address}: connection refused (no scheduler listens there)"]


def test_scheduler_without_workers_is_one_line_exit_3(tmp_path: Path, capsys: Any,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from nsys_llm_explainer import fleet

    root, _ = make_set(tmp_path / "set", ranks=2)
    monkeypatch.setattr(fleet, "CONNECT_TIMEOUT_S", 2)
    with _dask(tmp_path, workers=0) as address:
        code = _fleet_bounded(["fleet", str(root), "--out", str(tmp_path / "o"), "--scheduler", address, "-q"])
    assert code == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"nsys-llm-explain: error: --scheduler {address}: no worker joined the scheduler within 2 s "
                   f"(start some with: dask worker {address})"]
