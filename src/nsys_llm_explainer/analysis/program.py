"""What program the capture ran, named from its command line (TraceData.command_lines()):
the program's base name after unwrapping launchers, and the arguments that name the model or
select the test. Nothing else of the command line is ever kept.

Unwrapping, repeated until a program remains:
- shells: `bash -c "..."` runs the string (its last command, after `cd`/`export`/`source`
  steps); `bash run.sh` runs run.sh;
- `env` and its `NAME=value` assignments, `nohup`, `time`, `timeout`, `numactl`, `taskset`,
  `stdbuf`, `nice`, `uv run`, `poetry run`, `conda run`, `pipenv run`;
- process launchers with their options: `mpirun`/`mpiexec`/`srun`/`jsrun`/`aprun`, `torchrun`
  (and `python -m torch.distributed.run|launch`), `deepspeed`, `accelerate launch`, `nsys
  profile|launch`;
- Python: `python [options] SCRIPT` is the script; `python -m module` is module (a
  launcher module is unwrapped again); `python -c ...` is "python -c".

Test runners: `pytest`/`py.test`/`python -m pytest` (the program is the first test file
named; `-k EXPR` and `FILE::test` select tests), `python -m unittest`, `ctest` (`-R`), a
Google Test binary (`--gtest_filter`), a test binary by name (`test_*`, `*_test`,
`*_tests`). Benchmarks: Google Benchmark's `--benchmark_filter`, or a name with "bench".

Shown arguments: the model (MODEL_FLAGS, the positional model of `vllm serve`,
`trtllm-serve`, trtexec's `--loadEngine`/`--onnx`, or a metadata field that names it) and
the test selection (TEST_FLAGS). A model is cut to the base name of its value's first plain
word (a path's last part, a Hugging Face repository's model name: "Qwen/Qwen2-7B hf_..."
shows "Qwen2-7B"); a test selection is shown as written, unless it holds a path, an address
or an assignment. A word that looks like a token or key, a URL or an assignment, and an
argument whose flag names a secret, are never shown.

A program is one-shot when it runs its work once: a test (a unit test, a test binary, a
test runner), or an explicit single iteration (`--iters 1`, `--num-prompts=1` ...).

How the captured program ended, read from its own output (Nsight Systems keeps the
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
file system is echoed."""

from __future__ import annotations

import re
import shlex

import pandas as pd

from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.trace.data import CommandLine, StreamText, TraceData, Unavailable

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


@frozen
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


@frozen
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


KEY = "command_line:program"
SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh", "fish"})
PREFIXES = frozenset({"env", "nohup", "time", "stdbuf", "nice", "ionice", "chrt", "setsid", "exec", "command"})
RUNNERS = {"uv": "run", "poetry": "run", "pipenv": "run", "conda": "run", "mamba": "run", "micromamba": "run",
           "pixi": "run", "accelerate": "launch", "nsys": ("profile", "launch")}
LAUNCHERS = frozenset({"mpirun", "mpiexec", "orterun", "srun", "jsrun", "aprun", "torchrun", "deepspeed",
                       "numactl", "taskset", "timeout", "horovodrun", "charmrun", "flux"})
LAUNCH_MODULES = frozenset({"torch.distributed.run", "torch.distributed.launch", "deepspeed.launcher.runner",
                            "accelerate.commands.launch", "torch.distributed.elastic.multiprocessing"})
# Launcher options that take a value as the next argument (the program comes after them).
VALUE_OPTIONS = frozenset({
    "-n", "-np", "-N", "-c", "-p", "-H", "-x", "-w", "-t", "-A", "-G", "-m", "-C", "-o", "-e", "-i", "-s",
    "--np", "--host", "--hosts", "--hostfile", "--machinefile", "--map-by", "--bind-to", "--rank-by", "--mca",
    "--partition", "--account", "--time", "--ntasks", "--ntasks-per-node", "--nodes", "--gpus", "--gres",
    "--cpus-per-task", "--mem", "--nproc_per_node", "--nproc-per-node", "--nnodes", "--node_rank",
    "--node-rank", "--master_addr", "--master-addr", "--master_port", "--master-port", "--rdzv_backend",
    "--rdzv-backend", "--rdzv_endpoint", "--rdzv-endpoint", "--rdzv_id", "--rdzv-id", "--num_processes",
    "--num_machines", "--machine_rank", "--main_process_ip", "--main_process_port", "--config_file",
    "--mixed_precision", "--num_gpus", "--num_nodes", "--include", "--exclude", "--launcher",
    "--physcpubind", "--cpunodebind", "--membind", "--interleave", "--preferred", "--trace", "--output",
    "--delay", "--duration", "--capture-range", "--sample", "--cuda-graph-trace", "-k", "--signal",
    "--kill-after", "--env", "-u", "--cpu-list", "-l", "--name", "--prefix", "--with",
    "--python", "--directory", "--project", "--gpu-metrics-devices", "--stats", "--force-overwrite",
    "--backtrace", "--cudabacktrace", "--osrt-threshold", "--python-sampling", "--pytorch", "-d",
})
PYTHON = re.compile(r"^(python|pypy)(\d+(\.\d+)?)?[dmu]?(\.exe)?$")
PYTHON_VALUE_OPTIONS = frozenset({"-W", "-X", "--check-hash-based-pycs"})
MODEL_FLAGS = frozenset({
    "--model", "--model-path", "--model_path", "--model-name", "--model_name", "--model-id", "--model_id",
    "--model-name-or-path", "--model_name_or_path", "--pretrained-model-name-or-path",
    "--pretrained_model_name_or_path", "--hf-model", "--hf_model", "--model-dir", "--model_dir",
    "--engine-dir", "--engine_dir", "--checkpoint-dir", "--checkpoint_dir", "--loadEngine", "--onnx",
    "--deploy", "--uff", "-m",
})
TEST_FLAGS = frozenset({"--gtest_filter", "-k", "--benchmark_filter", "-R", "--tests-regex", "--filter",
                        "--gtest_repeat"})
SERVE_COMMANDS = {"vllm": "serve", "trtllm-serve": None, "sglang": "serve", "ollama": "run", "lmdeploy": "serve"}
TEST_NAME = re.compile(r"^(test[_-]\w+|\w+[_-]tests?|tests?)(\.py|\.exe)?$", re.IGNORECASE)
BENCH_NAME = re.compile(r"bench", re.IGNORECASE)
SERVER_NAME = re.compile(r"serve|server|api_server|launch_server", re.IGNORECASE)
ONCE = re.compile(r"^--?(num[-_]?)?(iters?|iterations|steps|runs|repeats|repetitions|batches|prompts|requests|"
                  r"samples|trials)(=1)?$", re.IGNORECASE)
SECRET = re.compile(r"token|key|secret|pass(word|wd)?|credential|auth|cookie|session|private|cert|bearer|"
                    r"access", re.IGNORECASE)
MAX_SHOWN_CHARS = 120
MAX_DEPTH = 8


@frozen
class Program:
    """The program a capture ran, as shown: nothing but names (module docstring)."""

    name: str | None  # base name after unwrapping launchers (None: only a model is named)
    args: tuple[str, ...]  # shown arguments: the model, the test selection
    kind: str  # "test", "benchmark", "server" or "program"
    runner: str | None  # pytest, unittest, gtest, ctest, google-benchmark
    language: str | None  # "python" or "native"; None when not known
    launchers: tuple[str, ...]  # what ran it: bash, torchrun, mpirun ...
    model: str | None
    test: str | None  # the test selection, as shown
    one_shot: bool
    source: str

    def text(self) -> str:
        """`name args...`, at most MAX_SHOWN_CHARS characters."""
        words = " ".join((self.name, *self.args)) if self.name else f"model {self.model}"
        return words if len(words) <= MAX_SHOWN_CHARS else words[: MAX_SHOWN_CHARS - 1] + "…"

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "args": list(self.args), "shown": self.text(), "kind": self.kind,
                "runner": self.runner, "language": self.language, "launchers": list(self.launchers),
                "model": self.model, "test": self.test, "one_shot": self.one_shot, "source": self.source}


def base_name(value: str) -> str:
    """A path's or a repository's last part ("/models/llama-3" -> "llama-3")."""
    return re.split(r"[\\/]", value.strip().rstrip("\\/"))[-1]


def safe(value: str) -> str | None:
    """The value as shown: the base name of its first word that is a plain name (a value may
    hold a token next to the model's name), or None when it holds none. A word that looks like a
    token or key, an assignment, an address or a URL is never a name."""
    for word in re.split(r"[\s,;?&]+", value.strip()):
        if not word or "://" in word or "@" in word or "=" in word or TOKEN.search(word):
            continue
        name = base_name(word).strip("'\"")
        if name and not TOKEN.search(name) and len(name) <= 80 and re.fullmatch(r"[\w.+:\[\]\-*?|^$()#]+", name):
            return name
    return None


def _split(argv: tuple[str, ...]) -> list[str]:
    """The argument list: a one-string command line (a metadata field) is split like a shell."""
    if len(argv) == 1 and " " in argv[0].strip():
        try:
            return shlex.split(argv[0])
        except ValueError:
            return argv[0].split()
    return list(argv)


def _shell_command(text: str) -> list[str]:
    """The command a shell string runs: its last step that is not cd/export/source/set."""
    try:
        words = shlex.split(text, posix=True)
    except ValueError:
        words = text.split()
    steps, cur = [], []
    for w in words:
        if w in (";", "&&", "||", "|") or w.endswith(";"):
            if w.endswith(";") and w != ";":
                cur.append(w[:-1])
            steps.append(cur)
            cur = []
        else:
            cur.append(w)
    steps.append(cur)
    real = [s for s in steps if s and base_name(s[0]) not in ("cd", "export", "source", ".", "set", "ulimit",
                                                               "echo", "true", "unset", "module", "conda")]
    return real[-1] if real else []


def _skip_options(args: list[str], i: int) -> int:
    """Index of the first argument after a launcher's options."""
    while i < len(args) and args[i].startswith("-") and args[i] != "--":
        opt = args[i]
        i += 1
        if "=" not in opt and opt in VALUE_OPTIONS and i < len(args):
            i += 1
    return i + 1 if i < len(args) and args[i] == "--" else i


def _unwrap(args: list[str]) -> tuple[list[str], list[str]]:
    """(the program's argument list, the launchers unwrapped) (module docstring)."""
    launchers: list[str] = []
    for _ in range(MAX_DEPTH):
        if not args:
            break
        head = base_name(args[0])
        if head in SHELLS:
            if len(args) > 2 and args[1] in ("-c", "-lc", "-ic", "-cl"):
                launchers.append(head)
                args = _shell_command(args[2])
                continue
            rest = [a for a in args[1:] if not a.startswith("-")]
            if rest:
                launchers.append(head)
                args = rest
                continue
            break
        if head in PREFIXES:
            launchers.append(head)
            i = 1
            while i < len(args) and (args[i].startswith("-") or re.match(r"^\w+=", args[i])):
                i += 1
            args = args[i:]
            continue
        if head in RUNNERS:
            sub = RUNNERS[head]
            subs = sub if isinstance(sub, tuple) else (sub,)
            if len(args) > 1 and args[1] in subs:
                launchers.append(f"{head} {args[1]}")
                args = args[_skip_options(args, 2):]
                continue
            break
        if head in LAUNCHERS:
            launchers.append(head)
            i = _skip_options(args, 1)
            if head == "timeout" and i < len(args) and re.match(r"^\d", args[i]):
                i += 1
            args = args[i:]
            continue
        if PYTHON.match(head):
            i = 1
            while i < len(args) and args[i].startswith("-") and args[i] not in ("-m", "-c"):
                i += 2 if args[i] in PYTHON_VALUE_OPTIONS else 1
            if i < len(args) and args[i] == "-m" and i + 1 < len(args):
                module = args[i + 1]
                if module in LAUNCH_MODULES or module.startswith("torch.distributed."):
                    launchers.append(f"python -m {module}")
                    args = args[_skip_options(args, i + 2):]
                    continue
                if module in ("pytest", "unittest"):
                    launchers.append("python")
                    args = [module, *args[i + 2:]]
                    continue
                launchers.append("python")
                return [module, *args[i + 2:]], launchers
            if i < len(args) and args[i] == "-c":
                launchers.append("python")
                return ["python -c"], launchers
            if i < len(args):
                launchers.append("python")
                args = args[i:]
                continue
            break
        break
    return args, launchers


def _flag_values(args: list[str], flags: frozenset[str]) -> list[tuple[str, str]]:
    """(flag, value) for `--flag value` and `--flag=value` arguments of `flags`."""
    out = []
    for i, a in enumerate(args):
        flag, eq, value = a.partition("=")
        if flag in flags:
            if eq:
                out.append((flag, value))
            elif i + 1 < len(args) and not args[i + 1].startswith("-"):
                out.append((flag, args[i + 1]))
    return out


def describe(cmd: CommandLine) -> Program | None:
    """The program of one command line (module docstring), or None when nothing can be named."""
    args, launchers = _unwrap(_split(cmd.argv))
    if not args and cmd.model is None:
        return None
    name = (args[0] if args[0] == "python -c" else safe(args[0])) if args else None
    rest = args[1:]
    runner = None
    test = None
    kind = "program"
    python = any(x.startswith("python") for x in launchers) or bool(args and PYTHON.match(base_name(args[0])))
    language = "python" if python or (name or "").endswith(".py") else None
    if name in ("pytest", "py.test", "unittest"):
        runner, language = ("pytest" if name != "unittest" else "unittest"), "python"
        files = [a for a in rest if not a.startswith("-") and (".py" in a or "::" in a or "/" in a)]
        named = [a for a in rest if not a.startswith("-")] if runner == "unittest" else files
        test = safe(named[0]) if named else None
        name = (safe(named[0].split("::")[0]) if files else None) or name
    shown: list[str] = []
    selection = [(f, v) for f, v in _flag_values(rest, TEST_FLAGS) if not SECRET.search(f)]
    for flag, value in selection:
        v = value.strip()
        if v and not TOKEN.search(v) and len(v) <= 80 and not re.search(r"[/\\@=]|://", v):
            shown.append(f"{flag} {v}" if flag in ("-k", "-R") else f"{flag}={v}")
            test = test or v
    if any(f == "--gtest_filter" for f, _ in selection) or any(a.startswith("--gtest_") for a in rest):
        runner, language = runner or "gtest", language or "native"
    elif any(f == "--benchmark_filter" for f, _ in selection):
        runner, kind = "google-benchmark", "benchmark"
    if name == "ctest":
        runner, language = "ctest", "native"
    model = _model(name, rest, cmd.model)
    if model:
        shown.insert(0, model)
    if runner in ("pytest", "unittest", "gtest", "ctest") or (name and TEST_NAME.match(name)):
        kind = "test"
    elif kind != "benchmark" and name and BENCH_NAME.search(name):
        kind = "benchmark"
    elif name and (SERVER_NAME.search(name) or name in SERVE_COMMANDS):
        kind = "server"
    if name in SERVE_COMMANDS and SERVE_COMMANDS[name] and rest[:1] == [SERVE_COMMANDS[name]]:
        name = f"{name} {rest[0]}"
    if name is None and model is None:
        return None
    if language is None and name and cmd.source != "metadata":
        language = "native" if "." not in name or name.endswith((".exe", ".out", ".bin")) else None
    once = kind == "test" or _runs_once(rest)
    return Program(name, tuple(dict.fromkeys(shown)), kind, runner, language, tuple(launchers), model, test,
                   once, cmd.source)


def _model(name: str | None, rest: list[str], meta: str | None) -> str | None:
    """The model the command line (or a metadata field) names, as shown, or None."""
    for flag, value in _flag_values(rest, MODEL_FLAGS):
        if flag == "-m" and name in ("pytest", "py.test"):
            continue  # pytest's -m selects markers
        if (shown := safe(value)) is not None:
            return shown
    if name in SERVE_COMMANDS:
        sub = SERVE_COMMANDS[name]
        pos = [a for a in rest if not a.startswith("-")]
        if sub is None and pos:
            return safe(pos[0])
        if sub is not None and len(pos) > 1 and pos[0] == sub:
            return safe(pos[1])
    return safe(meta) if meta else None


def _runs_once(rest: list[str]) -> bool:
    for i, a in enumerate(rest):
        m = ONCE.match(a.split("=")[0] if "=" in a else a)
        if not m:
            continue
        value = a.split("=", 1)[1] if "=" in a else (rest[i + 1] if i + 1 < len(rest) else "")
        if value.strip() == "1":
            return True
    return False


def _pids(data: TraceData) -> list[int]:
    """The processes that ran kernels, most kernels first, then those whose output the
    capture holds."""
    out: list[int] = []
    try:
        k = data.kernels()
        if len(k):
            counts = pd.Series(k.pid).value_counts(sort=False)  # one hash pass: few processes
            out = [int(p) for p, _ in sorted(counts.items(), key=lambda pc: (-pc[1], pc[0])) if p >= 0]
    except Unavailable:
        pass
    return out + [s.pid for s in data.program_output() if s.pid not in out]


def program(data: TraceData) -> Program | None:
    """The program the capture ran (cached): the first command line the capture records that
    names one, else the name of the process that ran the kernels."""

    def build() -> Program | None:
        for cmd in data.command_lines():
            found = describe(cmd)
            if found is not None:
                return found
        pids = _pids(data)
        names = data.process_names(pids)
        for pid in pids:
            if names.get(pid, "").strip():
                return describe(CommandLine(pid, (names[pid],), "PROCESSES"))
        return None

    return data.cached(KEY, build)
