"""Work queued before the capture (the "carried" bucket): kernels the capture saw run but
whose launch it did not record because the launch came before the capture began.

A kernel is carried when its launch call is not in the capture (no API call with its
(process, correlation id)) and it runs, in its stream's order, before the first kernel of
that stream whose launch the capture holds: a stream runs its work in launch order, so such
a kernel was launched before any launch the capture recorded on that stream. A stream with
no recorded launch at all uses the first recorded launch's kernel on the same process and
device. Kernels without a launch that run after that point are not carried: their launch
records are missing (a filtered or sampled trace), which NLE202 reports. A process whose
capture holds no launch call at all (API tracing off) has no carried kernels: nothing tells
what came before the capture.

Typical sources: the previous step's kernels drained by the captured step's leading
synchronize (a PyTorch profiler window opened mid-loop), or the host's lead over the GPU at
the start of a window cut from a longer capture (Nsight Systems --delay/--duration).

Carried work counts in the window's busy and idle figures (the GPU ran it there), and in no
step, iteration or per-step figure: steps, step work, critical path, what-if, MFU, the
serving view and diff leave it out.
"""

from __future__ import annotations

import numpy as np

from nsys_llm_explainer.analysis import intervals
from nsys_llm_explainer.analysis.groups import as_mask, group_codes, sparse_rows
from nsys_llm_explainer.analysis.join import kernel_launch_index
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.trace.data import TraceData

KEY = "carried"
_NEVER = np.iinfo(np.int64).max


@frozen
class Carried:
    marked: np.ndarray  # the carried kernels, as groups.sparse_rows keeps a mask
    rows_total: int  # kernels in the trace
    kernels: int
    kernel_ns: int  # summed kernel time
    busy_ns: int  # union of the carried kernels' intervals (all devices)
    end_ns: int | None  # when the last carried kernel ended
    devices: tuple[int, ...]

    @property
    def mask(self) -> np.ndarray:
        """Per kernel: carried (a new array)."""
        return as_mask(self.marked, self.rows_total)

    def to_json(self) -> dict[str, object]:
        return {"kernels": self.kernels, "kernel_ns": self.kernel_ns, "busy_ns": self.busy_ns,
                "end_ns": self.end_ns, "devices": list(self.devices)}


def _first_launched(group: np.ndarray, ngroups: int, start: np.ndarray, launched: np.ndarray) -> np.ndarray:
    """Per group: the earliest start of a kernel whose launch is recorded (_NEVER: none)."""
    first = np.full(ngroups, _NEVER, dtype=np.int64)
    np.minimum.at(first, group[launched], start[launched])
    return first


def _mask(data: TraceData) -> np.ndarray:
    k = data.kernels()
    n = len(k)
    if n == 0:
        return np.zeros(0, dtype=bool)
    launch = kernel_launch_index(data)
    launched = launch >= 0
    if launched.all() or not launched.any():
        return np.zeros(n, dtype=bool)
    start = k.start.astype(np.int64, copy=False)
    stream_code, _ = group_codes(k.pid, k.device, k.stream)
    device_code, _ = group_codes(k.pid, k.device)
    by_stream = _first_launched(stream_code, int(stream_code.max()) + 1, start, launched)[stream_code]
    by_device = _first_launched(device_code, int(device_code.max()) + 1, start, launched)[device_code]
    process_code, _ = group_codes(k.pid)
    traced = np.zeros(int(process_code.max()) + 1, dtype=bool)
    traced[process_code[launched]] = True
    bound = np.where(by_stream < _NEVER, by_stream, by_device)
    return ~launched & (start < bound) & traced[process_code]


_NONE = np.empty(0, dtype=np.int64)


def carried(data: TraceData) -> Carried:
    """The carried kernels of the trace (cached)."""

    def build() -> Carried:
        k = data.kernels()
        mask = _mask(data)
        if not mask.any():
            return Carried(_NONE, len(mask), 0, 0, 0, None, ())
        s, e = k.start[mask], k.end[mask]
        return Carried(sparse_rows(mask), len(mask), int(mask.sum()), int(k.dur[mask].sum()),
                       int(intervals.union_length(s, e)), int(e.max()),
                       tuple(int(d) for d in np.unique(k.device[mask]).tolist()))

    return data.cached(KEY, build)
