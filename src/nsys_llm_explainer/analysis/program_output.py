"""How the captured program ended, read from its own output (Nsight Systems keeps the
stdout and stderr of a program it launched in ProcessStreams).

Each line is classified once, the first rule that matches:

- profiler: the profiler's own libraries failed to load or attach (PROFILER_LINE: the
  Nsight Systems injection libraries, CUPTI, "symbol lookup error" on them). The program
  could not run under the profiler; nothing it did was captured.
- warning: a warning (`UserWarning: ...`, `Warning: ...`, `[W ...]`): never decisive, even
  when it mentions an error ("... will raise an error in a future release").
- killed: the process ended on a signal or was killed ("Killed", "Segmentation fault",
  "Aborted (core dumped)", "terminate called ...", SIGKILL/SIGSEGV/SIGABRT ...).
- error: an exception or an error message (a Python exception line `FooError: ...`,
  "CUDA error: ...", "error: ...", "ERROR ...", "fatal", "failed to ...", "out of memory",
  "No such file or directory").

The decisive line, in order: a profiler line; the exception line that closes the last Python
traceback; the last "killed" line; the last error line of stderr, then of stdout. The line
that follows it is kept as context when it is indented (a message continued on the next
line: "  Missing: inputs_train_stream.bin").

Everything quoted is scrubbed (scrub()): paths are cut to their file name, URLs, e-mail
addresses, IP addresses and user@host pairs are replaced, `NAME=value` assignments keep the
name only, and long token-like strings are replaced: nothing from the user's environment or
file system is echoed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nsys_llm_explainer.trace.data import StreamText

MAX_LINE_CHARS = 200
KINDS = ("profiler", "killed", "error")
__all__ = ["KINDS", "Ending", "StreamText", "classify", "ending", "lines_of", "scrub"]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_RANK_PREFIX = re.compile(r"^\s*\[(rank|RANK)\s*\d+\]\s*:?\s*")
PROFILER_LINE = re.compile(
    r"libToolsInjection\w*|ToolsInjection|libnvtx3?interop|nsys[-_ ]?(launcher|cli)|quadd_|"
    r"(libcupti\S*|\bCUPTI)\W.*\b(error|fail|undefined|cannot|unable)|"
    r"\b(error|fail\w*|undefined|cannot|unable)\b.*\b(libcupti\S*|injection librar\w*)|"
    r"CUPTI_ERROR_\w+|[Ii]njection (library|failed|error)",
)
WARNING_LINE = re.compile(
    r"^\s*(\S+\.)?\w*Warning\b|^\s*(WARNING|Warning|warning)\b|^\s*\[W[ \]]|^\s*W\d{4} |warnings\.warn"
)
KILLED_LINE = re.compile(
    r"^\s*Killed\b|Segmentation fault|core dumped|^\s*Aborted\b|Bus error|Floating point exception|"
    r"Illegal instruction|terminate called|\bSIG(KILL|SEGV|ABRT|TERM|BUS|FPE|ILL)\b|"
    r"killed by signal|received signal|exit(ed)? (with )?(code|status) (137|139|134|-9|-11|-6)\b|"
    r"\bOOM[- ]?kill",
    re.IGNORECASE,
)
EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*\.)?[A-Z]\w*(Error|Exception|Interrupt|Exit|Failure)\b(:.*)?$")
ERROR_LINE = re.compile(
    r"\bERROR\b|\bFATAL\b|\b[Ff]atal( error)?\b|\b[Ee]rror\s*:|\b[Ee]rror\b.*\b(occurred|code|raised)\b|"
    r"^\s*[Ee]rror\b|\b\w+(Error|Exception)\s*:|\b[Ff]ailed to\b|\bout of memory\b|OutOfMemory|"
    r"No such file or directory|\bnot found!|\bcannot (open|find|load|allocate)\b|\bAssertion .* failed\b"
)
TRACEBACK = re.compile(r"^\s*Traceback \(most recent call last\):")

# Scrubbing (module docstring), applied in this order.
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://\S+")
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(\.[\w-]+)+\b")
_USER_HOST = re.compile(r"\b[\w.-]+@[\w.-]+\b")
_IPV4 = re.compile(r"\b\d{1,3}(\.\d{1,3}){3}(:\d+)?\b")
_ASSIGN = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|'[^']*'|\S+)")
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:~|\.{1,2})?(?:[\\/][^\s\\/'\"`:;,()\[\]{}<>]+)+|"
                   r"\b[^\s\\/'\"`:;,()\[\]{}<>=]+(?:[\\/][^\s\\/'\"`:;,()\[\]{}<>]+)+")
_TOKEN = re.compile(r"\b(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{32,}\b|"
                    r"\b(hf|sk|ghp|gho|xox[abp]|AKIA)[_-][A-Za-z0-9_-]{8,}")


@dataclass(frozen=True)
class Ending:
    """The decisive line of a program's output and what it says."""

    kind: str  # one of KINDS
    line: str  # scrubbed
    stream: str
    pid: int
    context: str | None = None  # the indented line after it, scrubbed


def _basename(match: re.Match[str]) -> str:
    text = match.group(0).rstrip("\\/")
    name = re.split(r"[\\/]", text)[-1]
    return name or "<path>"


def scrub(text: str) -> str:
    """A line safe to quote: see the module docstring."""
    line = _ANSI.sub("", text).replace("\t", " ").strip()
    line = _URL.sub("<url>", line)
    line = _EMAIL.sub("<email>", line)
    line = _USER_HOST.sub("<user@host>", line)
    line = _IPV4.sub("<address>", line)
    line = _ASSIGN.sub(lambda m: f"{m.group(1)}=<redacted>", line)
    line = _PATH.sub(_basename, line)
    line = _TOKEN.sub("<redacted>", line)
    line = " ".join(line.split())
    if len(line) > MAX_LINE_CHARS:
        line = line[: MAX_LINE_CHARS - 3] + "..."
    return line


def lines_of(text: str) -> list[str]:
    """The stream's lines: carriage returns (progress bars) end lines too; ANSI codes and a
    `[rankN]:` prefix are removed."""
    out = []
    for raw in re.split(r"\r\n|\r|\n", text):
        line = _RANK_PREFIX.sub("", _ANSI.sub("", raw)).rstrip()
        if line.strip():
            out.append(line)
    return out


def classify(line: str) -> str | None:
    """'profiler', 'warning', 'killed', 'error' or None (module docstring)."""
    if PROFILER_LINE.search(line):
        return "profiler"
    if WARNING_LINE.search(line):
        return "warning"
    if KILLED_LINE.search(line):
        return "killed"
    if EXCEPTION_LINE.match(line.strip()) or ERROR_LINE.search(line):
        return "error"
    return None


def _context(lines: list[str], i: int) -> str | None:
    if i + 1 < len(lines) and lines[i + 1][:1] in (" ", "\t") and classify(lines[i + 1]) != "warning":
        return scrub(lines[i + 1]) or None
    return None


def _traceback_end(lines: list[str]) -> int | None:
    """Index of the exception line closing the last traceback, or None."""
    starts = [i for i, ln in enumerate(lines) if TRACEBACK.match(ln)]
    if not starts:
        return None
    for j in range(starts[-1] + 1, len(lines)):
        stripped = lines[j].strip()
        if lines[j][:1] not in (" ", "\t") and EXCEPTION_LINE.match(stripped):
            return j
    return None


def ending(streams: list[StreamText]) -> Ending | None:
    """The decisive line of the captured output (module docstring), or None when no line
    says the program or the profiler failed."""
    found: dict[str, list[tuple[int, StreamText, list[str], int]]] = {k: [] for k in KINDS}
    tracebacks: list[tuple[StreamText, list[str], int]] = []
    order = sorted(streams, key=lambda s: (s.stream != "stderr", s.pid))
    for rank, s in enumerate(order):
        lines = lines_of(s.text)
        end = _traceback_end(lines)
        if end is not None:
            tracebacks.append((s, lines, end))
        for i, line in enumerate(lines):
            kind = classify(line)
            if kind in found:
                found[kind].append((rank, s, lines, i))
    pick: tuple[str, StreamText, list[str], int] | None = None
    if found["profiler"]:
        _, s, lines, i = found["profiler"][0]
        pick = ("profiler", s, lines, i)
    elif tracebacks:
        s, lines, i = tracebacks[0]
        pick = ("killed" if classify(lines[i]) == "killed" else "error", s, lines, i)
    elif found["killed"]:
        _, s, lines, i = min(found["killed"], key=lambda t: (t[0], -t[3]))
        pick = ("killed", s, lines, i)
    elif found["error"]:
        _, s, lines, i = min(found["error"], key=lambda t: (t[0], -t[3]))
        pick = ("error", s, lines, i)
    if pick is None:
        return None
    kind, s, lines, i = pick
    return Ending(kind, scrub(lines[i]), s.stream, s.pid, _context(lines, i))
