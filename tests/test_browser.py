"""The explorer in a real browser: JupyterLab on localhost, Debian's Chromium driven by Playwright.

The test opens notebooks/08_explorer.ipynb, runs it, reads the figure the
explorer shows, moves the "stride rows" slider, and checks that the figure
changed.  Screenshots of the page before and after are saved in
``test-artifacts/`` at the repository root.

It needs the ``playwright`` package (no browser download: it drives
``/usr/bin/chromium``, which ``.ci/run`` installs with apt-get) and JupyterLab.
Outside CI it skips when either is missing; in CI (``CI=true``) it fails instead.
"""

from __future__ import annotations

import base64
import io
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = os.environ.get("CONVVIZ_CHROMIUM", "/usr/bin/chromium")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]


KERNEL_IDLE = """() => {
    const widget = window.jupyterapp.shell.currentWidget;
    const kernel = widget && widget.sessionContext && widget.sessionContext.session
        && widget.sessionContext.session.kernel;
    return Boolean(kernel) && kernel.status === "idle";
}"""


def _require(condition: bool, reason: str) -> None:
    if not condition:
        if IN_CI:
            pytest.fail(f"browser test cannot run in CI: {reason}")
        pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def jupyterlab(tmp_path):
    _require(shutil.which("jupyter") is not None or _has_module("jupyterlab"), "JupyterLab is not installed")
    shutil.copy(ROOT / "notebooks" / "08_explorer.ipynb", tmp_path / "explorer.ipynb")
    port, token = _free_port(), secrets.token_hex(16)
    log = open(tmp_path / "jupyterlab.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
         f"--ServerApp.token={token}", f"--ServerApp.root_dir={tmp_path}", "--allow-root",
         "--LabApp.expose_app_in_browser=True", "--ServerApp.disable_check_xsrf=True"],
        stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, MPLBACKEND="module://matplotlib_inline.backend_inline"))
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    pytest.fail("JupyterLab did not start:\n" + (tmp_path / "jupyterlab.log").read_text()[-3000:])
                time.sleep(0.5)
        yield url, token
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def _has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def _figure_src(page) -> str:
    """The data URL of the explorer's figure (the last image in the notebook's outputs)."""
    images = page.locator(".jp-OutputArea-output img")
    if images.count() == 0:
        return ""
    return images.last.get_attribute("src") or ""


def _pixels(data_url: str) -> np.ndarray:
    from PIL import Image

    payload = data_url.split(",", 1)[1]
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(payload))).convert("RGB"), dtype=float)


@pytest.fixture
def watchdog():
    """Fail (instead of hanging CI) if the whole browser session takes over 7 minutes."""
    import signal

    def expire(signum, frame):
        raise TimeoutError("the browser test took more than 420 s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(420)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_explorer_redraws_when_a_slider_moves(jupyterlab, watchdog):
    playwright_api = pytest.importorskip("playwright.sync_api") if not IN_CI else __import__(
        "playwright.sync_api", fromlist=["sync_playwright"])
    _require(os.path.exists(CHROMIUM), f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    url, token = jupyterlab
    ARTIFACTS.mkdir(exist_ok=True)
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = None
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1100})
            page.goto(f"{url}/lab/tree/explorer.ipynb?token={token}", timeout=120_000)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
            page.wait_for_function("window.jupyterapp !== undefined", timeout=60_000)
            # A fresh JupyterLab may ask which kernel to start: take the notebook's own.
            try:
                page.locator(".jp-Dialog .jp-mod-accept").click(timeout=10_000)
            except playwright_api.TimeoutError:
                pass
            page.wait_for_function(KERNEL_IDLE, timeout=120_000)
            # Run every cell (fire and forget: the command's promise ends when they all have).
            page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
            page.wait_for_selector(".widget-hslider", timeout=120_000)
            page.wait_for_function(
                "document.querySelectorAll('.jp-OutputArea-output img').length > 0", timeout=120_000)
            before = _figure_src(page)
            page.screenshot(path=str(ARTIFACTS / "explorer_before.png"), full_page=True)

            slider = page.locator(".widget-hslider", has_text="stride rows")
            readout = slider.locator(".widget-readout")
            assert readout.inner_text().strip() == "2"
            readout.click()
            page.keyboard.press("Control+A")
            page.keyboard.type("1")
            page.keyboard.press("Enter")
            deadline = time.monotonic() + 60
            after = before
            while time.monotonic() < deadline and (after == before or not after):
                page.wait_for_timeout(250)
                after = _figure_src(page)
            page.wait_for_timeout(500)
            after = _figure_src(page)
            page.screenshot(path=str(ARTIFACTS / "explorer_after.png"), full_page=True)
        except Exception:
            if page is not None:  # keep what the browser showed, for the CI log reader
                page.screenshot(path=str(ARTIFACTS / "explorer_failure.png"), full_page=True)
            raise
        finally:
            browser.close()
    assert before and after, "the explorer showed no figure"
    assert after != before, "the figure did not change when the slider moved"
    a, b = _pixels(before), _pixels(after)
    assert a.shape != b.shape or np.mean(np.abs(a - b)) > 1.0
    assert (ARTIFACTS / "explorer_before.png").stat().st_size > 10_000
    assert (ARTIFACTS / "explorer_after.png").stat().st_size > 10_000
