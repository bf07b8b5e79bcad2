"""nsys-llm-explain: explain Nsight Systems SQLite exports and PyTorch profiler traces.

    from nsys_llm_explainer import explain
    report = explain("trace.sqlite")
    report.findings, report.table("kernels"), report.to_dict()
    report.write("out/", formats="md,json")

`explain`, `Options` and `Report` load on first use, so importing the package (the CLI
does, for --version) stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nsys_llm_explainer.about import TOOL_NAME, __version__

if TYPE_CHECKING:
    from nsys_llm_explainer.api import Report, explain
    from nsys_llm_explainer.options import Options

_LAZY = {
    "explain": ("nsys_llm_explainer.api", "explain"),
    "Report": ("nsys_llm_explainer.api", "Report"),
    "Options": ("nsys_llm_explainer.options", "Options"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["TOOL_NAME", "Options", "Report", "__version__", "explain"]
