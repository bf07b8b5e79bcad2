"""The roofline plot: valid SVG, escaped labels, log-log placement, a data table."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import pytest

from nsys_llm_explainer.compute.peaks import lookup, roofs
from nsys_llm_explainer.render.svg import roofline as svg
from nsys_llm_explainer.render.svg.roofline import RooflinePoint, build_roofline

NS = "{http://www.w3.org/2000/svg}"
HOSTILE = '<script>alert("x")</script> & </svg><b>'
H100 = roofs(lookup("NVIDIA H100 80GB HBM3"))


def points() -> list[RooflinePoint]:
    return [
        RooflinePoint("aten::mm [8944x1024x1024]", "bf16", 18_756_927_488, 38_731_776, 30_000),
        RooflinePoint(HOSTILE, "fp8", 2e12, 1e9, 5_000_000),
        RooflinePoint("flash attention", "bf16", 10_239_377_408, 73_269_248, 25_000),
        RooflinePoint("silu", "bf16", 0, 100_745_216, 40_000),  # bytes-only: not drawn
    ]


def coords(root: ET.Element) -> list[tuple[str, float, float]]:
    out = []
    for el in root.iter():
        tag = el.tag.replace(NS, "")
        if tag == "circle":
            out.append((tag, float(el.get("cx")), float(el.get("cy"))))
        elif tag == "text":
            out.append((tag, float(el.get("x")), float(el.get("y"))))
        elif tag == "line":
            out += [
                (tag, float(el.get("x1")), float(el.get("y1"))),
                (tag, float(el.get("x2")), float(el.get("y2"))),
            ]
        elif tag == "path":
            for x, y in re.findall(r"[ML](-?[\d.]+),(-?[\d.]+)", el.get("d")):
                out.append((tag, float(x), float(y)))
    return out


def test_roofline_renders_valid_escaped_accessible_svg():
    plot = build_roofline([H100["bf16"], H100["fp8"]], points(), device="GPU 0")
    text = plot.svg(standalone=True)
    assert "<script>" not in text and "&lt;script&gt;" in text and "</svg><b>" not in text
    root = ET.fromstring(text)
    assert root.get("role") == "img" and root.find(f"{NS}title").text == "Roofline"
    assert "1 operations without FLOPs are not drawn" in root.find(f"{NS}desc").text
    _, _, w, h = (float(v) for v in root.get("viewBox").split())
    for tag, x, y in coords(root):
        assert -0.05 <= x <= w + 0.05 and -0.05 <= y <= h + 0.05, (tag, x, y)
    assert len(plot.rows) == 3 and all(len(r) == len(plot.headers) for r in plot.rows)
    first = plot.rows[0]  # the longest first: the hostile fp8 point, kept verbatim for the table
    assert first[0] == HOSTILE and first[1] == "fp8" and first[6] == "compute"
    mm = next(r for r in plot.rows if r[0].startswith("aten::mm"))
    # 18.757 GFLOP in 30 us = 625.2 TFLOP/s; 484.3 FLOP/byte is past the 295.4 ridge
    assert mm[2] == "484.3" and mm[3] == "625.23" and mm[4] == "989.50" and mm[5] == "63.2%"


def test_points_sit_on_log_axes_and_scale_with_time():
    plot = build_roofline([H100["bf16"]], points()[:1] + points()[2:])
    root = ET.fromstring(plot.svg())
    dots = [
        el
        for el in root.iter(f"{NS}circle")
        if el.get("class") == "k0" and float(el.get("r")) > 3.5
    ]
    assert len(dots) == 2
    radii = sorted(float(d.get("r")) for d in dots)
    assert radii[1] == pytest.approx(svg.R_MAX, abs=0.05)  # the longest point
    # area proportional to time: r = R_MAX x sqrt(25 us / 30 us) = 11 x 0.9129 = 10.04 px
    assert radii[0] == pytest.approx(11 * math.sqrt(25 / 30), abs=0.05)
    assert (radii[0] / radii[1]) ** 2 == pytest.approx(25 / 30, abs=0.01)
    # equal ratios on an axis are equal distances: x of the ridge vs the two points
    ridge = next(el for el in root.iter(f"{NS}circle") if float(el.get("r")) == 3.5)
    xs = {round(float(d.get("r")), 1): float(d.get("cx")) for d in dots}
    x_mm, x_attn = xs[round(radii[1], 1)], xs[round(radii[0], 1)]
    ai_mm, ai_attn = 18_756_927_488 / 38_731_776, 10_239_377_408 / 73_269_248
    ratio = (x_mm - float(ridge.get("cx"))) / (x_attn - float(ridge.get("cx")))
    expected = math.log10(ai_mm / H100["bf16"].ridge) / math.log10(ai_attn / H100["bf16"].ridge)
    assert ratio == pytest.approx(expected, abs=0.02)


def test_point_area_is_proportional_to_time_above_the_minimum():
    # 11 px at the longest; a quarter of the time is a quarter of the area (5.5 px); below
    # (3/11)^2 = 7.4% of the longest time the radius stays at the 3 px minimum.
    assert svg.point_radius(100, 100) == 11.0
    assert svg.point_radius(25, 100) == pytest.approx(5.5)
    assert svg.point_radius(9, 100) == pytest.approx(3.3)
    assert svg.point_radius(7, 100) == 3.0 and svg.point_radius(1, 100) == 3.0


def test_nothing_to_draw():
    assert build_roofline([], points()) is None
    assert build_roofline([H100["bf16"]], [RooflinePoint("copy", "bf16", 0, 10, 5)]) is None
