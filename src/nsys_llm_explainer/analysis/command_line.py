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
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

import pandas as pd

from nsys_llm_explainer.analysis.program_output import TOKEN
from nsys_llm_explainer.trace.data import CommandLine, TraceData, Unavailable

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


@dataclass(frozen=True)
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
