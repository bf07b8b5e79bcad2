"""SVG builders: element counts bounded by bins (not by kernels or steps), every coordinate
inside the viewBox, trace text escaped, a title and a text alternative on every plot."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from hashlib import sha1
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.kernels.labels import labels_for
from nsys_llm_explainer.model import MetricResult, Report, Table, TraceInfo
from nsys_llm_explainer.render.json_writer import report_dict
from nsys_llm_explainer.render.svg import PLOTS, build_plots, plot_files, steps, timeline, top_kernels
from nsys_llm_explainer.render.svg.base import Plot, PlotInput, esc, n

NS = "{http://www.w3.org/2000/svg}"
HOSTILE = '<script>alert("x")</script> & </svg><b>'


def make_report(
    metrics: dict[str, dict[str, Any]], tables: dict[str, tuple[Table, ...]] | None = None
) -> Report:
    info = TraceInfo("t.sqlite", 1, None, None, (), (), 0, 10, {})
    results = {
        mid: MetricResult(mid, data, (tables or {}).get(mid, ())) for mid, data in metrics.items()
    }
    return Report(info, results, (), (), (), {"top_n": 20})


def plot_input(
    metrics: dict[str, dict[str, Any]], tables: dict[str, tuple[Table, ...]] | None = None
) -> PlotInput:
    report = make_report(metrics, tables)
    return PlotInput(report_dict(report), report, labels_for(report.metrics))


def timeline_data(bins: int, devices: int = 2, causes: bool = True) -> dict[str, Any]:
    pattern = [None, 0.0, 12.5, 100.0, 55.0]
    return {
        "bins": bins,
        "window_start_ns": 0,
        "window_end_ns": bins * 1_000,
        "bin_ns": 1_000.0,
        "causes": ["sync_wait", "memcpy", "launch_bound", "host_other", "capture_edge"]
        if causes
        else [],
        "devices": [
            {
                "device_id": d,
                "busy_pct": [pattern[i % 5] for i in range(bins)],
                "idle_cause": [(i // 7) % 6 - 1 for i in range(bins)] if causes else None,
            }
            for d in range(devices)
        ],
        "bands_source": "top_level_nvtx",
        "bands": [
            {"name": HOSTILE, "covered_ns": 5_000, "runs": [[i, i + 1] for i in range(0, bins, 2)]},
            {"name": "decode", "covered_ns": 7, "runs": [[0, bins]]},
        ],
        "bands_reason": None,
    }


def parse(plot: Plot) -> ET.Element:
    return ET.fromstring(plot.svg(standalone=True))


def pen_points(d: str) -> list[tuple[float, float]]:
    """Absolute pen positions of a path using the commands the builders emit (M h v H V z)."""
    points, x, y = [], 0.0, 0.0
    for cmd, args in re.findall(r"([MhvHVz])([^MhvHVz]*)", d):
        nums = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", args)]
        if cmd == "M":
            x, y = nums
        elif cmd == "h":
            x += nums[0]
        elif cmd == "v":
            y += nums[0]
        elif cmd == "H":
            x = nums[0]
        elif cmd == "V":
            y = nums[0]
        points.append((x, y))
    return points


def assert_inside_viewbox(root: ET.Element) -> None:
    _, _, w, h = (float(v) for v in root.get("viewBox").split())
    for el in root.iter():
        tag = el.tag.replace(NS, "")
        pts: list[tuple[float, float]] = []
        if tag == "rect":
            x, y = float(el.get("x")), float(el.get("y"))
            pts = [(x, y), (x + float(el.get("width")), y + float(el.get("height")))]
        elif tag == "line":
            pts = [
                (float(el.get("x1")), float(el.get("y1"))),
                (float(el.get("x2")), float(el.get("y2"))),
            ]
        elif tag == "text":
            pts = [(float(el.get("x")), float(el.get("y")))]
        elif tag == "path":
            pts = pen_points(el.get("d"))
        for px, py in pts:
            assert -0.05 <= px <= w + 0.05 and -0.05 <= py <= h + 0.05, (tag, px, py, w, h)


def shapes(root: ET.Element) -> int:
    return sum(
        1 for el in root.iter() if el.tag.replace(NS, "") in ("rect", "path", "line", "text")
    )


def assert_accessible(root: ET.Element, plot: Plot) -> None:
    assert root.get("role") == "img"
    title, desc = root.find(f"{NS}title"), root.find(f"{NS}desc")
    assert title is not None and title.text == plot.title
    assert desc is not None and len(desc.text) > 20
    assert root.get("aria-labelledby") == f"{plot.id}-t {plot.id}-d"
    assert plot.headers and plot.rows and all(len(r) == len(plot.headers) for r in plot.rows)


@pytest.mark.parametrize("bins", [1, 10, 1000])
def test_timeline_element_count_does_not_grow_with_bins(bins):
    plot = timeline.build_timeline(plot_input({"timeline": timeline_data(bins)}))
    root = parse(plot)
    assert_inside_viewbox(root)
    assert_accessible(root, plot)
    # per device: background, idle, 5 causes, busy, 2 labels; per band: path + label; axis <= 30.
    assert shapes(root) <= 2 * 10 + 2 * 2 + 30 + 3 * 8
    assert len(plot.rows) == min(timeline.SEGMENTS, bins)


def test_timeline_busy_outline_follows_the_bins():
    data = timeline_data(4, devices=1, causes=False)
    data["devices"][0]["busy_pct"] = [0.0, 100.0, 100.0, 50.0]
    plot = timeline.build_timeline(plot_input({"timeline": data}))
    busy = next(el for el in parse(plot).iter(f"{NS}path") if el.get("class") == "busy")
    top = timeline.ROW_H  # bins are 250 px wide; 100% rises ROW_H above the strip bottom
    xs = [x for x, _ in pen_points(busy.get("d"))]
    ys = [y for _, y in pen_points(busy.get("d"))]
    assert xs[0] == timeline.LEFT and xs[-1] == timeline.LEFT + timeline.PLOT_W
    assert max(ys) - min(ys) == pytest.approx(top)
    # Equal neighbours merge: bins 1 and 2 (both 100%) share one segment.
    assert sorted(set(xs)) == [timeline.LEFT + 250 * i for i in (0, 1, 3, 4)]


def test_timeline_table_averages_bins():
    data = timeline_data(40, devices=1, causes=False)
    data["devices"][0]["busy_pct"] = [100.0] * 20 + [None, 0.0] * 10
    headers, rows = timeline.segment_rows(data)
    assert headers == ("Time since first kernel", "GPU 0 busy")
    assert [r[1] for r in rows] == ["100%"] * 10 + ["0.0%"] * 10


def test_top_kernels_escapes_and_colours_by_category():
    kernels = [
        {
            "name": HOSTILE if i == 0 else f"k{i}",
            "device_id": i % 2,
            "calls": 3,
            "total_ns": 1000 - i,
        }
        for i in range(40)
    ]
    names = pd.DataFrame({"name": [HOSTILE, "k1"], "category": ["gemm", "attention"]})
    cats = {"categories": [{"category": "gemm"}, {"category": "attention"}, {"category": "other"}]}
    inp = plot_input(
        {
            "top_kernels": {"kernels": kernels, "devices": [0, 1], "total_kernel_ns": 40_000},
            "categories": cats,
        },
        {"categories": (Table("kernel_category_names", ("name", "category"), names),)},
    )
    plot = top_kernels.build_top_kernels(inp)
    text = plot.svg()
    assert "<script>" not in text and "</svg><b>" not in text and "&lt;script&gt;" in text
    root = parse(plot)
    assert_inside_viewbox(root)
    assert_accessible(root, plot)
    bars = [el for el in root.iter(f"{NS}rect") if el.find(f"{NS}title") is not None]
    assert len(bars) == top_kernels.TOP
    assert bars[0].get("class") == "k0" and bars[1].get("class") == "k1"
    assert bars[2].get("class") == top_kernels.OTHER_CLASS  # no category known
    # The table shows labels; the full name is the first cell's tooltip (the template escapes both).
    assert plot.headers == ("Kernel", "Devices", "Calls", "Total", "Share", "Category")
    assert plot.rows[0][0] == HOSTILE and plot.row_titles[0] == HOSTILE
    assert plot.row_titles[1:3] == ("k1", "k2")


def test_top_kernels_sums_a_name_over_devices():
    kernels = [
        {"name": "a", "device_id": 0, "calls": 1, "total_ns": 10},
        {"name": "b", "device_id": 0, "calls": 1, "total_ns": 15},
        {"name": "a", "device_id": 1, "calls": 2, "total_ns": 10},
    ]
    rows = top_kernels.by_name({"kernels": kernels, "total_kernel_ns": 35})
    assert [(r["name"], r["total_ns"], r["calls"], r["devices"]) for r in rows] == [
        ("a", 20, 3, [0, 1]),
        ("b", 15, 1, [0]),
    ]


def test_gap_histogram_shares_and_bounds():
    hist = [
        {
            "device_id": d,
            "buckets": [
                {"label": lab, "count": c, "total_ns": t}
                for lab, c, t in zip(
                    ["<10us", "10-100us", "0.1-1ms", "1-10ms", ">10ms"],
                    [90, 5, 3, 1, 1],
                    [1, 2, 3, 4, 90],
                    strict=True,
                )
            ],
        }
        for d in range(5)
    ]
    plot = timeline.build_gap_histogram(plot_input({"gpu_idle": {"histograms": hist}}))
    root = parse(plot)
    assert_inside_viewbox(root)
    assert_accessible(root, plot)
    tips = [
        el.find(f"{NS}title").text
        for el in root.iter(f"{NS}rect")
        if el.find(f"{NS}title") is not None
    ]
    assert len(tips) == 5 * 5 * 2
    assert "90.0% of gaps" in tips[0] and "90.0% of idle time" in tips[9]


def test_steps_marks_are_bounded_by_pixels_not_steps():
    k = 50_000
    rows = [
        {
            "phase": "decode" if i % 3 else "prefill",
            "start_ns": i * 1_000,
            "latency_ns": 500 + i % 97,
        }
        for i in range(k)
    ]
    plot = steps.build_steps(plot_input({"steps": {"steps": rows}}))
    root = parse(plot)
    assert_inside_viewbox(root)
    assert_accessible(root, plot)
    marks = [el for el in root.iter(f"{NS}path") if el.get("class", "").startswith("k")]
    assert len(marks) == 2
    assert all(el.get("d").count("M") <= steps.MAX_MARKS for el in marks)
    assert dict((r[0], r[1]) for r in plot.rows) == {"decode": "33,333", "prefill": "16,667"}


def test_steps_from_the_csv_table_when_json_has_no_rows():
    frame = pd.DataFrame(
        {"step": [0, 1], "phase": ["step", "step"], "start_ns": [0, 10], "latency_ns": [5, 7]}
    )
    inp = plot_input(
        {"steps": {"phases": []}}, {"steps": (Table("steps", tuple(frame.columns), frame),)}
    )
    plot = steps.build_steps(inp)
    assert plot is not None and plot.rows[0][:2] == ("step", "2")


def test_per_process_bars():
    procs = [
        {
            "pid": p,
            "kernel_count": 1,
            "kernel_ns": p * 10,
            "pct_of_kernel_time": 1.0,
            "devices": [0],
        }
        for p in range(30, 0, -1)
    ]
    plot = top_kernels.build_per_process(plot_input({"per_process": {"processes": procs}}))
    root = parse(plot)
    assert_inside_viewbox(root)
    assert_accessible(root, plot)
    assert len(plot.rows) == top_kernels.PER_PROCESS_TOP


def test_missing_metrics_give_reasons_not_empty_plots():
    plots, missing = build_plots(plot_input({}))
    assert plots == [] and {m.title for m in missing} == {s.title for s in PLOTS}
    assert all("did not run" in m.reason for m in missing)


def test_a_failing_builder_loses_only_its_plot():
    bad = {"top_kernels": {"kernels": [{"nonsense": 1}], "devices": [0], "total_kernel_ns": 1}}
    plots, missing = build_plots(plot_input({"timeline": timeline_data(10), **bad}))
    assert [p.id for p in plots] == ["timeline"]
    assert any("could not be drawn" in m.reason for m in missing)


def test_plot_files_are_standalone_xml_with_a_stylesheet():
    files = plot_files([timeline.build_timeline(plot_input({"timeline": timeline_data(100)}))])
    text = files["plots/timeline.svg"]
    root = ET.fromstring(text.split("\n", 1)[1])
    assert root.tag == f"{NS}svg" and root.find(f"{NS}style") is not None
    assert "prefers-color-scheme: dark" in text


def test_esc_and_n():
    assert esc('<a b="c">&\x00\x1f') == "&lt;a b=&quot;c&quot;&gt;&amp;"
    assert n(1.0) == "1" and n(2.25) == "2.2" and n(float("nan")) == "0" and n(-0.04) == "-0"


def test_step_marks_merge_per_cell_and_coarsen():
    assert len(steps.marks(np.array([0.0, 0.5, 10.0]), np.array([0.0, 0.5, 10.0]))) == 2
    rng = np.random.default_rng(0)
    many = steps.marks(rng.uniform(0, 560, 200_000), rng.uniform(0, 200, 200_000))
    assert steps.MAX_MARKS // 4 < len(many) <= steps.MAX_MARKS


def test_timeline_band_labels_stay_distinct():
    data = timeline_data(10, devices=1, causes=False)
    data["bands"] = [
        {"name": "KernelExecutor::compileFusion", "covered_ns": 9, "runs": [[0, 5]]},
        {"name": "KernelExecutor::runFusion", "covered_ns": 8, "runs": [[5, 10]]},
        {"name": "autograd::engine::evaluate_function: SelectBackward0", "covered_ns": 7, "runs": [[1, 2]]},
        {"name": "decode", "covered_ns": 6, "runs": [[2, 3]]},
    ]
    root = parse(timeline.build_timeline(plot_input({"timeline": data})))
    shown = [
        (tip.text, tip.tail) for el in root.iter(f"{NS}text")
        if (tip := el.find(f"{NS}title")) is not None and (tip.text or "").startswith("NVTX ")
    ]
    assert shown == [
        ("NVTX KernelExecutor::compileFusion: 9 ns", "…compileFusion"),
        ("NVTX KernelExecutor::runFusion: 8 ns", "…runFusion"),
        ("NVTX autograd::engine::evaluate_function: SelectBackward0: 7 ns", "…SelectBackward0"),
        ("NVTX decode: 6 ns", "decode"),
    ]


def test_shorten_all_examples():
    from nsys_llm_explainer.render.escape import shorten_all

    assert shorten_all(["model.layers.10.self_attn", "model.layers.11.self_attn"], 16) == {
        "model.layers.10.self_attn": "…10.self_attn", "model.layers.11.self_attn": "…11.self_attn"}
    same = shorten_all(["a b", "a  b"], 16)  # equal once blanks collapse: a hash tells them apart
    assert same == {"a b": "a b #" + sha1(b"a b").hexdigest()[:4], "a  b": "a b #" + sha1(b"a  b").hexdigest()[:4]}


@settings(max_examples=200)
@given(st.lists(st.text(min_size=1, max_size=60), max_size=8, unique=True), st.integers(8, 30))
def test_shorten_all_keeps_names_apart(names, limit):
    from nsys_llm_explainer.render.escape import shorten_all

    labels = shorten_all(names, limit)
    assert set(labels) == set(names)
    assert len(set(labels.values())) == len(names)
    assert all(len(v) <= limit for v in labels.values())
