"""The documentation site builds offline with warnings as errors, and what it promises is there.

One build (``python -m sphinx -W --keep-going -b html docs <tmp>``, every notebook of the
course executed once) serves every test here: the pages of the navigation exist, every
notebook became a page with its outputs, the API reference documents every public name,
the compatibility table names every op record, the explorer page loads nothing from the
network, search has its index, and every internal link, image and anchor of the built site
resolves.
"""

from __future__ import annotations

import html
import importlib
import re
import subprocess
import sys
import types
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

pytest.importorskip("sphinx")
pytest.importorskip("myst_nb")
pytest.importorskip("furo")
pytest.importorskip("numpydoc")

import convviz  # noqa: E402
from convviz import ops  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
NOTEBOOKS = sorted(p for p in (ROOT / "notebooks").glob("*.md") if re.match(r"^\d\d_\w+\.md$", p.name))

# The modules whose public names (``__all__``) the reference documents, submodules included.
API_MODULES = ["convviz", "convviz.geometry", "convviz.layers", "convviz.reference", "convviz.viz",
               "convviz.viz.checks", "convviz.exercises", "convviz.explorer", "convviz.errors",
               "convviz.compat.tf.nn", "convviz.compat.tf.raw_ops", "convviz.compat.mindspore.ops",
               "convviz.compat.torch"]


class _Page(HTMLParser):
    """The ids, links (tag, attribute, value) and external scripts/styles of one HTML page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name in ("id", "name") and (name == "id" or tag == "a"):
                self.ids.add(value)
            if (tag, name) in {("a", "href"), ("link", "href"), ("img", "src"), ("script", "src"),
                               ("iframe", "src"), ("source", "src"), ("video", "src")}:
                self.links.append((tag, name, value))


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def _text(fragment: str) -> str:
    """Visible text of an HTML fragment (tags, <wbr> included, removed; entities decoded)."""
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    html_dir = out / "html"
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html", "-q",
         "-d", str(out / "doctrees"), str(DOCS), str(html_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, f"the site does not build:\n{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}"
    warnings = re.findall(r"^.*(?:^|: )WARNING: .*$", proc.stderr, re.M)  # Sphinx's, not a kernel's log
    # ... nor the line TensorFlow's logging library prints once per process where it is installed
    warnings = [line for line in warnings if "absl::InitializeLog()" not in line]
    assert not warnings, "\n".join(warnings[:40])
    return html_dir


def test_every_source_page_is_built_and_in_the_navigation(site):
    sources = [p.relative_to(DOCS).with_suffix("") for p in DOCS.rglob("*.md")
               if "_build" not in p.parts and p.name != "README.md"]
    assert len(sources) >= 15
    index = _parse(site / "index.html")
    navigation = {urlsplit(v).path for tag, _, v in index.links if tag == "a" and not urlsplit(v).scheme}
    for source in sources:
        assert (site / source.with_suffix(".html")).is_file(), f"{source} was not built"
        if source != Path("index"):  # the root page is the navigation's title link
            assert source.with_suffix(".html").as_posix() in navigation, f"{source} is not in the navigation"
    for required in ("install", "course/index", "teaching", "api/index", "compatibility", "gallery",
                     "explore", "speed", "development", "changelog"):
        assert (site / f"{required}.html").is_file(), required


def test_every_notebook_is_an_executed_page(site):
    assert NOTEBOOKS, "no course notebooks (notebooks/NN_slug.md)"
    course = (site / "course" / "index.html").read_text(encoding="utf-8")
    for notebook in NOTEBOOKS:
        page = site / "course" / f"{notebook.stem}.html"
        assert page.is_file(), f"{notebook.name} is not a page of the site"
        assert f'href="{notebook.stem}.html"' in course, f"{notebook.name} is not in the course's table of contents"
        text = page.read_text(encoding="utf-8")
        source = notebook.read_text(encoding="utf-8")
        code_cells = source.count("```{code-cell}")
        assert code_cells >= 2 and text.count('class="cell docutils container"') >= code_cells
        assert 'class="cell_output' in text, f"{notebook.name} was not executed (no outputs)"
        assert "Traceback (most recent call last)" not in text and 'class="output traceback' not in text
        if re.search(r"\bviz\.|\bplt\.", source):
            assert re.search(r'<div class="cell_output[^>]*>.*?<img ', text, re.S), \
                f"{notebook.name} draws figures but its page shows none"


def test_every_lesson_embeds_the_explorer_at_its_preset(site):
    """Each course page shows the offline explorer (it computes in the page, no kernel) at its
    lesson's setting; the one-layer and transposed-convolution lessons use the new modes."""
    sys.path.insert(0, str(ROOT / "docs" / "_sphinxext"))
    from convviz_docs import LESSON_EXPLORERS

    from convviz.explorer._setting import OPS

    assert sorted(LESSON_EXPLORERS) == sorted(n.stem for n in NOTEBOOKS)
    for notebook in NOTEBOOKS:
        page = _parse(site / "course" / f"{notebook.stem}.html")
        frames = [v for tag, _, v in page.links if tag == "iframe"]
        query = LESSON_EXPLORERS[notebook.stem][0]
        assert frames == [f"../explorer.html?{query}"], notebook.name
        op = dict(part.split("=") for part in query.split("&"))["op"]
        assert op in OPS, (notebook.name, op)
    assert "op=conv_transpose2d" in LESSON_EXPLORERS["09_transposed_convolution_in_practice"][0]
    one_layer = LESSON_EXPLORERS["07_one_layer_forward_and_backward"][0]
    assert "op=conv2d_backprop_filter" in one_layer and "in_channels=2" in one_layer and "batch=2" in one_layer


def _ids(site: Path) -> set[str]:
    found: set[str] = set()
    for page in (site / "api").glob("*.html"):
        found |= _parse(page).ids
    return found


def _public(module: types.ModuleType) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, o in vars(module).items()
                 if not n.startswith("_") and getattr(o, "__module__", None) == module.__name__]
    return list(names)


def test_api_reference_documents_every_public_name(site):
    ids = _ids(site)
    modules = [importlib.import_module(name) for name in API_MODULES]
    homes: dict[int, set[str]] = {}
    for module in modules:
        for name in _public(module):
            homes.setdefault(id(getattr(module, name)), set()).add(f"{module.__name__}.{name}")
    for module in modules:
        for name in _public(module):
            obj = getattr(module, name)
            if isinstance(obj, types.ModuleType):
                assert f"module-{obj.__name__}" in ids, f"{obj.__name__} has no reference section"
            else:
                assert homes[id(obj)] & ids, f"{module.__name__}.{name} is not documented"
    top = (site / "api" / "convviz.html").read_text(encoding="utf-8")
    for name in convviz.__all__:
        obj = getattr(convviz, name)
        targets = {f"module-{obj.__name__}"} if isinstance(obj, types.ModuleType) else homes[id(obj)]
        assert any(f'#{t}"' in top or f'id="{t}"' in top for t in targets), f"convviz.{name} is not on the API page"
    # numpydoc rendered the sections (a parameter list, a returns section, doctest examples).
    assert re.search(r'<dt class="field-odd">Parameters', top) and "Examples" in top and "&gt;&gt;&gt;" in top


def test_compatibility_table_has_every_op_record(site):
    text = (site / "compatibility.html").read_text(encoding="utf-8")
    tables = re.findall(r"<table.*?</table>", text, re.S)
    assert len(tables) == 1
    table = _text(tables[0])
    for op in ops.OPS:
        assert op.name in table and op.tf_name and op.tf_name in table, op.name
        assert f"#convviz.compat.tf.raw_ops.{op.tf_name}" in tables[0]
    for name in ops.__all__:
        assert f"#convviz.{name}" in tables[0]
    from convviz.compat import torch as ctorch
    from convviz.compat.mindspore import ops as cms
    from convviz.compat.tf import nn as cnn
    for module in (cnn, cms, ctorch):
        for name in module.__all__:
            assert f"#{module.__name__}.{name}" in tables[0], f"{module.__name__}.{name} is not in the table"
    for peer in ("tf.nn.conv2d", "tf.compat.v1.nn.conv2d_backprop_filter", "torch.nn.grad.conv2d_weight",
                 "torch.nn.functional.conv_transpose2d", "Conv2DTranspose"):
        assert peer in table, peer


def test_explorer_page_is_offline_and_linked_with_presets(site):
    page = site / "explorer.html"
    assert page.is_file() and page.stat().st_size > 20_000
    text = page.read_text(encoding="utf-8")
    assert "mountPage" in text and 'id="convviz-explorer"' in text
    assert not re.search(r"""<(script|link|img|iframe)\b[^>]*\b(src|href)\s*=\s*["']?(https?:)?//""", text, re.I)
    assert not re.search(r"""@import\s+url\(\s*["']?(https?:)?//""", text, re.I)
    guide = _parse(site / "explore.html")
    frames = [v for tag, _, v in guide.links if tag == "iframe"]
    assert frames and all(v.startswith("explorer.html?") for v in frames)
    presets = [v for tag, _, v in guide.links if tag == "a" and v.startswith("explorer.html?")]
    assert "explorer.html?input=8&stride=3&padding=VALID" in presets and len(presets) >= 5


def test_search_has_its_index(site):
    index = site / "searchindex.js"
    assert index.is_file() and (site / "search.html").is_file()
    words = index.read_text(encoding="utf-8")
    assert "conv2d_backprop_input" in words and "gridding" in words
    for title in ("Install", "Changelog", "Gallery"):
        assert title in words


def test_every_internal_link_resolves(site):
    pages = sorted(site.rglob("*.html"))
    parsed = {page: _parse(page) for page in pages}
    broken: list[str] = []
    external: list[str] = []
    for page, content in parsed.items():
        if page.name == "explorer.html" and page.parent == site:
            continue  # the explorer page: checked above (it has no links)
        for tag, _, value in content.links:
            parts = urlsplit(value)
            if parts.scheme in ("mailto", "data", "javascript"):
                continue
            if parts.scheme or value.startswith("//"):
                if tag in ("script", "link", "img", "iframe") and "mathjax" not in value.lower():
                    external.append(f"{page.relative_to(site)}: {tag} {value}")
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if not target.exists():
                broken.append(f"{page.relative_to(site)}: {value}")
                continue
            if target.is_dir():
                target = target / "index.html"
            if parts.fragment and target.suffix == ".html" and target in parsed:
                if unquote(parts.fragment) not in parsed[target].ids:
                    broken.append(f"{page.relative_to(site)}: {value} (no such anchor)")
    assert not broken, "broken internal links:\n" + "\n".join(broken[:40])
    assert not external, "pages load from the network:\n" + "\n".join(external[:40])


def test_gallery_shows_every_figure(site):
    from convviz.viz import gallery

    text = (site / "gallery.html").read_text(encoding="utf-8")
    images = [v for tag, _, v in _parse(site / "gallery.html").links if tag == "img"]
    assert len(images) == len(gallery.ENTRIES)
    for entry in gallery.ENTRIES:
        assert html.escape(entry.lesson, quote=False) in text or entry.lesson in _text(text), entry.name
        stem = Path(entry.shown).stem
        assert any(Path(urlsplit(v).path).stem.startswith(stem) for v in images), entry.name
