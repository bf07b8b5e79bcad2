"""Helpers shared by the fleet tests: generated rank sets, the schema, output comparison."""

from __future__ import annotations

import json
import types
import typing
from importlib import resources
from pathlib import Path
from typing import Any, NotRequired

import numpy as np

from benchmarks.fleet_synth import FleetConfig, generate
from nsys_llm_explainer.model import JsonValue

TIMING_FILE = "fleet_timing.json"


def make_set(root: Path, **kw: Any) -> tuple[Path, dict[str, Any]]:
    kw = {"ranks": 8, "steps": 12, "layers": 3, **kw}
    kw.setdefault("straggler", min(3, kw["ranks"] - 1))
    cfg = FleetConfig(**kw)
    return root, generate(cfg, root)


def fleet_schema() -> dict[str, Any]:
    text = resources.files("nsys_llm_explainer.schema").joinpath("fleet.schema.json").read_text("utf-8")
    return json.loads(text)  # type: ignore[no-any-return]


def schema_errors(doc: Any) -> list[str]:
    import jsonschema

    v = jsonschema.Draft202012Validator(fleet_schema())
    return sorted(f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in v.iter_errors(doc))


def output_files(out: Path) -> dict[str, bytes]:
    """Every output file except the timing file, by relative path."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and p.name != TIMING_FILE}


def truth_waits(truth: dict[str, Any], tie_ns: int) -> dict[str, np.ndarray]:
    """A deliberately plain reference: per collective skew, last rank and wait, per rank the
    wait it caused, from the generator's own arrival times."""
    a = np.asarray(truth["collective_arrival_ns"], dtype=np.int64)
    skew = a.max(axis=1) - a.min(axis=1)
    last = a.argmax(axis=1)
    wait = (a.max(axis=1)[:, None] - a).sum(axis=1)
    caused = np.zeros(a.shape[1], dtype=np.int64)
    for c in range(len(a)):
        if skew[c] >= tie_ns:
            caused[last[c]] += wait[c]
    return {"skew": skew, "last": last, "wait": wait, "caused": caused}


def shape_errors(value: Any, hint: Any, where: str = "$") -> list[str]:
    """Where `value` (a fleet document as built, before JSON) does not have the shape its type
    declares: a TypedDict's required keys missing or undeclared keys present, recursively
    through lists, dicts and optional values. Scalars are not checked (numpy or Python)."""
    origin = typing.get_origin(hint)
    if typing.is_typeddict(hint):
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not an object ({hint.__name__})"]
        hints = typing.get_type_hints(hint, localns={"JsonValue": JsonValue}, include_extras=True)
        required = {k for k, h in hints.items() if typing.get_origin(h) is not NotRequired}
        errors = [f"{where}: lacks {k!r} ({hint.__name__})" for k in sorted(required - set(value))]
        errors += [f"{where}: undeclared key {k!r} ({hint.__name__})" for k in sorted(set(value) - set(hints))]
        for k in set(value) & set(hints):
            h = hints[k]
            errors += shape_errors(value[k], typing.get_args(h)[0] if typing.get_origin(h) is NotRequired else h,
                                   f"{where}.{k}")
        return errors
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        if value is None and len(options) < len(typing.get_args(hint)):
            return []
        found = [shape_errors(value, a, where) for a in options]
        return [] if any(not f for f in found) else found[0]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {type(value).__name__}, not a list"]
        return [e for i, v in enumerate(value) for e in shape_errors(v, typing.get_args(hint)[0], f"{where}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not an object"]
        return [e for k, v in value.items() for e in shape_errors(v, typing.get_args(hint)[1], f"{where}.{k}")]
    return []
