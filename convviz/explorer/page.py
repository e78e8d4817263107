"""The explorer as one offline HTML file: no Python behind it, no network.

The page inlines the same ES module and stylesheet as the widget and mounts it
with a small model backed by a plain object and the URL query, so a course can
link to a preset (``explorer.html?input=7x9&stride=2&padding=VALID&op=depthwise_filter_grad``;
links with the old ``op=filter_grad`` still open it) and every control change
rewrites the query.  The numbers are computed in the page by ``core.js``, which
the tests hold equal to convviz's kernels.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from ._arguments import resolve
from ._assets import inline_module, stylesheet
from ._setting import to_wire

__all__ = ["page_html", "write_page"]

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<title>{title}</title>
<style>
html, body {{ margin: 0; background: #ffffff; }}
@media (prefers-color-scheme: dark) {{ html, body {{ background: #1e1e1e; }} }}
body.cvz-dark-page {{ background: #1e1e1e; }}
#convviz-explorer {{ max-width: 1600px; margin: 0 auto; }}
{css}
</style>
</head>
<body>
<main id="convviz-explorer" aria-label="convviz explorer"></main>
<noscript>This page needs JavaScript to draw the explorer.</noscript>
<script type="application/json" id="convviz-setting">{setting}</script>
<script type="module">
{module}
const setting = JSON.parse(document.getElementById("convviz-setting").textContent);
window.convvizExplorer = mountPage(document.getElementById("convviz-explorer"), setting);
const syncPage = () => document.body.classList.toggle(
  "cvz-dark-page", document.querySelector(".cvz-explorer").dataset.theme === "dark");
new MutationObserver(syncPage).observe(document.getElementById("convviz-explorer"),
  {{ attributes: true, subtree: true, attributeFilter: ["data-theme"] }});
syncPage();
</script>
</body>
</html>
"""


def page_html(x: Any = None, W: Any = None, dy: Any = None, *, title: str = "convviz explorer",
              **settings: Any) -> str:
    """Return the explorer as a standalone HTML page (one file, works offline from ``file://``).

    Takes the same arguments as :func:`convviz.explore`; the URL query of the opened
    page overrides the settings (``input``, ``kernel``, ``stride``, ``dilation`` as
    ``N`` or ``HxW``; ``padding``; ``pads`` as ``top,bottom,left,right``; ``op``;
    ``multiplier``; ``seed``; ``values``; ``theme``).

    Examples
    --------
    >>> from convviz.explorer import page_html
    >>> page = page_html(input=8, stride=3, padding="VALID", op="depthwise_filter_grad")
    >>> page.startswith("<!doctype html>"), "http" in page.split("<body>")[1]
    (True, False)
    """
    r = resolve(x, W, dy, **settings)
    setting = dict(r.params)
    setting["arrays"] = {name: to_wire(plane, r.captions.get(name, "")) for name, plane in r.given.items()}
    setting["locked"] = r.locked
    text = json.dumps(setting, separators=(",", ":")).replace("</", "<\\/")
    module = inline_module().replace("</script", "<\\/script")
    return _PAGE.format(title=html.escape(title), css=stylesheet(), setting=text, module=module)


def write_page(path: str | Path, x: Any = None, W: Any = None, dy: Any = None, **settings: Any) -> Path:
    """Write :func:`page_html` to ``path`` (parents created) and return the path.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from convviz.explorer import write_page
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = write_page(pathlib.Path(tmp) / "explorer.html", kernel=(3, 5))
    ...     path.stat().st_size > 20_000
    True
    """
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page_html(x, W, dy, **settings), encoding="utf-8")
    return out
