"""Regenerate docs/images/explorer*.png, the README's screenshots of the explorer page.

Usage: python scripts/explorer_screenshot.py   (needs playwright and /usr/bin/chromium)
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from convviz.explorer import write_page

ROOT = Path(__file__).resolve().parent.parent
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
SHOTS = [  # file, query, cell to hover
    ("explorer.png", "?input=7&kernel=3&stride=2&padding=SAME&op=input_grad",
     '[data-panel="dx"][data-row="2"][data-col="3"]'),
    ("explorer_lost_rows.png", "?input=8&kernel=3&stride=3&padding=VALID&op=input_grad&theme=dark",
     '[data-panel="dy"][data-row="1"][data-col="1"]'),
]


def main() -> None:
    out = ROOT / "docs" / "images"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        page_path = write_page(Path(tmp) / "explorer.html")
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        for name, query, cell in SHOTS:
            page.goto(page_path.as_uri() + query)
            page.hover(cell)
            page.screenshot(path=str(out / name))
            print("wrote", out / name)
        browser.close()


if __name__ == "__main__":
    main()
