"""How fast the explorer page answers, in Chromium: hover-to-highlight and parameter-change-to-redraw.

Run: ``python benchmarks/explorer_latency.py [--repeat N] [--json PATH] [--check]``.

The standalone page (``convviz.explorer.write_page``) is opened from ``file://`` in
Debian's Chromium (``/usr/bin/chromium``, or ``$CONVVIZ_CHROMIUM``) through
Playwright, offline (every non-``file:`` request is aborted), at a 1280x720
viewport, with a 24x24 input and a 5x5 kernel, SAME padding, stride 1 and stride 2,
for the input gradient, the depthwise filter gradient and the forward pass; and with a
16x16 input, 4 input and 4 output channels and a 3x3 kernel (the panels one plane at a
time, as the page shows them) for the three dense ops.  Everything is timed inside the page with
``performance.now()``:

* hover: ``mouseover`` dispatched on a cell (the panels' delegated handler runs
  synchronously: clear the old highlight, explain the cell, light its cells, write
  the worked sum), then ``document.body.offsetHeight`` forces style and layout; the
  clock stops after that.  Many different cells of every panel are hovered in turn
  (dx, dy and W taps for the input gradient; x, dy and the dW taps, which light
  about 2x576 cells, for the filter gradient; x, W and y for forward).
* parameter change: a control's value is set and ``change`` dispatched (the handler
  recomputes and redraws every panel), then layout is forced; the control flips
  between two values so that every repetition is a real change.  The pointer has
  left the panels first (nothing hovered or pinned), as when a user reaches for a
  control.

Before each sample the page is given a frame (``requestAnimationFrame`` then a
task), so samples start from a painted page, as a user's events do.  Paint and
compositing after layout are not included.  Reported: min, median, p95 (nearest
rank) and max in ms, against the targets hover <= 16 ms (one 60 Hz frame) and
parameter change <= 50 ms; a row passes when its p95 meets its target.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

CHROMIUM = os.environ.get("CONVVIZ_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]
VIEWPORT = {"width": 1280, "height": 720}
TARGET_MS = {"hover": 16.0, "change": 50.0}
# name -> (URL query, the ops timed on it, control -> (value to flip to, the case's own value)):
# one channel at 24x24 with a 5x5 kernel, and several channels (4 in, 4 out, 3x3) at 16x16, whose
# panels show one plane at a time; kernel_w keeps the output size under SAME.
ONE_CHANNEL_OPS = ("conv2d_backprop_input", "depthwise_conv2d_native_backprop_filter", "conv2d")
DENSE_OPS = ("conv2d_backprop_input", "conv2d_backprop_filter", "conv2d")
CASES = {
    "24x24 k5 s1": ("input=24&kernel=5&stride=1&dilation=1&padding=SAME", ONE_CHANNEL_OPS,
                    {"seed": ("1", "0"), "kernel_w": ("3", "5"), "padding": ("VALID", "SAME")}),
    "24x24 k5 s2": ("input=24&kernel=5&stride=2&dilation=1&padding=SAME", ONE_CHANNEL_OPS,
                    {"seed": ("1", "0"), "kernel_w": ("3", "5"), "padding": ("VALID", "SAME")}),
    "16x16 4>4 k3": ("input=16&kernel=3&stride=1&dilation=1&padding=SAME&in_channels=4&out_channels=4", DENSE_OPS,
                     {"seed": ("1", "0"), "kernel_w": ("5", "3"), "padding": ("VALID", "SAME")}),
}
HOVER_PANELS = {"conv2d_backprop_input": ("dx", "dy", "w"), "depthwise_conv2d_native_backprop_filter": ("dw", "x", "dy"),
                "conv2d": ("y", "x", "w"), "conv2d_backprop_filter": ("dw", "x", "dy")}
PANEL_NAMES = {"x": "x cell", "w": "W tap", "dy": "dy cell", "dx": "dx cell", "dw": "dW tap", "y": "y cell"}
WARMUP = 5

FRAME_JS = "const frame = () => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));"

HOVER_JS = """async (selectors) => {
  %s
  const times = [], lit = [];
  for (const s of selectors) {
    const el = document.querySelector(s);
    if (!el) throw new Error("no cell " + s);
    await frame();
    const t0 = performance.now();
    el.dispatchEvent(new MouseEvent("mouseover", { bubbles: true, cancelable: true, view: window }));
    void document.body.offsetHeight;
    times.push(performance.now() - t0);
    lit.push(document.querySelectorAll(".cvz-in, .cvz-target").length);
  }
  return { times, lit };
}""" % FRAME_JS

CHANGE_JS = """async ({ name, values, reps }) => {
  %s
  const el = document.querySelector(`[name="${name}"]`);
  const times = [], cells = [];
  for (let i = 0; i < reps; i++) {
    await frame();
    const t0 = performance.now();
    el.value = values[i %% values.length];
    el.dispatchEvent(new Event("change", { bubbles: true }));
    void document.body.offsetHeight;
    times.push(performance.now() - t0);
    cells.push(document.querySelectorAll("[data-panel]").length);
  }
  return { times, cells };
}""" % FRAME_JS

LEAVE_JS = """() => { document.querySelector(".cvz-panels").dispatchEvent(new MouseEvent("mouseleave"));
  if (document.querySelector(".cvz-in, .cvz-target, .cvz-pinned")) throw new Error("cells still lit"); }"""

# The panel's visible numbered cells (a plane behind a tab is not what a user points at).
CELLS_JS = """(panel) => [...document.querySelectorAll(`[data-panel="${panel}"]:not([data-pad])`)]
  .filter((e) => e.offsetParent !== null).map((e) => `[data-panel="${panel}"][data-index="${e.dataset.index}"]`)"""


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def summary(times: list[float]) -> dict[str, float]:
    s = sorted(times)
    p95 = s[max(0, math.ceil(0.95 * len(s)) - 1)]  # nearest rank
    return {"n": len(s), "min": s[0], "median": statistics.median(s), "p95": p95, "max": s[-1]}


def spread(items: list[str], n: int, rng: random.Random) -> list[str]:
    """``n`` items, every one before any repeats, in a shuffled order."""
    out: list[str] = []
    while len(out) < n:
        batch = list(items)
        rng.shuffle(batch)
        out.extend(batch)
    return out[:n]


def open_page(context, url: str):
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.goto(url)
    page.wait_for_function("() => window.convvizExplorer && document.querySelector('[data-panel]')")
    return page, errors


def run(repeat: int, quiet: bool = False) -> dict:
    from playwright.sync_api import sync_playwright

    from convviz.explorer import write_page

    if not os.path.exists(CHROMIUM):
        raise SystemExit(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set CONVVIZ_CHROMIUM)")
    rng = random.Random(20261123)
    rows: list[dict] = []
    requested: list[str] = []

    def route(r):
        if r.request.url.startswith("file:"):
            r.continue_()
        else:
            requested.append(r.request.url)
            r.abort()

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        path = write_page(Path(tmp) / "explorer.html")
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        version = browser.version
        try:
            context = browser.new_context(viewport=VIEWPORT, color_scheme="light")
            context.route("**/*", route)
            for case, (q, ops, changes) in CASES.items():
                for op in ops:
                    url = f"{path.as_uri()}?{q}&op={op}&seed=0&theme=light"
                    page, errors = open_page(context, url)
                    # hover: every panel, many different cells
                    for panel in HOVER_PANELS[op]:
                        cells = page.evaluate(CELLS_JS, panel)
                        page.evaluate(HOVER_JS, spread(cells, WARMUP, rng))
                        got = page.evaluate(HOVER_JS, spread(cells, repeat, rng))
                        rows.append(dict(case=case, op=op, kind="hover", what=PANEL_NAMES[panel],
                                         distinct=min(len(cells), repeat),
                                         lit=int(statistics.median(got["lit"])), **summary(got["times"])))
                    # parameter change: redraw everything (the pointer has left the panels, nothing lit)
                    page.evaluate(LEAVE_JS)
                    for name, (other, base) in changes.items():
                        page.evaluate(CHANGE_JS, {"name": name, "values": [other, base], "reps": 2 * WARMUP})
                        reps = repeat + repeat % 2  # even: the page ends on the case's own setting
                        got = page.evaluate(CHANGE_JS, {"name": name, "values": [other, base], "reps": reps})
                        rows.append(dict(case=case, op=op, kind="change", what=f"{name} {base}\u2194{other}",
                                         distinct=2, lit=int(statistics.median(got["cells"])),
                                         **summary(got["times"])))
                    if errors:
                        raise RuntimeError(f"the page raised {errors} ({url})")
                    page.close()
                    if not quiet:
                        print(f"  measured {case} {op}", file=sys.stderr)
            context.close()
        finally:
            browser.close()
    if requested:
        raise RuntimeError(f"the page tried the network: {requested}")
    for row in rows:
        row["target"] = TARGET_MS[row["kind"]]
        row["ok"] = row["p95"] <= row["target"]
    return {
        "benchmark": "explorer page latency (ms, in-page performance.now(), handler + forced layout)",
        "chromium": version, "cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
        "viewport": VIEWPORT, "repeat": repeat, "targets_ms": TARGET_MS,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "results": rows,
    }


def table(report: dict) -> str:
    lines = [f"explorer page latency: Chromium {report['chromium']}, {report['cpu']} ({report['cores']} cores), "
             f"viewport {report['viewport']['width']}x{report['viewport']['height']}",
             "times in ms (handler + forced layout, in-page performance.now()); ok = p95 within target; "
             "lit = cells lit (hover) or cells drawn (change), median",
             f"{'case':12} {'op':40} {'measure':27} {'n':>3} {'lit':>5} {'min':>6} {'median':>7} {'p95':>6} "
             f"{'max':>6}  target"]
    for r in report["results"]:
        measure = f"{r['kind']} {r['what']}"
        lines.append(f"{r['case']:12} {r['op']:40} {measure:27} {r['n']:>3} {r['lit']:>5} {r['min']:6.2f} "
                     f"{r['median']:7.2f} {r['p95']:6.2f} {r['max']:6.2f}  <= {r['target']:.0f} "
                     f"{'ok' if r['ok'] else 'OVER'}")
    for kind in ("hover", "change"):
        sel = [r for r in report["results"] if r["kind"] == kind]
        worst = max(sel, key=lambda r: r["p95"])
        missed = sum(not r["ok"] for r in sel)
        verdict = "met in every row" if not missed else f"MISSED in {missed} of {len(sel)} rows"
        lines.append(f"{kind}: worst p95 {worst['p95']:.2f} ms ({worst['case']}, {worst['op']}, {worst['what']}), "
                     f"target {TARGET_MS[kind]:.0f} ms: {verdict}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=40, help="samples per row (at least 30; default 40)")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON to PATH")
    parser.add_argument("--check", action="store_true", help="exit with status 1 when a row misses its target")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)
    if args.repeat < 30:
        parser.error("--repeat must be at least 30")
    report = run(args.repeat, quiet=args.quiet)
    print(table(report))
    if args.json:
        out = Path(args.json)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {out}")
    return 1 if args.check and not all(r["ok"] for r in report["results"]) else 0


if __name__ == "__main__":
    sys.exit(main())
