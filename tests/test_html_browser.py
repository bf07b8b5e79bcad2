"""report.html in a real browser: headless Chromium over the DevTools protocol (tests/cdp.py).

Opens the report of a shared real trace from file://, and checks: no console errors or
exceptions, no network request besides the file itself, the timeline SVG laid out and
visible, a screenshot that is not blank, no page-wide horizontal scroll on a phone-sized
screen, and dark mode switching the colours. Set NLE_SCREENSHOT_DIR to keep the PNGs.
"""

from __future__ import annotations

import base64
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests import png
from tests.cdp import Browser, Page
from tests.conftest import NSYS_TRACES, SHARED_TRACES, run_cli

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
QWEN_CONFIG = Path(__file__).parent / "fixtures" / "hf_configs" / "qwen1.5-0.5b.json"


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
