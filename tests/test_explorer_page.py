"""The standalone explorer page (``convviz.explorer.write_page``) in Chromium, opened from ``file://``.

Every number the page shows is checked against convviz itself (the kernels through
``convviz.explorer._setting.compute``, the geometry through ``convviz.geometry``),
never against the page: hovering a cell lights the cells the geometry says, worked
sums equal the kernels' values, the URL query sets the controls and a control
change rewrites it, text on every numbered cell meets WCAG AA in both themes, and
core.js run inside the page agrees with convviz on every setting of
``tests/explorer_cases.CASES``.  Screenshots (one per op and theme) are saved in
``test-artifacts/`` at the repository root.

Every request the page makes other than ``file:`` is aborted, recorded, and fails
the test: the page must work offline.

It needs the ``playwright`` package (no browser download: it drives
``/usr/bin/chromium``).  Outside CI it skips when either is missing; in CI
(``CI=true``) it fails instead.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

import numpy as np
import pytest

from convviz.explorer import write_page
from convviz.explorer._setting import MODES
from convviz.explorer._setting import OPS as EXPLORER_OPS
from convviz.explorer._setting import build_geometry, compute, defaults
from convviz.geometry import same_padding
from explorer_cases import CASES, check_case
from helpers import CHROMIUM, CHROMIUM_ARGS, IN_CI

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
VIEWPORT = {"width": 1280, "height": 720}
OPS = EXPLORER_OPS
THEMES = ("light", "dark")
PAD_NAMES = ("pad_top", "pad_bottom", "pad_left", "pad_right")
# The setting of the URL test (the brief's preset): asymmetric explicit pads, dilation, unequal strides.
PRESET_QUERY = "input=7x9&kernel=3x2&stride=2x3&dilation=1x2&padding=EXPLICIT&pads=1,0,2,1&op=conv2d_backprop_input&seed=5"

# Every cell the page draws, as plain data (one round trip).
CELLS_JS = """(panel) => [...document.querySelectorAll(panel ? `[data-panel="${panel}"]` : "[data-panel]")].map((e) => ({
  panel: e.dataset.panel, row: Number(e.dataset.row), col: Number(e.dataset.col),
  ch: e.dataset.channel === undefined ? 0 : Number(e.dataset.channel), hasChannel: e.dataset.channel !== undefined,
  value: e.dataset.value === undefined ? null : e.dataset.value, pad: e.dataset.pad === "true",
  classes: [...e.classList], product: e.dataset.product === undefined ? null : e.dataset.product,
  label: e.getAttribute("aria-label"), text: e.textContent.trim()}))"""

# What tests/explorer/dump.mjs computes for each setting (describe.mjs), with the page's own core.
_DESCRIBE = (ROOT / "tests" / "explorer" / "describe.mjs").read_text(encoding="utf-8").replace(
    "export function describe", "function describe")
DUMP_JS = f"(settings) => {{\n{_DESCRIBE}\nreturn describe(window.convvizExplorer.core, settings);\n}}"

SUM_JS = """() => { const s = document.querySelector('[data-role="sum"]');
  return { value: s.dataset.value, hidden: s.hidden, text: s.textContent,
           title: document.querySelector(".cvz-focus-title").textContent,
           note: document.querySelector(".cvz-note").textContent }; }"""

PRODUCTS_JS = """() => { const el = document.querySelector('[data-role="products"]');
  return { hidden: el.hidden, lines: [...el.querySelectorAll(".cvz-product")].map((e) => e.textContent),
           fonts: [...el.querySelectorAll(".cvz-product")].map((e) => parseFloat(getComputedStyle(e).fontSize)),
           labels: [...document.querySelectorAll("[data-product]")].map((e) => [e.getBoundingClientRect().width,
             parseFloat(getComputedStyle(e, "::after").fontSize)]) }; }"""

COLORS_JS = """() => [...document.querySelectorAll("[data-panel]")].filter(
    (e) => e.dataset.value !== undefined || e.textContent.trim() !== "").map((e) => {
  const s = getComputedStyle(e);
  return { panel: e.dataset.panel, row: e.dataset.row, col: e.dataset.col, pad: e.dataset.pad === "true",
           text: e.textContent.trim(), bg: s.backgroundColor, fg: s.color };
})"""


# ---------------------------------------------------------------------------------
# Helpers: settings, queries, numbers


def setting(**overrides: Any) -> dict[str, Any]:
    """A full explorer setting: the defaults with ``overrides`` (light theme unless given)."""
    p = dict(defaults(), theme="light")
    p.update(overrides)
    return p


def query(p: dict[str, Any]) -> str:
    """The URL query naming setting ``p`` (every parameter spelled out)."""
    q = {"input": f"{p['input_h']}x{p['input_w']}", "kernel": f"{p['kernel_h']}x{p['kernel_w']}",
         "stride": f"{p['stride_h']}x{p['stride_w']}", "dilation": f"{p['dilation_h']}x{p['dilation_w']}",
         "padding": p["padding"], "pads": ",".join(str(p[n]) for n in PAD_NAMES), "op": p["op"],
         "multiplier": p["multiplier"], "seed": p["seed"], "values": p["values"], "theme": p["theme"],
         "in_channels": p["in_channels"], "out_channels": p["out_channels"], "groups": p["groups"],
         "batch": p["batch"], "output_padding": f"{p['output_padding_h']}x{p['output_padding_w']}",
         "symbols": p["symbols"], "practice": p["practice"]}
    return "?" + urlencode(q, safe=",")


def params_from_query(search: str) -> dict[str, Any]:
    """Read a page URL query back into a setting (independently of core.js's parser)."""
    q = {k: v[0] for k, v in parse_qs(search.lstrip("?")).items()}
    p = setting(theme="auto")
    for key, (h, w) in {"input": ("input_h", "input_w"), "kernel": ("kernel_h", "kernel_w"),
                        "stride": ("stride_h", "stride_w"), "dilation": ("dilation_h", "dilation_w")}.items():
        if key in q:
            parts = [int(v) for v in q[key].split("x")]
            p[h], p[w] = parts[0], parts[-1]
    if "pads" in q:
        for name, v in zip(PAD_NAMES, q["pads"].split(",")):
            p[name] = int(v)
    for key in ("multiplier", "seed", "in_channels", "out_channels", "groups", "batch"):
        if key in q:
            p[key] = int(q[key])
    for key in ("padding", "op", "values", "theme", "symbols", "practice"):
        if key in q:
            p[key] = q[key]
    if p["padding"].replace("x", "").isdigit():  # PyTorch's padding (conv_transpose2d): both sides alike
        parts = [int(v) for v in p["padding"].split("x")]
        p.update(padding="EXPLICIT", pad_top=parts[0], pad_bottom=parts[0], pad_left=parts[-1], pad_right=parts[-1])
    if "output_padding" in q:
        parts = [int(v) for v in q["output_padding"].split("x")]
        p["output_padding_h"], p["output_padding_w"] = parts[0], parts[-1]
    return p


def product_value(text: str) -> float:
    """A cell's ``data-product`` (``+6``, ``+−2``, typographic minus) as a float."""
    return float(text.lstrip("+").replace("\u2212", "-"))


def sel(panel: str, r: int, c: int, ch: int | None = None) -> str:
    s = f'[data-panel="{panel}"][data-row="{r}"][data-col="{c}"]'
    return s + (f'[data-channel="{ch}"]' if ch is not None else "")


def lit(cells: list[dict], cls: str, panel: str | None = None) -> set[tuple]:
    return {(c["row"], c["col"]) if not c["hasChannel"] else (c["ch"], c["row"], c["col"])
            for c in cells if cls in c["classes"] and (panel is None or c["panel"] == panel)}


def srgb_luminance(rgb: tuple[float, float, float]) -> float:
    """WCAG 2.x relative luminance of an sRGB colour with 0-255 channels."""
    def lin(v: float) -> float:
        v /= 255
        return v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4

    r, g, b = (lin(v) for v in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: tuple[float, float, float], b: tuple[float, float, float]) -> float:
    la, lb = srgb_luminance(a), srgb_luminance(b)
    return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)


def css_rgb(text: str) -> tuple[tuple[float, float, float], float]:
    """``rgb(r, g, b)`` / ``rgba(r, g, b, a)`` -> ((r, g, b), alpha)."""
    m = re.fullmatch(r"rgba?\(([^)]*)\)", text.strip())
    assert m, text
    parts = [float(v) for v in m.group(1).replace("/", ",").replace(" ", ",").split(",") if v]
    return (parts[0], parts[1], parts[2]), (parts[3] if len(parts) > 3 else 1.0)


# ---------------------------------------------------------------------------------
# Fixtures: one Chromium for the module, an offline page per test


def _require(condition: bool, reason: str) -> None:
    if not condition:
        if IN_CI:
            pytest.fail(f"browser test cannot run in CI: {reason}")
        pytest.skip(reason)


@pytest.fixture(scope="module")
def browser():
    if IN_CI:
        from playwright.sync_api import sync_playwright
    else:
        sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    _require(os.path.exists(CHROMIUM), f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


class Pages:
    """Opens the explorer page offline: every non-``file:`` request is aborted and recorded."""

    def __init__(self, browser, directory: Path):
        self.browser = browser
        self.path = write_page(directory / "explorer.html")
        self.contexts: list = []
        self.requested: list[str] = []
        self.errors: list[str] = []
        self.checked = False

    def _route(self, route) -> None:
        url = route.request.url
        if url.startswith("file:"):
            route.continue_()
        else:
            self.requested.append(url)
            route.abort()

    def open(self, search: str = "", viewport: dict | None = None, color_scheme: str = "light", downloads: bool = False):
        context = self.browser.new_context(viewport=viewport or VIEWPORT, color_scheme=color_scheme,
                                           accept_downloads=downloads)
        context.route("**/*", self._route)
        self.contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda err: self.errors.append(f"page error: {err}"))
        page.on("console", lambda msg: msg.type == "error" and self.errors.append(f"console: {msg.text}"))
        page.goto(self.path.as_uri() + search)
        page.wait_for_function("() => window.convvizExplorer && document.querySelector('.cvz-explorer')")
        return page

    def check_offline(self) -> None:
        """Nothing but file: was requested, and the page raised no error."""
        self.checked = True
        assert self.requested == [], f"the page tried the network: {self.requested}"
        assert self.errors == [], self.errors

    def close(self) -> None:
        for context in self.contexts:
            context.close()


@pytest.fixture
def pages(browser, tmp_path):
    p = Pages(browser, tmp_path)
    try:
        yield p
        if not p.checked:  # a test that forgot: check anyway
            p.check_offline()
    finally:
        p.close()


def url_query(page) -> str:
    """The page's query as the controls last set it: the page writes it after the redraw
    is painted (a frame later), so a pending write is made now."""
    return page.evaluate("() => { window.convvizExplorer.model.flushUrl(); return location.search; }")


def open_setting(pages: Pages, p: dict[str, Any]):
    page = pages.open(query(p))
    assert url_query(page) != ""
    return page


def sum_state(page) -> dict[str, Any]:
    return page.evaluate(SUM_JS)


def cells(page, panel: str | None = None) -> list[dict]:
    return page.evaluate(CELLS_JS, panel)


def away(page) -> None:
    """Move the mouse off the panels (onto the page's title)."""
    box = page.locator(".cvz-title").bounding_box()
    page.mouse.move(box["x"] + 2, box["y"] + 2)


# ---------------------------------------------------------------------------------
# Hover: which cells light, and the worked sums


def test_hovering_a_dy_cell_lights_the_dx_cells_convviz_geometry_names(pages):
    p = setting(input_h=7, input_w=9, kernel_h=3, kernel_w=2, stride_h=2, stride_w=3, dilation_w=2,
                padding="EXPLICIT", pad_top=1, pad_bottom=0, pad_left=2, pad_right=1, seed=5)
    g = build_geometry(p)
    ref = compute(p)
    w, dy = ref.inputs["w"][0, 0], ref.inputs["dy"][0, 0]
    page = open_setting(pages, p)
    (oh_n, ow_n), (kh_n, kw_n) = g.output_hw, g.kernel_hw
    assert len(cells(page, "dy")) == oh_n * ow_n
    landed_on_padding = 0
    for oh in range(oh_n):
        for ow in range(ow_n):
            page.hover(sel("dy", oh, ow))
            got = cells(page)
            hovered = [c for c in got if "cvz-source-cell" in c["classes"]]
            assert [(c["panel"], c["row"], c["col"]) for c in hovered] == [("dy", oh, ow)]
            assert float(hovered[0]["value"]) == dy[oh, ow]
            expected = {}
            for kh in range(kh_n):
                for kw in range(kw_n):
                    i, j = g.rows.input_index(oh, kh), g.cols.input_index(ow, kw)
                    assert (i, j) == g.input_cell((oh, ow), (kh, kw))
                    expected[(i, j)] = dy[oh, ow] * w[kh, kw]
                    landed_on_padding += g.is_padding((i, j))
            assert lit(got, "cvz-target", "dx") == set(expected), (oh, ow)
            assert lit(got, "cvz-target") == set(expected)  # nothing outside dx is a target
            assert lit(got, "cvz-in", "w") == {(kh, kw) for kh in range(kh_n) for kw in range(kw_n)}
            for c in got:
                if c["panel"] == "dx" and "cvz-target" in c["classes"]:
                    if c["product"] is not None:  # (written on cells of 32 px or more)
                        assert product_value(c["product"]) == expected[(c["row"], c["col"])], c
                    assert c["pad"] == g.is_padding((c["row"], c["col"]))
                else:
                    assert c["product"] is None, c
            listed = {}  # the info panel's lines: "dx[i,j] += a·b = product"
            for line in page.evaluate(PRODUCTS_JS)["lines"]:
                name, rest = line.split(" += ")
                i, j = (int(v.replace("\u2212", "-")) for v in name[3:-1].split(","))
                listed[(i, j)] = product_value(rest.split(" = ")[1].replace(" (dropped)", ""))
                assert line.endswith("(dropped)") == g.is_padding((i, j)), line
            assert listed == expected, (oh, ow)
    assert landed_on_padding > 0  # the setting does send products onto padding
    pages.check_offline()





@pytest.mark.parametrize("size", ["small cells", "large cells", "channels"])
def test_a_given_cells_products_are_listed_and_never_drawn_under_13_px(pages, size):
    # A 24x24 input draws 24 px cells: a label of 0.72 of the number's font would be 10 px
    # there, under the back row's 10 pt, so the products go to the info panel only; a 5x5
    # input's cells are large enough for them on the cells as well.  Channels: 18
    # products, 12 listed and how many more.
    small, k, ch = {"small cells": (24, 1, 1), "large cells": (5, 3, 1), "channels": (16, 3, 2)}[size]
    p = setting(op="conv2d_backprop_input", input_h=small, input_w=small, kernel_h=k, kernel_w=k, padding="SAME",
                in_channels=ch, out_channels=ch, seed=3)
    page = open_setting(pages, p)
    cell = sel("dy", 2, 2, 0 if ch > 1 else None)
    page.hover(cell)
    got = page.evaluate(PRODUCTS_JS)
    assert not got["hidden"] and got["lines"] and min(got["fonts"]) >= 13
    n_terms = k * k * ch
    assert len(got["lines"]) == min(n_terms, 12) + (n_terms > 12)
    if n_terms > 12:
        assert got["lines"][-1] == f"\u2026 ({n_terms - 12} more)"
    hovered = float(page.locator(cell).get_attribute("data-value"))
    for line in got["lines"][:min(n_terms, 12)]:  # "dx[...] += a\u00b7b = product": a is the hovered value
        factors, product = line.split(" += ")[1].split(" = ")
        a, b = (product_value(v.strip("()")) for v in factors.split("\u00b7"))
        assert a == hovered and product_value(product.replace(" (dropped)", "")) == a * b, line
    assert all(width >= 32 and font >= 13 for width, font in got["labels"])
    if size == "small cells":
        assert page.locator(sel("dx", 2, 2)).bounding_box()["width"] < 32 and got["labels"] == []
    if size == "large cells":
        assert len(got["labels"]) == 9
    pages.check_offline()


def test_hovering_dx_cells_shows_the_kernels_value_as_the_worked_sum(pages):
    p = setting(input_h=7, input_w=9, kernel_h=3, kernel_w=2, stride_h=2, stride_w=3, dilation_w=2,
                padding="EXPLICIT", pad_top=1, pad_bottom=0, pad_left=2, pad_right=1, seed=5)
    g = build_geometry(p)
    dx = compute(p).output[0, 0]
    page = open_setting(pages, p)
    assert sum_state(page)["hidden"]
    h, w = g.input_hw
    for r in range(h):
        for c in range(w):
            page.hover(sel("dx", r, c))
            s = sum_state(page)
            assert not s["hidden"]
            assert float(s["value"]) == dx[r, c], (r, c)
            # the lit (dy cell, tap) pairs are exactly those convviz's geometry sends to (r, c)
            got = cells(page)
            pairs = [((oh, ow), (kh, kw)) for oh in range(g.output_hw[0]) for ow in range(g.output_hw[1])
                     for kh in range(g.kernel_hw[0]) for kw in range(g.kernel_hw[1])
                     if g.input_cell((oh, ow), (kh, kw)) == (r, c)]
            assert lit(got, "cvz-in", "dy") == {o for o, _ in pairs}, (r, c)
            assert lit(got, "cvz-in", "w") == {t for _, t in pairs}, (r, c)
            if not pairs:
                assert dx[r, c] == 0 and "no terms" in s["text"]
    pages.check_offline()


def test_a_lost_row_sums_to_zero_and_the_note_says_why(pages):
    p = setting(input_h=8, input_w=8, kernel_h=3, kernel_w=3, stride_h=3, stride_w=3, padding="VALID")
    g = build_geometry(p)
    dx = compute(p).output[0, 0]
    assert g.rows.zero_gradient_indices().tolist() == [6, 7]  # convviz's own account
    page = open_setting(pages, p)
    got = cells(page, "dx")
    lost_cells = {(c["row"], c["col"]) for c in got if "cvz-lost" in c["classes"]}
    assert lost_cells == {(r, c) for r in range(8) for c in range(8)
                          if r in g.zero_gradient_rows() or c in g.zero_gradient_cols()}
    assert page.eval_on_selector_all("[data-lost-row]", "els => els.map(e => Number(e.dataset.lostRow))") == [6, 7]
    for r, c in [(0, 0), (2, 4), (5, 5), (6, 2), (7, 0), (3, 7)]:
        page.hover(sel("dx", r, c))
        s = sum_state(page)
        assert float(s["value"]) == dx[r, c], (r, c)
        if r in (6, 7):
            assert dx[r, c] == 0
            assert f"No window reads row {r}" in s["note"] and "exactly 0" in s["note"], s["note"]
            assert "windows stop at row 5" in s["note"]  # (out - 1) * stride + eff - 1 = 5
    # The gutter label of a lost row explains it too, and lights its cells.
    page.hover('[data-lost-row="6"]')
    s = sum_state(page)
    assert "No window reads row 6" in s["note"] and s["hidden"]
    assert lit(cells(page, "dx"), "cvz-in") == {(6, c) for c in range(8)}
    pages.check_offline()


def test_hovering_a_dw_tap_shows_the_depthwise_kernels_value(pages):
    p = setting(op="depthwise_conv2d_native_backprop_filter", multiplier=2, input_h=7, input_w=6, kernel_h=3, kernel_w=3,
                stride_h=2, stride_w=1, padding="SAME", seed=11)
    g = build_geometry(p)
    ref = compute(p)
    assert ref.source.startswith("convviz.depthwise_conv2d_native_backprop_filter")
    dw = ref.output[0]  # [multiplier, kh, kw] of channel 0
    page = open_setting(pages, p)
    taps = cells(page, "dw")
    assert {(c["ch"], c["row"], c["col"]) for c in taps} == {
        (m, r, c) for m in range(2) for r in range(3) for c in range(3)}
    assert all(c["hasChannel"] for c in taps) and all(c["hasChannel"] for c in cells(page, "dy"))
    for m in range(2):
        for kh in range(3):
            for kw in range(3):
                page.hover(sel("dw", kh, kw, m))
                s = sum_state(page)
                assert float(s["value"]) == dw[m, kh, kw], (m, kh, kw)
                got = cells(page)
                # the dy cells of channel m whose tap (kh, kw) reads a real x cell
                outs = {(oh, ow) for oh in g.rows.output_range(kh) for ow in g.cols.output_range(kw)}
                assert lit(got, "cvz-in", "dy") == {(m, oh, ow) for oh, ow in outs}
    pages.check_offline()


def test_hovering_a_y_cell_shows_the_conv2d_kernels_value(pages):
    p = setting(op="conv2d", input_h=6, input_w=7, kernel_h=3, kernel_w=4, stride_h=1, stride_w=2,
                dilation_h=2, padding="SAME", seed=3, values="decimals")
    ref = compute(p)
    assert ref.source.startswith("convviz.conv2d")
    y = ref.output[0, 0]
    page = open_setting(pages, p)
    for r in range(y.shape[0]):
        for c in range(y.shape[1]):
            page.hover(sel("y", r, c))
            assert float(sum_state(page)["value"]) == pytest.approx(y[r, c], abs=1e-12), (r, c)
    pages.check_offline()


def test_padding_cells_explain_same_and_explicit_padding(pages):
    # SAME with an odd amount to split: input 6, kernel 4, stride 1 needs 3 -> 1 before, 2 after.
    p = setting(input_h=6, input_w=6, kernel_h=4, kernel_w=4, stride_h=1, stride_w=1, padding="SAME")
    g = build_geometry(p)
    before, after = same_padding(6, 4, 1, 1)
    assert (g.rows.pad_before, g.rows.pad_after) == (before, after) == (1, 2)
    page = open_setting(pages, p)
    pads = [c for c in cells(page, "dx") if c["pad"]]
    assert pads and all(c["value"] is None for c in pads)
    assert {(c["row"], c["col"]) for c in pads} == {
        (r, c) for r in range(-1, 8) for c in range(-1, 8) if g.is_padding((r, c))}
    page.hover(sel("dx", 7, 2))  # a bottom padding row
    note = sum_state(page)["note"]
    assert "SAME" in note and f"\u230a3/2\u230b = {before} top and {after} bottom" in note, note
    assert "one of the 2 bottom rows" in note
    assert "gradient" in note and "dropped" in note and "not part of x" in note
    page.hover(sel("dx", -1, 3))  # the top padding row
    note = sum_state(page)["note"]
    assert f"= {before} top" in note and "one of the 1 top rows" in note and "dropped" in note

    # EXPLICIT: the pad asked for, per side.
    p = setting(input_h=7, input_w=9, kernel_h=3, kernel_w=2, stride_h=2, stride_w=3, dilation_w=2,
                padding="EXPLICIT", pad_top=1, pad_bottom=0, pad_left=2, pad_right=1)
    page = open_setting(pages, p)
    page.hover(sel("dx", 3, -2))
    note = sum_state(page)["note"]
    assert f"Explicit padding: you asked for {p['pad_left']} left columns" in note, note
    assert "gradient" in note and "dropped" in note

    # Forward: an x padding cell shows 0 and lights the y cells whose window reads it.
    p = setting(op="conv2d", input_h=5, input_w=5, kernel_h=3, kernel_w=3, stride_h=2, stride_w=2, padding="SAME")
    g = build_geometry(p)
    page = open_setting(pages, p)
    page.hover(sel("x", -1, 0))
    assert page.text_content(sel("x", -1, 0)).strip() == "0"
    readers = {(oh, ow) for oh in range(g.output_hw[0]) for ow in range(g.output_hw[1])
               for kh in range(3) for kw in range(3) if g.input_cell((oh, ow), (kh, kw)) == (-1, 0)}
    assert readers and lit(cells(page, "y"), "cvz-target") == readers
    assert "SAME padding" in sum_state(page)["note"]
    pages.check_offline()


# ---------------------------------------------------------------------------------
# Pinning and the keyboard


def test_click_pins_and_a_second_click_unpins(pages):
    p = setting()
    dx = compute(p).output[0, 0]
    page = open_setting(pages, p)
    page.click(sel("dx", 2, 3))
    away(page)
    s = sum_state(page)
    assert float(s["value"]) == dx[2, 3] and not s["hidden"]
    got = cells(page, "dx")
    assert lit(got, "cvz-pinned") == {(2, 3)} and lit(got, "cvz-source-cell") == {(2, 3)}
    assert lit(cells(page, "dy"), "cvz-in")  # the pairs stay lit
    # hovering elsewhere shows that cell, leaving the panels shows the pinned one again
    page.hover(sel("dx", 0, 0))
    assert float(sum_state(page)["value"]) == dx[0, 0]
    away(page)
    assert float(sum_state(page)["value"]) == dx[2, 3]
    page.click(sel("dx", 2, 3))
    assert lit(cells(page, "dx"), "cvz-pinned") == set()
    away(page)
    assert sum_state(page)["hidden"] and sum_state(page)["value"] == ""
    assert lit(cells(page), "cvz-in") == set() and lit(cells(page), "cvz-source-cell") == set()
    pages.check_offline()


def test_keyboard_moves_pins_and_clears(pages):
    p = setting(input_h=6, input_w=6, stride_h=1, stride_w=1)
    dx = compute(p).output[0, 0]
    page = open_setting(pages, p)
    active = "() => { const d = document.activeElement.dataset; return [d.panel, Number(d.row), Number(d.col)]; }"
    # each panel has one tab stop: its first real cell
    assert page.eval_on_selector_all("[data-panel][tabindex='0']", "els => els.map(e => e.dataset.panel)") == [
        "w", "dy", "dx"]
    page.focus(sel("dx", 0, 0))
    assert page.evaluate(active) == ["dx", 0, 0]
    assert float(sum_state(page)["value"]) == dx[0, 0]
    page.keyboard.press("ArrowRight")
    assert page.evaluate(active) == ["dx", 0, 1]
    page.keyboard.press("ArrowDown")
    assert page.evaluate(active) == ["dx", 1, 1]
    assert float(sum_state(page)["value"]) == dx[1, 1]
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowDown")
    assert page.evaluate(active) == ["dx", 1, 1]
    page.keyboard.press("Enter")
    assert lit(cells(page, "dx"), "cvz-pinned") == {(1, 1)}
    page.keyboard.press("ArrowRight")  # focus moves on, the pin stays
    assert page.evaluate(active) == ["dx", 1, 2]
    assert lit(cells(page, "dx"), "cvz-pinned") == {(1, 1)}
    page.keyboard.press("Escape")
    assert lit(cells(page), "cvz-pinned") == set() and lit(cells(page), "cvz-source-cell") == set()
    assert sum_state(page)["hidden"]
    assert page.evaluate("() => document.activeElement.closest('[data-panel]') === null")
    # W's first tap: arrows stop at the panel's edge
    page.focus(sel("w", 0, 0))
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowLeft")
    assert page.evaluate(active) == ["w", 0, 0]
    pages.check_offline()


# ---------------------------------------------------------------------------------
# Walking the computation


def test_step_and_play_walk_the_output_cells(pages):
    p = setting()  # 6x6 input, kernel 3, stride 2, SAME: dx is 6x6
    dx = compute(p).output[0, 0]
    n = dx.size
    page = open_setting(pages, p)
    state = """() => { const pinned = document.querySelector(".cvz-pinned");
      return { pinned: pinned ? [pinned.dataset.panel, Number(pinned.dataset.row), Number(pinned.dataset.col)] : null,
               sum: document.querySelector('[data-role="sum"]').dataset.value,
               pending: [...document.querySelectorAll(".cvz-pending")].map((e) => [Number(e.dataset.row), Number(e.dataset.col)]),
               walking: document.querySelector(".cvz-explorer").classList.contains("cvz-walking"),
               pressed: document.querySelector('[name="play"]').getAttribute("aria-pressed") }; }"""
    assert page.evaluate(state)["pending"] == []
    page.click('[name="step"]')
    s = page.evaluate(state)
    assert s["pinned"] == ["dx", 0, 0] and float(s["sum"]) == dx[0, 0] and s["walking"]
    assert sorted(map(tuple, s["pending"])) == [(r, c) for r in range(6) for c in range(6)][1:]
    page.click('[name="step"]')
    s = page.evaluate(state)
    assert s["pinned"] == ["dx", 0, 1] and float(s["sum"]) == dx[0, 1] and len(s["pending"]) == n - 2

    page.select_option('[name="speed"]', "8")
    page.click('[name="play"]')
    first = page.evaluate(state)
    assert first["pressed"] == "true"
    page.wait_for_timeout(900)  # 8 cells/s
    later = page.evaluate(state)
    index = later["pinned"][1] * 6 + later["pinned"][2]
    assert index > first["pinned"][1] * 6 + first["pinned"][2] + 2
    assert float(later["sum"]) == dx[later["pinned"][1], later["pinned"][2]]
    assert len(later["pending"]) == n - 1 - index  # every later cell is hidden
    page.click('[name="play"]')  # pause
    paused = page.evaluate(state)
    assert paused["pressed"] == "false"
    page.wait_for_timeout(400)
    assert page.evaluate(state) == paused  # frozen
    index = paused["pinned"][1] * 6 + paused["pinned"][2]
    assert len(paused["pending"]) == n - 1 - index and index < n - 1
    # the next cell is hidden: its text has the colour of its background
    r, c = divmod(index + 1, 6)
    assert [r, c] in paused["pending"]
    colors = page.eval_on_selector(sel("dx", r, c),
                                   "e => [getComputedStyle(e).color, getComputedStyle(e).backgroundColor]")
    assert colors[0] == colors[1]
    pages.check_offline()


# ---------------------------------------------------------------------------------
# The URL query and the controls


def _controls(page) -> dict[str, str]:
    return page.eval_on_selector_all(".cvz-controls [name]",
                                     "els => Object.fromEntries(els.map(e => [e.name, e.value]))")


def _check_numbers(page, p: dict[str, Any]) -> None:
    ref = compute(p)
    got = [c for c in cells(page, ref.output_panel) if not c["pad"]]
    assert len(got) == ref.output.size
    for c in got:
        assert float(c["value"]) == ref.output[0][c["ch"], c["row"], c["col"]], c
        assert c["label"] and c["value"] in c["label"]
    for name, plane in ref.inputs.items():
        shown = {(c["ch"], c["row"], c["col"]): float(c["value"]) for c in cells(page, name) if not c["pad"]}
        assert shown == {idx: v for idx, v in np.ndenumerate(plane[0])}, name


def test_the_url_query_sets_the_page_and_a_control_change_rewrites_it(pages):
    page = pages.open("?" + PRESET_QUERY)
    p = setting(input_h=7, input_w=9, kernel_h=3, kernel_w=2, stride_h=2, stride_w=3, dilation_h=1,
                dilation_w=2, padding="EXPLICIT", pad_top=1, pad_bottom=0, pad_left=2, pad_right=1,
                op="conv2d_backprop_input", seed=5, theme="auto")
    assert params_from_query(url_query(page)) == p
    controls = _controls(page)
    for name, value in p.items():
        assert controls[name] == str(value), name
    _check_numbers(page, p)
    dx_pads = [c for c in cells(page, "dx") if c["pad"]]
    assert len(dx_pads) == (7 + 1 + 0) * (9 + 2 + 1) - 7 * 9
    assert float(page.get_attribute(".cvz-explorer", "data-render-ms")) >= 0

    # A number control: fill and commit.
    page.fill('[name="stride_h"]', "3")
    page.dispatch_event('[name="stride_h"]', "change")
    p["stride_h"] = 3
    search = url_query(page)
    assert "stride=3&" in search, search  # both strides are 3 now
    assert params_from_query(search) == p
    oh, ow = build_geometry(p).output_hw
    assert f"output {oh}\u00d7{ow}" in page.text_content(".cvz-subtitle")
    _check_numbers(page, p)

    # A select: the op, then the padding.
    page.select_option('[name="op"]', "depthwise_conv2d_native_backprop_filter")
    p["op"] = "depthwise_conv2d_native_backprop_filter"
    search = url_query(page)
    assert "op=depthwise_conv2d_native_backprop_filter" in search and "multiplier=1" in search
    assert params_from_query(search) == p
    _check_numbers(page, p)
    page.fill('[name="multiplier"]', "3")
    page.dispatch_event('[name="multiplier"]', "change")
    p["multiplier"] = 3
    assert params_from_query(url_query(page)) == p
    _check_numbers(page, p)
    page.select_option('[name="padding"]', "VALID")
    p["padding"] = "VALID"
    search = url_query(page)
    assert "padding=VALID" in search and "pads=" not in search
    assert params_from_query(search) == dict(p, pad_top=0, pad_bottom=0, pad_left=0, pad_right=0)
    _check_numbers(page, p)

    # The rewritten URL reopens the same setting.
    page.reload()
    page.wait_for_function("() => window.convvizExplorer")
    controls = _controls(page)
    for name in ("input_h", "input_w", "stride_h", "stride_w", "dilation_w", "op", "multiplier", "padding", "seed"):
        assert controls[name] == str(p[name]), name
    _check_numbers(page, p)
    pages.check_offline()


def test_a_link_with_the_old_op_name_opens_the_depthwise_filter_gradient(pages):
    """Links made before the rename (op=filter_grad) keep working; the page rewrites them to the new name."""
    page = pages.open("?input=7x9&stride=2&op=filter_grad&multiplier=2&seed=4")
    p = setting(input_h=7, input_w=9, stride_h=2, stride_w=2, op="depthwise_conv2d_native_backprop_filter", multiplier=2, seed=4,
                theme="auto")
    assert _controls(page)["op"] == "depthwise_conv2d_native_backprop_filter"
    assert page.text_content(".cvz-title").startswith("depthwise filter gradient")
    _check_numbers(page, p)
    page.fill('[name="seed"]', "5")
    page.dispatch_event('[name="seed"]', "change")
    # (written by the page itself a frame after the redraw: no flush here)
    page.wait_for_function("() => location.search.includes('seed=5')", timeout=5000)
    search = page.evaluate("() => location.search")
    assert "op=depthwise_conv2d_native_backprop_filter&multiplier=2" in search and "op=filter_grad" not in search
    pages.check_offline()


def test_controls_that_do_not_apply_are_disabled(pages):
    page = pages.open("?op=conv2d_backprop_input&padding=SAME")
    disabled = f"""() => Object.fromEntries([...{list(PAD_NAMES) + ['multiplier', 'stride_h', 'op']!r}].map(
        (n) => [n, document.querySelector(`[name="${{n}}"]`).disabled]))"""
    d = page.evaluate(disabled)
    assert d == {"pad_top": True, "pad_bottom": True, "pad_left": True, "pad_right": True,
                 "multiplier": True, "stride_h": False, "op": False}
    assert page.eval_on_selector('[name="multiplier"]',
                                 "e => e.closest('.cvz-field').classList.contains('cvz-disabled')")
    page.select_option('[name="padding"]', "EXPLICIT")
    d = page.evaluate(disabled)
    assert not any(d[n] for n in PAD_NAMES) and d["multiplier"]
    page.select_option('[name="op"]', "depthwise_conv2d_native_backprop_filter")
    d = page.evaluate(disabled)
    assert not any(d[n] for n in PAD_NAMES) and not d["multiplier"]
    page.select_option('[name="op"]', "conv2d")
    page.select_option('[name="padding"]', "VALID")
    d = page.evaluate(disabled)
    assert all(d[n] for n in PAD_NAMES) and d["multiplier"]
    pages.check_offline()


def test_a_setting_where_no_window_fits_says_so_and_recovers(pages):
    p = setting(input_h=2, input_w=2, kernel_h=5, kernel_w=5, padding="VALID")
    assert compute(p) is None and 0 in build_geometry(p).output_hw  # convviz: the output is empty
    page = open_setting(pages, p)
    message = page.locator(".cvz-message")
    assert message.is_visible() and "No window fits" in message.text_content()
    assert cells(page) == []
    page.select_option('[name="padding"]', "SAME")
    p["padding"] = "SAME"
    assert not message.is_visible()
    _check_numbers(page, p)
    pages.check_offline()


# ---------------------------------------------------------------------------------
# Colour


def test_every_numbered_cell_meets_wcag_aa_in_both_themes(pages):
    # padding on x ("0" text), on dx and cropped rows of a transposed y (blank); decimals and integers; every op
    page = pages.open("?input=7x8&kernel=4x3&stride=1x2&padding=SAME&seed=21&multiplier=2")
    checked = 0
    for values in ("integers", "decimals"):
        page.select_option('[name="values"]', values)
        for op in OPS:
            page.select_option('[name="op"]', op)
            for theme in THEMES:
                page.select_option('[name="theme"]', theme)
                assert page.get_attribute(".cvz-explorer", "data-theme") == theme
                found = page.evaluate(COLORS_JS)
                assert any(not c["pad"] for c in found)
                if "input" in MODES[op].given:  # x's padding shows its 0 (dx's and a cropped y's are blank)
                    assert any(c["pad"] and c["text"] == "0" for c in found)
                for c in found:
                    bg, alpha = css_rgb(c["bg"])
                    fg, fg_alpha = css_rgb(c["fg"])
                    assert alpha == 1 and fg_alpha == 1, c  # opaque, so the ratio is what is seen
                    ratio = contrast(bg, fg)
                    assert ratio >= 4.5, (values, op, theme, c, round(ratio, 2))
                    checked += 1
    assert checked > 500
    pages.check_offline()


@pytest.mark.parametrize("scheme", THEMES)
def test_theme_auto_follows_the_system(pages, scheme):
    page = pages.open("?theme=auto", color_scheme=scheme)
    assert page.get_attribute(".cvz-explorer", "data-theme") == scheme
    page_bg, _ = css_rgb(page.evaluate("getComputedStyle(document.body).backgroundColor"))
    assert (srgb_luminance(page_bg) < 0.1) == (scheme == "dark")  # the page around the explorer matches
    pages.check_offline()


# ---------------------------------------------------------------------------------
# core.js in the page, on every setting of the cross-check grid


def test_core_in_the_page_equals_convviz_on_every_case(pages):
    page = pages.open("?theme=light")
    dumped = page.evaluate(DUMP_JS, CASES)
    assert list(dumped["params"]) == list(defaults())
    results = dumped["results"]
    assert len(results) == len(CASES)
    checked = 0
    for params, got in zip(CASES, results):
        check_case(params, got)
        checked += 1
    assert checked >= 200
    pages.check_offline()


# ---------------------------------------------------------------------------------
# Screenshots: one per op and theme, with a hovered cell so the worked sum shows

SHOTS = {  # op -> (extra query, the hovered cell)
    "conv2d_backprop_input": ("input=7x9&kernel=3&stride=2&padding=SAME&seed=4", ("dx", 3, 4, None)),
    "depthwise_conv2d_native_backprop_filter": ("input=7x9&kernel=3&stride=2&padding=SAME&seed=4&multiplier=2", ("dw", 1, 2, 1)),
    "conv2d": ("input=7x9&kernel=3&stride=2&padding=SAME&seed=4", ("y", 1, 2, None)),
    "conv2d_backprop_filter": ("input=7x9&kernel=3&stride=2&padding=SAME&seed=4&in_channels=2&out_channels=2",
                               ("dw", 1, 2, 1)),
    "depthwise_conv2d_native": ("input=7x9&kernel=3&stride=2&padding=SAME&seed=4&multiplier=2", ("y", 1, 2, 1)),
    "depthwise_conv2d_native_backprop_input": ("input=7x9&kernel=3&stride=2&padding=SAME&seed=4", ("dx", 3, 4, None)),
    "conv_transpose2d": ("input=3x4&kernel=3&stride=2&padding=1&output_padding=1&seed=4", ("y", 2, 3, None)),
}


# The legibility case: 4 input and 4 output channels, a 3x3 kernel, at 1280x720 (one plane at a time).
CHANNEL_SHOT = ("conv2d", "input=8&kernel=3&stride=1&padding=SAME&seed=4&in_channels=4&out_channels=4",
                ("y", 3, 4, 1))


@pytest.fixture(scope="module")
def screenshots(browser, tmp_path_factory):
    pages = Pages(browser, tmp_path_factory.mktemp("shots"))
    ARTIFACTS.mkdir(exist_ok=True)
    taken = []
    shots = [(op, op, extra, cell) for op, (extra, cell) in SHOTS.items()]
    shots.append(("conv2d-4x4-channels", *CHANNEL_SHOT))
    try:
        for name, op, extra, (panel, r, c, ch) in shots:
            for theme in THEMES:
                page = pages.open(f"?{extra}&op={op}&theme={theme}", viewport=VIEWPORT)
                if name == "conv2d-4x4-channels":  # the settings folded: the panels and the sum fill 1280x720
                    page.click(".cvz-settings > summary")
                target = page.locator(sel(panel, r, c, ch)).first
                if not target.is_visible():  # a plane behind a tab: show it first
                    page.click(f'[data-panel-tab="{panel}"][data-plane-tab="{target.get_attribute("data-plane")}"]')
                target.hover()
                page.wait_for_timeout(50)
                path = ARTIFACTS / f"explorer-page-{name}-{theme}.png"
                page.screenshot(path=str(path), full_page=name != "conv2d-4x4-channels")
                taken.append(dict(op=op, name=name, theme=theme, path=path, cell=(panel, r, c, ch),
                                  search=url_query(page), sum=sum_state(page),
                                  root_theme=page.get_attribute(".cvz-explorer", "data-theme")))
        yield taken, pages
    finally:
        pages.close()


def test_four_by_four_channels_fit_one_1280x720_screen(pages):
    """The issue's legibility case, settings folded: x, W and y side by side in one row beside the
    worked sum (of a hovered y cell), all within 1280x720 without scrolling, no number under 13 px (y's sums of 36 products take 3 characters)."""
    op, extra, (panel, r, c, ch) = CHANNEL_SHOT
    page = pages.open(f"?{extra}&op={op}&theme=light", viewport=VIEWPORT)
    page.click(".cvz-settings > summary")
    target = page.locator(sel(panel, r, c, ch)).first
    page.click(f'[data-panel-tab="{panel}"][data-plane-tab="{target.get_attribute("data-plane")}"]')
    target.hover()
    boxes = page.evaluate("""() => [...document.querySelectorAll('.cvz-panel, [data-role=sum]')].map((e) => {
        const b = e.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; })""")
    *panels, worked = boxes
    assert len(panels) == 3 and len({round(top) for _, top, _, _ in panels}) == 1, panels  # one row
    assert all(right <= worked[0] for _, _, right, _ in panels) and worked[2] <= 1280
    assert max(bottom for *_, bottom in boxes) <= 720, boxes
    assert min(size for _, size, _, _ in page.evaluate(FONTS_JS)) >= 13
    pages.check_offline()


def test_screenshots_show_the_worked_sum_of_convviz(screenshots):
    taken, pages = screenshots
    assert len(taken) == 2 * (len(SHOTS) + 1) and set(SHOTS) == set(OPS)
    for shot in taken:
        p = params_from_query(shot["search"])
        assert p["op"] == shot["op"] and shot["root_theme"] == shot["theme"]
        ref = compute(p)
        _, r, c, ch = shot["cell"]
        assert not shot["sum"]["hidden"]
        assert float(shot["sum"]["value"]) == ref.output[0][ch or 0, r, c], shot
    pages.check_offline()


def test_screenshot_files_exist(screenshots):
    taken, _ = screenshots
    for op in (*OPS, "conv2d-4x4-channels"):
        for theme in THEMES:
            path = ARTIFACTS / f"explorer-page-{op}-{theme}.png"
            assert path.exists() and path.stat().st_size > 10_000, path
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------------------------
# Regressions: bugs found while writing these tests


def test_hovering_the_lost_columns_caption_raises_no_error(pages):
    page = open_setting(pages, setting(input_h=8, input_w=8, kernel_h=3, kernel_w=3, stride_h=3, stride_w=3,
                                       padding="VALID"))
    page.hover(".cvz-gutter.cvz-lost-label:not([data-lost-row])")
    page.hover('[data-lost-col="6"]')
    assert "No window reads column 6" in sum_state(page)["note"]
    pages.check_offline()


def test_a_committed_number_control_shows_the_value_in_use(pages):
    page = pages.open("?input=8&theme=light")
    page.fill('[name="input_h"]', "40")
    page.keyboard.press("Tab")  # commits: change
    assert "input=32x8" in url_query(page)  # the page does use 32 (the control's max)
    assert page.input_value('[name="input_h"]') == "32"
    page.fill('[name="input_w"]', "")
    page.keyboard.press("Tab")
    assert page.input_value('[name="input_w"]') == "8"
    pages.check_offline()


# ---------------------------------------------------------------------------------
# Channels, groups and batch


def _index_cells(page, panel: str) -> dict[tuple[int, ...], float]:
    """``{data-index: value}`` of every numbered cell of a panel (hidden planes included)."""
    got = page.eval_on_selector_all(
        f'[data-panel="{panel}"][data-index]', "els => els.map(e => [e.dataset.index, e.dataset.value])")
    return {tuple(int(v) for v in index.split(",")): float(value) for index, value in got}


@pytest.mark.parametrize("op", ["conv2d", "conv2d_backprop_filter", "depthwise_conv2d_native_backprop_input",
                                "conv_transpose2d"])
def test_every_cell_of_every_plane_has_its_index_in_the_ops_tensor(pages, op):
    """data-index is the cell's index in the array convviz takes or returns (NHWC, HWIO, [kh, kw, c, m];
    NCHW and (C_in, C_out / groups, kH, kW) for conv_transpose2d), for every plane, shown or not."""
    p = setting(op=op, input_h=5, input_w=4, kernel_h=3, kernel_w=2, stride_h=2, stride_w=1, in_channels=4,
                out_channels=2, groups=2, multiplier=2, batch=2, seed=7, padding="SAME")
    if op == "conv_transpose2d":
        p.update(padding="EXPLICIT", pad_top=1, pad_bottom=1, output_padding_h=1)
    ref = compute(p)
    page = open_setting(pages, p)
    for name, array in ref.arrays.items():
        shown = _index_cells(page, name)
        assert len(shown) == array.size, name
        for index, value in shown.items():
            assert value == array[index], (name, index)
    pages.check_offline()


def test_a_grouped_filter_is_drawn_block_diagonal_and_its_tabs_choose_planes(pages):
    p = setting(op="conv2d", input_h=16, input_w=16, kernel_h=3, kernel_w=3, stride_h=1, stride_w=1,
                in_channels=4, out_channels=4, groups=2, seed=2)
    page = open_setting(pages, p)
    blocks = page.eval_on_selector_all('[data-panel-box="w"] .cvz-block',
                                       "els => els.map(e => e.classList.contains('cvz-unlinked'))")
    # 4 x 4 blocks, x channel c feeds y channel o only within a group: 2 blocks of 2 x 2
    assert len(blocks) == 16
    linked = [[not blocks[r * 4 + c] for c in range(4)] for r in range(4)]
    assert linked == [[r // 2 == c // 2 for c in range(4)] for r in range(4)]
    visible = 'els => els.filter(e => e.offsetParent !== null).map(e => e.dataset.planeBox)'
    assert page.eval_on_selector_all('[data-panel-box="y"] [data-plane-box]', visible) == ["0,0"]
    page.click('[data-panel-tab="y"][data-plane-tab="0,3"]')
    assert page.eval_on_selector_all('[data-panel-box="y"] [data-plane-box]', visible) == ["0,3"]
    # y[0, 5, 5, 3] sums channels 2 and 3 of x: x and W turn to planes that hold its terms
    page.hover('[data-panel="y"][data-row="5"][data-col="5"][data-plane="0,3"]')
    s = sum_state(page)
    ref = compute(p)
    assert float(s["value"]) == ref.arrays["y"][0, 5, 5, 3]
    assert "18 terms through 2 channels" in s["text"]
    assert page.eval_on_selector_all('[data-panel-box="x"] [data-plane-box]', visible) == ["0,2"]
    lit_x = page.eval_on_selector_all('[data-panel="x"].cvz-in', "els => els.map(e => e.dataset.plane)")
    assert sorted(set(lit_x)) == ["0,2", "0,3"] and len(lit_x) == 18
    badges = page.eval_on_selector_all('[data-panel-tab="x"].cvz-has-lit', "els => els.map(e => e.dataset.planeTab)")
    assert badges == ["0,2", "0,3"]
    page.click('[name="planes"]')  # every plane stacked
    assert len(page.eval_on_selector_all('[data-panel-box="y"] [data-plane-box]', visible)) == 4
    pages.check_offline()


# ---------------------------------------------------------------------------------
# The code panel


@pytest.mark.parametrize("op", EXPLORER_OPS)
def test_the_code_panel_exports_what_computes_the_numbers_on_screen(pages, op):
    """The page's convviz code (and PyTorch's, where installed), run here, gives the numbers it shows."""
    p = setting(op=op, input_h=6, input_w=5, kernel_h=3, kernel_w=2, stride_h=2, stride_w=1, dilation_w=2,
                in_channels=2, out_channels=4, groups=2, multiplier=2, batch=2, seed=12, values="decimals",
                padding="EXPLICIT", pad_top=1, pad_bottom=0, pad_left=2, pad_right=1)
    if op == "conv_transpose2d":
        p.update(pad_bottom=1, pad_right=2, output_padding_h=1)
    page = open_setting(pages, p)
    page.click(".cvz-code-box summary")
    ref = compute(p)
    shown = _index_cells(page, ref.output_panel)
    langs = ["convviz"] + [lang for lang, module in (("pytorch", "torch"), ("tensorflow", "tensorflow"))
                           if importlib.util.find_spec(module)]
    for lang in langs:
        page.select_option('[name="code_lang"]', lang)
        pre = page.locator('[data-role="code"]')
        assert pre.get_attribute("data-lang") == lang
        if "# NOTE: TensorFlow's CPU" in pre.text_content():  # a setting TensorFlow's kernels may refuse
            continue
        namespace: dict[str, Any] = {}
        with contextlib.redirect_stdout(io.StringIO()):
            exec(pre.text_content(), namespace)  # noqa: S102 - what a user would paste
        got = np.asarray(namespace[pre.get_attribute("data-result")])
        tol = 1e-4 if lang == "tensorflow" else 1e-12
        assert got.shape == ref.arrays[ref.output_panel].shape
        for index, value in shown.items():
            assert got[index] == pytest.approx(value, abs=tol), (lang, index)
    page.click('[name="copy_code"]')
    page.wait_for_function("() => document.querySelector('.cvz-copied').textContent !== ''", timeout=5000)
    assert page.text_content(".cvz-copied") in ("copied", "select the code and copy it")
    pages.check_offline()


# ---------------------------------------------------------------------------------
# Symbols


def test_symbols_name_the_cells_and_write_the_sum_as_a_formula_with_its_numbers(pages):
    p = setting(op="conv2d", input_h=5, input_w=5, kernel_h=3, kernel_w=3, stride_h=1, stride_w=1, padding="SAME",
                in_channels=2, seed=3, symbols="on")
    page = open_setting(pages, p)
    ref = compute(p)
    xs = cells(page, "x")
    real = [c for c in xs if not c["pad"]]
    # short names on the cells (x with row and column subscripts), the value in data-value and the label
    assert {c["text"] for c in real} == {"x" + "".join("\u2080\u2081\u2082\u2083\u2084"[int(d)] for d in f"{r}{c}")
                                         for r in range(5) for c in range(5)}
    assert all(c["value"] in c["label"] for c in real)
    page.hover('[data-panel="y"][data-row="1"][data-col="2"]')
    s = sum_state(page)
    assert float(s["value"]) == ref.arrays["y"][0, 1, 2, 0]
    assert "y[n,i,j,o] = \u03a3_{c,kh,kw} x[n, i+kh\u22121, j+kw\u22121, c]\u00b7W[kh,kw,c,o]" in s["text"]
    terms = page.eval_on_selector_all(".cvz-sum-term", "els => els.map(e => e.textContent)")
    assert len(terms) == 12 + 1 and "x[0,0,1,0]\u00b7W[0,0,0,0]" in terms[0]  # 12 shown, then "+ ... (6 more)"
    x, w = ref.arrays["x"], ref.arrays["w"]
    nums = page.eval_on_selector_all(".cvz-sum-nums", "els => els.map(e => e.textContent)")
    first = [product_value(v.strip("()")) for v in nums[0].split("\u00b7")]
    assert first == [x[0, 0, 1, 0], w[0, 0, 0, 0]]
    assert "symbols=on" in url_query(page)
    page.select_option('[name="symbols"]', "off")
    assert cells(page, "y")[0]["text"] == core_number(ref.arrays["y"][0, 0, 0, 0])
    assert "symbols=" not in url_query(page)
    pages.check_offline()


def core_number(v: float) -> str:
    """A number as the cells write it: integers plainly, with a typographic minus."""
    return (f"{v:g}").replace("-", "\u2212")


# ---------------------------------------------------------------------------------
# Slides: what is on screen as an SVG and a PNG


@pytest.mark.parametrize("op, cell", [("conv2d_backprop_input", ("dx", 3, 4)), ("conv2d", ("y", 3, 4)),
                                      ("depthwise_conv2d_native_backprop_filter", ("dw", 1, 1)),
                                      ("conv_transpose2d", ("y", 4, 5))])
def test_a_slide_saves_the_panels_the_highlight_and_the_worked_sum(pages, op, cell):
    import xml.etree.ElementTree as ET

    p = setting(op=op, input_h=16, input_w=16, kernel_h=3, kernel_w=3, stride_h=1, stride_w=1, in_channels=4,
                out_channels=4, groups=2, multiplier=2, seed=5, theme="dark")
    if op == "conv_transpose2d":
        p.update(input_h=6, input_w=6, stride_h=2, stride_w=2, padding="EXPLICIT", pad_top=1, pad_bottom=1,
                 pad_left=1, pad_right=1, output_padding_h=1, output_padding_w=1)
    page = pages.open(query(p), downloads=True)
    panel, r, c = cell
    page.click(f'[data-panel="{panel}"][data-row="{r}"][data-col="{c}"] >> nth=0')
    value = float(sum_state(page)["value"])
    files = {}
    for kind in ("svg", "png"):
        with page.expect_download() as download:
            page.click(f'[name="save_{kind}"]')
        files[kind] = pages.path.parent / download.value.suggested_filename
        download.value.save_as(files[kind])
    assert files["svg"].name == f"convviz-{op}.svg" and files["png"].name == f"convviz-{op}.png"
    root = ET.parse(files["svg"]).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    assert (root.get("width"), root.get("height")) == ("1280", "720")
    texts = [(t.text or "", float(t.get("font-size"))) for t in root.iter(f"{ns}text")]
    assert min(size for _, size in texts) >= 13  # legible on a 1280x720 slide
    assert any(text == f"= {core_number(value)}" for text, _ in texts)  # the worked sum's total
    lit = [e.get("data-lit") for e in root.iter(f"{ns}rect") if e.get("data-lit")]
    assert lit.count("focus") == 1 and lit.count("in") >= 2
    png = files["png"].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(png[16:20], "big") == 2560 and int.from_bytes(png[20:24], "big") == 1440
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / f"explorer-slide-{op}.png").write_bytes(png)
    pages.check_offline()


# ---------------------------------------------------------------------------------
# Practice


def test_practice_hides_the_result_checks_answers_and_shows_the_sum_on_a_miss(pages):
    p = setting(op="conv2d_backprop_input", input_h=6, input_w=6, kernel_h=3, kernel_w=3, stride_h=2, stride_w=2,
                seed=8, practice="on")
    ref = compute(p)
    dx = ref.arrays["dx"]
    page = open_setting(pages, p)
    assert "practice=on" in url_query(page)
    got = [c for c in cells(page, "dx") if not c["pad"]]
    assert len(got) == 36 and all(c["text"] == "?" for c in got)  # the numbers wait for answers
    assert page.get_attribute('[name="play"]', "disabled") is not None
    score = page.locator('[data-role="score"]')
    assert score.get_attribute("data-tried") == "0" and "36 cells left" in score.text_content()
    # hovering a hidden cell tells nothing of its sum
    page.hover(sel("dx", 1, 1))
    assert sum_state(page)["hidden"] and "= ?" in sum_state(page)["title"]
    # right, typed with a typographic minus where the value is negative
    page.click(sel("dx", 1, 1))
    v = dx[0, 1, 1, 0]
    page.fill('[name="answer"]', f"{v:g}".replace("-", "\u2212"))
    page.click('[name="check"]')
    feedback = page.locator('[data-role="feedback"]')
    assert feedback.get_attribute("data-result") == "right" and "Right" in feedback.text_content()
    assert page.text_content(sel("dx", 1, 1)).strip() == core_number(v)
    assert "cvz-right" in page.get_attribute(sel("dx", 1, 1), "class")
    assert (score.get_attribute("data-right"), score.get_attribute("data-tried")) == ("1", "1")
    # wrong: the value, the worked sum and its cells are shown
    page.click(sel("dx", 2, 3))
    w = dx[0, 2, 3, 0]
    page.fill('[name="answer"]', f"{w + 1:g}")
    page.keyboard.press("Enter")
    assert feedback.get_attribute("data-result") == "wrong"
    assert f"you wrote {core_number(w + 1)}" in feedback.text_content()
    away(page)
    s = sum_state(page)
    assert not s["hidden"] and float(s["value"]) == w
    assert lit(cells(page), "cvz-in", "dy") and "cvz-wrong" in page.get_attribute(sel("dx", 2, 3), "class")
    assert (score.get_attribute("data-right"), score.get_attribute("data-tried")) == ("1", "2")
    # not a number: asked again, nothing scored
    page.click(sel("dx", 0, 0))
    page.fill('[name="answer"]', "seven")
    page.click('[name="check"]')
    assert feedback.get_attribute("data-result") == "none" and score.get_attribute("data-tried") == "2"
    # another setting has its own score; coming back keeps this one
    page.fill('[name="seed"]', "9")
    page.dispatch_event('[name="seed"]', "change")
    assert score.get_attribute("data-tried") == "0"
    page.fill('[name="seed"]', "8")
    page.dispatch_event('[name="seed"]', "change")
    assert score.get_attribute("data-tried") == "2"
    # a reload of the linked exercise finds it as the learner left it (localStorage) ...
    url_query(page)
    page.reload()
    page.wait_for_function("() => window.convvizExplorer && document.querySelector('[data-panel]')")
    score = page.locator('[data-role="score"]')
    assert (score.get_attribute("data-right"), score.get_attribute("data-tried")) == ("1", "2")
    assert page.text_content(sel("dx", 1, 1)).strip() == core_number(v)
    assert "cvz-wrong" in page.get_attribute(sel("dx", 2, 3), "class")
    # ... until "start over" hides every result cell again, for good
    page.click('[name="practice_reset"]')
    assert score.get_attribute("data-tried") == "0" and "36 cells left" in score.text_content()
    assert page.text_content(sel("dx", 1, 1)).strip() == "?"
    page.reload()
    page.wait_for_function("() => window.convvizExplorer && document.querySelector('[data-panel]')")
    assert page.locator('[data-role="score"]').get_attribute("data-tried") == "0"
    pages.check_offline()


def test_conv_transpose2d_draws_the_convolution_it_transposes(pages):
    """The toggle draws conv2d's grids: y's grid (its input) and x's (its output); an x cell's window on
    y's grid is exactly where conv_transpose2d scatters it; output_padding's row past the last window is marked."""
    p = setting(op="conv_transpose2d", input_h=3, input_w=4, kernel_h=3, kernel_w=3, stride_h=2, stride_w=2,
                padding="EXPLICIT", pad_top=0, pad_bottom=0, pad_left=1, pad_right=1, output_padding_h=1, seed=4)
    page = open_setting(pages, p)
    button = page.locator('[name="as_convolution"]')
    assert button.is_visible() and page.locator('[data-role="convolution"]').is_hidden()
    button.click()
    figure = page.locator('[data-role="convolution"]')
    assert figure.is_visible() and "conv2d with the same weights" in figure.text_content()
    assert "1 row past its last window" in figure.text_content()
    lost = page.eval_on_selector_all(".cvz-mini-lost", "els => els.map(e => e.dataset.convCell)")
    assert lost and all(cell.split("|")[1] == "7" for cell in lost)  # y's row 7: output_padding's, reached by nothing
    for r, c in [(0, 0), (1, 2), (2, 3)]:
        page.hover(sel("x", r, c))
        targets = lit(cells(page, "y"), "cvz-target")
        window = page.eval_on_selector_all(".cvz-mini-in", "els => els.map(e => e.dataset.convCell)")
        assert {tuple(int(v) for v in cell.split("|")[1:]) for cell in window if cell.startswith("in|")} == targets
        assert page.eval_on_selector_all(".cvz-mini-focus", "els => els.map(e => e.dataset.convCell)") == [f"out|{r}|{c}"]
    page.select_option('[name="op"]', "conv2d")
    assert button.is_hidden() and figure.is_hidden()
    pages.check_offline()


def test_a_redraw_keeps_the_cells_of_panels_it_does_not_reshape(pages):
    """A new seed rewrites numbers in place; a new kernel width rebuilds the filter and redraws the padded
    input in place (its SAME pads change: its real cells stay, pad cells come and go), keeping y's cells."""
    p = setting(op="conv2d", input_h=16, input_w=16, kernel_h=3, kernel_w=3, stride_h=1, stride_w=1,
                in_channels=4, out_channels=4, seed=0)
    page = open_setting(pages, p)
    tag = """() => { for (const e of document.querySelectorAll('[data-panel="y"], [data-panel="x"]')) e._kept = true; }"""
    kept = """(panel) => { const els = [...document.querySelectorAll(`[data-panel="${panel}"]`)];
                     return [els.length, els.filter((e) => e._kept).length,
                             els.filter((e) => e._kept && !e.dataset.pad).length]; }"""
    page.evaluate(tag)
    page.fill('[name="seed"]', "1")
    page.dispatch_event('[name="seed"]', "change")
    n, same, _ = page.evaluate(kept, "y")
    assert n == same == 4 * 16 * 16
    _check_every_index(page, dict(p, seed=1))
    page.fill('[name="kernel_w"]', "5")
    page.dispatch_event('[name="kernel_w"]', "change")
    n, same, _ = page.evaluate(kept, "y")
    assert n == same == 4 * 16 * 16  # y's shape is the same under SAME: its cells stay
    n, same, real = page.evaluate(kept, "x")
    assert n == 4 * 18 * 20 and real == 4 * 16 * 16 and same == n - 4 * 2 * 18  # new: the two outer pad columns
    _check_every_index(page, dict(p, seed=1, kernel_w=5))
    pages.check_offline()


GRIDS_JS = """() => [...document.querySelectorAll(".cvz-panel")].map((panel) => [
  panel.querySelector(".cvz-shape").textContent,
  [...panel.querySelectorAll(".cvz-key")].map((k) => k.hidden),
  [...panel.querySelectorAll(".cvz-grid")].map((grid) => [grid.getAttribute("style"),
    [...grid.children].map((e) => [e.tagName, ...[...e.attributes].map((a) => `${a.name}=${a.value}`).sort(),
                                   e.textContent])])])"""

REDRAWS = {  # op -> the first setting, then the controls changed one after another
    "conv2d": ("input=9x8&kernel=3&stride=1&padding=SAME&in_channels=2&out_channels=3",
               [("kernel_w", "5"), ("padding", "VALID"), ("input_h", "12"), ("stride_h", "2"), ("padding", "SAME"),
                ("dilation_w", "2"), ("padding", "EXPLICIT"), ("pad_left", "3"), ("pad_bottom", "0"), ("seed", "4")]),
    "conv2d_backprop_input": ("input=8&kernel=3&stride=2&padding=SAME&in_channels=2&out_channels=2",
                              [("kernel_h", "4"), ("stride_w", "3"), ("padding", "VALID"), ("input_w", "11"),
                               ("dilation_h", "2"), ("padding", "SAME")]),
    "conv_transpose2d": ("input=3x4&kernel=3&stride=2&padding=1&output_padding=1&in_channels=2&out_channels=2",
                         [("output_padding_w", "0"), ("kernel_w", "4"), ("stride_h", "3"), ("input_h", "5")]),
    "depthwise_conv2d_native": ("input=7&kernel=3&stride=2&padding=SAME&in_channels=2&multiplier=2&symbols=on",
                                [("kernel_h", "2"), ("padding", "VALID"), ("input_w", "10"), ("stride_w", "1")]),
    "conv2d_backprop_filter": ("input=6&kernel=3&stride=1&padding=SAME&in_channels=2&out_channels=2&batch=2&practice=on",
                               [("input_h", "8"), ("padding", "VALID"), ("stride_h", "2"), ("dilation_w", "2")]),
}


@pytest.mark.parametrize("op", sorted(REDRAWS))
def test_a_redraw_in_place_equals_a_fresh_page_of_the_same_setting(pages, op):
    """After each change the panels redrawn in place (rows, columns and pads added or removed around
    the kept cells) hold exactly the children, attributes and text that a page opened on the new
    setting's link draws."""
    start, changes = REDRAWS[op]
    page = pages.open(f"?{start}&op={op}&seed=2")
    for name, value in changes:
        control = f'[name="{name}"]'
        if page.eval_on_selector(control, "e => e.tagName") == "SELECT":
            page.select_option(control, value)
        else:
            page.fill(control, value)
            page.dispatch_event(control, "change")
        drawn = page.evaluate(GRIDS_JS)
        fresh = pages.open(url_query(page))
        assert drawn == fresh.evaluate(GRIDS_JS), (name, value)
        fresh.close()
    pages.check_offline()


FONTS_JS = """() => [...document.querySelectorAll(".cvz-cell[data-value]")].filter((e) => e.offsetParent !== null)
  .map((e) => [e.textContent, parseFloat(getComputedStyle(e).fontSize), e.scrollWidth, e.clientWidth])"""


@pytest.mark.parametrize("search", [
    "?input=16&kernel=3&padding=SAME&in_channels=4&out_channels=4&op=conv2d&seed=1",
    "?input=24&kernel=5&stride=1&padding=SAME&op=conv2d_backprop_input&values=decimals&seed=3",
    "?input=12&kernel=5&stride=1&padding=SAME&in_channels=3&out_channels=2&batch=2&op=conv2d_backprop_filter",
    "?input=24&kernel=3&stride=1&padding=VALID&op=depthwise_conv2d_native&symbols=on",
])
def test_no_number_is_drawn_under_10pt_or_cut_off(pages, search):
    """At 1280x720, every number on a cell (of every panel's shown plane) is at least 13 px (10 pt,
    VISUAL.md's least size) and fits its cell: long numbers widen their panel's cells instead."""
    page = pages.open(search)
    shown = page.evaluate(FONTS_JS)
    assert shown and any(len(text) >= 3 for text, *_ in shown)
    small = [(text, size) for text, size, _, _ in shown if size < 13]
    cut = [(text, width, room) for text, _, width, room in shown if width > room]
    assert not small and not cut, (small[:5], cut[:5])
    pages.check_offline()


def _check_every_index(page, p: dict[str, Any]) -> None:
    """Every tensor's every cell on the page (hidden planes too) holds convviz's value at its data-index."""
    for name, array in compute(p).arrays.items():
        shown = _index_cells(page, name)
        assert len(shown) == array.size, name
        assert all(value == array[index] for index, value in shown.items()), name


# ---------------------------------------------------------------------------------
# URL presets of every op, and the keyboard across planes

PRESETS = {  # op -> a teacher's link (PyTorch's padding for conv_transpose2d)
    "conv2d": "input=7x6&kernel=3x2&stride=2x1&padding=EXPLICIT&pads=1,0,2,1&in_channels=2&out_channels=4&groups=2",
    "conv2d_backprop_input": "input=8&kernel=3&stride=2&dilation=2&padding=SAME&in_channels=3&out_channels=2&batch=2",
    "conv2d_backprop_filter": "input=6&kernel=3&stride=1&padding=VALID&in_channels=2&out_channels=2&batch=2",
    "depthwise_conv2d_native": "input=7&kernel=3&stride=2&padding=SAME&in_channels=2&multiplier=2",
    "depthwise_conv2d_native_backprop_input": "input=9&kernel=3&stride=3&padding=VALID&in_channels=3&multiplier=1",
    "depthwise_conv2d_native_backprop_filter": "input=9&kernel=3&stride=2&dilation=2&padding=SAME&multiplier=2",
    "conv_transpose2d": "input=3x4&kernel=3&stride=2&padding=1x0&output_padding=1&in_channels=2&out_channels=4&groups=2",
}


@pytest.mark.parametrize("op", EXPLORER_OPS)
def test_a_link_opens_every_op_on_its_setting_and_the_page_keeps_it(pages, op):
    assert set(PRESETS) == set(EXPLORER_OPS)
    page = pages.open(f"?{PRESETS[op]}&op={op}&seed=6")
    p = params_from_query(f"?{PRESETS[op]}&op={op}&seed=6")
    assert _controls(page)["op"] == op
    _check_every_index(page, p)
    page.fill('[name="seed"]', "7")
    page.dispatch_event('[name="seed"]', "change")
    search = url_query(page)
    assert f"op={op}" in search and "seed=7" in search
    if op == "conv_transpose2d":
        assert "padding=1x0" in search and "output_padding=1&" in search and "pads=" not in search
    page.reload()
    page.wait_for_function("() => window.convvizExplorer")
    _check_every_index(page, dict(p, seed=7))
    pages.check_offline()


def test_the_keyboard_moves_within_a_plane_and_pins(pages):
    p = setting(op="conv2d", input_h=5, input_w=5, kernel_h=3, kernel_w=3, stride_h=1, stride_w=1, in_channels=2,
                out_channels=2, seed=3)
    page = open_setting(pages, p)
    start = '[data-panel="y"][data-row="1"][data-col="1"][data-plane="0,1"]'
    page.focus(start)
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowDown")
    focused = page.evaluate("() => [document.activeElement.dataset.plane, document.activeElement.dataset.row,"
                            " document.activeElement.dataset.col]")
    assert focused == ["0,1", "2", "2"]
    page.keyboard.press("Enter")
    s = sum_state(page)
    assert float(s["value"]) == compute(p).arrays["y"][0, 2, 2, 1] and "through 2 channels" in s["text"]
    page.keyboard.press("Escape")
    assert sum_state(page)["hidden"]
    pages.check_offline()


@pytest.mark.parametrize("theme", THEMES)
def test_symbols_and_practice_cells_meet_wcag_aa(pages, theme):
    page = pages.open(f"?op=conv2d&input=6&kernel=3&stride=1&in_channels=2&symbols=on&practice=on&theme={theme}")
    page.click('[data-panel="y"][data-row="0"][data-col="0"]')
    page.fill('[name="answer"]', "0")
    page.click('[name="check"]')  # one answered cell (right or wrong), the rest hidden
    found = page.evaluate(COLORS_JS)
    assert any(c["text"] == "?" for c in found) and any(c["text"].startswith("x") for c in found)
    for c in found:
        bg, alpha = css_rgb(c["bg"])
        fg, _ = css_rgb(c["fg"])
        assert alpha == 1 and contrast(bg, fg) >= 4.5, (theme, c, round(contrast(bg, fg), 2))
    pages.check_offline()


def test_in_a_lesson_frame_the_settings_start_folded(pages):
    """Standalone, the settings are open; embedded in a course page's iframe they start folded (one click opens them)."""
    page = pages.open("?op=conv2d&input=8")
    assert page.get_attribute(".cvz-settings", "open") is not None
    lesson = pages.path.parent / "lesson.html"
    lesson.write_text(f'<!doctype html><title>lesson</title><iframe src="{pages.path.name}?op=conv_transpose2d&input=4"'
                      ' style="width:1000px;height:700px"></iframe>', encoding="utf-8")
    outer = pages.open()
    outer.goto(lesson.as_uri())
    frame = outer.frame_locator("iframe")
    frame.locator(".cvz-explorer").wait_for()
    assert frame.locator(".cvz-settings").get_attribute("open") is None
    assert frame.locator('[data-panel="y"]').first.is_visible()
    frame.locator(".cvz-settings > summary").click()
    assert frame.locator('[name="stride_h"]').is_visible()
    pages.check_offline()
