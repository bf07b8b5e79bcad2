"""The host side of the graph: each launching thread's CUDA calls in order, per block.

A thread's calls form a chain: a call starts when the previous one returned plus the host
work between them (the gap), and takes its own duration. Calls nested in another call of
the same thread (a driver call inside a runtime call, a call recorded twice) belong to the
outermost one. Which calls wait for the device, and for what, is decided here by API name
(CUDA runtime/driver and HIP):

- device synchronize: everything the process queued on its device(s) before the call;
- stream synchronize: everything queued before on the stream its synchronization record
  names (Nsight Systems CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, PyTorch profiler cuda_sync);
- event synchronize: the work before the event's record, when the trace names its stream;
- a copy call that blocks (synchronous cudaMemcpy*, or an async copy to or from pageable
  memory): its own copy.
A stream or event wait whose stream the trace does not name is not guessed: when the process
queued work on a single stream of the device it is that stream, otherwise the call keeps its
measured duration and is counted as an unrecovered edge.
"""

from __future__ import annotations

import re

import numpy as np

from nsys_llm_explainer.analysis.join import launch_api_mask
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.graph.scan import Blocks, carried_in, rows_in_windows, segmented_cummax
from nsys_llm_explainer.trace.columns import factorize

# What a call is, for the replay and for the critical path's composition.
OTHER, LAUNCH, COPY, MEMSET, SYNC, EVENT = 0, 1, 2, 3, 4, 5
CALL_KINDS = ("runtime", "launch", "copy", "memset", "sync", "event")
CALL_FOR_TASK = {"memcpy": 2, "memset": 3, "graph_execs": 1}  # the call kind that issues each
# What a blocking call waits for.
WAIT_NONE, WAIT_DEVICE, WAIT_STREAM, WAIT_EVENT, WAIT_OWN_COPY = 0, 1, 2, 3, 4

_DEVICE_SYNC = re.compile(r"^(cudaDeviceSynchronize|cuCtxSynchronize|hipDeviceSynchronize)")
_STREAM_SYNC = re.compile(r"^(cu(da)?StreamSynchronize|hipStreamSynchronize)")
_EVENT_SYNC = re.compile(r"^(cu(da)?EventSynchronize|hipEventSynchronize)")
_COPY = re.compile(r"^(cu(da)?|hip)Memcpy", re.IGNORECASE)
_MEMSET = re.compile(r"^(cu(da)?|hip)Memset", re.IGNORECASE)
_EVENT = re.compile(r"^(cu(da)?|hip)(EventRecord|StreamWaitEvent|EventQuery|StreamQuery)")


def api_tables(names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per runtime API code: its call kind, and what it waits for if it blocks by itself."""
    launch = launch_api_mask(names)
    kind = np.zeros(max(len(names), 1), dtype=np.int64)
    wait = np.zeros(max(len(names), 1), dtype=np.int64)
    for i, n in enumerate(names):
        if launch[i]:
            kind[i] = LAUNCH
        elif _COPY.match(n):
            kind[i] = COPY
            if "async" not in n.lower():  # cudaMemcpy, cudaMemcpy2D, cuMemcpyDtoH ...: synchronous
                wait[i] = WAIT_OWN_COPY
        elif _MEMSET.match(n):
            kind[i] = MEMSET
        elif _DEVICE_SYNC.match(n):
            kind[i], wait[i] = SYNC, WAIT_DEVICE
        elif _STREAM_SYNC.match(n):
            kind[i], wait[i] = SYNC, WAIT_STREAM
        elif _EVENT_SYNC.match(n):
            kind[i], wait[i] = SYNC, WAIT_EVENT
        elif _EVENT.match(n):
            kind[i] = EVENT
    return kind, wait


@frozen
class HostNodes:
    """Outermost calls of the active threads, sorted by (block, thread, start)."""

    row: np.ndarray  # runtime row of the outermost call
    block: np.ndarray
    thread: np.ndarray  # dense thread code within the selection
    start: np.ndarray  # absolute
    end: np.ndarray
    member_row: np.ndarray  # every selected runtime row (nested calls included)
    member_node: np.ndarray  # its node
    fixed: np.ndarray  # a call that began before the block (its times are kept as measured)


def host_nodes(
    start: np.ndarray, end: np.ndarray, pid: np.ndarray, tkey: np.ndarray,
    blocks: Blocks, active: np.ndarray, blocking: np.ndarray,
) -> HostNodes:
    """Calls of the (block, thread key) pairs in `active` (two columns) inside each block,
    nested calls merged into their outermost call. A call of such a thread that began before
    the block and is still running when it begins opens the thread's chain with its measured
    times; a block no thread launches anything in gets the threads blocked in a call
    (`blocking`: per runtime row) across its start."""
    rows, block = rows_in_windows(pid, start, blocks)
    span_rows, span_block = carried_in(pid, start, end, blocks)
    idle = np.ones(len(blocks), bool)
    idle[active[:, 0]] = False
    extra = idle[span_block] & blocking[span_rows]
    if extra.any():
        active = np.concatenate([active, np.stack([span_block[extra], tkey[span_rows[extra]]], axis=1)])
    n_in = len(rows)
    rows, block = np.concatenate([rows, span_rows]), np.concatenate([block, span_block])
    spanning = np.r_[np.zeros(n_in, bool), np.ones(len(span_rows), bool)]
    if len(rows) == 0 or len(active) == 0:
        z = np.empty(0, np.int64)
        return HostNodes(z, z, z, z, z, z, z, np.zeros(0, bool))
    codes, uniq = factorize(np.concatenate([tkey[rows], active[:, 1]]))
    tcode, acode = codes[: len(rows)], codes[len(rows):]
    nthreads = len(uniq)
    keep = np.isin(block * nthreads + tcode, active[:, 0] * nthreads + acode)
    rows, block, tcode, spanning = rows[keep], block[keep], tcode[keep], spanning[keep]
    order = np.lexsort((-end[rows], start[rows], tcode, block))
    rows, block, tcode, spanning = rows[order], block[order], tcode[order], spanning[order]
    origin = blocks.start[block]
    s, e = start[rows] - origin, end[rows] - origin  # block-relative: small enough to pack
    chain = block * nthreads + tcode
    new_chain = np.r_[True, chain[1:] != chain[:-1]]
    # A call that starts before everything earlier on its thread has returned is nested.
    reach = _running_max_within(e, new_chain)
    top = new_chain | (s >= np.r_[np.iinfo(np.int64).min, reach[:-1]])
    group = np.cumsum(top) - 1
    first = np.flatnonzero(top)
    gend = np.maximum.reduceat(e, first) if len(first) else e[:0]
    o = origin[first]
    return HostNodes(rows[first], block[first], tcode[first], s[first] + o, gend + o, rows, group,
                     spanning[first])


def _running_max_within(values: np.ndarray, first: np.ndarray) -> np.ndarray:
    return segmented_cummax(values, first)
