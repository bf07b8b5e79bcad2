"""report.html in a real browser: headless Chromium over the DevTools protocol (tests/cdp.py).

Opens the report of a shared real trace from file://, and checks: no console errors or
exceptions, no network request besides the file itself, the timeline SVG laid out and
visible with a lane per GPU coloured by idle cause and a legend, a screenshot that is not
blank, no data dump in the visible text (no `{`, no `re:` pattern, no "(see report.json)"),
no column header wrapped inside a word at 1280 px, every in-page link (the findings list
first) leading to an element, no page-wide horizontal scroll on a phone-sized screen, and
dark mode switching the colours. Set NLE_SCREENSHOT_DIR to keep the PNGs.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests import png
from tests.cdp import Browser, Page
from tests.conftest import NSYS_TRACES, SHARED_TRACES, run_cli

pytestmark = pytest.mark.slow

TRACE = NSYS_TRACES / "nsysai_h100_2gpu_1s.sqlite"
CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome")
MIN_STD = 8.0  # a blank or single-colour screenshot has a pixel standard deviation near 0
MIN_COLOURS = 16


def chromium() -> str:
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip(
        "Chromium is not installed and could not be installed "
        "(.ci/run tries `apt-get install -y chromium`); the browser test needs it"
    )


@pytest.fixture(scope="module")
def report_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not TRACE.is_file():
        pytest.skip(f"shared real trace not found at {TRACE} (a clone outside /work)")
    out = tmp_path_factory.mktemp("browser") / "out"
    res = run_cli(TRACE, "--out", out, "-q")
    assert res.exit_code == 0, res.stderr
    return out / "report.html"


def problems(page: Page, own_url: str) -> tuple[list[str], list[str]]:
    """Console errors and exceptions, and requests for anything but the page itself."""
    errors, requests = [], []
    for e in page.events:
        p: dict[str, Any] = e.get("params", {})
        if e["method"] == "Runtime.exceptionThrown":
            errors.append(str(p.get("exceptionDetails", {}).get("text")))
        elif e["method"] == "Runtime.consoleAPICalled" and p.get("type") in (
            "error",
            "assert",
            "warning",
        ):
            errors.append(
                " ".join(str(a.get("value", a.get("description"))) for a in p.get("args", []))
            )
        elif e["method"] == "Log.entryAdded" and p["entry"].get("level") in ("error", "warning"):
            errors.append(p["entry"].get("text", ""))
        elif e["method"] == "Network.requestWillBeSent":
            url = p["request"]["url"]
            if url != own_url:
                requests.append(url)
    return errors, requests


def viewport(page: Page, width: int, height: int, dark: bool = False) -> None:
    page.call(
        "Emulation.setDeviceMetricsOverride",
        width=width,
        height=height,
        deviceScaleFactor=1,
        mobile=width < 600,
    )
    page.call(
        "Emulation.setEmulatedMedia",
        features=[{"name": "prefers-color-scheme", "value": "dark" if dark else "light"}],
    )


def not_blank(shot: bytes) -> tuple[float, int]:
    pixels = png.decode(shot)[:, :, :3].reshape(-1, 3)
    colours = len(np.unique(pixels[:: max(1, len(pixels) // 200_000)], axis=0))
    return float(pixels.std()), colours


def keep(name: str, data: bytes) -> None:
    folder = os.environ.get("NLE_SCREENSHOT_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / name).write_bytes(data)


# Every visible header cell: each space-separated word must lie on one line (a word broken
# across lines gives a Range two client rects on different lines), and a header without a
# space must be one line.
HEADER_WORDS_JS = """(() => {
    const out = {headers: 0, single: 0, split: []};
    // Lines a set of text rects spans: tops more than 3 px apart are different lines.
    const lines = rects => {
        const tops = [...rects].filter(r => r.width > 0).map(r => r.top).sort((a, b) => a - b);
        return tops.filter((t, i) => i === 0 || t - tops[i - 1] > 3).length;
    };
    const textRects = (node, a, b) => {
        const r = document.createRange(); r.setStart(node, a); r.setEnd(node, b);
        return [...r.getClientRects()];
    };
    for (const th of document.querySelectorAll('th')) {
        if (!th.getClientRects().length) continue;
        out.headers++;
        const text = th.textContent.trim();
        const nodes = [];
        const walker = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
        for (let node = walker.nextNode(); node; node = walker.nextNode()) nodes.push(node);
        if (text && !/\\s/.test(text)) {
            out.single++;
            const all = nodes.flatMap(n => n.data.trim() ? textRects(n, 0, n.data.length) : []);
            if (lines(all) > 1) out.split.push(text);
            continue;
        }
        for (const node of nodes) {
            for (const m of node.data.matchAll(/\\S+/g)) {
                if (lines(textRects(node, m.index, m.index + m[0].length)) > 1) out.split.push(m[0] + ' in ' + text);
            }
        }
    }
    return out;
})()"""


def test_report_html_in_headless_chromium(report_html: Path, tmp_path: Path) -> None:
    exe = chromium()
    url = report_html.resolve().as_uri()
    with Browser.launch(exe, tmp_path / "profile") as page:
        for domain in ("Page", "Runtime", "Log", "Network"):
            page.call(f"{domain}.enable")
        viewport(page, 1280, 900)
        page.call("Page.navigate", url=url)
        page.wait_event("Page.loadEventFired")
        page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")

        errors, requests = problems(page, url)
        assert errors == [], f"console errors: {errors}"
        assert requests == [], f"network requests: {requests}"

        box = page.evaluate("""(() => {
            const svg = document.querySelector('svg[data-plot="timeline"]');
            if (!svg) return null;
            svg.scrollIntoView({block: 'center'});
            const r = svg.getBoundingClientRect(), s = getComputedStyle(svg);
            const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
            return {w: r.width, h: r.height, x: r.left + scrollX, y: r.top + scrollY,
                    visible: s.visibility === 'visible'
                    && s.display !== 'none', hit: !!hit && svg.contains(hit),
                    paths: svg.querySelectorAll('path.busy').length};
        })()""")
        assert box is not None, "no timeline SVG in the page"
        assert box["visible"] and box["hit"] and box["w"] >= 640 and box["h"] >= 100, box
        assert box["paths"] == 2  # one busy outline per GPU of this 2-GPU trace

        clip = {"x": box["x"], "y": box["y"], "width": box["w"], "height": box["h"], "scale": 1}
        timeline_png = page.call("Page.captureScreenshot", format="png", clip=clip)["data"]
        page.evaluate("window.scrollTo(0, 0)")
        top_png = page.call("Page.captureScreenshot", format="png")["data"]
        for name, data in (("timeline.png", timeline_png), ("top.png", top_png)):
            raw = base64.b64decode(data)
            keep(name, raw)
            std, colours = not_blank(raw)
            assert std > MIN_STD and colours >= MIN_COLOURS, (name, std, colours)

        text = page.evaluate("document.body.innerText")
        for bad in ("{", "(see report.json)"):
            assert bad not in text, text[max(0, text.find(bad) - 100) : text.find(bad) + 100]
        assert not re.search(r"(?<![A-Za-z])re:", text)

        broken = page.evaluate(HEADER_WORDS_JS)
        assert broken["headers"] >= 50, broken  # the check saw the report's tables
        assert broken["single"] >= 20, broken
        assert broken["split"] == [], f"header cells wrapped inside a word: {broken['split']}"

        links = page.evaluate("""(() => {
            const hrefs = [...document.querySelectorAll('a[href^="#"]')].map(a => a.getAttribute('href').slice(1));
            return {all: hrefs, missing: hrefs.filter(h => !document.getElementById(h)),
                    findings: [...document.querySelectorAll('ol.findex a')].map(a => a.getAttribute('href'))};
        })()""")
        assert links["missing"] == [], links["missing"]
        assert links["findings"][0] == "#finding-1" and any(h.startswith("#m-") for h in links["findings"])

        lanes = page.evaluate("""(() => {
            const svg = document.querySelector('svg[data-plot="timeline"]');
            const texts = [...svg.querySelectorAll('text')].map(t => t.textContent);
            const legend = texts.filter(t => t.startsWith('idle: '));
            const classes = [...svg.querySelectorAll('path')].map(p => p.getAttribute('class'));
            return {legend: legend, causes: classes.filter(c => /^k[0-9]$/.test(c)).length,
                    gpus: [...svg.querySelectorAll('text')].filter(t => /^GPU [0-9]+$/.test(t.textContent)).length};
        })()""")
        # This trace's GPUs idle mostly while copies run: each lane shows copy-coloured idle time.
        assert lanes["gpus"] == 2 and "idle: copying" in lanes["legend"] and lanes["causes"] >= 2, lanes

        viewport(page, 390, 844)
        widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert widths[0] <= widths[1], f"page scrolls sideways on a narrow screen: {widths}"

        light = page.evaluate("getComputedStyle(document.body).backgroundColor")
        viewport(page, 1280, 900, dark=True)
        dark = page.evaluate("getComputedStyle(document.body).backgroundColor")
        text_fill = page.evaluate("getComputedStyle(document.querySelector('svg.nle text')).fill")
        assert light != dark and text_fill != "rgb(31, 35, 40)", (light, dark, text_fill)
        keep(
            "dark.png", base64.b64decode(page.call("Page.captureScreenshot", format="png")["data"])
        )

        errors, requests = problems(page, url)
        assert errors == [] and requests == [], (errors, requests)


QWEN = SHARED_TRACES / "kineto" / "hf_qwen1.5_0.5b_h100.json.gz"
QWEN_CONFIG = Path(__file__).resolve().parents[1] / "fixtures" / "hf_configs" / "qwen1.5-0.5b.json"


@pytest.fixture(scope="module")
def roofline_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not QWEN.is_file():
        pytest.skip(f"shared real trace not found at {QWEN} (a clone outside /work)")
    out = tmp_path_factory.mktemp("browser_roofline") / "out"
    res = run_cli(QWEN, "--out", out, "-q", "--model", QWEN_CONFIG)
    assert res.exit_code == 0, res.stderr
    return out / "report.html"


def test_roofline_renders_in_headless_chromium(roofline_html: Path, tmp_path: Path) -> None:
    exe = chromium()
    url = roofline_html.resolve().as_uri()
    with Browser.launch(exe, tmp_path / "profile") as page:
        for domain in ("Page", "Runtime", "Log", "Network"):
            page.call(f"{domain}.enable")
        viewport(page, 1280, 900)
        page.call("Page.navigate", url=url)
        page.wait_event("Page.loadEventFired")
        page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        box = page.evaluate("""(() => {
            const svg = document.querySelector('svg[data-plot="roofline"]');
            if (!svg) return null;
            svg.scrollIntoView({block: 'center'});
            const r = svg.getBoundingClientRect(), s = getComputedStyle(svg);
            const dots = [...svg.querySelectorAll('circle')].map(c => c.getBoundingClientRect())
                .filter(b => b.width > 0 && b.left >= r.left && b.right <= r.right + 1);
            return {w: r.width, h: r.height, x: r.left + scrollX, y: r.top + scrollY,
                    visible: s.visibility === 'visible' && s.display !== 'none',
                    dots: dots.length, roofs: svg.querySelectorAll('path').length};
        })()""")
        assert box is not None, "no roofline SVG in the page"
        assert box["visible"] and box["w"] >= 400 and box["h"] >= 200, box
        assert box["dots"] >= 8 and box["roofs"] >= 2, box  # operations + ridge marks; BF16 and FP32 roofs
        clip = {"x": box["x"], "y": box["y"], "width": box["w"], "height": box["h"], "scale": 1}
        raw = base64.b64decode(page.call("Page.captureScreenshot", format="png", clip=clip)["data"])
        keep("roofline.png", raw)
        std, colours = not_blank(raw)
        assert std > MIN_STD and colours >= MIN_COLOURS, (std, colours)
        errors, requests = problems(page, url)
        assert errors == [] and requests == [], (errors, requests)
