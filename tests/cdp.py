"""A minimal Chrome DevTools Protocol client on the standard library (socket + a
WebSocket client of ~40 lines), for the browser test: no Selenium, no Playwright.

    with Browser.launch(chromium, tmp_path) as page:
        page.call("Page.enable")
        page.navigate(url)
        shot = page.screenshot()
"""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-default-apps",
    "--disable-extensions",
    "--hide-scrollbars",
    "--mute-audio",
    "--remote-debugging-port=0",
    "--remote-allow-origins=*",
)


class WebSocket:
    """Client side of RFC 6455: masked text frames out, (fragmented) frames in."""

    def __init__(self, url: str, timeout: float) -> None:
        assert url.startswith("ws://")
        hostport, _, path = url[5:].partition("/")
        host, _, port = hostport.partition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                "Sec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                raise ConnectionError("websocket handshake: connection closed")
            head += chunk
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"websocket handshake refused: {head[:200]!r}")

    def send(self, text: str) -> None:
        data = text.encode()
        mask = os.urandom(4)
        n = len(data)
        header = bytes([0x81]) + (
            bytes([0x80 | n])
            if n < 126
            else struct.pack("!BH", 0x80 | 126, n)
            if n < 1 << 16
            else struct.pack("!BQ", 0x80 | 127, n)
        )
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def _exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("websocket closed")
            buf += chunk
        return bytes(buf)

    def recv(self) -> str:
        parts = []
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._exact(8))[0]
            payload = self._exact(n)
            if b0 & 0x0F == 0x8:
                raise ConnectionError("websocket closed by the browser")
            if b0 & 0x0F in (0x9, 0xA):  # ping/pong: not used by Chromium's DevTools server
                continue
            parts.append(payload)
            if b0 & 0x80:
                return b"".join(parts).decode()

    def close(self) -> None:
        self.sock.close()


class Page:
    """One tab: call() sends a command and returns its result; events are kept in order."""

    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws
        self.events: list[dict[str, Any]] = []
        self._id = 0

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_event(self, method: str, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for e in self.events:
                if e["method"] == method:
                    return e
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append(msg)
        raise TimeoutError(f"no {method} within {timeout} s")

    def evaluate(self, expression: str) -> Any:
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"evaluate failed: {res['exceptionDetails']}")
        return res["result"].get("value")

    def screenshot(self) -> bytes:
        return base64.b64decode(
            self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        )


class Browser:
    """A headless Chromium with a fresh profile, reached over its DevTools port."""

    def __init__(self, proc: subprocess.Popen[bytes], page: Page) -> None:
        self.proc, self.page = proc, page

    @staticmethod
    def launch(chromium: str, profile: Path, timeout: float = 30.0) -> Browser:
        proc = subprocess.Popen(
            [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while not port_file.exists() or not port_file.read_text().strip():
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"chromium did not start (exit code {proc.poll()})")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        local = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
        with local.open(f"http://127.0.0.1:{port}/json/list", timeout=timeout) as resp:
            targets = json.load(resp)
        url = next(t["webSocketDebuggerUrl"] for t in targets if t.get("type") == "page")
        return Browser(proc, Page(WebSocket(url, timeout)))

    def __enter__(self) -> Page:
        return self.page

    def __exit__(self, *exc: object) -> None:
        self.page.ws.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
