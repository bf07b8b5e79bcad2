"""No leaks: capture metadata never reaches an output unless --include-capture-info, and
even then secret-looking values are redacted."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from nsys_llm_explainer import cli
from nsys_llm_explainer.render import escape
from nsys_llm_explainer.trace.nsys.metadata import REDACTED, is_secret_name, parse_env, redact_arguments
from tests.conftest import nsys_trace_files
from tests.fixtures.builder import TraceBuilder

MIN_LEN = 7  # values longer than 6 characters are scanned
ALLOWED_EXPORT_ROWS = ("EXPORT_PRODUCT_VERSION", "EXPORT_SCHEMA_VERSION")  # shown on purpose
# Genuine collisions, not leaks: "unknown" is one trace's CpuDescription and an environment
# value, and also the report's own word for a GPU model or version it does not know;
# "schedule" is a Linux kernel thread's name in one trace and a word of the Nsight Compute plan's
# comments ("a profiler schedule").
FALSE_POSITIVES = {"unknown", "schedule"}


def metadata_values(path: Path) -> tuple[set[str], set[str]]:
    """(values that must never appear, versions that may) from every metadata table."""
    con = sqlite3.connect(f"{path.resolve().as_uri()}?immutable=1", uri=True)
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    found: set[str] = set()
    allowed: set[str] = set()

    def rows(sql: str) -> list[tuple]:
        return con.execute(sql).fetchall()

    if "META_DATA_CAPTURE" in tables:
        for name, value in rows("SELECT name, value FROM META_DATA_CAPTURE"):
            found.add(str(value))
            if str(name).endswith("ENVIRONMENT_VARIABLE"):
                found.add(parse_env(str(value))[1])
    if "TARGET_INFO_SYSTEM_ENV" in tables:
        found.update(str(v) for (v,) in rows("SELECT value FROM TARGET_INFO_SYSTEM_ENV"))
    for t in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if t in tables:
            for name, value in rows(f"SELECT name, value FROM {t}"):
                (allowed if name in ALLOWED_EXPORT_ROWS else found).add(str(value))
    if "PROCESSES" in tables:
        found.update(str(v) for (v,) in rows("SELECT name FROM PROCESSES"))
    if {"ThreadNames", "StringIds"} <= tables:
        sql = "SELECT s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId"
        found.update(str(v) for (v,) in rows(sql))
    con.close()
    return {v for v in found if len(v) >= MIN_LEN} - allowed - FALSE_POSITIVES, allowed


def spellings(value: str) -> set[str]:
    """How a value would look in each output: raw (CSV), Markdown-escaped, JSON-escaped."""
    return {
        value,
        escape.md(value),
        json.dumps(value, ensure_ascii=False)[1:-1],
        value.replace('"', '""'),
    }


def shown_program(out: Path) -> set[str]:
    """The words the report shows on purpose from the command line: the program's base name and
    the arguments that name the model or select the test (metrics.capture.captured.program).
    Each is checked to be a name, never a path, an assignment or a token."""
    doc = json.loads((out / "report.json").read_text(encoding="utf-8"))
    cap = doc["metrics"]["capture"]
    program = (cap.get("captured") or {}).get("program") if cap["status"] == "ok" else None
    if not program:
        return set()
    words = {w for w in (program["name"], *program["args"]) if w}
    for w in words:
        value = w.split("=", 1)[-1].split(" ", 1)[-1]
        assert "/" not in value and "\\" not in value and "@" not in value, w
        assert not re.search(r"hf_|sk-|ghp_|secret|token|passw", value, re.IGNORECASE), w
    return words


def leaks(out: Path, secrets: set[str]) -> list[tuple[str, str]]:
    shown = shown_program(out)
    # a value inside a shown word reveals nothing more (a thread name is the program's first 15 characters)
    secrets = {v for v in secrets if not any(v in w for w in shown)}
    found = []
    for f in sorted(p for p in out.rglob("*") if p.is_file()):
        text = f.read_text(encoding="utf-8", errors="replace")
        found += [(v[:60], f.name) for v in secrets if any(s in text for s in spellings(v))]
    return found


def run(*argv: str | Path) -> int:
    return cli.run([str(a) for a in argv])


@pytest.mark.parametrize(
    "trace", nsys_trace_files() or [None], ids=lambda p: p.stem if p else "none"
)
@pytest.mark.slow
def test_real_traces_leak_nothing(trace: Path | None, tmp_path: Path) -> None:
    if trace is None:
        pytest.skip("shared real traces not found beside the project (a clone outside /work)")
    # Run through a neutrally named link: the exports' own file names are recorded in their
    # metadata (EXPORT_OUTPUT_FILE), and the report names the path it was given.
    link = tmp_path / "input.sqlite"
    link.symlink_to(trace)
    secrets, _ = metadata_values(trace)
    assert run(link, "--out", tmp_path / "out", "-q") == 0
    assert leaks(tmp_path / "out", secrets) == []


@pytest.mark.parametrize(
    "trace", nsys_trace_files() or [None], ids=lambda p: p.stem if p else "none"
)
def test_real_traces_capture_info_redacts(trace: Path | None, tmp_path: Path) -> None:
    if trace is None:
        pytest.skip("shared real traces not found beside the project (a clone outside /work)")
    assert run(trace, "--out", tmp_path / "out", "-q", "--include-capture-info") == 0
    doc = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    info = doc["capture_info"]
    for var in info["environment"]:
        if is_secret_name(var["name"]):
            assert var["value"] == REDACTED, var["name"]
    md = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "## Capture info" in md
    # The scanner sees what the flag lets through, so its silence above means something.
    shown = {e["value"] for e in info["environment"] if len(e["value"]) >= MIN_LEN}
    if shown:
        assert leaks(tmp_path / "out", shown)


SECRET_ENV = {
    "HF_TOKEN": "hf_abcdefghijklmnop",
    "OPENAI_API_KEY": "sk-proj-1234567890",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMIK7MDENG",
    "DB_PASSWORD": "hunter2hunter2",
    "GITHUB_AUTH": "ghp_zzzzzzzzzzzzzz",
    "MY_CREDENTIALS": "user:pa55word!",
}
PLAIN_ENV = {"WORKDIR_HINT": "/home/alice/project-x", "CUDA_VISIBLE_DEVICES": "0,1,2,3"}


def capture_trace(d: Path) -> Path:
    meta = [
        ("DEVICE_DISPLAY_NAME", "alice-workstation.corp.example"),
        ("PROCESS_0:COMMAND", "python3"),
        ("PROCESS_0:ARGUMENT_0", "serve.py"),
        ("PROCESS_0:ARGUMENT_1", "--hf-token=hf_cmdline_secret_1"),
        ("PROCESS_0:ARGUMENT_2", "--api-key"),
        ("PROCESS_0:ARGUMENT_3", "sk-cmdline-secret-2"),
        ("PROCESS_0:WORKING_DIR", "/home/alice/private-dir"),
        (
            "PROCESS_0:ENVIRONMENT_VARIABLE",
            'DATABASE_URL="postgres://alice:dbpass9876@db.internal/x"',
        ),
    ]
    meta += [
        ("PROCESS_0:ENVIRONMENT_VARIABLE", f'{k}="{v}"')
        for k, v in {**SECRET_ENV, **PLAIN_ENV}.items()
    ]
    b = TraceBuilder("2024.6", capture_meta=meta)
    b.process(100, name="vllm-engine-core")
    b.thread_name(100, 100, "alice-worker-thread")
    b.runtime(1000, 1100, corr=1)
    b.kernel(2000, 3000, corr=1, name="gemm_kernel")
    return b.write(d / "t.sqlite")


def test_default_report_has_no_capture_metadata(tmp_path: Path) -> None:
    """Nothing of the capture metadata but the program's base name (serve.py): not its flags'
    values (tokens), the working directory, the environment, host, process or thread names."""
    trace = capture_trace(tmp_path)
    assert run(trace, "--out", tmp_path / "out", "-q") == 0
    secrets, _ = metadata_values(trace)
    assert "vllm-engine-core" in secrets and "alice-worker-thread" in secrets
    assert shown_program(tmp_path / "out") == {"serve.py"}
    assert leaks(tmp_path / "out", secrets) == []
    doc = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    assert "capture_info" not in doc
    assert all(p["name"] is None for p in doc["trace"]["processes"])


def test_capture_info_included_and_redacted(tmp_path: Path) -> None:
    trace = capture_trace(tmp_path)
    assert run(trace, "--out", tmp_path / "out", "-q", "--include-capture-info") == 0
    out = tmp_path / "out"
    hidden = {*SECRET_ENV.values(), "hf_cmdline_secret_1", "sk-cmdline-secret-2", "dbpass9876"}
    assert leaks(out, hidden) == []
    doc = json.loads((out / "report.json").read_text(encoding="utf-8"))
    info = doc["capture_info"]
    env = {e["name"]: e["value"] for e in info["environment"]}
    assert {k: env[k] for k in SECRET_ENV} == dict.fromkeys(SECRET_ENV, REDACTED)
    assert {k: env[k] for k in PLAIN_ENV} == PLAIN_ENV
    assert env["DATABASE_URL"] == f"postgres://alice:{REDACTED}@db.internal/x"
    settings = {s["name"]: s["value"] for s in info["settings"]}
    assert settings["PROCESS_0:ARGUMENTS"] == f"serve.py --hf-token={REDACTED} --api-key {REDACTED}"
    assert settings["PROCESS_0:WORKING_DIR"] == "/home/alice/private-dir"
    assert info["processes"] == [{"pid": 100, "name": "vllm-engine-core"}]
    assert doc["trace"]["processes"][0]["name"] == "vllm-engine-core"
    assert info["redacted_values"] == len(SECRET_ENV) + 3
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "vllm-engine-core" in md and escape.md("/home/alice/project-x") in md


@pytest.mark.parametrize(
    "name",
    [
        "GITHUB_TOKEN",
        "api_key",
        "Secret",
        "PGPASSWORD",
        "AWS_CREDENTIAL",
        "HTTP_AUTHORIZATION",
        "ssh_passphrase",
        "--auth-token",
    ],
)
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name", ["PATH", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "OMP_NUM_THREADS"]
)
def test_plain_names(name: str) -> None:
    assert not is_secret_name(name)


def test_redact_arguments_forms() -> None:
    args = ["--token", "abc", "--x=1", "TOKEN=zzz", "-p", "--password=", "https://u:pw@h/"]
    assert redact_arguments(args) == [
        "--token",
        REDACTED,
        "--x=1",
        f"TOKEN={REDACTED}",
        "-p",
        f"--password={REDACTED}",
        f"https://u:{REDACTED}@h/",
    ]
