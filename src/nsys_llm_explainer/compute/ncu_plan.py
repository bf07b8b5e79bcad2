"""An Nsight Compute plan for the kernels worth a closer look: ncu_plan.sh (one ready ncu
command per kernel) and ncu_targets.json (the same list for scripts).

Each command selects one kernel and one launch of it:

- --kernel-name-base mangled with the mangled name when the trace has it (exact whatever
  the demangler), else demangled with the name as the trace prints it; --kernel-name
  regex:^...$ anchors the whole name, regex-escaped, so that it matches this kernel only.
- --launch-skip counts launches of the matching kernel only (ncu's --launch-skip; the
  unfiltered count is --launch-skip-before-match). It skips the launches that ran in the
  warm-up: before `steady_from` (a launch ordinal the caller knows, e.g. the first steady
  step) or, without one, in the first WARMUP_SHARE of the capture, and always the first
  launch (cold caches, lazy loading, autotuning). --launch-count 1.
- The skip is counted from the capture's first launch, but ncu counts from the start of the
  process: when the capture began later (nsys --capture-range or --delay, a PyTorch profiler
  schedule, a capture of step N), the launches before it must be added. The plan says so in
  its header and per kernel, with what the trace allows (Counting): the number of profiler
  steps that ran before the captured ones (ProfilerStep#N numbers them) and the kernel's
  launches per captured step, giving an estimate to add; or an NVTX filter
  (--nvtx --nvtx-include on the step ranges, "name/" for push/pop ranges, "name" for
  start/end ones) with the skip counted among the launches inside those ranges only.
- the sections answer the question the kernel raises: GEMM/attention (or compute-bound):
  SpeedOfLight with the roofline charts; memory-bound: SpeedOfLight and MemoryWorkloadAnalysis;
  else SpeedOfLight, launch statistics and occupancy.

Every trace string is untrusted: the shell text single-quotes arguments (a ' becomes '\\''),
the regex escapes metacharacters and writes control characters as \\xHH, and comment lines
have control characters removed, so a kernel name cannot end a comment or a quote.

Characters outside ASCII: ncu's documentation does not name its regex engine, and the
escapes differ: ECMAScript (C++ std::regex) writes a code point as \\uHHHH, PCRE as \\x{HHHH},
each is an error or another match in the other, and neither matches the UTF-8 bytes a
byte-oriented matcher sees (nor does \\xHH for U+0080 to U+00FF). The character itself, in
UTF-8, matches in every one of them: a byte matcher compares the same bytes, a UTF-8-aware
one the same character, and no non-ASCII character is a metacharacter. So printable
non-ASCII characters are written as they are. Invisible ones (Unicode categories C and Z:
line and paragraph separators, bidirectional controls, odd spaces) would make the script
read differently from what it runs, so they become .{1,n}, n their UTF-8 length: one
character, or its n bytes, in every engine (and in Python's re). Real kernel names are ASCII.

NCCL kernels are left out with the reason: ncu serialises kernels, which stalls collectives.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Sequence

from nsys_llm_explainer.frozen import frozen

WARMUP_SHARE = 0.10
COMPUTE_CATEGORIES = frozenset({"gemm", "attention", "moe"})
MEMORY_CATEGORIES = frozenset({"memory", "norm", "reduction", "activation_elementwise"})
# Every command collects what classifies a launch and explains a latency-bound one (Speed
# of Light, launch statistics, occupancy, scheduler statistics), then what its question needs.
BASE_SECTIONS = ("SpeedOfLight", "LaunchStats", "Occupancy", "SchedulerStats")
COMPUTE_SECTIONS = (
    *BASE_SECTIONS,
    "SpeedOfLight_RooflineChart",
    "SpeedOfLight_HierarchicalTensorRooflineChart",
    "ComputeWorkloadAnalysis",
)
MEMORY_SECTIONS = (*BASE_SECTIONS, "MemoryWorkloadAnalysis", "MemoryWorkloadAnalysis_Tables")
OTHER_SECTIONS = (*BASE_SECTIONS, "WarpStateStats")
# Counters every command asks for by name (--metrics), present on every GPU ncu supports
# (Volta on): the duration, DRAM bytes, and the floating-point instructions that give
# FLOPs per precision (add + mul + 2 x fma). They land in the CSV's "Command line profiler
# metrics" rows, which `--ncu` reads.
METRICS = (
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    *(f"sm__sass_thread_inst_executed_op_{p}{op}_pred_on.sum" for p in "dfh" for op in ("add", "mul", "fma")),
)
# The CSV export: ncu's details page of the report it wrote, in base units (full precision).
CSV_EXPORT = ("--csv", "--page", "details", "--print-units", "base")
_REGEX_META = set("\\^$.|?*+()[]{}")
_UNSAFE_COMMENT = re.compile(r"[\x00-\x1f\x7f\u0080-\u009f\u2028\u2029]")


@frozen
class KernelTarget:
    name: str  # full demangled name as the trace records it
    device: int
    calls: int
    total_ns: int
    call_order: Sequence[int]  # ordinal of each launch among all the capture's launches
    category: str = "other"
    bound: str | None = None  # "compute" | "memory" when a roofline said so
    mangled_name: str | None = None
    share_pct: float | None = None  # of all kernel time
    in_ranges: Sequence[int] | None = None  # call_order of the launches inside the NVTX filter's ranges


@frozen
class Counting:
    """What the trace tells about the launches ncu will count before the captured ones."""

    nvtx_include: str | None = None  # --nvtx-include expression matching the step ranges
    steps_before: int = 0  # profiler steps that ran before the first captured one
    captured_steps: int = 0  # steps in the capture (launches per step = calls / this)


NVTX_SAFE = re.compile(r"^[A-Za-z0-9_.:#+ -]{1,120}$")  # no '/', '@', brackets or quotes


def nvtx_include(name: str, push_pop: bool) -> str | None:
    """ncu's --nvtx-include expression for ranges named `name` in the default domain
    ("name/" for push/pop ranges, "name" for start/end ranges); None for names the
    expression syntax would misread."""
    if not NVTX_SAFE.match(name):
        return None
    return f"{name}/" if push_pop else name


def regex_escape(text: str) -> str:
    """Escape for ncu's regex and Python's re: metacharacters get a backslash, ASCII control
    characters become \\xHH, printable non-ASCII characters stay as they are, invisible
    ones become .{1,n} (see the module docstring)."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch in _REGEX_META:
            out.append("\\" + ch)
        elif 0x20 <= code < 0x7F:
            out.append(ch)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif unicodedata.category(ch)[0] in "CZ":
            out.append(f".{{1,{len(ch.encode('utf-8', 'surrogatepass'))}}}")
        else:
            out.append(ch)
    return "".join(out)


def name_regex(name: str) -> str:
    return f"^{regex_escape(name)}$"


def shell_quote(text: str) -> str:
    """POSIX single quotes: nothing inside is special except ' itself."""
    return "'" + text.replace("'", "'\\''") + "'"


def comment_text(text: str, limit: int = 160) -> str:
    s = _UNSAFE_COMMENT.sub("?", text)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def launch_window(
    call_order: Sequence[int], steady_from: int | None = None, total_launches: int | None = None
) -> tuple[int, int, str]:
    """(launch_skip, launch_count, why) for one kernel from its launch ordinals."""
    order = sorted(call_order)
    calls = len(order)
    if calls <= 1:
        return 0, 1, "a single launch: nothing to skip"
    if steady_from is None:
        span = total_launches if total_launches else order[-1] + 1
        steady_from = math.ceil(span * WARMUP_SHARE)
        where = f"in the first {WARMUP_SHARE:.0%} of the capture's launches"
    else:
        where = f"before launch {steady_from} (warm-up)"
    warm = sum(1 for o in order if o < steady_from)
    skip = min(max(1, warm), calls - 1)
    if warm == 0:
        why = "skips its first launch (cold caches, lazy loading, autotuning), profiles the next"
    elif skip < warm:
        why = (
            f"all but the last of its {calls} launches ran {where}: skips {skip}, profiles the last"
        )
    else:
        why = f"skips the {skip} of {calls} launches {where}, profiles the next one"
    return skip, 1, why


def sections_for(category: str, bound: str | None) -> tuple[tuple[str, ...], str]:
    if bound == "memory" or (bound is None and category in MEMORY_CATEGORIES):
        return MEMORY_SECTIONS, "memory-bound: memory workload analysis"
    if bound == "compute" or category in COMPUTE_CATEGORIES:
        return COMPUTE_SECTIONS, "matrix work: speed of light with roofline charts"
    return OTHER_SECTIONS, "speed of light, launch statistics and occupancy"


def _counting(k: KernelTarget, skip: int, c: Counting, steady_from: int | None, total: int | None) -> dict:
    """The target's fields about launches before the capture (see the module docstring)."""
    out: dict = {"nvtx_include": None, "nvtx_launch_skip": None, "launches_before_capture": None}
    notes = ["add the launches that ran before the capture, if it began after the process started"]
    if c.steps_before and c.captured_steps:
        per_step = k.calls / c.captured_steps
        before = round(c.steps_before * per_step)
        out["launches_before_capture"] = before
        rate = f"{per_step:,.0f}" if per_step.is_integer() else f"{per_step:,.1f}"
        notes[0] = (
            f"{c.steps_before} profiler steps ran before the captured ones: if each launched it "
            f"as often as the captured steps ({rate} per step), add about {before:,}, "
            f"i.e. --launch-skip {skip + before}"
        )
    if c.nvtx_include and k.in_ranges:
        nskip, _, _ = launch_window(k.in_ranges, steady_from, total)
        out["nvtx_include"], out["nvtx_launch_skip"] = c.nvtx_include, nskip
        notes.append(
            f"or count only launches inside the step ranges: --nvtx --nvtx-include "
            f"{shell_quote(c.nvtx_include)} --launch-skip {nskip}"
        )
    out["counting"] = "; ".join(notes)
    return out


def _target(
    rank: int, k: KernelTarget, steady_from: int | None, total: int | None, counting: Counting
) -> dict:
    skip, count, why_skip = launch_window(k.call_order, steady_from, total)
    sections, why_sections = sections_for(k.category, k.bound)
    base, pattern_of = ("mangled", k.mangled_name) if k.mangled_name else ("demangled", k.name)
    share = f", {k.share_pct:.1f}% of kernel time" if k.share_pct is not None else ""
    return {
        "rank": rank,
        "name": k.name,
        "mangled_name": k.mangled_name,
        "device": k.device,
        "calls": k.calls,
        "total_ns": k.total_ns,
        "category": k.category,
        "bound": k.bound,
        "kernel_name_base": base,
        "regex": name_regex(pattern_of),
        "launch_skip": skip,
        "launch_count": count,
        "sections": list(sections),
        "export": f"ncu_{rank:02d}_{re.sub(r'[^a-z0-9]+', '_', k.category.lower()).strip('_') or 'kernel'}",
        "why": f"#{rank} by GPU time ({k.total_ns / 1e6:,.3f} ms in {k.calls:,} calls{share}); "
        f"{why_sections}; {why_skip}",
        **_counting(k, skip, counting, steady_from, total),
    }


def plan(
    kernels: Sequence[KernelTarget],
    steady_from: int | None = None,
    total_launches: int | None = None,
    counting: Counting = Counting(),
) -> dict:
    """The plan as ncu_targets.json's object: targets in rank order, and the kernels left out."""
    targets: list[dict] = []
    skipped: list[dict] = []
    for k in kernels:
        if k.category == "communication" or k.name.startswith("nccl"):
            skipped.append(
                {
                    "name": k.name,
                    "reason": "NCCL kernel: ncu serialises kernels, which stalls collectives",
                }
            )
            continue
        targets.append(_target(len(targets) + 1, k, steady_from, total_launches, counting))
    return {"version": 1, "metrics": list(METRICS), "targets": targets, "skipped": skipped}


def targets_json(p: dict) -> str:
    return json.dumps(p, indent=2, ensure_ascii=True) + "\n"


def plan_script(p: dict) -> str:
    """ncu_plan.sh: run as `sh ncu_plan.sh <your command and its arguments>`. Each kernel's
    run writes its report (EXPORT.ncu-rep) and then its CSV export (EXPORT.csv, the details
    page in base units), which `nsys-llm-explain TRACE --out DIR --ncu FOLDER` reads as it is."""
    lines = [
        "#!/bin/sh",
        "# Nsight Compute plan written by nsys-llm-explain: one ncu run per kernel.",
        "# Usage: sh ncu_plan.sh <the command you profiled with nsys, and its arguments>",
        "# Each run writes ncu_NN_*.ncu-rep (open it in ncu-ui) and ncu_NN_*.csv; merge the CSVs into",
        "# the report with: nsys-llm-explain TRACE --out DIR --ncu <this folder>",
        "# --devices is the device id as the trace numbers it; drop it if CUDA_VISIBLE_DEVICES remaps.",
        "# --launch-skip is counted from the first launch of the capture, but ncu counts launches",
        "# from the start of the process: if the capture began later (nsys --capture-range or",
        "# --delay, a profiler schedule, a capture of a later step), add the launches that ran",
        "# before it, as each kernel's 'launch counting' line says.",
        "set -eu",
        'if [ "$#" -eq 0 ]; then echo "usage: sh ncu_plan.sh <command> [args...]" >&2; exit 2; fi',
        "",
    ]
    for t in p["targets"]:
        lines.append(f"# {t['rank']}. {comment_text(t['name'])}")
        lines.append(f"# why: {comment_text(t['why'], 400)}")
        if t.get("counting"):
            lines.append(f"# launch counting: {comment_text(t['counting'], 400)}")
        args = [
            "ncu --target-processes all",
            f"--devices {int(t['device'])}",
            f"--kernel-name-base {t['kernel_name_base']}",
            f"--kernel-name {shell_quote('regex:' + t['regex'])}",
            f"--launch-skip {int(t['launch_skip'])} --launch-count {int(t['launch_count'])}",
            " ".join(f"--section {s}" for s in t["sections"]),
            f"--metrics {','.join(p.get('metrics') or METRICS)}",
            f"--export {t['export']} --force-overwrite",
            '"$@"',
        ]
        rep, csv = f"{t['export']}.ncu-rep", f"{t['export']}.csv"
        lines.append(f"rm -f {rep} {csv}")
        lines.append(" \\\n  ".join(args))
        missing = f"ncu_plan.sh: {t['export']}: no kernel was profiled (see its launch counting line)"
        lines.append(f"if [ -f {rep} ]; then ncu --import {rep} {' '.join(CSV_EXPORT)} > {csv}; "
                     f"else echo \"{missing}\" >&2; fi")
        lines.append("")
    for s in p["skipped"]:
        lines.append(f"# left out: {comment_text(s['name'])}: {s['reason']}")
    return "\n".join(lines).rstrip("\n") + "\n"
