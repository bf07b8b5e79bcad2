"""report.json against its shipped JSON Schema: fixture traces, real exports, and documents
that must be rejected (so the schema is not vacuously permissive)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from nsys_llm_explainer.api import explain
from nsys_llm_explainer.metrics import ALWAYS
from nsys_llm_explainer.render import json_writer
from nsys_llm_explainer.schema import (
    errors,
    fragment_ids,
    load_fragment,
    load_report_schema,
    validate,
)
from tests.conftest import CORE_METRICS, GENERATIONS, nsys_trace_files
from tests.fixtures import planted_story, variants
from tests.fixtures.builder import TraceBuilder

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "src" / "nsys_llm_explainer" / "schema"
VARIANTS: dict[str, Callable[..., Path]] = {
    "empty_export": variants.empty_export,
    "no_kernels": variants.no_kernels,
    "no_nvtx": variants.no_nvtx,
    "null_ends": variants.null_ends,
    "mixed_text": variants.mixed_text,
    "multi_process_colliding_corr": variants.multi_process_colliding_corr,
}


def full_trace(path: Path, version: str) -> Path:
    """Two processes, two devices, nested NVTX, sync calls, a copy: every core metric runs."""
    b = TraceBuilder(version)
    b.gpu(0)
    b.gpu(1)
    for pid, dev in ((100, 0), (200, 1)):
        b.process(pid)
        b.nvtx(0, 100_000, text="decode", pid=pid)
        b.nvtx(1_000, 40_000, text="attention", pid=pid)
        for i in range(6):
            t = 2_000 + i * 10_000
            b.runtime(t, t + 500, pid=pid, corr=i + 1)
            b.kernel(
                t + 1_000,
                t + 1_000 + 3_000 * (i + 1),
                pid=pid,
                device=dev,
                corr=i + 1,
                name=f"void kernel_{i % 3}<float>(float*)",
            )
        b.runtime(80_000, 95_000, pid=pid, corr=50, name="cudaDeviceSynchronize_v3020")
        b.runtime(96_000, 96_100, pid=pid, corr=51, name="cudaEventQuery_v3020")
    b.memcpy(30_000, 40_000, bytes=1 << 20, copy_kind=1, device=0)
    b.nvtx(200_000, None, text="unended")
    return b.write(path)


def report_json(path: Path) -> dict[str, Any]:
    """The document exactly as the JSON writer puts it on disk."""
    return json.loads(json_writer.render(explain(path)))  # type: ignore[no-any-return]


# Keys ending in _ns that are averages, not times on the trace clock (documented as numbers).
FRACTIONAL_NS = frozenset({"/metrics/timeline/bin_ns"})


def walk(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for k, v in node.items():
            yield f"{path}/{k}", v
            yield from walk(v, f"{path}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, f"{path}/{i}")


def assert_valid(doc: dict[str, Any]) -> None:
    problems = errors(doc)
    assert not problems, "\n".join(problems[:20])
    # JSON Schema's "integer" accepts 5.0; the contract says integer nanoseconds.
    floats = [
        p
        for p, v in walk(doc)
        if p.endswith("_ns") and p not in FRACTIONAL_NS and not (
            v is None or type(v) is int or (type(v) is list and all(type(x) is int for x in v))
        )
    ]
    assert not floats, f"non-integer *_ns values: {floats[:10]}"


def test_schema_is_valid_draft_2020_12() -> None:
    schema = load_report_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert set(schema["properties"]["metrics"]["properties"]) == set(fragment_ids())


def test_loader_picks_up_every_fragment_file() -> None:
    on_disk = sorted(p.stem for p in (SCHEMA_DIR / "metrics").glob("*.json"))
    assert fragment_ids() == on_disk
    assert set(CORE_METRICS) <= set(on_disk)


@pytest.mark.parametrize("metric_id", fragment_ids())
def test_fragment_is_a_described_object_schema(metric_id: str) -> None:
    frag = load_fragment(metric_id)
    jsonschema.Draft202012Validator.check_schema(frag)
    assert frag.get("type") == "object" and isinstance(frag.get("properties"), dict)
    assert not {"status", "notes", "reason"} & set(frag["properties"]), (
        "the loader adds status/notes"
    )
    assert set(frag.get("required", [])) <= set(frag["properties"])
    undocumented = [
        k for k, v in frag["properties"].items() if "description" not in v and "$ref" not in v
    ]
    assert not undocumented, f"{metric_id}: keys without a description: {undocumented}"


@pytest.mark.parametrize("metric_id", CORE_METRICS)
def test_core_fragment_is_closed_and_complete(metric_id: str) -> None:
    """Core metrics: every key required and no undocumented key allowed, at every level."""
    frag = load_fragment(metric_id)
    objects = [frag, *frag.get("$defs", {}).values()]
    objects += [
        v
        for o in list(objects)
        for v in o.get("properties", {}).values()
        if v.get("type") == "object"
    ]
    for obj in objects:
        if obj.get("type") != "object":
            continue
        assert obj.get("additionalProperties") is False, obj
        assert set(obj["required"]) == set(obj["properties"]), obj


@pytest.mark.parametrize("version", GENERATIONS)
def test_full_fixture_report_validates(tmp_path: Path, version: str) -> None:
    doc = report_json(full_trace(tmp_path / "full.sqlite", version))
    assert all(doc["metrics"][m]["status"] == "ok" for m in CORE_METRICS), {
        m: doc["metrics"][m].get("reason") for m in CORE_METRICS
    }
    assert_valid(doc)


@pytest.mark.parametrize("version", GENERATIONS)
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variant_report_validates(tmp_path: Path, name: str, version: str) -> None:
    doc = report_json(VARIANTS[name](tmp_path / f"{name}.sqlite", version))
    assert_valid(doc)
    assert set(doc["metrics"]) == {m.id for m in ALWAYS}


def test_per_layer_sync_stall_report_validates(tmp_path: Path) -> None:
    """The planted per-layer sync stalls (a copy and a synchronize in each of 32 layers, 4
    steps): their sync_wait time is a piece whose only source is layer_syncs."""
    doc = report_json(planted_story.layer_sync_stalls().write(tmp_path / "layers.sqlite"))
    hp = doc["metrics"]["host_patterns"]
    assert hp["layer_syncs"]["count"] == 4 * 32
    assert {tuple(p["sources"]) for p in hp["sync_wait_pieces"]} == {("layer_syncs",)}
    assert_valid(doc)


@pytest.mark.parametrize("trace", nsys_trace_files(), ids=lambda p: p.stem)
def test_real_trace_report_validates(trace: Path) -> None:
    assert_valid(report_json(trace))


def test_real_traces_present_or_skip_reason() -> None:
    if not nsys_trace_files():
        pytest.skip("shared real traces not found beside the repository (../shared/traces/nsys)")


@pytest.fixture(scope="module")
def good_doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A valid report; metrics still lacking a fragment are left out here (another test
    reports them), so each breakage below is the only thing wrong with its document."""
    doc = report_json(full_trace(tmp_path_factory.mktemp("doc") / "t.sqlite", "2024.6"))
    known = set(fragment_ids())
    doc["metrics"] = {k: v for k, v in doc["metrics"].items() if k in known}
    return doc


def _set(doc: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    node: Any = doc
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node[k]
    node[keys[-1]] = value


def _drop(doc: dict[str, Any], dotted: str) -> None:
    keys = dotted.split(".")
    node: Any = doc
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node[k]
    del node[keys[-1]]


BREAKAGES: dict[str, Callable[[dict[str, Any]], None]] = {
    "float ns": lambda d: _set(d, "metrics.top_kernels.total_kernel_ns", 1.5),
    "negative duration": lambda d: _set(d, "metrics.gpu_idle.devices.0.busy_ns", -1),
    "string count": lambda d: _set(d, "metrics.sync.blocking_calls", "3"),
    "missing kernel key": lambda d: _drop(d, "metrics.top_kernels.kernels.0.p99_ns"),
    "missing notes": lambda d: _drop(d, "metrics.gpu_idle.notes"),
    "unknown metric key": lambda d: _set(d, "metrics.gpu_idle.surprise", 1),
    "unknown metric": lambda d: _set(d, "metrics.not_a_metric", {"status": "ok", "notes": []}),
    "bad status": lambda d: _set(d, "metrics.sync.status", "done"),
    "skipped without reason": lambda d: _set(d, "metrics.sync", {"status": "skipped"}),
    "skipped with data": lambda d: _set(
        d, "metrics.sync", {"status": "skipped", "reason": "x", "calls": []}
    ),
    "bad rule id": lambda d: _set(d, "findings", [{**d["findings"][0], "rule_id": "X1"}]),
    "bad severity": lambda d: _set(d, "findings", [{**d["findings"][0], "severity": "critical"}]),
    "unknown top-level key": lambda d: _set(d, "command_line", "python serve.py --token=..."),
    "unknown trace key": lambda d: _set(d, "trace.hostname", "node-17"),
    "wrong tool": lambda d: _set(d, "tool.name", "other"),
    "coverage above 1": lambda d: _set(d, "metrics.nvtx_attribution.coverage", 1.5),
    "bad histogram label": lambda d: _set(
        d, "metrics.gpu_idle.histograms.0.buckets.0.label", "<1us"
    ),
}


@pytest.mark.parametrize("name", sorted(BREAKAGES))
def test_schema_rejects(good_doc: dict[str, Any], name: str) -> None:
    assert good_doc["findings"], "the full fixture must produce at least one finding"
    assert_valid(good_doc)
    doc = copy.deepcopy(good_doc)
    BREAKAGES[name](doc)
    assert errors(doc), f"schema accepted a document with {name}"
    with pytest.raises(ValueError, match="does not match its schema"):
        validate(doc)


def test_skipped_form_is_accepted(good_doc: dict[str, Any]) -> None:
    doc = copy.deepcopy(good_doc)
    for mid in doc["metrics"]:
        doc["metrics"][mid] = {"status": "skipped", "reason": "not measured in this test"}
    assert errors(doc) == []


def test_runtime_never_imports_jsonschema(tmp_path: Path) -> None:
    trace = full_trace(tmp_path / "t.sqlite", "2024.6")
    code = (
        "import sys\n"
        "from nsys_llm_explainer.cli import run\n"
        "import nsys_llm_explainer.schema\n"
        f"rc = run([{str(trace)!r}, '--out', {str(tmp_path / 'out')!r}, '--quiet'])\n"
        "assert rc == 0, rc\n"
        "assert 'jsonschema' not in sys.modules, 'jsonschema imported at runtime'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
