"""A page opened in a real headless Chromium, driven over the DevTools protocol: what its console
reported (errors, uncaught exceptions, failed loads), what a script evaluates to once it has loaded,
and a screenshot. The HTML report's test (tests/report/test_html.py) and the docs' screenshot
(scripts/report_screenshot.py) use it. Needs a Chromium binary (Debian's ``chromium``) and the
``websockets`` package (the ``dev`` extra)."""
from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# As the workplace's probe starts it: no sandbox (root in a container), no GPU, and no background
# networking (the machine's closed network refuses those connections, many at a time).
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-port=0", "--remote-allow-origins=*")


def chromium() -> str | None:
    """The Chromium binary on this machine, or None."""
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


@dataclass
class Page:
    errors: list[str] = field(default_factory=list)  # console errors, uncaught exceptions, failed loads
    value: Any = None  # what the script evaluated to after the load
    screenshot: bytes = b""


@contextlib.contextmanager
def _browser(width: int, height: int) -> Iterator[str]:
    """A headless Chromium; yields its DevTools websocket address for a new page."""
    binary = chromium()
    if binary is None:
        raise RuntimeError("no chromium on this machine (apt-get install chromium)")
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        proc = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}",
                                 "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)  # its own process group: its helpers go with it
        try:
            port_file = Path(profile) / "DevToolsActivePort"
            for _ in range(300):
                if port_file.is_file() and port_file.read_text().strip():
                    break
                time.sleep(0.1)
            port = port_file.read_text().split()[0]
            from urllib.request import urlopen

            for _ in range(100):
                with contextlib.suppress(OSError):
                    targets = json.loads(urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5).read())
                    pages = [t for t in targets if t.get("type") == "page"]
                    if pages:
                        yield pages[0]["webSocketDebuggerUrl"]
                        return
                time.sleep(0.1)
            raise RuntimeError("chromium opened no page")
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def open_page(url: str, script: str = "null", *, width: int = 1280, height: int = 2000, screenshot: bool = False,
              settle_s: float = 1.0, timeout_s: float = 60.0) -> Page:
    """Load ``url``, wait for its load event and ``settle_s`` more, then evaluate ``script``."""
    from websockets.sync.client import connect

    page, ids = Page(), itertools.count(1)
    with _browser(width, height) as address, connect(address, max_size=None, open_timeout=timeout_s) as ws:
        def call(method: str, **params: Any) -> dict:
            n = next(ids)
            ws.send(json.dumps({"id": n, "method": method, "params": params}))
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                message = json.loads(ws.recv(timeout=timeout_s))
                _note(message, page)
                if message.get("id") == n:
                    if "error" in message:
                        raise RuntimeError(f"{method}: {message['error']}")
                    return message.get("result", {})
            raise TimeoutError(method)

        for domain in ("Page", "Runtime", "Log"):
            call(f"{domain}.enable")
        call("Page.navigate", url=url)
        deadline, loaded = time.monotonic() + timeout_s, False
        while not loaded and time.monotonic() < deadline:
            message = json.loads(ws.recv(timeout=timeout_s))
            _note(message, page)
            loaded = message.get("method") == "Page.loadEventFired"
        if not loaded:
            raise TimeoutError(f"{url} did not load in {timeout_s:g} s")
        time.sleep(settle_s)
        result = call("Runtime.evaluate", expression=script, returnByValue=True)
        page.value = result.get("result", {}).get("value")
        if screenshot:
            shot = call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
            page.screenshot = base64.b64decode(shot["data"])
    return page


def _note(message: dict, page: Page) -> None:
    """Keep what a DevTools event says went wrong."""
    method, params = message.get("method"), message.get("params", {})
    if method == "Runtime.exceptionThrown":
        details = params.get("exceptionDetails", {})
        page.errors.append(details.get("exception", {}).get("description") or details.get("text", "exception"))
    elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
        page.errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
    elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
        page.errors.append(params["entry"].get("text", "error"))
