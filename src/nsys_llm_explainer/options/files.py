"""Small JSON files named by options (--phase-map, --kernel-categories, --gpu-peaks, --model)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nsys_llm_explainer.errors import UsageError


def read_json_file(path: str | Path, what: str, max_bytes: int | None = None) -> Any:
    """The parsed JSON of `path`; a one-line UsageError naming `what` when it cannot be used."""
    p = Path(path)
    try:
        if max_bytes is not None and p.stat().st_size > max_bytes:
            raise UsageError(f"{p}: {what} is larger than {max_bytes} bytes")
        return json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{p}: cannot read {what} ({exc.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{p}: {what} is not valid JSON ({exc})") from None
