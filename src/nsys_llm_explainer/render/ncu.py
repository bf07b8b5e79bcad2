"""The files of `nsys-llm-explain ncu`: ncu.md, ncu.json (schema/ncu.schema.json), ncu.csv
and ncu_roofline.svg, from Nsight Compute results (ncu/)."""

from __future__ import annotations

import functools
import json
import math
from typing import Any

import jinja2
import pandas as pd

from nsys_llm_explainer.about import TOOL_NAME, __version__
from nsys_llm_explainer.kernels.labels import Labels
from nsys_llm_explainer.ncu import LAUNCH_COLUMNS
from nsys_llm_explainer.ncu.results import NcuDocument, Results, document, launch_rows
from nsys_llm_explainer.render import templates
from nsys_llm_explainer.render.csv_writer import render_frame
from nsys_llm_explainer.render.svg import plot_files
from nsys_llm_explainer.render.svg.roofline import build_ncu

MD_NAME, JSON_NAME, CSV_NAME = "ncu.md", "ncu.json", "ncu.csv"
OWN = (MD_NAME, JSON_NAME, CSV_NAME, "ncu_roofline.svg")


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """ncu.md's environment: report.md's filters (render/templates.py NCU_MD)."""
    return templates.markdown_environment(templates.NCU_MD)


def files(results: Results, top_n: int = 20) -> dict[str, str]:
    """File name -> text."""
    doc: NcuDocument = _finite(document(results, {"name": TOOL_NAME, "version": __version__}))
    labels = Labels(launch["kernel"] for launch in doc["launches"])
    plot = build_ncu(doc["launches"], labels)
    out: dict[str, str] = {}
    view = None
    if plot is not None:
        svg = plot_files([plot])
        out["ncu_roofline.svg"] = next(iter(svg.values()))
        view = {"title": plot.title, "path": "ncu_roofline.svg", "summary": plot.summary}
    out[MD_NAME] = environment().get_template("ncu.md.j2").render(doc=doc, top_n=top_n, kernel_labels=labels, plot=view)
    out[JSON_NAME] = json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    out[CSV_NAME] = render_frame(pd.DataFrame(launch_rows(doc["launches"]), columns=list(LAUNCH_COLUMNS)))
    return out


__all__ = ["JSON_NAME", "MD_NAME", "OWN", "files"]
