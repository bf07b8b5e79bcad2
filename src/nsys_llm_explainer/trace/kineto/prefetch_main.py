"""The prefetch helper's side (see prefetch.py): read and collect the trace's events, write
them pickled to `out`. A forked helper calls serve(); a fresh interpreter runs main(), which
reads the path on stdin and exits 0, or 1 on any failure (the parent then reads the trace
itself and reports what went wrong)."""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path
from typing import IO


def serve(path: Path, out: IO[bytes]) -> None:
    from nsys_llm_explainer.trace.kineto.collect import read_events

    data = pickle.dumps(read_events(path), protocol=pickle.HIGHEST_PROTOCOL)
    out.write(data)
    out.flush()


def main() -> None:
    try:
        request = json.loads(sys.stdin.readline())
        serve(Path(str(request["path"])), sys.stdout.buffer)
    except BaseException:  # noqa: BLE001 - any failure: the parent reads the trace itself
        sys.exit(1)


if __name__ == "__main__":
    main()
