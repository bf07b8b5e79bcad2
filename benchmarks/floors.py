"""The native read floors the tool is measured against, each in its own process.

    python -m benchmarks.floors adbc TRACE.sqlite     # ADBC SQLite driver -> Arrow tables
    python -m benchmarks.floors msgspec TRACE.json    # msgspec typed decode of every event

- adbc: the ADBC SQLite driver reads the columns the report needs from the kernel, runtime
  and NVTX tables (measure.FLOOR_QUERIES) into Arrow tables, no Python object per value.
- msgspec: msgspec decodes every event of a PyTorch profiler trace into typed structs
  (name, category, phase, times, process and thread ids, flow id, and the args the tool
  reads: correlation, External id, device, stream, bytes, shapes, Python ids).

Each prints one JSON line: seconds (wall), cpu_s and rows. run() starts it in a child
process of the interpreter given (the Makefile's .venv-floors, which has
benchmarks/floors-requirements.txt installed; the tool's own virtualenv stays the default
install) and adds that process's peak memory; a floor whose packages are missing is
reported as unavailable.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import measure  # noqa: E402

NEEDS = {"adbc": ("adbc_driver_sqlite", "pyarrow"), "msgspec": ("msgspec",)}


ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PYTHON = ROOT / ".venv-floors" / "bin" / "python"


def python() -> str:
    """The interpreter the floors run in: .venv-floors when it exists, else this one."""
    return str(DEFAULT_PYTHON) if DEFAULT_PYTHON.exists() else sys.executable


def missing(kind: str, interpreter: str) -> list[str]:
    """The modules floor `kind` needs that `interpreter` lacks."""
    probe = "import importlib.util, sys; print(' '.join(m for m in sys.argv[1:] if not importlib.util.find_spec(m)))"
    res = subprocess.run([interpreter, "-c", probe, *NEEDS[kind]], capture_output=True, text=True, check=False)
    return res.stdout.split() if res.returncode == 0 else list(NEEDS[kind])


def adbc_read(path: Path) -> dict[str, Any]:
    import adbc_driver_sqlite.dbapi as adbc

    t0, c0 = time.perf_counter(), time.process_time()
    rows = 0
    uri = f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro"
    with adbc.connect(uri) as con, con.cursor() as cur:
        cur.execute("SELECT name FROM pragma_table_info('CUPTI_ACTIVITY_KIND_KERNEL')")
        have = {r[0] for r in cur.fetchall()}
        optional = "".join(f", {c}" for c in measure.OPTIONAL_KERNEL_COLUMNS if c in have)
        for template in measure.FLOOR_QUERIES.values():
            cur.execute(template.format(optional=optional))
            rows += cur.fetch_arrow_table().num_rows
    return {"seconds": time.perf_counter() - t0, "cpu_s": time.process_time() - c0, "rows": rows}


def msgspec_read(path: Path) -> dict[str, Any]:
    import msgspec

    opt_int = int | None
    args = msgspec.defstruct("Args", [
        ("correlation", opt_int, None), ("external_id", opt_int, None), ("device", opt_int, None),
        ("stream", opt_int, None), ("bytes", opt_int, None), ("cuda_sync_kind", str | None, None),
        ("input_dims", Any, None), ("input_type", Any, None), ("concrete", Any, None),
        ("python_id", opt_int, None), ("python_parent", opt_int, None),
    ], rename={"external_id": "External id", "input_dims": "Input Dims", "input_type": "Input type",
               "concrete": "Concrete Inputs", "python_id": "Python id", "python_parent": "Python parent id"},
        gc=False)
    event = msgspec.defstruct("Event", [
        ("ph", str, ""), ("cat", str, ""), ("name", str, ""), ("ts", float, 0.0), ("dur", float, 0.0),
        ("pid", int | str, 0), ("tid", int | str, 0), ("id", opt_int, None), ("args", args | None, None),
    ], gc=False)
    trace_type = msgspec.defstruct("Trace", [("traceEvents", list[event])], gc=False)  # type: ignore[valid-type]

    t0, c0 = time.perf_counter(), time.process_time()
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        import gzip

        raw = gzip.decompress(raw)
    trace = msgspec.json.decode(raw, type=trace_type)
    rows = len(trace.traceEvents)
    return {"seconds": time.perf_counter() - t0, "cpu_s": time.process_time() - c0, "rows": rows}


READERS = {"adbc": adbc_read, "msgspec": msgspec_read}


def run(kind: str, path: Path, log: Path) -> dict[str, Any]:
    """Floor `kind` on `path` in a child process: seconds, cpu_s, rows and peak_tree_rss_mib;
    {"unavailable": why} when its packages are not installed or it fails."""
    interpreter = python()
    lacking = missing(kind, interpreter)
    if lacking:
        return {"unavailable": f"{', '.join(lacking)} not installed in {interpreter} "
                "(make bench-large makes .venv-floors from benchmarks/floors-requirements.txt)"}
    cmd = [interpreter, "-m", "benchmarks.floors", kind, str(path)]
    res = measure.run_cmd(cmd, log.with_suffix(""), cwd=ROOT)
    if res["exit_code"] != 0:
        return {"unavailable": f"the {kind} floor failed: {res['log'][-300:]}"}
    figures = json.loads(res["log"].strip().splitlines()[-1])
    return {**figures, "peak_tree_rss_mib": res["peak_tree_rss_mib"], "process_wall_s": res["wall_s"]}


def main(argv: list[str] | None = None) -> int:
    kind, path = (sys.argv[1:] if argv is None else argv)[:2]
    print(json.dumps(READERS[kind](Path(path))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
