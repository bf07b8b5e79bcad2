"""Running the per-trace tasks: in this process, in a local process pool, or on Dask.

Results come back in task order whatever order they finish in; `done` is called as each
finishes (progress). Dask is optional: `pip install 'nsys-llm-explain[distributed]'`.

A scheduler address that refuses the connection or does not resolve fails at once (a TCP
probe before the Dask client, which would retry until CONNECT_TIMEOUT_S); a scheduler with no
worker after CONNECT_TIMEOUT_S fails too. Both are input errors (exit 3) in one line. The
LocalCluster listens on 127.0.0.1 only, its HTTP endpoint on a free port with no dashboard.
"""

from __future__ import annotations

import logging
import multiprocessing
import socket
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any
from urllib.parse import urlsplit

from nsys_llm_explainer.about import TOOL_NAME
from nsys_llm_explainer.errors import InputError, UsageError
from nsys_llm_explainer.fleet.worker import Task, summarize, unreadable

Done = Callable[[int, dict[str, Any]], None]
INSTALL_HINT = f"pip install '{TOOL_NAME}[distributed]'"
CONNECT_TIMEOUT_S = 20
PROBE_TIMEOUT_S = 3


def run_local(tasks: list[Task], jobs: int, done: Done) -> list[dict[str, Any]]:
    results: list[dict[str, Any] | None] = [None] * len(tasks)
    if jobs <= 1 or len(tasks) <= 1:
        for i, t in enumerate(tasks):
            results[i] = summarize(t)
            done(i, results[i])  # type: ignore[arg-type]
        return results  # type: ignore[return-value]
    # spawn: workers start from a clean interpreter, whatever threads this process has.
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=ctx) as pool:
        futures = {pool.submit(summarize, t): i for i, t in enumerate(tasks)}
        for fut in as_completed(futures):
            i = futures[fut]
            results[i] = fut.result()
            done(i, results[i])  # type: ignore[arg-type]
    return results  # type: ignore[return-value]


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise UsageError(f"--scheduler needs Dask: {INSTALL_HINT}") from None
    return distributed


def run_dask(tasks: list[Task], scheduler: str, jobs: int, done: Done) -> list[dict[str, Any]]:
    """scheduler: 'local' (a LocalCluster of `jobs` single-threaded worker processes) or the
    address of a running scheduler (tcp://HOST:PORT)."""
    distributed = _distributed()
    cluster = None
    try:
        if scheduler == "local":
            cluster = distributed.LocalCluster(
                n_workers=jobs, threads_per_worker=1, processes=True, host="127.0.0.1",
                dashboard_address=":0", scheduler_kwargs={"dashboard": False}, silence_logs=logging.ERROR,
            )
            client = distributed.Client(cluster, set_as_default=False)
        else:
            probe(scheduler)
            try:
                client = distributed.Client(
                    scheduler, timeout=CONNECT_TIMEOUT_S, set_as_default=False
                )
            except (OSError, TimeoutError) as exc:
                raise InputError(f"--scheduler {scheduler}: cannot connect ({exc})") from None
        try:
            return _submit(client, tasks, scheduler, done, distributed)
        finally:
            client.close()
    finally:
        if cluster is not None:
            cluster.close()


def probe(scheduler: str) -> None:
    """InputError at once when a tcp:// scheduler address refuses the connection or does not
    resolve; any other outcome (listening, slow, another protocol) is left to the Dask client."""
    parts = urlsplit(scheduler)
    if parts.scheme != "tcp" or not parts.hostname:
        return
    try:
        port = parts.port
    except ValueError:
        raise InputError(f"--scheduler {scheduler}: not a valid port") from None
    if port is None:
        return
    try:
        with socket.create_connection((parts.hostname, port), timeout=PROBE_TIMEOUT_S):
            return
    except ConnectionRefusedError:
        raise InputError(f"--scheduler {scheduler}: connection refused (no scheduler listens there)") from None
    except socket.gaierror as exc:
        raise InputError(f"--scheduler {scheduler}: cannot resolve {parts.hostname} ({exc.strerror})") from None
    except OSError:
        return


def _submit(client: Any, tasks: list[Task], scheduler: str, done: Done, distributed: Any) -> list[dict[str, Any]]:
    if not client.scheduler_info().get("workers"):
        try:
            client.wait_for_workers(1, timeout=CONNECT_TIMEOUT_S)
        except TimeoutError:
            raise InputError(
                f"--scheduler {scheduler}: no worker joined the scheduler within {CONNECT_TIMEOUT_S} s "
                f"(start some with: dask worker {scheduler})"
            ) from None
    paths = [t.abspath for t in tasks]
    bad = client.submit(unreadable, paths, pure=False).result()
    if bad:
        raise InputError(
            f"--scheduler {scheduler}: a worker cannot read {len(bad)} of {len(paths)} traces "
            f"(first: {bad[0]}); put them where every worker sees the same path"
        )
    futures = client.map(summarize, tasks, pure=False)
    index = {f.key: i for i, f in enumerate(futures)}
    results: list[dict[str, Any] | None] = [None] * len(tasks)
    for fut in distributed.as_completed(futures, loop=client.loop):
        i = index[fut.key]
        results[i] = fut.result()
        done(i, results[i])  # type: ignore[arg-type]
    return results  # type: ignore[return-value]
