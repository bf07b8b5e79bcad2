"""The bad-input corpus: every case through the whole CLI, with its exact exit code.

Each case asserts: the exit code; for failures one stderr line naming the problem and what to
do; never a traceback; the input's bytes unchanged (sha256) and no file created beside it;
unreadable inputs create no output directory; damaged but readable inputs still write the
report, with the affected sections skipped and a warning that counts the ignored rows.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from nsys_llm_explainer import cli
from nsys_llm_explainer.errors import ExitCode
from tests.fixtures import hostile as h


@dataclass(frozen=True)
class Case:
    id: str
    build: Callable[[Path], Path]
    exit_code: int
    message: tuple[str, ...] = ()  # substrings of the one stderr line (lowercase)
    warnings: tuple[str, ...] = ()  # substrings that some report.json warning must hold
    skipped: tuple[str, ...] = ()  # metrics that must be skipped
    kernels: int | None = None  # top_kernels' total kernel count, when it must run
    extra: tuple[str, ...] = field(default=())


EXPORT = "nsys export --type sqlite"
K = h.KERNEL
UNREADABLE = [
    Case("missing", h.missing, 3, ("no such file", EXPORT)),
    Case("directory", h.directory, 3, ("is a directory", "nsys export")),
    Case("fifo", h.fifo, 3, ("not a regular file", "sqlite export")),
    Case("empty", h.write_bytes("e.sqlite", b""), 3, ("is empty", EXPORT)),
    Case(
        "random_bytes",
        h.write_bytes("r.sqlite", h.random_bytes),
        3,
        ("not a sqlite database", EXPORT),
    ),
    Case("text_file", h.write_bytes("t.sqlite", h.text_file), 3, ("not a sqlite database", EXPORT)),
    Case("gzip", h.gzipped, 3, ("gzip-compressed", "gunzip")),
    Case(
        "nsys_rep",
        h.nsys_report(".nsys-rep"),
        3,
        ("nsight systems report", f"{EXPORT} --output capture.sqlite capture.nsys-rep"),
    ),
    Case(
        "qdrep",
        h.nsys_report(".qdrep"),
        3,
        ("nsight systems report", f"{EXPORT} --output capture.sqlite capture.qdrep"),
    ),
    Case(
        "truncated_in_header",
        h.truncated(lambda n: 50),
        3,
        ("truncated", "export the capture again"),
    ),
    Case("truncated_header_only", h.truncated(lambda n: 100), 3, ("truncated", "again")),
    Case("truncated_half", h.truncated(lambda n: n // 2), 3, ("truncated", "again")),
    Case("truncated_last_page", h.truncated(lambda n: n - 4096), 3, ("truncated", "again")),
    Case("truncated_one_byte", h.truncated(lambda n: n - 1), 3, ("truncated", "again")),
    Case(
        "magic_then_junk",
        h.write_bytes("j.sqlite", b"SQLite format 3\x00" + b"\xff" * 200),
        3,
        ("sqlite", "again"),
    ),
    Case("corrupt_schema_page", h.corrupt_schema_page, 3, ("damaged", "export the capture again")),
    Case(
        "no_tables", h.sqlite_with(), 3, ("not an nsight systems export", "has no tables", EXPORT)
    ),
    Case(
        "non_nsys",
        h.sqlite_with("CREATE TABLE users (id INTEGER, email TEXT)"),
        3,
        ("not an nsight systems export", "none of the nsight systems tables", EXPORT),
    ),
    Case("core_names_are_views", h.core_views_only, 3, ("not an nsight systems export",)),
]

ALL = ("top_kernels", "launch_storm", "gpu_idle", "per_process", "nvtx_attribution")
IGNORED = "rows ignored"
DAMAGED = [
    Case("all_core_tables_empty", h.all_core_empty, 0, skipped=(*ALL, "nvtx_ranges", "sync")),
    *(
        Case(
            f"kernel_without_{col}",
            h.drop_column(K, col),
            0,
            skipped=ALL,
            extra=(f"lacks column(s) {col}",),
        )
        for col in ("start", "end", "deviceId")
    ),
    Case("kernel_without_correlationId", h.drop_column(K, "correlationId"), 0, kernels=3),
    Case(
        "text_timestamps",
        h.damaged(f"UPDATE {K} SET start = 't2000' WHERE correlationId = 1"),
        0,
        warnings=(f"{K}: 1 of 3 {IGNORED}",),
        kernels=2,
    ),
    Case(
        "real_device_id",
        h.damaged(f"UPDATE {K} SET deviceId = 0.5 WHERE correlationId = 2"),
        0,
        warnings=(f"{K}: 1 of 3 {IGNORED}",),
        kernels=2,
    ),
    Case(
        "real_correlation_id",
        h.damaged(f"UPDATE {K} SET correlationId = 1.5 WHERE start = 2000"),
        0,
        kernels=3,
    ),
    Case(
        "null_start",
        h.damaged(f"UPDATE {K} SET start = NULL WHERE correlationId = 3"),
        0,
        warnings=(f"{K}: 1 of 3 {IGNORED}",),
        kernels=2,
    ),
    Case(
        "null_end",
        h.damaged(f'UPDATE {K} SET "end" = NULL WHERE correlationId = 3'),
        0,
        warnings=(f"{K}: 1 of 3 {IGNORED}",),
        kernels=2,
    ),
    Case(
        "null_start_and_end_everywhere",
        h.damaged(f'UPDATE {K} SET start = NULL, "end" = NULL'),
        0,
        warnings=(f"{K}: 3 of 3 {IGNORED}",),
        skipped=ALL,
    ),
    Case(
        "end_before_start",
        h.damaged(f'UPDATE {K} SET "end" = 1 WHERE correlationId = 2'),
        0,
        warnings=(f"{K}: 1 of 3 {IGNORED}", "end before start"),
        kernels=2,
    ),
    Case(
        "duplicated_rows",
        h.damaged(f"INSERT INTO {K} SELECT * FROM {K}"),
        0,
        warnings=(f"{K}: 3 duplicated kernel rows",),
        kernels=3,
    ),
    Case(
        "timestamps_near_2_63",
        h.damaged(
            f'UPDATE {K} SET start = {2**63 - 100}, "end" = {2**63 - 1} WHERE correlationId = 3'
        ),
        0,
        warnings=(f"{K}: 1 of 3 {IGNORED}", "2^62"),
        kernels=2,
    ),
    Case(
        "durations_overflow_int64",
        h.damaged(f'UPDATE {K} SET start = 0, "end" = {2**62 - 1}, streamId = rowid'),
        0,
        skipped=ALL,
        extra=(f"{K}: its durations add up to more than 2^56 ns",),
    ),
    Case(
        "nvtx_durations_overflow_int64",
        h.damaged(f'UPDATE {h.NVTX} SET start = 0, "end" = {2**62 - 1}', loosen=()),
        0,
        skipped=("nvtx_ranges", "nvtx_attribution"),
        kernels=3,
    ),
    Case(
        "negative_timestamps",
        h.damaged(f"UPDATE {K} SET start = -5000 WHERE correlationId = 3"),
        0,
        warnings=(f"{K}: 1 of 3 {IGNORED}",),
        kernels=2,
    ),
    Case(
        "blob_timestamps",
        h.damaged(f"UPDATE {K} SET start = x'00ff' WHERE correlationId = 3"),
        0,
        warnings=(f"{K}: 1 of 3 {IGNORED}",),
        kernels=2,
    ),
    Case(
        "huge_device_id",
        h.damaged(f"UPDATE {K} SET deviceId = {2**62} WHERE correlationId = 3"),
        0,
        warnings=(f"{K}: 1 of 3 {IGNORED}", "deviceId outside [0, 65535]"),
        kernels=2,
    ),
    Case(
        "negative_device_id",
        h.damaged(f"UPDATE {K} SET deviceId = {-(2**63)} WHERE correlationId = 3"),
        0,
        warnings=(f"{K}: 1 of 3 {IGNORED}",),
        kernels=2,
    ),
    Case(
        "negative_name_ids",
        h.damaged(
            f"UPDATE {h.RUNTIME} SET nameId = -5",
            f"UPDATE {K} SET demangledName = -7, shortName = -7",
            loosen=(),
        ),
        0,
        kernels=3,
    ),
    Case("null_global_pid", h.damaged(f"UPDATE {K} SET globalPid = NULL"), 0, kernels=3),
    Case(
        "kernel_name_1mb",
        h.damaged(
            "UPDATE StringIds SET value = 'k' || hex(zeroblob(524288)) WHERE value = 'relu_kernel'",
            loosen=(),
        ),
        0,
        kernels=3,
    ),
    Case(
        "missing_string_id",
        h.damaged(f"UPDATE {K} SET demangledName = 987654 WHERE correlationId = 2"),
        0,
        warnings=("StringIds: 1 referenced ids are missing",),
        kernels=3,
    ),
    Case("no_string_table", h.damaged("DROP TABLE StringIds", loosen=()), 0, kernels=3),
    Case(
        "blob_string_value",
        h.damaged(
            "UPDATE StringIds SET value = x'ff00fe' WHERE value = 'relu_kernel'",
            loosen=("StringIds",),
        ),
        0,
        kernels=3,
    ),
    Case(
        "nvtx_text_hostile",
        h.damaged(
            "UPDATE NVTX_EVENTS SET text = '# forged' || char(10) || '| a | b |' || char(13) "
            "|| '`tick` <script>alert(1)</script> [x](http://evil.example) ' "
            "|| CAST(x'fffe41' AS TEXT) WHERE text = 'forward'",
            loosen=(),
        ),
        0,
        kernels=3,
    ),
    Case(
        "nvtx_text_start",
        h.damaged(
            "UPDATE NVTX_EVENTS SET start = '900ns' WHERE text = 'step'", loosen=("NVTX_EVENTS",)
        ),
        0,
        warnings=(f"NVTX_EVENTS: 1 of 2 {IGNORED}",),
        kernels=3,
    ),
    # A range whose type is not a number is not a range: it is left out like a mark.
    Case(
        "nvtx_event_type_text",
        h.damaged(
            "UPDATE NVTX_EVENTS SET eventType = 'push' WHERE text = 'step'", loosen=("NVTX_EVENTS",)
        ),
        0,
        kernels=3,
    ),
    Case(
        "runtime_name_missing",
        h.damaged(f"UPDATE {h.RUNTIME} SET nameId = 424242", loosen=()),
        0,
        kernels=3,
    ),
    Case(
        "hostile_version_and_gpu_name",
        h.damaged(
            "UPDATE META_DATA_EXPORT SET value = '# 2024 | <b>x</b>' "
            "WHERE name = 'EXPORT_PRODUCT_VERSION'",
            "UPDATE TARGET_INFO_GPU SET name = '<img src=x onerror=alert(1)> | ### GPU'",
            loosen=(),
        ),
        0,
        kernels=3,
    ),
    Case(
        "kernel_is_a_view",
        h.view_named_kernel,
        0,
        skipped=ALL,
        warnings=(f"{K} is a view, not a table",),
    ),
    Case("trigger_named_like_core", h.trigger_named_kernel, 0, kernels=3),
    Case("hostile_identifiers", h.hostile_identifiers, 0, kernels=3),
    Case("wal_with_wal_file", h.wal_mode, 0, kernels=5),
    Case("wal_without_wal_file", h.wal_mode_clean, 0, kernels=3),
    Case(
        "path_with_uri_characters", lambda d: h.good(d, "a?b#c%20 d&mode=rw.sqlite"), 0, kernels=3
    ),
]
CASES = UNREADABLE + DAMAGED


def sha(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def snapshot(d: Path) -> dict[str, str | None]:
    return {p.name: sha(p) for p in d.iterdir()}


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.run(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_corpus_size() -> None:
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_case(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    indir = tmp_path / "in"
    indir.mkdir()
    trace = case.build(indir)
    before = snapshot(indir)
    out = tmp_path / "out"
    code, stdout, stderr = run([str(trace), "--out", str(out), "-q"], capsys)
    assert "Traceback" not in stderr + stdout
    assert snapshot(indir) == before  # bytes unchanged, nothing created beside the input
    assert code == case.exit_code, stderr
    if case.exit_code != 0:
        lines = stderr.splitlines()
        assert len(lines) == 1, stderr
        assert lines[0].startswith("nsys-llm-explain: error: ")
        for want in case.message:
            assert want.lower() in lines[0].lower(), lines[0]
        assert not out.exists()
        return
    assert stderr == ""
    doc = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert (out / "report.md").is_file()
    for want in case.warnings:
        assert any(want in w for w in doc["warnings"]), doc["warnings"]
    for mid in case.skipped:
        assert doc["metrics"][mid]["status"] == "skipped", mid
    for want in case.extra:
        reasons = " ".join(m.get("reason", "") for m in doc["metrics"].values()).lower()
        assert want.lower() in reasons, reasons
    if case.kernels is not None:
        tk = doc["metrics"]["top_kernels"]
        assert tk["status"] == "ok", tk
        assert tk["kernel_count"] == case.kernels


def test_exit_codes_documented(capsys: pytest.CaptureFixture[str]) -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    assert cli.run(["--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    for code in ExitCode:
        assert f"| {int(code)} |" in section, code
        assert f"{int(code)} " in cli.EXIT_CODES_HELP, code
    assert " ".join(cli.EXIT_CODES_HELP.split()) in help_text
