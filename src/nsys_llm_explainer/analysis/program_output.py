"""How the captured program ended, read from its own output (Nsight Systems keeps the
stdout and stderr of a program it launched in ProcessStreams).

Each line is classified once, the first rule that matches:

- profiler: the profiler's own libraries failed to load or attach (PROFILER_LINE: the
  Nsight Systems injection libraries, "symbol lookup error" on them). The program could not
  run under the profiler; nothing it did was captured.
- conflict: the program's own profiler or timer could not use CUPTI because Nsight Systems
  holds it (CONFLICT_LINE: a CUPTI_ERROR_* code, "multiple subscribers", "another profiler is
  already active", "CUPTI initialization failed", "no events were recorded"): the program
  runs, but its own measurements are empty. Decisive only when the program then fails (the failure is the
  profiling's, not the program's): outcome profiler_conflict.
- warning: a warning (`UserWarning: ...`, `FILE:12: FutureWarning: ...` with the source
  line Python prints under it, `Warning: ...`, `[W ...]`): never decisive, even when it
  mentions an error ("... will raise an error in a future release").
- interrupted: the run was stopped from outside (INTERRUPT_LINE: KeyboardInterrupt, SIGINT,
  SIGTERM, "Terminated", exit status 130 or 143): Ctrl-C, a job scheduler or the profiler's
  --duration limit ending the program.
- killed: the process ended on a fatal signal or was killed ("Killed", "Segmentation fault",
  "Aborted (core dumped)", "terminate called ...", SIGKILL/SIGSEGV/SIGABRT ...).
- error: an exception or an error message (a Python exception line `FooError: ...`,
  "CUDA error: ...", "error: ...", "ERROR ...", "fatal", "failed to ...", "out of memory",
  "No such file or directory").

Output that only warns is not a failure. A traceback is a warning, not a failure, when
Python says it was not fatal ("Exception ignored in ..." before it), when a warning line
introduces it (logging.warning(..., exc_info=True)), or when NumPy prints it under "A module
that was compiled using NumPy 1.x cannot be run in NumPy 2" (the import goes on without
NumPy support).

The decisive line, in order: a profiler line; the exception line that closes the last
(fatal) Python traceback; the last interrupted or killed line; the last error line of
stderr, then of stdout. The line that follows it is kept as context when it is indented (a
message continued on the next line: "  Missing: inputs_train_stream.bin"). A traceback also
says where the program was when it stopped: its innermost frame (`where`) and the functions
that led there (`stack`, outermost first).

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
MAX_STACK = 6  # functions kept from a traceback's stack (outermost first)
KINDS = ("profiler", "conflict", "interrupted", "killed", "error")
__all__ = ["KINDS", "Ending", "StreamText", "classify", "ending", "lines_of", "scrub"]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_RANK_PREFIX = re.compile(r"^\s*\[(rank|RANK)\s*\d+\]\s*:?\s*")
PROFILER_LINE = re.compile(
    r"libToolsInjection\w*|ToolsInjection|libnvtx3?interop|nsys[-_ ]?(launcher|cli)|quadd_|"
    r"\b(error|fail\w*|undefined|cannot|unable)\b.*\b(libcupti\S*|injection librar\w*)|"
    r"libcupti\S*\W.*\b(undefined symbol|cannot open|not found|no such file)|"
    r"[Ii]njection (library|failed|error)",
)
CONFLICT_LINE = re.compile(
    r"CUPTI_ERROR_\w+|multiple (cupti )?subscribers|"
    r"(another|other) (profil\w+|cupti \w+|tool)\b.*\b(active|running|attached|enabled|subscribed)|"
    r"\bcupti\w*\b.*\b(subscri\w+|already in use|busy|fail\w*)\b|profiler activities will be missing|"
    r"\b(no|0|zero) (cuda |gpu |kernel |device |profil\w+ )?(events?|activit\w+|kernels?) (were |was |have been )?"
    r"(recorded|collected|captured|profiled)\b",
    re.IGNORECASE,
)
WARNING_LINE = re.compile(
    r"^\s*(\S+:\d+:\s*)?(\S+\.)?\w*Warning\b|^\s*(WARNING|Warning|warning)\b|^\s*\[W[ \]\d]|^\s*W\d{4} |"
    r"warnings\.warn"
)
PY_WARNING = re.compile(r"^\S+:\d+: (\S+\.)?\w*Warning: ")  # warnings.showwarning's header
INTERRUPT_LINE = re.compile(
    r"^\s*(\S+\.)?KeyboardInterrupt\b|^\s*Terminated\b|\bSIG(INT|TERM)\b|Signals\.SIG(INT|TERM)\b|"
    r"(got|received|caught) signal:? (2|15)\b|\binterrupted by (the )?user\b|"
    r"exit(ed)? (with )?(code|status):? (130|143|-2|-15)\b",
    re.IGNORECASE,
)
KILLED_LINE = re.compile(
    r"^\s*Killed\b|Segmentation fault|core dumped|^\s*Aborted\b|Bus error|Floating point exception|"
    r"Illegal instruction|terminate called|\bSIG(KILL|SEGV|ABRT|BUS|FPE|ILL)\b|"
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
FRAME = re.compile(r'^\s*File "([^"]*)", line (\d+), in (\S.*?)\s*$')
# A logging warning that a traceback follows (logging.warning(..., exc_info=True)).
LOG_WARNING = re.compile(r"^\s*WARNING:[A-Za-z_][\w.]*:|\s-\s*WARNING\s*-\s|\|\s*WARNING\s*\|")
# Python says these tracebacks were not fatal (module docstring).
NOT_FATAL_BEFORE = re.compile(r"^\s*Exception ignored in\b|compiled using NumPy 1\.x cannot be run in")
NORMAL_EXIT = re.compile(r"^(\S+\.)?SystemExit(: *(0|None)?)?\s*$")

# Scrubbing (module docstring), applied in this order.
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://\S+")
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(\.[\w-]+)+\b")
_USER_HOST = re.compile(r"\b[\w.-]+@[\w.-]+\b")
_IPV4 = re.compile(r"\b\d{1,3}(\.\d{1,3}){3}(:\d+)?\b")
_ASSIGN = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|'[^']*'|\S+)")
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:~|\.{1,2})?(?:[\\/][^\s\\/'\"`:;,()\[\]{}<>]+)+|"
                   r"\b[^\s\\/'\"`:;,()\[\]{}<>=]+(?:[\\/][^\s\\/'\"`:;,()\[\]{}<>]+)+")
# Long mixed strings, and vendor-prefixed keys (hf_, sk-, ghp_ ...: a body of letters and digits
# with a capital or a digit, so that snake_case names such as hf_hub_download stay).
TOKEN = re.compile(r"\b(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{32,}\b|"
                   r"\b(hf|sk|ghp|gho|github_pat|xox[abp]|AKIA)[_-](?=[A-Za-z0-9-]*[0-9A-Z])[A-Za-z0-9-]{12,}")


@dataclass(frozen=True)
class Ending:
    """The decisive line of a program's output and what it says."""

    kind: str  # one of KINDS
    line: str  # scrubbed
    stream: str
    pid: int
    context: str | None = None  # the indented line after it, scrubbed
    where: str | None = None  # a traceback's innermost frame: "http_get (FILE:467)"
    stack: tuple[str, ...] = ()  # the traceback's functions, outermost first (at most MAX_STACK)
    conflict: str | None = None  # kind conflict: the line where the program's own profiler failed


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
    line = TOKEN.sub("<redacted>", line)
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
    """'profiler', 'conflict', 'warning', 'interrupted', 'killed', 'error' or None (module
    docstring)."""
    if PROFILER_LINE.search(line):
        return "profiler"
    if CONFLICT_LINE.search(line):
        return "conflict"
    if WARNING_LINE.search(line):
        return "warning"
    if INTERRUPT_LINE.search(line):
        return "interrupted"
    if KILLED_LINE.search(line):
        return "killed"
    if EXCEPTION_LINE.match(line.strip()) or ERROR_LINE.search(line):
        return "error"
    return None


def _context(lines: list[str], i: int) -> str | None:
    if i + 1 < len(lines) and lines[i + 1][:1] in (" ", "\t") and classify(lines[i + 1]) != "warning":
        return scrub(lines[i + 1]) or None
    return None


@dataclass(frozen=True)
class _Traceback:
    start: int  # the "Traceback (most recent call last):" line
    end: int  # the exception line closing it
    fatal: bool


def _tracebacks(lines: list[str], warned: list[bool]) -> list[_Traceback]:
    """Every traceback closed by an exception line, in order, with whether it was fatal
    (module docstring: not after "Exception ignored in", a warning line or NumPy's ABI note)."""
    out = []
    starts = [i for i, ln in enumerate(lines) if TRACEBACK.match(ln)]
    for n, s in enumerate(starts):
        stop = starts[n + 1] if n + 1 < len(starts) else len(lines)
        for j in range(s + 1, stop):
            if lines[j][:1] not in (" ", "\t") and EXCEPTION_LINE.match(lines[j].strip()):
                before = lines[max(0, s - 12):s]
                logged = s > 0 and warned[s - 1] and bool(LOG_WARNING.search(lines[s - 1]))
                quiet = logged or any(NOT_FATAL_BEFORE.search(b) for b in before)
                out.append(_Traceback(s, j, not quiet and not NORMAL_EXIT.match(lines[j].strip())))
                break
    return out


def _warning_lines(lines: list[str]) -> list[bool]:
    """Per line: part of a warning (a warning line; Python's warning header's message lines up
    to and including the indented source line under it)."""
    out = [False] * len(lines)
    i = 0
    while i < len(lines):
        if classify(lines[i]) == "warning":
            out[i] = True
            if PY_WARNING.match(lines[i].strip()):
                for j in range(i + 1, min(i + 6, len(lines))):
                    if TRACEBACK.match(lines[j]) or classify(lines[j]) not in (None, "warning", "error"):
                        break
                    out[j] = True
                    if lines[j][:1] in (" ", "\t"):
                        i = j
                        break
        i += 1
    return out


def _frames(lines: list[str], tb: _Traceback) -> tuple[str | None, tuple[str, ...]]:
    """(innermost frame "func (FILE:12)", the functions outermost first) of a traceback."""
    frames = [m for ln in lines[tb.start:tb.end] if (m := FRAME.match(ln.replace("Traceback (most recent "
                                                                                   "call last):", "")))]
    if not frames:
        return None, ()
    last = frames[-1]
    where = scrub(f"{last.group(3)} ({last.group(1)}:{last.group(2)})")
    names = [scrub(m.group(3)) for m in frames if m.group(3) != "<module>"]
    stack = tuple(n for k, n in enumerate(names) if k == 0 or n != names[k - 1])
    if len(stack) > MAX_STACK:
        stack = (*stack[:2], *stack[-(MAX_STACK - 2):])
    return where, stack


def ending(streams: list[StreamText]) -> Ending | None:
    """The decisive line of the captured output (module docstring), or None when no line
    says the program or the profiler failed or that the run was stopped."""
    hits: dict[str, list[tuple[int, StreamText, list[str], int]]] = {k: [] for k in KINDS}
    fatal: list[tuple[StreamText, list[str], _Traceback]] = []  # per stream: its last fatal traceback
    order = sorted(streams, key=lambda s: (s.stream != "stderr", s.pid))
    for rank, s in enumerate(order):
        lines = lines_of(s.text)
        warned = _warning_lines(lines)
        tbs = _tracebacks(lines, warned)
        quiet: set[int] = set()
        for tb in tbs:
            if not tb.fatal:
                quiet.update(range(tb.start, tb.end + 1))
        last = [tb for tb in tbs if tb.fatal][-1:]
        fatal.extend((s, lines, tb) for tb in last)
        for i, line in enumerate(lines):
            if warned[i] or i in quiet:
                continue
            kind = classify(line)
            if kind in hits:
                hits[kind].append((rank, s, lines, i))
    pick: tuple[str, StreamText, list[str], int] | None = None
    where: tuple[str | None, tuple[str, ...]] = (None, ())
    if hits["profiler"]:
        _, s, lines, i = hits["profiler"][0]
        pick = ("profiler", s, lines, i)
    elif fatal:
        s, lines, tb = fatal[0]  # stderr first
        kind = classify(lines[tb.end])
        pick = (kind if kind in ("interrupted", "killed") else "error", s, lines, tb.end)
        where = _frames(lines, tb)
    else:
        stopped = hits["interrupted"] + hits["killed"]
        for kind in ("stopped", "error"):
            found = stopped if kind == "stopped" else hits["error"]
            if found:
                _, s, lines, i = min(found, key=lambda t: (t[0], -t[3]))
                pick = (classify(lines[i]) or "error", s, lines, i)
                break
    if pick is None:
        return None
    kind, s, lines, i = pick
    conflict = None
    if kind in ("error", "killed") and hits["conflict"]:
        _, cs, clines, ci = hits["conflict"][0]
        conflict, kind = scrub(clines[ci]), "conflict"
    return Ending(kind, scrub(lines[i]), s.stream, s.pid, _context(lines, i), where[0], where[1], conflict)
