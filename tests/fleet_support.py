"""Helpers shared by the fleet tests: generated rank sets, the schema, output comparison."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.fleet_synth import FleetConfig, generate

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
