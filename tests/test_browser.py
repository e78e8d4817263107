"""The explorer widget in a real browser: JupyterLab on localhost, Debian's Chromium driven by Playwright.

The test opens notebooks/11_explorer_worksheet.ipynb, runs it, and uses the first explorer as a
learner would: hovers a dL/dx cell and reads the worked sum, then changes the stride
with its control.  Every number it reads is checked against convviz's kernels (the
anywidget's output numbers come from Python).  Screenshots are saved in
``test-artifacts/`` at the repository root.

It needs the ``playwright`` package (no browser download: it drives
``/usr/bin/chromium``, which ``.ci/run`` installs with apt-get) and JupyterLab.
Outside CI it skips when either is missing; in CI (``CI=true``) it fails instead.
"""

from __future__ import annotations

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

from helpers import CHROMIUM, CHROMIUM_ARGS, IN_CI

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"


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
    shutil.copy(ROOT / "notebooks" / "11_explorer_worksheet.ipynb", tmp_path / "explorer.ipynb")
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


def _explorer_numbers(page, panel: str) -> np.ndarray:
    """The first explorer's numbered cells of one panel, as an array."""
    cells = page.evaluate(f"""() => Array.from(document.querySelector('.cvz-explorer')
        .querySelectorAll('[data-panel="{panel}"]:not([data-pad])'))
        .map(c => [Number(c.dataset.row), Number(c.dataset.col), Number(c.dataset.value)])""")
    rows = max(r for r, _, _ in cells) + 1
    cols = max(c for _, c, _ in cells) + 1
    out = np.full((rows, cols), np.nan)
    for r, c, v in cells:
        out[r, c] = v
    return out


def _explorer_tensor(page, panel: str) -> dict[tuple[int, ...], float]:
    """``{data-index: value}`` of every numbered cell of the first explorer's panel (hidden planes too)."""
    got = page.locator(".cvz-explorer").first.evaluate(
        f"e => [...e.querySelectorAll('[data-panel=\"{panel}\"][data-index]')].map(c => [c.dataset.index, c.dataset.value])")
    return {tuple(int(v) for v in index.split(",")): float(value) for index, value in got}


def _explorer_params(page) -> dict:
    """The first explorer's setting, read from its controls."""
    from convviz.explorer._setting import PARAMS

    got = page.locator(".cvz-explorer").first.evaluate("e => [...e.querySelectorAll('[name]')].map(i => [i.name, i.value])")
    return {name: int(value) if len(PARAMS[name]) == 3 else value for name, value in got if name in PARAMS}


def _kernel_dx(params: dict) -> np.ndarray:
    from convviz.explorer._setting import compute

    return compute(params).output[0, 0]


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


def test_explorer_widget_in_jupyterlab(jupyterlab, watchdog):
    from convviz.explorer._setting import compute, defaults

    playwright_api = pytest.importorskip("playwright.sync_api") if not IN_CI else __import__(
        "playwright.sync_api", fromlist=["sync_playwright"])
    _require(os.path.exists(CHROMIUM), f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    url, token = jupyterlab
    ARTIFACTS.mkdir(exist_ok=True)
    params = dict(defaults(), input_h=8, input_w=8, kernel_h=3, kernel_w=3, stride_h=2, stride_w=2)
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
            explorer = page.locator(".cvz-explorer").first
            # The source line as it reads the moment the kernel's numbers arrive (read in the
            # same check: the explorer sets both together, and a later read once found the
            # line of an explorer drawn anew by the notebook's run, before its reply).
            source = page.wait_for_function(
                "() => { const e = document.querySelector('.cvz-explorer');"
                " return e && e.dataset.numbers === 'kernel' && e.querySelector('.cvz-source').textContent; }",
                timeout=120_000).json_value()
            assert "convviz.conv2d_backprop_input" in source
            # The numbers on screen are the kernel's.
            np.testing.assert_array_equal(_explorer_numbers(page, "dx"), _kernel_dx(params))

            # Hover a dL/dx cell: its worked sum is the kernel's value there.
            cell = explorer.locator('[data-panel="dx"][data-row="3"][data-col="4"]')
            cell.hover()
            total = explorer.locator('[data-role="sum"]')
            assert float(total.get_attribute("data-value")) == _kernel_dx(params)[3, 4]
            assert "dy[" in total.inner_text() and "W[" in total.inner_text()
            lit = explorer.locator(".cvz-in").count()
            assert lit >= 2
            page.screenshot(path=str(ARTIFACTS / "explorer_jupyterlab.png"), full_page=False)

            # Change the stride with its control: Python answers with the kernel's numbers.
            stride = explorer.locator('[name="stride_h"]')
            stride.fill("1")
            stride.dispatch_event("change")
            params["stride_h"] = 1
            page.wait_for_function(
                "() => { const e = document.querySelector('.cvz-explorer');"
                " return e.dataset.numbers === 'kernel' && e.querySelectorAll('[data-panel=dy][data-col=\"0\"]:not([data-pad])').length === 8; }",
                timeout=60_000)
            np.testing.assert_array_equal(_explorer_numbers(page, "dx"), _kernel_dx(params))
            explorer.locator('[data-panel="dx"][data-row="5"][data-col="2"]').hover()
            assert float(total.get_attribute("data-value")) == _kernel_dx(params)[5, 2]

            # The dark theme, as a JupyterLab user in a dark room would pick it.
            explorer.locator('[name="theme"]').select_option("dark")
            page.wait_for_selector(".cvz-explorer[data-theme='dark']", timeout=10_000)
            explorer.locator('[data-panel="dy"][data-row="2"][data-col="1"]').hover()
            page.screenshot(path=str(ARTIFACTS / "explorer_jupyterlab_dark.png"), full_page=False)

            # Another mode with channels, chosen with the controls: conv_transpose2d, 2 -> 2
            # channels; every cell of every plane of y holds the kernel's number at its data-index.
            explorer.locator('[name="op"]').select_option("conv_transpose2d")
            for name in ("in_channels", "out_channels"):
                control = explorer.locator(f'[name="{name}"]')
                control.fill("2")
                control.dispatch_event("change")
            page.wait_for_function(
                "() => { const e = document.querySelector('.cvz-explorer');"
                " return e.dataset.numbers === 'kernel' && e.querySelector('.cvz-source').textContent.includes('conv_transpose2d')"
                " && e.querySelectorAll('[data-panel=y][data-plane=\"0,1\"]').length > 0; }", timeout=60_000)
            shown = _explorer_tensor(page, "y")
            expected = compute(_explorer_params(page)).arrays["y"]
            assert expected.shape[1] == 2 and len(shown) == expected.size
            assert all(value == expected[index] for index, value in shown.items())
            page.screenshot(path=str(ARTIFACTS / "explorer_jupyterlab_conv_transpose2d.png"), full_page=False)
        except Exception:
            if page is not None:  # keep what the browser showed, for the CI log reader
                page.screenshot(path=str(ARTIFACTS / "explorer_failure.png"), full_page=True)
            raise
        finally:
            browser.close()
    assert (ARTIFACTS / "explorer_jupyterlab.png").stat().st_size > 10_000
