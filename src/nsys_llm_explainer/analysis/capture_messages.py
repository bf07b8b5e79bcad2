"""What the profiler's own messages (nsys DIAGNOSTIC_EVENT warnings and errors) say about the
GPU figures, by their wording. Each message gets one kind, the first that matches:

- cpu_sampling: about CPU sampling or CPU backtraces ("Unable to collect CPU kernel IP samples
  ... perf event paranoid level is 2", "Hardware event ... used to trigger sample
  collection"): most Linux hosts print these; they say nothing about the CUDA trace.
- version: the installed driver or CUDA/CUPTI version is not the one this Nsight Systems was
  built for ("Installed CUDA driver version (12.0) is not supported by this build ... CUDA
  trace will be collected using libraries for driver version 11.7"): the CUDA trace was
  collected through a fallback, so some activity may be missing or misattributed.
- events_missing: CUDA tracing did not start or events were lost ("CUDA profiling might have
  not been started correctly", dropped or lost events, full or overflowing buffers, data not
  flushed, "No CUDA events collected").
- no_events: a kind of event the capture asked for and found none of, other than CUDA ("No
  NVTX events collected. Does the process use NVTX?", OpenGL, OS runtime): a fact about the
  application, not a loss.
- other: anything else (shown, not judged).

events_may_be_missing is true for events_missing only; version warnings are reported as
concerning the CUDA trace but do not by themselves say that events are missing.
"""

from __future__ import annotations

import re

KINDS = ("cpu_sampling", "version", "events_missing", "no_events", "other")
CUDA_KINDS = ("version", "events_missing")  # the kinds that concern the GPU figures

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("cpu_sampling", re.compile(
        r"\bcpu\b.*\b(ip|sampl\w*|backtraces?)\b|perf[_ ]event|paranoid|backtrace|"
        r"\bip samples?\b|sampling period|sample collection|context switch", re.IGNORECASE)),
    ("version", re.compile(
        r"driver version|not supported by this build|libraries for driver|"
        r"\b(cupti|cuda|driver)\b.*\bversion\b.*\b(not supported|unsupported|mismatch|older|newer)|"
        r"unsupported (driver|gpu|device|cuda)", re.IGNORECASE)),
    ("events_missing", re.compile(
        r"not (been )?started correctly|not started correctly|dropp(ed|ing)|\blost\b|overflow|"
        r"buffers? (is |are |was |were )?(full|exhausted)|incomplete|truncat|"
        r"not (all|every)\b.*\b(flushed|collected|recorded)|(were|was|could) not (be )?(flushed|collected|recorded)|"
        r"fail(ed|ure)? to (flush|collect|enable|initiali[sz]e|inject|record)|"
        r"no cuda (events|activit|kernels|trace)|events? (may|might) be missing|missing events",
        re.IGNORECASE)),
    ("no_events", re.compile(r"^no \w+( \w+)? events collected", re.IGNORECASE)),
)


def kind_of(text: str) -> str:
    """The kind of one profiler message (module docstring)."""
    for kind, pattern in _PATTERNS:
        if pattern.search(text):
            return kind
    return "other"
