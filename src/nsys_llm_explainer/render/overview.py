"""What report.md and report.html show first, from report.json's dict: the key numbers under
the verdict, each finding's time at stake in words, the per-device time table, and the
grouping of metric sections by the question they answer."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypedDict

from nsys_llm_explainer.compute.peaks import NEAR_ROOF_PCT, regime
from nsys_llm_explainer.diagnosis.evidence import devices_text
from nsys_llm_explainer.fmt import dur, ms, pct
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.graph.changes import WORDS
from nsys_llm_explainer.model import GAIN_WHY_PREFIXES
from nsys_llm_explainer.render.json_writer import ok

if TYPE_CHECKING:
    from nsys_llm_explainer.render.report_types import (
        DeviceDoc,
        DiagnosisDoc,
        FindingDoc,
        ProgramDoc,
        ReportDoc,
        ServingSection,
    )

TOP_FINDINGS = 3
OPEN_EVIDENCE = 5  # evidence lines of a top finding shown open in report.md
DEVICE_ROWS = 4  # GPUs listed one per key-number row; more are summarized in one row
STEP_PHASES = 3


@frozen
class Group:
    id: str
    title: str
    metric_ids: tuple[str, ...]


# Metric sections by the question they answer, in reading order. A metric not listed here
# goes to OTHER (add it to the group it belongs to).
GROUPS: tuple[Group, ...] = (
    Group("gpu", "What runs on the GPU", (
        "top_kernels", "categories", "operators", "fusion_candidates", "cuda_graphs", "per_process",
        "gpu_context", "casts",
    )),
    Group("efficiency", "How close to the hardware", (
        "compute_efficiency", "model_utilization", "gemm_precision", "ncu", "ncu_plan",
    )),
    Group("steptime", "Where the step time goes", ("critical_path", "what_if")),
    Group("waits", "Why the GPU waits", (
        "timeline", "idle_causes", "gpu_idle", "boundness", "launch_overhead", "launch_storm", "sync",
        "host_patterns",
    )),
    Group("io", "Transfers and communication", ("memory_transfers", "communication")),
    Group("nvtx", "NVTX and steps", ("steps", "step_work", "nvtx_ranges", "nvtx_attribution")),
    Group("other", "Other measurements", ()),
    Group("capture", "Capture facts", ("workload", "capture")),
)
OTHER = "other"
GROUP_OF = {mid: g.id for g in GROUPS for mid in g.metric_ids}

VERDICT_WORDS = {
    "gpu_bound": "GPU-bound",
    "mixed": "Mixed",
    "transfer_bound": "Transfer-bound",
    "communication_bound": "Communication-bound",
    "sync_bound": "Sync-bound",
    "host_bound": "Host-bound",
    "not_steady_state": "Not steady state",
    "insufficient_data": "Insufficient data",
    "no_gpu_work": "No GPU work",
}
WORKLOAD_WORDS = {
    "llm_inference": "LLM inference",
    "llm_training": "LLM training",
    "pytorch_training": "PyTorch training",
    "pytorch_inference": "PyTorch inference",
    "tensorrt_inference": "TensorRT inference",
    "generic_cuda": "plain CUDA program",
    "unknown": "unknown",
}


MODEL_WORDS = {"recommendation": ", a recommendation model", "cnn": ", a convolutional network"}
# Primary kinds that say how the run went, with no GPU time at stake (diagnosis/capture.py).
RUN_KINDS = ("program_failed", "killed", "profiler_failed", "cuda_not_traced", "kernels_not_recorded", "no_kernels")
# How the run ended, in words, for the key numbers (the id stays in report.json).
RUN_WORDS = {
    "program_failed": "the program failed",
    "killed": "the program was killed",
    "profiler_failed": "the profiler failed to attach",
    "cuda_not_traced": "CUDA was not traced",
    "kernels_not_recorded": "kernels were launched but not recorded",
    "no_kernels": "no kernel ran",
}


def workload_words(kind: str) -> str:
    return WORKLOAD_WORDS.get(kind, kind.replace("_", " "))


BUCKET_WORDS = {
    "compute": "Own work running (kernels, on-device copies, memsets)",
    "exposed_communication": "Communication kernels, nothing overlapping",
    "transfer": "Idle, copies running",
    "communication_wait": "Idle, waiting on communication",
    "sync_wait": "Idle, host waiting in a sync",
    "launch_bound": "Idle, host launching kernels",
    "host_other": "Idle, host in no launch, copy or sync call",
    "device_wait": "Idle, next work already queued",
    "capture_edge": "Capture edge (host not visible)",
}
BUCKET_SHORT = {
    "compute": "Compute", "exposed_communication": "Exposed comm.", "transfer": "Copies",
    "communication_wait": "Comm. wait", "sync_wait": "Sync wait", "launch_bound": "Launching",
    "host_other": "Host other", "device_wait": "Queued wait", "capture_edge": "Capture edge",
}
BUSY_BUCKETS = ("compute", "exposed_communication")
DEVICE_COLUMNS = 8


class WorkloadItem(TypedDict, total=False):
    """One signal of the workload metric, as report.md and report.html list it."""

    what: str
    kernel_pct: float | None
    kernel_example: str | None  # a full kernel name
    ranges: int | None
    range_example: str | None  # a normalized range name


def workload_items(doc: ReportDoc) -> tuple[list[WorkloadItem], list[str]] | None:
    """What ran, one item per signal of the workload metric (kernel share and range count
    together, each with its first example: a full kernel name for the writers to label, a
    normalized range name), and the metric's other evidence lines; None without the metric."""
    from nsys_llm_explainer.metrics.workload import SIGNALS

    m = ok(doc.get("metrics", {}).get("workload"))
    if m is None:
        return None
    items: dict[str, WorkloadItem] = {}
    for sid, row in m.get("kernel_signals", {}).items():
        items[sid] = {"what": SIGNALS[sid][2] if sid in SIGNALS else sid, "kernel_pct": row["pct_of_kernel_time"],
                      "kernel_example": _first(row.get("examples")), "ranges": None, "range_example": None}
    for sid, ranges in m.get("range_signals", {}).items():
        item = items.setdefault(sid, {"what": SIGNALS[sid][2] if sid in SIGNALS else sid, "kernel_pct": None,
                                      "kernel_example": None})
        item["ranges"] = ranges["ranges"]
        item["range_example"] = _first(ranges.get("examples"))
    heads = tuple(f"{SIGNALS[sid][2]}:" for sid in SIGNALS)
    notes = [e for e in m.get("evidence", []) if not e.startswith(heads)]
    return list(items.values()), notes


def _first(examples: list[str] | None) -> str | None:
    return examples[0] if examples else None


def bin_counts(busy_pct: list[float | None]) -> dict[str, int]:
    """Of a timeline device's bins inside its window: with kernels, at least 90% busy, and
    without kernels."""
    inside = [v for v in busy_pct if v is not None]
    return {"busy": sum(1 for v in inside if v > 0), "full": sum(1 for v in inside if v >= 90),
            "idle": sum(1 for v in inside if v == 0)}


def time_origin(doc: ReportDoc) -> int | None:
    """The timeline plot's time zero: the first kernel (start of the earliest device's kernel
    window), from the timeline metric or else the devices' windows; None without kernels."""
    metrics = doc.get("metrics", {})
    tl = ok(metrics.get("timeline"))
    if tl is not None:
        return int(tl["window_start_ns"])
    idle = ok(metrics.get("gpu_idle"))
    starts = [s for d in (idle.get("devices", []) if idle else []) if (s := d.get("window_start_ns")) is not None]
    return int(min(starts)) if starts else None


def since_first_kernel(doc: ReportDoc, ns: int | None) -> str:
    """An absolute timestamp as the time since the first kernel (the timeline's axis), with
    full precision: a table column."""
    origin = time_origin(doc)
    if ns is None or origin is None:
        return "n/a"
    return ms(int(ns) - origin)


def group_of(metric_id: str) -> str:
    return GROUP_OF.get(metric_id, OTHER)


def plural(count: int, word: str, many: str | None = None) -> str:
    """"1 kernel", "3 kernels", with thousands separators."""
    return f"{count:,} {word if count == 1 else (many or word + 's')}"


def verdict_words(verdict: str, kind: str | None = None) -> str:
    """The verdict in words; no_gpu_work on a capture that did not trace CUDA says that the GPU's
    work was not seen, not that there was none."""
    if verdict == "no_gpu_work" and kind == "cuda_not_traced":
        return "GPU work not traced"
    return VERDICT_WORDS.get(verdict, verdict.replace("_", " "))


def verdict_summary(diagnosis: DiagnosisDoc, sentence: bool = False) -> str:
    """The diagnosis summary without its leading "Transfer-bound: " (the verdict's words,
    which the verdict line shows already); `sentence`: capitalized, to stand on its own."""
    summary = str(diagnosis.get("summary") or "")
    head = f"{verdict_words(str(diagnosis.get('verdict', '')))}: "
    if summary.startswith(head) and len(summary) > len(head):
        summary = summary[len(head):]
        if sentence:
            summary = summary[:1].upper() + summary[1:]
    return summary


def about(group: Group, titles: list[str]) -> str:
    """A group's one-line list of its sections, each title without the group's own title
    in front ("How close to the hardware: FLOPs, ..." reads "FLOPs, ...")."""
    head = f"{group.title}: "
    return ", ".join(t[len(head):] if t.startswith(head) and len(t) > len(head) else t for t in titles)


def _busy(device: DeviceDoc) -> tuple[int, int]:
    ns = sum(b["ns"] for b in device["buckets"] if b["bucket"] in BUSY_BUCKETS)
    return ns, int(device["window_ns"])


def _share(ns: int, window: int) -> float:
    return 100.0 * ns / window if window else 0.0


def busy_rows(devices: list[DeviceDoc]) -> list[tuple[str, str]]:
    """GPU busy (kernels running) per device, or one summary row for many devices."""
    if not devices:
        return [("GPU busy", "not measured, because no kernels were captured")]
    if len(devices) <= DEVICE_ROWS:
        rows = []
        for d in devices:
            ns, window = _busy(d)
            rows.append((f"GPU {d['device_id']} busy", f"{pct(_share(ns, window))} of its {dur(window)} window"))
        return rows
    shares = sorted((_share(*_busy(d)), d["device_id"]) for d in devices)
    mid = shares[len(shares) // 2][0]
    return [("GPU busy", f"{len(shares)} GPUs: lowest {pct(shares[0][0])} (GPU {shares[0][1]}), median {pct(mid)}, "
                         f"highest {pct(shares[-1][0])} (GPU {shares[-1][1]})")]


def key_numbers(doc: ReportDoc) -> list[tuple[str, str]]:
    """(what, value) rows of plain text: GPU busy, kernel time, steps, the primary bottleneck."""
    diag = doc["diagnosis"]
    metrics = doc.get("metrics", {})
    rows = busy_rows(diag.get("devices") or [])
    tk = ok(metrics.get("top_kernels"))
    if tk is not None:
        devices = diag.get("devices") or []
        over = f", summed over {devices_text([d['device_id'] for d in devices])}" if len(devices) > 1 else ""
        rows.append(("Kernel time", f"{dur(tk['total_kernel_ns'])} in {plural(tk['kernel_count'], 'kernel')} "
                                    f"({plural(tk['distinct_kernels'], 'name')}){over}"))
    serving = ok(metrics.get("serving"))
    steps = None if serving is not None else ok(metrics.get("steps"))
    rows.extend(serving_rows(serving) if serving is not None else [])
    phases = [p for p in (steps.get("phases", []) if steps else []) if p.get("steps")]
    if steps is not None and steps.get("confidence") == "low" and phases:
        # Repeats guessed from the launch sequence alone are not a step a reader could time:
        # no latency figure stands on them.
        rows.append(("Step latency", f"not measured: {plural(sum(p['steps'] for p in phases), 'repeat')} found "
                                     "with low confidence (pass --step-range or a phase map)"))
        phases = []
    for p in phases[:STEP_PHASES]:
        what = "Step latency" if len(phases) == 1 else f"Step latency ({p['phase']})"
        if p["steps"] == 1:  # percentiles of one step say nothing more than its latency
            rows.append((what, f"{dur(p['p50_ns'])} (1 step)"))
        else:
            rows.append((what, f"p50 {dur(p['p50_ns'])}, p99 {dur(p['p99_ns'])} over {p['steps']:,} steps"))
    primary = diag.get("primary")
    if primary is not None and primary["kind"] in RUN_KINDS:
        first = primary["evidence"][0] if primary["evidence"] else ""
        words = RUN_WORDS.get(primary["kind"], primary["kind"])
        rows.append(("Primary bottleneck", f"{words}: {first}" if first else words))
    elif primary is not None:
        where = devices_text(list(primary["devices"]))
        most = "" if len(primary["devices"]) == 1 else " on the GPU with the most"
        rows.append(("Primary bottleneck", f"{primary['kind']} on {where}: {dur(primary['impact_ns'])} "
                                           f"{primary_measure(primary['kind'])}{most}, {pct(primary['impact_pct'])} "
                                           "of its time"))
    wl = diag.get("workload")
    if wl is not None and wl.get("kind") != "unknown":
        model = MODEL_WORDS.get(wl.get("model") or "", "")
        rows.append(("Workload", f"{workload_words(wl['kind'])}{model} (confidence {wl['confidence']})"))
    return rows + capture_rows(doc)


PROGRAM_KINDS = {"test": "a test", "benchmark": "a benchmark", "server": "a server"}
RUNNER_WORDS = {"gtest": "Google Test", "pytest": "pytest", "unittest": "unittest", "ctest": "CTest",
                "google-benchmark": "Google Benchmark"}


def program_words(program: ProgramDoc) -> str:
    """"test_matmul --gtest_filter=X (a test, Google Test; runs its work once)"."""
    what = [PROGRAM_KINDS[program["kind"]]] if program.get("kind") in PROGRAM_KINDS else []
    if runner := program.get("runner"):
        what.append(RUNNER_WORDS.get(runner, runner))
    if program.get("launchers"):
        what.append(f"run by {' > '.join(program['launchers'])}")
    tail = "; runs its work once" if program.get("one_shot") else ""
    inner = ", ".join(what) + tail
    return f"{program['shown']} ({inner.lstrip('; ')})" if inner else str(program["shown"])


def gpu_words(doc: ReportDoc, devices: list[int]) -> str:
    """The GPUs that ran work with their peaks: "GPU 9: AMD Instinct MI300X (dense BF16 1,307
    TFLOPS, 5,300 GB/s)", one entry per model, or that the trace names none of them."""
    gc = ok(doc.get("metrics", {}).get("gpu_context"))
    rows = {g["device_id"]: g for g in (gc.get("gpus", []) if gc else [])}
    named = _trace_gpu_names(doc)
    by_model: dict[str, list[int]] = {}
    for dev in devices:
        name = (rows.get(dev) or {}).get("name") or named.get(dev)
        if name:
            by_model.setdefault(name, []).append(dev)
    if not by_model:
        return f"{devices_text(devices)}: not named by the trace, so no peak figures"
    parts = []
    for name, devs in by_model.items():
        row = rows.get(devs[0]) or {}
        peaks = [f"dense BF16 {row['bf16_tflops']:,.0f} TFLOPS" if row.get("bf16_tflops") else None,
                 f"{row['hbm_gbps']:,.0f} GB/s" if row.get("hbm_gbps") else None]
        shown = [p for p in peaks if p]
        peak = f" ({', '.join(shown)})" if shown else " (no built-in peaks)"
        parts.append(f"{devices_text(devs)}: {name}{peak}")
    return "; ".join(parts)


def _trace_gpu_names(doc: ReportDoc) -> dict[int, str | None]:
    """Device id -> the GPU's name as the trace's gpus list gives it (trace.gpus)."""
    gpus = doc.get("trace", {}).get("gpus", [])
    out: dict[int, str | None] = {}
    for g in gpus if isinstance(gpus, list) else []:
        if isinstance(g, dict) and isinstance(dev := g.get("device_id"), int):
            name = g.get("name")
            out[dev] = name if isinstance(name, str) else None
    return out


def capture_rows(doc: ReportDoc) -> list[tuple[str, str]]:
    """The GPUs the kernels ran on, with their peaks, and the program the capture ran."""
    rows = []
    devices = [d["device_id"] for d in doc["diagnosis"].get("devices") or []]
    if devices:
        rows.append(("GPU" if len(devices) == 1 else "GPUs", gpu_words(doc, devices)))
    cap = ok(doc.get("metrics", {}).get("capture"))
    captured = cap.get("captured") if cap else None
    program = captured.get("program") if captured else None
    if program:
        rows.append(("Program", program_words(program)))
    return rows


ENGINE_WORDS = {"vllm": "vLLM", "sglang": "SGLang", "tensorrt_llm": "TensorRT-LLM"}
SOURCE_WORDS = {
    "engine_marks": "the engine's marks", "user_marks": "prefill/decode ranges", "model_runner": "model-runner frames",
    "model_forward": "model forward frames", "model_structure": "the layer structure",
}


def serving_rows(serving: ServingSection) -> list[tuple[str, str]]:
    """The serving view's key numbers: iterations by phase, then one row per phase."""
    phases = serving.get("phases") or []
    count = serving.get("iteration_count", 0)
    split = ", ".join(f"{p['iterations']:,} {p['phase']}" for p in phases)
    source = SOURCE_WORDS.get(serving["source"], serving["source"])
    engine = serving.get("engine")
    if serving["source"] == "engine_marks" and engine is not None and engine in ENGINE_WORDS:
        source = f"{ENGINE_WORDS[engine]}'s marks"
    rows = [("Iterations", f"{count:,} ({split}), from {source}")]
    for p in phases:
        graphs = ("no CUDA graph" if not p["graph_iterations"]
                  else f"CUDA graphs in {p['graph_iterations']:,} of {p['iterations']:,}")
        busy = f"{dur(p['gpu_busy_p50_ns'])} busy"
        if p["phase"] == "decode" and p.get("period_p50_ns") is not None:
            value = (f"{dur(p['period_p50_ns'])} per output token (p50; p90 {dur(p['period_p90_ns'])}), "
                     f"GPU span {dur(p['gpu_span_p50_ns'])} of which {busy}, "
                     f"{p['launches_per_iteration']:,.0f} launches per token, {graphs}")
        else:
            many = p["iterations"] > 1
            span = f"GPU span {'p50 ' if many else ''}{dur(p['gpu_span_p50_ns'])}"
            tokens = ""
            if p.get("tokens"):
                sequences = p.get("sequences_p50")
                seqs = f" in {plural(sequences, 'sequence')}" if sequences and not many else ""
                tokens = f"{p['tokens']:,} tokens{seqs}: "
            per = (f" ({dur(p['ns_per_token'])} per token, {p['tokens_per_s']:,.0f} tokens/s)"
                   if p.get("ns_per_token") and p.get("tokens_per_s") else "")
            value = (f"{tokens}{span}{per}, {busy}{' (p50)' if many else ''}, "
                     f"{p['launches_per_iteration']:,.0f} launches{' per iteration' if many else ''}, {graphs}")
        rows.append((p["phase"].capitalize(), value))
    return rows


def primary_measure(kind: str) -> str:
    """What the primary bottleneck's time is: busy time for compute (its work, not time that
    could be recovered; the findings say what of it is above the roof), else time at stake."""
    return "of GPU time busy with its own work" if kind == "compute" else "of GPU time at stake"


def share_of(devices: list[int], top: int | None = None) -> str:
    """Whose time a share of the time at stake is: one GPU's, or, for several, the GPU with the
    most (`top` when known; the time at stake is one device's, never a sum: rules/impact.py)."""
    if not devices:
        return "of the time of all GPUs"
    if len(devices) == 1:
        return f"of the time of GPU {devices[0]}"
    who = f"GPU {top}" if top is not None else "the GPU"
    return f"of the time of {who} with the most of {devices_text(sorted(devices))} (each GPU's figure below)"


def impact(finding: FindingDoc) -> str:
    """"GPU time at stake: ..." for a finding, in words, with its estimated gain and, when the
    gain is far below the time at stake or not given, why (rules/impact.py)."""
    ns = finding.get("impact_ns")
    if ns is None:
        return "No GPU time at stake: a note about the capture or the data."
    affected = [d for a in finding.get("affected", []) if (d := a.get("device_id")) is not None]
    devices = sorted(set(affected))
    top = affected[0] if affected else None  # the rules list the largest first
    return (f"GPU time at stake: {dur(ns)}, {pct(finding.get('impact_pct'))} {share_of(devices, top)}."
            f"{gain_text(finding)}")


# What each named what-if change does, as the what-if table and the findings' gains name it
# (graph/changes.py). The copies change hides the copies entirely: where they outlast the
# compute, overlap alone cannot, so its gain is what avoiding them (or hiding them) buys.
WHAT_IF_WORDS = WORDS


def gain_why(finding: FindingDoc) -> str | None:
    """Why the estimated gain is far below the time at stake, or why none is given: the
    evidence line rules/impact.py writes (GAIN_WHY_PREFIXES), without its prefix."""
    evidence: list[str] = finding.get("evidence") or []
    for e in evidence:
        for prefix in GAIN_WHY_PREFIXES:
            if e.startswith(prefix):
                return e[len(prefix):]
    return None


def shown_evidence(finding: FindingDoc) -> list[str]:
    """The evidence lines report.md and report.html list: the gain's why is on the time at
    stake's line (impact), not repeated."""
    return [e for e in finding.get("evidence") or [] if not e.startswith(GAIN_WHY_PREFIXES)]


def gain_text(finding: FindingDoc) -> str:
    """" Estimated gain: ..." when the step-graph replay estimated one, with why when it is far
    below the time at stake; " No estimated gain: why." when the replay could not tell; else ""."""
    gain = finding.get("estimated_gain_ns")
    why = gain_why(finding)
    if gain is None:
        return f" No estimated gain: {why}." if why else ""
    step = finding.get("estimated_gain_step_ns")
    per_step = f", {dur(step)} per step" if step is not None else ""
    change = str(finding.get("what_if"))
    words = WHAT_IF_WORDS.get(change)
    what = words[0].lower() + words[1:] if words else change
    because = f", far below the time at stake: {why}" if why else ""
    return f" Estimated gain (step replay, {what}): {dur(gain)} over the capture{per_step}{because}."


def impact_short(finding: FindingDoc) -> str:
    ns = finding.get("impact_ns")
    if ns is None:
        return "a note"
    gain = finding.get("estimated_gain_ns")
    est = f", estimated gain {dur(gain)}" if gain is not None else ""
    return f"{dur(ns)} at stake ({pct(finding.get('impact_pct'))}){est}"


def split_findings(doc: ReportDoc) -> tuple[list[FindingDoc], list[FindingDoc]]:
    """(the first screen's findings, the rest): the first TOP_FINDINGS findings with GPU time at
    stake, in report.json's order (severity band, then estimated gain or time at stake). A note (no time at stake)
    never takes one of those places: notes go in one line below (notes())."""
    findings = list(doc.get("findings", []))
    timed = [f for f in findings if f.get("impact_ns") is not None]
    top = timed[:TOP_FINDINGS]
    return top, [f for f in findings if not any(f is t for t in top)]


def notes(doc: ReportDoc) -> list[FindingDoc]:
    """The findings with no GPU time at stake: one "Notes" line under the first screen's findings."""
    return [f for f in doc.get("findings", []) if f.get("impact_ns") is None]


def fix(finding: FindingDoc) -> str | None:
    """A finding's main fix: its first recommendation (the rules put the specific API, flag or
    change first)."""
    recs = finding.get("recommendation") or []
    return recs[0] if recs else None


def severity_counts(findings: list[FindingDoc]) -> str:
    """"2 low, 3 notes" for a list of findings."""
    order = ("high", "medium", "low", "info")
    counts = {s: sum(1 for f in findings if f["severity"] == s) for s in order}
    words = {"info": ("note", "notes")}
    parts = []
    for s in order:
        if counts[s]:
            one, many = words.get(s, (s, s))
            parts.append(f"{counts[s]} {one if counts[s] == 1 else many}")
    return ", ".join(parts)


def device_table(devices: list[DeviceDoc]) -> tuple[list[str], list[list[str]]]:
    """Where each device's time went: one row per bucket and a column per device, or for
    more than DEVICE_COLUMNS devices one row per device."""
    buckets = [b["bucket"] for b in devices[0]["buckets"]] if devices else []

    def cell(d: DeviceDoc, b: str) -> str:
        entry = next((x for x in d["buckets"] if x["bucket"] == b), None)
        return "n/a" if entry is None else f"{dur(entry['ns'])} ({pct(entry['pct_of_window'])})"

    if len(devices) > DEVICE_COLUMNS:
        headers = ["GPU", "Window", *(BUCKET_SHORT.get(b, b.replace("_", " ")) for b in buckets)]
        return headers, [[str(d["device_id"]), dur(d["window_ns"]), *(cell(d, b) for b in buckets)]
                         for d in devices]
    headers = ["Where the time went", *(f"GPU {d['device_id']}" for d in devices)]
    rows = [["Window (first to last activity)", *(dur(d["window_ns"]) for d in devices)]]
    for b in buckets:
        rows.append([BUCKET_WORDS.get(b, b.replace("_", " ")), *(cell(d, b) for d in devices)])
    return headers, rows


def groups(metric_ids: list[str]) -> list[tuple[Group, list[str]]]:
    """The groups that hold sections of this report, each with its metric ids in order."""
    out = []
    for g in GROUPS:
        if g.id == OTHER:
            ids = [m for m in metric_ids if m not in GROUP_OF]
        else:
            ids = [m for m in g.metric_ids if m in metric_ids]
        if ids or g.id == "capture":
            out.append((g, ids))
    return out


__all__ = [
    "GROUPS", "OPEN_EVIDENCE", "TOP_FINDINGS", "Group", "about", "bin_counts", "busy_rows", "device_table", "group_of",
    "groups", "impact", "impact_short", "key_numbers", "plural", "severity_counts", "since_first_kernel",
    "split_findings", "notes", "fix", "time_origin", "verdict_summary", "verdict_words", "workload_items",
    "share_of", "shown_evidence",
]


class TemplateGlobals(TypedDict):
    """The helpers both report environments (Markdown and HTML) give their templates."""

    impact: Callable[[FindingDoc], str]
    impact_short: Callable[[FindingDoc], str]
    shown_evidence: Callable[[FindingDoc], list[str]]
    share_of: Callable[[Sequence[int]], str]
    fix: Callable[[FindingDoc], str | None]
    primary_measure: Callable[[str], str]
    workload_words: Callable[[str], str]
    run_kinds: tuple[str, ...]
    devices_text: Callable[[Sequence[int]], str]
    verdict_words: Callable[[str, str | None], str]
    verdict_summary: Callable[[DiagnosisDoc, bool], str]
    roof_regime: Callable[[str | None, float | None], str]
    near_roof_pct: float
    what_if_words: dict[str, str]


def template_globals() -> TemplateGlobals:
    """The helpers both report environments (Markdown and HTML) give their templates."""
    return {
        "impact": impact,
        "impact_short": impact_short,
        "shown_evidence": shown_evidence,
        "share_of": lambda ds: share_of(list(ds)),
        "fix": fix,
        "primary_measure": primary_measure,
        "workload_words": workload_words,
        "run_kinds": RUN_KINDS,
        "devices_text": lambda ds: devices_text(list(ds)),
        "verdict_words": verdict_words,
        "verdict_summary": verdict_summary,
        "roof_regime": regime,
        "near_roof_pct": NEAR_ROOF_PCT,
        "what_if_words": WHAT_IF_WORDS,
    }
