"""report.md and report.html read like a report, on every shared real trace and the example:
report.md opens with the verdict, the key numbers and the top findings in at most OPEN_LIMIT
lines, everything else in closed <details>; report.html puts the diagnosis and the findings
first and its metric sections are prose and tables, not data dumps."""

from __future__ import annotations

import re
from html import escape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from nsys_llm_explainer import fmt
from nsys_llm_explainer.api import explain
from nsys_llm_explainer.fmt import dur
from nsys_llm_explainer.metrics import ALWAYS
from nsys_llm_explainer.model import GAIN_WHY_PREFIXES
from nsys_llm_explainer.render import Format, rich, writers
from nsys_llm_explainer.render.escape import md
from nsys_llm_explainer.render.overview import gain_text, impact, verdict_words
from tests.conftest import SHARED_TRACES, md_open_lines, nsys_trace_files
from tests.kernels.test_labels_in_reports import example_trace

OPEN_LIMIT = 60
KINETO = sorted((SHARED_TRACES / "kineto").glob("*.json.gz")) if (SHARED_TRACES / "kineto").is_dir() else []
CASES = [p.name for p in nsys_trace_files() + KINETO] + ["example"]
BUSY = ("compute", "exposed_communication")


@pytest.fixture(scope="module", params=CASES)
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if request.param == "example":
        trace = example_trace(tmp_path_factory.mktemp("example"))
    else:
        trace = next(p for p in nsys_trace_files() + KINETO if p.name == request.param)
    report = explain(trace)
    out = writers.build(report, (Format.MD, Format.HTML))
    full = writers.build(report, (Format.MD,), md="full")["report.md"]
    return {"report": report, "doc": report.document, "md": out["report.md"], "full": full,
            "html": out["report.html"], "plots": sorted(k for k in out if k.startswith("plots/")),
            "svg": {k: v for k, v in out.items() if k.startswith("plots/")}}


def key_table(lines: list[str]) -> dict[str, str]:
    start = lines.index("| Key number | Value |")
    rows = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        what, value = (c.strip() for c in re.split(r"(?<!\\)\|", line)[1:3])
        rows[what] = value
    return rows


def gpus(devices: list[int]) -> str:
    """GPU 0, GPUs 0-1 or GPUs 0, 2: written here independently of diagnosis/evidence.py."""
    if len(devices) == 1:
        return f"GPU {devices[0]}"
    if all(b == a + 1 for a, b in zip(devices, devices[1:], strict=False)):
        return f"GPUs {devices[0]}-{devices[-1]}"
    return "GPUs " + ", ".join(map(str, devices))


def verdict_line(lines: list[str], doc: dict) -> int:
    """Where the verdict is: line 2, or line 4 after what changes the figures' meaning (the
    capture's `captured` sentences, one line)."""
    captured = doc["diagnosis"]["capture"].get("captured") or []
    if not captured:
        return 2
    assert lines[2] == f"**Captured:** {rich.md(' '.join(captured))}" and lines[3] == ""
    return 4


def test_open_part_is_short_and_starts_with_the_verdict(built):
    lines = md_open_lines(built["md"])
    assert len(lines) <= OPEN_LIMIT, f"{len(lines)} open lines"
    d = built["doc"]["diagnosis"]
    assert lines[0] == "# nsys-llm-explain report" and lines[1] == ""
    words = verdict_words(d["verdict"], (d.get("primary") or {}).get("kind"))
    plain = verdict_words(d["verdict"])  # the summary's own head
    summary = d["summary"].removeprefix(f"{plain}: ")  # the verdict's words are not said twice
    assert not summary.startswith(plain)
    at = verdict_line(lines, built["doc"])
    assert lines[at] == f"**Verdict:** {words} (`{d['verdict']}`, {d['confidence']} confidence): {rich.md(summary)}"


def test_key_numbers_come_from_the_diagnosis(built):
    doc = built["doc"]
    keys = key_table(md_open_lines(built["md"]))
    devices = doc["diagnosis"]["devices"]
    if not devices:
        assert keys["GPU busy"] == "not measured, because no kernels were captured"
    for d in devices:  # the shared traces have at most 4 GPUs: one row each
        busy = sum(b["ns"] for b in d["buckets"] if b["bucket"] in BUSY)
        window = d["window_end_ns"] - d["window_start_ns"]
        assert keys[f"GPU {d['device_id']} busy"] == f"{100 * busy / window:.1f}% of its {dur(window)} window"
    tk = doc["metrics"]["top_kernels"]
    if tk["status"] == "ok":
        n, names = len_kernels(built), len(set(built["report"].table("kernels")["name"]))
        # a sum over every device says so beside the per-device busy rows
        devices = sorted(d["device_id"] for d in doc["diagnosis"]["devices"])
        over = f", summed over {gpus(devices)}" if len(devices) > 1 else ""
        assert keys["Kernel time"] == (f"{dur(tk['total_kernel_ns'])} in {n:,} kernel{'s' * (n != 1)} "
                                       f"({names:,} name{'s' * (names != 1)}){md(over)}")
    else:
        assert "Kernel time" not in keys
    serving = doc["metrics"]["serving"]
    if serving["status"] == "ok":  # a serving capture speaks of iterations, not steps
        split = ", ".join(f"{p['iterations']:,} {p['phase']}" for p in serving["phases"])
        assert keys["Iterations"].startswith(f"{serving['iteration_count']:,} ({split}), from ")
        for p in serving["phases"]:
            row = keys[p["phase"].capitalize()]
            if p["phase"] == "decode" and p["period_p50_ns"] is not None:
                assert row.startswith(f"{dur(p['period_p50_ns'])} per output token (p50; p90 "
                                      f"{dur(p['period_p90_ns'])}), GPU span {dur(p['gpu_span_p50_ns'])}")
            else:
                assert f"GPU span {'p50 ' if p['iterations'] > 1 else ''}{dur(p['gpu_span_p50_ns'])}" in row
    steps = doc["metrics"]["steps"]
    phases = ([p for p in steps.get("phases", []) if p["steps"]]
              if steps["status"] == "ok" and serving["status"] != "ok" else [])
    if phases and steps["confidence"] == "low":  # guessed repeats: no latency stands on them
        assert keys["Step latency"] == (f"not measured: {sum(p['steps'] for p in phases):,} repeats found with low "
                                        "confidence (pass --step-range or a phase map)")
        phases = []
    for p in phases:
        row = keys["Step latency" if len(phases) == 1 else f"Step latency ({p['phase']})"]
        if p["steps"] == 1:
            assert row == f"{dur(p['p50_ns'])} (1 step)"
        else:
            assert row == f"p50 {dur(p['p50_ns'])}, p99 {dur(p['p99_ns'])} over {p['steps']:,} steps"
    if not phases and steps.get("confidence") != "low":
        assert not any(k.startswith("Step latency") for k in keys)
    primary = doc["diagnosis"]["primary"]
    if primary is None:
        assert "Primary bottleneck" not in keys
    elif not primary["devices"]:  # how the run went: no GPU time at stake
        # in words, never the id: "the program failed: stdout: ERROR: ..."
        words = {"program_failed": "the program failed", "killed": "the program was killed",
                 "profiler_failed": "the profiler failed to attach", "cuda_not_traced": "CUDA was not traced",
                 "kernels_not_recorded": "kernels were launched but not recorded", "no_kernels": "no kernel ran"}
        assert keys["Primary bottleneck"] == md(f"{words[primary['kind']]}: {primary['evidence'][0]}")
    else:
        where = gpus(primary["devices"])
        # several GPUs: the figure is the one with the most (never their sum), and says so
        most = "" if len(primary["devices"]) == 1 else " on the GPU with the most"
        assert keys["Primary bottleneck"].startswith(
            f"{primary['kind']} on {md(where)}: {dur(primary['impact_ns'])} "
            f"{'of GPU time busy with its own work' if primary['kind'] == 'compute' else 'of GPU time at stake'}"
            f"{most}, {primary['impact_pct']:.1f}%")


def len_kernels(built: dict[str, Any]) -> int:
    """Kernels counted from the CSV table, not from the metric's own count."""
    return int(built["report"].table("kernels")["calls"].sum())


def test_top_findings_show_time_at_stake_the_fix_and_evidence(built):
    """The first three findings with GPU time at stake (report.json's order: severity band,
    then estimated gain or time at stake), each with its main fix open as one line, then its first five evidence lines;
    the rest of its advice and evidence is behind details."""
    text, doc = built["md"], built["doc"]
    lines = md_open_lines(text)
    findings = doc["findings"]
    timed = [f for f in findings if f["impact_ns"] is not None]
    # by severity band, then by the estimated gain of the change where known, else by the time at stake
    bands = {"high": 0, "medium": 1, "low": 2, "info": 3}
    keys = [(bands[f["severity"]], -(f["estimated_gain_ns"] if f["estimated_gain_ns"] is not None
                                     else f["impact_ns"])) for f in timed]
    assert keys == sorted(keys)
    for i, f in enumerate(timed[:3], start=1):
        head = f"### {i}. {f['severity'].upper()} · {f['rule_id']}: {rich.md(f['title'])}"
        at = lines.index(head)
        devices = sorted({a["device_id"] for a in f["affected"] if a["device_id"] is not None})
        # one GPU's time at stake, never a sum: with several GPUs, the one with the most (first)
        whose = ("all GPUs" if not devices else gpus(devices) if len(devices) == 1
                 else f"GPU {f['affected'][0]['device_id']} with the most of {gpus(devices)} (each GPU's figure below)")
        stake = f"GPU time at stake: {dur(f['impact_ns'])}, {f['impact_pct']:.1f}% of the time of {whose}."
        assert impact(f) == stake + gain_text(f)
        assert lines[at + 2] == f"{rich.md(impact(f))} Confidence: {f['confidence']}."
        assert lines[at + 4] == f"**Fix:** {rich.md(f['recommendation'][0])}"
        # the gain's why is on the time at stake's line, not among the evidence lines
        evidence = [e for e in f["evidence"] if not e.startswith(GAIN_WHY_PREFIXES)]
        for why in (e.split(": ", 1)[1] for e in f["evidence"] if e.startswith(GAIN_WHY_PREFIXES)):
            assert why in impact(f)
        shown = [f"- {rich.md(e)}" for e in evidence[:5]]
        assert lines[at + 6 : at + 6 + len(shown)] == shown
        for e in evidence[5:] + f["recommendation"][1:]:
            assert f"- {rich.md(e)}" in text and f"- {rich.md(e)}" not in lines
    notes = [f for f in findings if f["impact_ns"] is None]
    for f in notes:  # never among the first three: one Notes line names them all
        assert not any(x.endswith(f"{f['rule_id']}: {rich.md(f['title'])}") for x in lines if x.startswith("### "))
    note_line = next((x for x in lines if x.startswith("**Notes**")), None)
    assert (note_line is not None) == bool(notes)
    for f in notes:
        assert f"{rich.md(f['title'])} ({f['rule_id']})" in note_line
    if not findings:
        assert "No rule fired. The sections below still hold the measurements." in lines


def test_other_findings_are_one_line_each_behind_details(built):
    text, lines = built["md"], md_open_lines(built["md"])
    timed = [f for f in built["doc"]["findings"] if f["impact_ns"] is not None]
    rest = [f for f in built["doc"]["findings"] if f not in timed[:3]]
    for f in rest:
        line = f"- **{f['severity'].upper()}** · {f['rule_id']}: {rich.md(f['title'])} · "
        assert sum(x.startswith(line) for x in text.splitlines()) == 1, line
        assert not any(x.startswith(line) for x in lines)
    summary = next((x for x in text.splitlines() if "more finding" in x), None)
    assert (summary is not None) == bool(rest)
    if rest:
        assert summary.startswith(f"<details><summary><strong>{len(rest)} more finding")


def test_sections_and_plots_are_inside_details(built):
    text, lines = built["md"], md_open_lines(built["md"])
    all_lines = text.splitlines()
    for metric in ALWAYS:
        head = f"### {md(metric.title)}"
        assert head in all_lines and head not in lines
    for plot in built["plots"]:
        link = f"]({plot})"
        assert link in text and not any(link in x for x in lines)
    for head in ("### Coverage and limitations", "### About the trace"):
        assert head in all_lines and head not in lines


def test_full_layout_is_open_with_the_diagnosis_first(built):
    full = built["full"]
    lines = full.splitlines()
    assert "<details" not in full
    assert lines[verdict_line(lines, built["doc"])].startswith("**Verdict:**")
    order = [lines.index("## Diagnosis"), lines.index("## Findings"), lines.index(f"## {md(ALWAYS[0].title)}"),
             lines.index("## Coverage and limitations")]
    assert order == sorted(order)
    for f in built["doc"]["findings"]:
        assert f"### {f['severity'].upper()} · {f['rule_id']}: {rich.md(f['title'])}" in lines
    assert len(md_open_lines(full)) == len(lines)


class Page(HTMLParser):
    """Ids, in-page links, and the visible text of each metric section (its figures aside:
    a plot's data table may name kernels in full)."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.links: list[str] = []
        self.text: dict[str, list[str]] = {}
        self.stack: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.append(str(a["id"]))
        if tag == "a" and (a.get("href") or "").startswith("#"):
            self.links.append(str(a["href"])[1:])
        self.stack.append((tag, a.get("id")))

    def handle_endtag(self, tag: str) -> None:
        while self.stack and self.stack.pop()[0] != tag:
            pass

    def handle_data(self, data: str) -> None:
        tags = [t for t, _ in self.stack]
        if any(t in ("figure", "script", "style", "svg") for t in tags):
            return
        section = next((i for t, i in reversed(self.stack) if t == "section" and i and i.startswith("m-")), None)
        if section:
            self.text.setdefault(section, []).append(data)


def test_html_reads_like_a_report(built):
    page = Page()
    page.feed(built["html"])
    assert len(page.ids) == len(set(page.ids)), "duplicate ids"
    assert set(page.links) <= set(page.ids), set(page.links) - set(page.ids)
    order = [page.ids.index(i) for i in ("diagnosis", "findings", "time")]
    order.append(min(page.ids.index(i) for i in page.ids if i.startswith("m-")))
    assert order == sorted(order)
    doc = built["doc"]
    findings = [f"finding-{i}" for i in range(1, len(doc["findings"]) + 1)]
    assert [x for x in page.links if x.startswith("finding-")] == findings  # the list at the top
    for i, f in enumerate(doc["findings"], start=1):
        for mid in f["metric_ids"]:
            assert f'<a href="#m-{mid}">' in built["html"].split(f'id="finding-{i}"', 1)[1].split("</details>")[0]
    assert {m.id for m in ALWAYS} <= {i[2:] for i in page.ids if i.startswith("m-")}
    for section, parts in page.text.items():
        text = " ".join(parts)
        for bad in ("{", "(see report.json)", " entries"):
            assert bad not in text, (section, bad, text[max(0, text.find(bad) - 80): text.find(bad) + 80])
        assert not re.search(r"(?<![A-Za-z])re:", text), section


def test_html_numbers_are_sortable_with_units(built):
    """Right-aligned cells carry their number in base units for the sorter (ns, bytes)."""
    cells = re.findall(r'<td class="n" data-v="([^"]+)">([^<]*)</td>', built["html"])
    assert cells
    unit = {"ns": 1, "µs": 1e3, "ms": 1e6, "s": 1e9, "B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "%": 1}
    for value, shown in cells:
        m = re.match(r"(-?[\d,.]+) ?(ns|µs|ms|s|B|KiB|MiB|GiB|%)?", shown)
        assert m, shown
        expected = float(m.group(1).replace(",", "")) * unit.get(m.group(2) or "", 1)
        assert float(value) == pytest.approx(expected, rel=1e-6), shown


def test_md_files_name_no_path_outside_the_report(built: dict[str, Any]) -> None:
    """Plots are linked relative to report.md."""
    for link in re.findall(r"\]\(([^)]*)\)", built["md"]):
        assert re.fullmatch(r"plots/[a-z_]+\.svg", link), link
        assert Path(link).as_posix() in built["plots"]


def _md_code(text: str) -> str:
    """`code` spans kept, the text between them Markdown-escaped (a reference for our own
    sentences, which hold no backtick inside a span)."""
    parts = text.split("`")
    return "".join(f"`{p}`" if i % 2 else md(p) for i, p in enumerate(parts))


def _html_code(text: str) -> str:
    parts = text.split("`")
    return "".join(f"<code>{escape(p)}</code>" if i % 2 else escape(p) for i, p in enumerate(parts))


def test_code_in_skip_reasons_and_limitations_renders_as_code(built):
    """Our own `code spans` in "Not measured, because ..." and in the coverage lines are code in
    both files: never an escaped backtick in report.md, a <code> element in report.html."""
    for text in (built["md"], built["full"]):
        assert "\\`" not in text
    doc = built["doc"]
    reasons = [m["reason"] for m in doc["metrics"].values() if m["status"] == "skipped"]
    for reason in reasons:
        assert f"_Not measured, because {_md_code(reason)}._" in built["md"]
        assert f'<p class="skipped">Not measured, because {_html_code(reason)}.</p>' in built["html"]
    for line in doc["limitations"]:
        assert f"- {_md_code(line)}" in built["md"].splitlines()
        assert f"<li>{_html_code(line)}</li>" in built["html"]
    coded = [r for r in reasons if "`" in r]
    if built["doc"]["trace"]["path"].endswith(("nsysai_h100_2gpu_1s.sqlite", "hta_alexnet_a100.json.gz")):
        assert coded  # these traces have such reasons: the checks above are not vacuous
    for reason in coded:
        assert _html_code(reason).count("<code>") >= 1


def test_html_says_n_a_never_none(built):
    text = re.sub(r"<[^>]+>", " ", built["html"])
    assert not re.search(r"\bNone\b", text), text[max(0, text.find("None") - 80): text.find("None") + 40]
    dist = built["doc"]["trace"].get("distributed")
    if dist:
        world = "n/a" if dist["world_size"] is None else dist["world_size"]
        row = f"<tr><td>Distributed</td><td>rank {dist['rank']} of {world} ({dist['backend'] or 'backend unknown'})"
        assert row in built["html"]


def test_percentages_read_the_same_in_titles_and_bodies(built):
    """A finding's stored impact_pct (and each device's) reads, at one decimal, as the
    unrounded share does: the share recomputed here from the GPU time at stake and the
    device windows. A title that formats the unrounded share and the body that formats the
    stored value then agree (75.6488% is stored 75.64, not 75.65)."""
    doc = built["doc"]
    windows = {d["device_id"]: d["window_ns"] for d in doc["diagnosis"]["devices"]}
    for f in doc["findings"]:
        devices = [a["device_id"] for a in f["affected"]]
        if f["impact_ns"] is None or None in devices or not set(devices) <= set(windows):
            continue
        # the time at stake is the device with the most's, of its own window
        raw = 100.0 * f["impact_ns"] / windows[f["affected"][0]["device_id"]]
        assert f"{f['impact_pct']:.1f}" == f"{raw:.1f}", f["rule_id"]
        for a in f["affected"]:
            assert f"{a['impact_pct']:.1f}" == f"{100.0 * a['impact_ns'] / windows[a['device_id']]:.1f}"
        shown = re.findall(r"\((\d+\.\d)% of ", f["title"])
        if shown and f["rule_id"] in ("NLE208", "NLE209", "NLE210", "NLE211", "NLE103"):
            assert shown[0] == f"{f['impact_pct']:.1f}", f["title"]


def test_long_durations_are_not_written_in_small_units(built):
    """From 10,000 of a unit on, the next unit: no "421,287.3 us" or "12,345.678 ms"."""
    for text in (built["full"], built["html"]):
        for value, unit in re.findall(r"(?<![\d,.])(\d[\d,]*\.\d+) (us|ms)\b", text):
            assert float(value.replace(",", "")) < 10_000, f"{value} {unit}"


def test_gap_tables_give_the_time_on_the_timeline_axis(built):
    """Largest-gap rows show their start as the time since the first kernel (the origin of
    the timeline plot's axis) beside the raw timestamp."""
    doc, text = built["doc"], built["full"]
    tl = doc["metrics"]["timeline"]
    if tl["status"] != "ok":
        return
    for mid in ("gpu_idle", "idle_causes"):
        m = doc["metrics"][mid]
        gaps = (m.get("gaps" if mid == "gpu_idle" else "top_gaps") or []) if m["status"] == "ok" else []
        for g in gaps[:20]:
            row = f"| {g['device_id']} | {fmt.ms(g['start_ns'] - tl['window_start_ns'])} | {g['start_ns']} | "
            assert row in text, row


def test_timeline_bands_have_distinct_labels_and_steps_share_one(built):
    svg = built["svg"].get("plots/timeline.svg")
    if svg is None:
        return
    bands = re.findall(r"<text[^>]*><title>NVTX ([^<]*): [^<:]*</title>([^<]*)</text>", svg)
    names = [n for n, _ in bands]
    assert len(set(names)) == len(names) and len({label for _, label in bands}) == len(bands), bands
    tl = built["doc"]["metrics"]["timeline"]
    assert sorted(names) == sorted(escape(b["name"], quote=False) for b in tl["bands"])
    assert not any(re.search(r"#\d+$", n) for n in names)  # ProfilerStep#551 ... are one band


def test_workload_box_names_each_signal_once_with_kernel_labels(built):
    from nsys_llm_explainer.metrics.workload import SIGNALS

    m = built["doc"]["metrics"]["workload"]
    if m["status"] != "ok":
        return
    box = built["html"].split("<h3>Workload</h3>", 1)[1].split("<h3>Capture</h3>", 1)[0]
    labels = built["report"].kernel_labels
    for sid in set(m["kernel_signals"]) | set(m["range_signals"]):
        head = f"<li><strong>{escape(SIGNALS[sid][2])}</strong>: "
        assert box.count(head) == 1, head
        item = box.split(head, 1)[1].split("</li>", 1)[0]
        k, r = m["kernel_signals"].get(sid), m["range_signals"].get(sid)
        if k is not None:
            full = k["examples"][0]
            assert item.startswith(f"{k['pct_of_kernel_time']:.1f}% of kernel time, e.g. "
                                   f'<span class="k" title="{escape(full)}">{escape(labels(full))}</span>')
        if r is not None:
            assert f"{r['ranges']:,} range" in item
    assert "void at::" not in re.sub(r'title="[^"]*"', "", box)  # no raw demangled names on view


def test_group_summaries_do_not_repeat_the_group_title(built):
    for line in built["md"].splitlines():
        m = re.match(r"<details><summary><strong>(.*?)</strong>: (.*)</summary>$", line)
        if m:
            assert not m.group(2).startswith(m.group(1)), line


def test_plot_tables_show_labels_not_demangled_names(built):
    for table in re.findall(r"as a table</summary>(.*?)</table>", built["html"], re.S):
        cells = re.findall(r"<td[^>]*>([^<]*)</td>", table)
        assert not any(c.startswith("void ") or "{lambda" in c or "[lambda" in c for c in cells), cells[:5]


def test_operator_kernels_table_has_the_label_column(built):
    rows = built["report"].table("operator_kernels")
    assert list(rows.columns[:3]) == ["operator", "kernel", "label"]
    labels = built["report"].kernel_labels
    assert rows["label"].tolist() == [labels(k) for k in rows["kernel"]]


def test_tables_hold_words_not_json_or_empty_columns(built):
    lines = built["full"].splitlines()
    if "| Operator | Input dims | Input types | Calls | Kernel (own) |" in lines:
        at = lines.index("| Operator | Input dims | Input types | Calls | Kernel (own) |") + 2
        m = built["doc"]["metrics"]["operators"]
        expected = [", ".join(t or "-" for t in s["input_types"])
                    for o in m["operators"][:5] for s in o["top_shapes"][:3]]
        shown = [re.split(r"(?<!\\)\|", x)[3].strip() for x in lines[at: at + len(expected)]]
        assert shown == [md(e) for e in expected]
    # No phase map: the NVTX tables have no Phase column (it would be empty).
    for mid, head in (("nvtx_ranges", "| Range | Count |"), ("nvtx_attribution", "| Range | Kernels |")):
        if built["doc"]["metrics"][mid]["status"] == "ok":
            assert any(x.startswith(head) for x in lines), head


def test_compute_evidence_names_kernels_by_label(built):
    d = built["doc"]["diagnosis"]
    primary = d["primary"]
    if primary is None or primary["kind"] != "compute":
        return
    labels = built["report"].kernel_labels
    rows = [r for r in built["doc"]["metrics"]["top_kernels"]["kernels"][:3] if r["device_id"] in primary["devices"]]
    expected = [f"{labels(r['name'])} on GPU {r['device_id']}: {dur(r['total_ns'])} in {r['calls']:,} calls"
                for r in rows]
    assert [e for e in primary["evidence"] if " calls" in e and " on GPU " in e] == expected
    assert rows  # the example trace is compute-bound: the check above is not vacuous there


def test_one_busy_figure_and_one_window_per_device_on_the_first_screen(built):
    """The verdict, the key numbers, the primary bottleneck and the findings give a device's
    busy share and its window the same way: the accounting's busy time over its window."""
    lines = md_open_lines(built["md"])
    text = "\n".join(lines)
    for dev in built["doc"]["diagnosis"]["devices"]:
        busy = sum(b["ns"] for b in dev["buckets"] if b["bucket"] in BUSY)
        share, window = f"{100.0 * busy / dev['window_ns']:.1f}%", dur(dev["window_ns"])
        gpu = f"GPU {dev['device_id']}"
        for found in re.findall(rf"{gpu} (?:is )?busy ([\d.]+%)", text):
            assert found == share, (gpu, found, share)
        for line in lines:
            if gpu in line or (line.startswith(f"| {gpu} busy")):
                for w in re.findall(r"of its ([\d.,]+ (?:ns|µs|ms|s)) window", line):
                    assert w == window, (line, window)
    assert "from the first to the last kernel" not in text


def test_first_screen_figures_have_three_significant_digits(built):
    """Durations and sizes on the first screen carry at most three significant digits (integer
    digits are never cut: 1,234 s), and microseconds are written µs."""
    for line in md_open_lines(built["md"]):
        prose = re.sub(r"`[^`]*`", "", line)
        assert not re.search(r"\d us\b", prose), line
        for number, unit in re.findall(r"(\d[\d,]*(?:\.\d+)?) ?(ns|µs|ms|s|KiB|MiB|GiB|GB/s)\b", prose):
            digits = number.replace(",", "")
            whole, _, decimals = digits.partition(".")
            significant = (whole.lstrip("0") + decimals).lstrip("0") if whole.strip("0") else decimals.lstrip("0")
            assert len(significant) <= 3 or not decimals, (number, unit, line)
