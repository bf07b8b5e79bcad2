"""The load helper's side (see trace/helper.py): read one request on stdin, load each
requested table with TraceData, write the columns to stdout (trace/wire.py), exit."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import IO

from nsys_llm_explainer.trace.nsys import wire
from nsys_llm_explainer.trace.nsys.helper import HELPER_KEYS
from nsys_llm_explainer.trace.nsys.load import NsysTraceData
from nsys_llm_explainer.trace.nsys.open import reopen
from nsys_llm_explainer.trace.nsys.probe import probe


def serve(uri: str, keys: list[str], out: IO[bytes]) -> None:
    conn = reopen(uri, Path("trace"))
    try:
        data = NsysTraceData(conn, probe(conn))
        for key in keys:
            if key not in HELPER_KEYS:
                wire.write_header(out, {"type": "failed", "key": key, "why": "not a helper key"})
                continue
            data.progress = lambda _label, rows, key=key: wire.write_header(
                out, {"type": "progress", "key": key, "rows": rows}
            )
            before = set(data.cache_keys())
            warned, counted = len(data.warnings), set(data.row_counts)
            missing = set(data.strings.missing)
            try:
                getattr(data, key)()
                entries = {k: data.cached_value(k) for k in data.cache_keys() if k not in before}
                wire.write_loaded(
                    out, key, entries, data.warnings[warned:],
                    {t: n for t, n in data.row_counts.items() if t not in counted},
                    sorted(data.strings.missing - missing),
                )
            except Exception as exc:  # noqa: BLE001 - the parent loads this table itself
                wire.write_header(out, {"type": "failed", "key": key, "why": type(exc).__name__})
            out.flush()
            data.release(*(k for k in data.cache_keys() if k not in before))
    finally:
        conn.close()


def main() -> None:
    request = json.loads(sys.stdin.readline())
    serve(str(request["uri"]), [str(k) for k in request["keys"]], sys.stdout.buffer)


if __name__ == "__main__":
    main()
