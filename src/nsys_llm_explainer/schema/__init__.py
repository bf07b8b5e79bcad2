"""The JSON Schema of report.json, assembled from the top-level schema and one fragment per metric.

report.schema.json describes everything except the metric payloads. Each file
schema/metrics/<metric_id>.json describes that metric's data when it ran (an object schema);
load_report_schema() inserts it as `metrics.<metric_id>`, adding the keys every metric
carries: `status` ("ok"), `notes` (limitations, plain text) and `left_out` (rows of long
lists that only the CSV tables hold, render/json_writer.py summarize), or the skipped form
{status: "skipped", reason}.

jsonschema is a test dependency only: the package never imports it at module level, and
validate() says so when it is missing.
"""

from __future__ import annotations

import copy
import functools
import json
from importlib import resources
from typing import Any

from nsys_llm_explainer.model import JsonObject, JsonValue

SCHEMA_FILE = "report.schema.json"
FRAGMENT_DIR = "metrics"
FRAGMENT_SUFFIX = ".json"
_OK_KEYS: JsonObject = {
    "status": {"const": "ok"},
    "notes": {
        "description": "Limitations of this metric's numbers on this trace (plain text).",
        "type": "array",
        "items": {"type": "string"},
    },
    "left_out": {
        "description": (
            "Lists of this metric cut short in report.json: list key -> {rows, csv}. Empty when "
            "every list is complete. The CSV table holds every row."
        ),
        "type": "object",
        "additionalProperties": {
            "type": "object",
            "required": ["rows", "csv"],
            "additionalProperties": False,
            "properties": {
                "rows": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Rows of the list not in report.json.",
                },
                "csv": {
                    "type": "string",
                    "pattern": "^tables/[a-z0-9_]+\\.csv$",
                    "description": "The CSV file, relative to the report directory, that holds every row.",
                },
            },
        },
    },
}


def _read_json(*parts: str) -> JsonObject:
    node = resources.files(__name__)
    for part in parts:
        node = node.joinpath(part)
    doc = json.loads(node.read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
        raise ValueError(f"schema file {'/'.join(parts)} does not hold a JSON object")
    return doc


def fragment_ids() -> list[str]:
    """Metric ids that have a schema fragment, sorted."""
    folder = resources.files(__name__).joinpath(FRAGMENT_DIR)
    if not folder.is_dir():
        return []
    return sorted(
        entry.name[: -len(FRAGMENT_SUFFIX)]
        for entry in folder.iterdir()
        if entry.is_file()
        and entry.name.endswith(FRAGMENT_SUFFIX)
        and not entry.name.startswith(".")
    )


def _object(node: JsonObject, key: str) -> JsonObject:
    """The object under `key` of a schema document; ValueError when it is not one."""
    value = node.get(key)
    if not isinstance(value, dict):
        raise ValueError(f"schema: {key!r} is not an object")
    return value


def load_fragment(metric_id: str) -> JsonObject:
    """The raw fragment of one metric (its data when status is "ok")."""
    return _read_json(FRAGMENT_DIR, metric_id + FRAGMENT_SUFFIX)


def ok_schema(metric_id: str, fragment: JsonObject, base_id: str) -> JsonObject:
    """The fragment with `status` and `notes` merged in, as its own schema resource.

    Giving it an `$id` keeps the fragment's local references ("#/$defs/...") pointing into
    the fragment rather than into the combined document.
    """
    out = copy.deepcopy(fragment)
    out.pop("$schema", None)
    out["$id"] = f"{base_id.rsplit('/', 1)[0]}/{FRAGMENT_DIR}/{metric_id}{FRAGMENT_SUFFIX}"
    props = out.get("properties")
    if out.get("type") != "object" or not isinstance(props, dict):
        raise ValueError(
            f"schema/metrics/{metric_id}.json must be an object schema with 'properties'"
        )
    out["properties"] = {**props, **copy.deepcopy(_OK_KEYS)}
    listed = out.get("required", [])
    required: list[JsonValue] = list(listed) if isinstance(listed, list) else []
    out["required"] = [*required, *(k for k in _OK_KEYS if k not in required)]
    return out


def load_report_schema() -> JsonObject:
    """The complete report.json schema, with every metric fragment inserted."""
    schema = _read_json(SCHEMA_FILE)
    base_id = str(schema["$id"])
    props = _object(_object(_object(schema, "properties"), "metrics"), "properties")
    for metric_id in fragment_ids():
        props[metric_id] = {
            "oneOf": [
                ok_schema(metric_id, load_fragment(metric_id), base_id),
                {"$ref": "#/$defs/skipped"},
            ]
        }
    return schema


def _inline_refs(node: JsonValue, defs: JsonObject, depth: int = 0) -> JsonValue:
    """Replace local "#/$defs/<name>" references by their targets.

    jsonschema resolves a $ref on every visit; on a report with tens of thousands of rows
    that dominates validation time (minutes instead of seconds). The schemas are not
    recursive, so inlining is exact.
    """
    if depth > 32:
        raise ValueError("schema $defs nest too deep (recursive reference?)")
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and set(node) <= {"$ref", "description"}:
            return _inline_refs(defs[ref[len("#/$defs/") :]], defs, depth + 1)
        own = node.get("$defs", {})
        local = (own if isinstance(own, dict) else {}) if "$id" in node else defs
        return {k: _inline_refs(v, local, depth) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inline_refs(v, defs, depth) for v in node]
    return node


@functools.lru_cache(maxsize=1)
def _validator() -> Any:
    try:
        import jsonschema
    except ImportError:  # pragma: no cover - exercised only without the test extras
        raise RuntimeError(
            "validating report.json needs the 'jsonschema' package: "
            "pip install 'nsys-llm-explain[test]'"
        ) from None
    schema = load_report_schema()
    cls = jsonschema.Draft202012Validator
    cls.check_schema(schema)
    return cls(_inline_refs(schema, {}))


def _flatten(err: Any) -> list[Any]:
    """Replace a oneOf failure on a metric by the errors of the branch its status picks."""
    if err.validator != "oneOf" or not err.context or not isinstance(err.instance, dict):
        return [err]
    branch = 0 if err.instance.get("status") == "ok" else 1
    picked = [e for e in err.context if e.schema_path and e.schema_path[0] == branch]
    return [leaf for e in picked for leaf in _flatten(e)] or [err]


def errors(doc: Any) -> list[str]:
    """Every way `doc` breaks the schema, as 'path: message' lines (empty when valid)."""
    validator = _validator()
    found = [leaf for err in validator.iter_errors(doc) for leaf in _flatten(err)]
    lines = []
    for err in found:
        where = "/".join(str(p) for p in err.absolute_path) or "(root)"
        lines.append(f"{where}: {err.message}")
    return sorted(lines)


def validate(doc: Any) -> None:
    """Raise ValueError listing every schema violation when `doc` is not a valid report."""
    problems = errors(doc)
    if problems:
        shown = "\n".join(problems[:20])
        more = f"\n... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise ValueError(f"report.json does not match its schema:\n{shown}{more}")


__all__ = ["errors", "fragment_ids", "load_fragment", "load_report_schema", "validate"]
