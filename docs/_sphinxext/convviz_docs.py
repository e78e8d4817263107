"""The parts of the convviz site that are generated from the package at build time.

* The course: ``notebooks/NN_slug.md`` (the notebooks' MyST sources) are copied into
  ``docs/course/`` before Sphinx reads its sources (myst-nb executes them there), with
  links between notebooks pointed at their pages.  The copies are build products
  (``docs/.gitignore``); the notebooks themselves are never edited.
* ``convviz-api``: one module's reference -- a summary table of every public name
  (``__all__``) and the numpydoc-rendered documentation of each, each object documented
  once, on the page of the module it belongs to.
* ``convviz-compat-table``: TensorFlow / MindSpore / PyTorch names beside convviz's,
  read from the op records (``convviz.ops.OPS``) and from the compat modules' code.
* ``convviz-gallery``: the figures of ``gallery/`` with the captions the gallery is
  drawn with (``convviz.viz.gallery.ENTRIES``).
* ``explorer.html``: the offline explorer page (``convviz.explorer.page_html``), written
  into the built site.
"""

from __future__ import annotations

import html
import importlib
import inspect
import re
import types
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

LOG = logging.getLogger(__name__)

DOCS = Path(__file__).resolve().parent.parent
ROOT = DOCS.parent
NOTEBOOKS = ROOT / "notebooks"
COURSE = DOCS / "course"
GALLERY = ROOT / "gallery"
NOTEBOOK_NAME = re.compile(r"^\d\d_[A-Za-z0-9_]+\.md$")

#: The modules with a reference page (``docs/api/<page>.md``), in the order of the API index.
API_MODULES = (
    "convviz",
    "convviz.geometry",
    "convviz.layers",
    "convviz.reference",
    "convviz.viz",
    "convviz.exercises",
    "convviz.explorer",
    "convviz.compat",
    "convviz.errors",
)


# -- the course ----------------------------------------------------------------------------

def course_notebooks() -> list[Path]:
    """The notebooks of the course: ``notebooks/NN_slug.md``, in lesson order."""
    return sorted(p for p in NOTEBOOKS.glob("*.md") if NOTEBOOK_NAME.match(p.name))


#: Each lesson's explorer: the setting its page embeds, live (the offline explorer computes in the
#: page, no kernel needed), and what to point at.  Every course notebook has one (tests/test_docs.py).
LESSON_EXPLORERS = {
    "01_first_contact_1d": ("input=1x9&kernel=1x3&stride=1&padding=VALID&op=conv2d",
                            "one row: each output is the sum of three products"),
    "02_convolution_as_a_matrix": ("input=4&kernel=3&stride=1&padding=VALID&op=conv2d",
                                   "a 4x4 input, a 3x3 kernel: the four windows of the matrix's rows"),
    "03_tour": ("input=8&kernel=3&stride=2&padding=SAME&op=conv2d_backprop_input",
                "the input gradient of a strided convolution"),
    "04_input_gradient_as_scatter": ("input=7&kernel=3&stride=2&padding=SAME&op=conv2d_backprop_input",
                                     "point at a dL/dy cell: its scatter; at a dL/dx cell: the gather"),
    "05_padding_and_lost_rows": ("input=8&kernel=3&stride=3&padding=VALID&op=conv2d_backprop_input",
                                 "the last two rows and columns get no gradient"),
    "06_dilation_and_gridding": ("input=11&kernel=3&stride=2&dilation=2&padding=VALID&op=conv2d_backprop_input",
                                 "gridding: every other row without gradient"),
    "07_one_layer_forward_and_backward": (
        "input=6&kernel=3&stride=1&padding=SAME&op=conv2d_backprop_filter&in_channels=2&out_channels=2&batch=2",
        "a layer's filter gradient: each tap sums over both images and every output cell"),
    "08_depthwise_filter_gradient": (
        "input=9&kernel=3&stride=2&dilation=2&padding=SAME&op=depthwise_conv2d_native_backprop_filter"
        "&in_channels=2&multiplier=2", "each channel's taps read a strided lattice of its own input channel"),
    "09_transposed_convolution_in_practice": (
        "input=4&kernel=3&stride=2&padding=1&output_padding=1&op=conv_transpose2d",
        "PyTorch's conv_transpose2d: padding crops, output_padding adds a row no input reaches"),
    "10_from_tensorflow_mindspore_pytorch": ("input=7&kernel=3&stride=2&padding=SAME&op=conv2d_backprop_input",
                                             "open 'Code for what is on screen' for the TensorFlow and PyTorch calls"),
    "11_explorer_worksheet": (
        "input=9&kernel=3&stride=2&dilation=2&padding=SAME&op=depthwise_conv2d_native_backprop_filter"
        "&multiplier=2&practice=on", "practice: type the value of a hidden dL/dW tap"),
    "12_lab_digits": ("input=8&kernel=3&stride=1&padding=SAME&op=conv2d&out_channels=4",
                      "one image through four 3x3 filters, as the lab's first layer"),
}


def _embedded_explorer(stem: str) -> str:
    """The lesson's explorer as raw HTML, placed under its title."""
    query, what = LESSON_EXPLORERS[stem]
    src = html.escape(f"../explorer.html?{query}")
    return (f'\n<iframe class="convviz-explorer convviz-lesson-explorer" src="{src}" '
            f'title="convviz explorer at this lesson\'s setting" loading="lazy"></iframe>\n'
            f'<p class="convviz-explorer-note">The explorer at this lesson\'s setting, live in the page: '
            f'{html.escape(what)}. <a href="{src}">Open it on its own</a>.</p>\n')


def _site_text(text: str, stem: str | None = None) -> str:
    """A notebook's MyST source as a page of the site: links to a sibling notebook
    (``NN_slug.ipynb``) point at its page, links into the repository's folders one level
    further up (the page lives in ``docs/course/``, the notebook in ``notebooks/``)."""
    text = re.sub(r"\]\((\d\d_[A-Za-z0-9_]+)\.ipynb(#[^)]*)?\)", r"](\1.md\2)", text)
    text = re.sub(r"\]\(\.\./(?!\.\./)", "](../../", text)
    # An explorer preset written as code (`explorer.html?input=8&stride=3`) opens the site's copy.
    text = re.sub(r"(?<![`\w])`explorer\.html\?([^`\s]+)`",
                  lambda m: (f'<a class="convviz-preset" href="../explorer.html?{html.escape(m.group(1))}">'
                             f'<code>explorer.html?{html.escape(m.group(1))}</code></a>'), text)
    if stem in LESSON_EXPLORERS:  # the lesson's explorer, live, under its title
        text = re.sub(r"^(# .+)$", lambda m: m.group(1) + "\n" + _embedded_explorer(stem), text, count=1, flags=re.M)
    return text


def sync_course(app: Sphinx, config: Any) -> None:
    """Copy the notebooks' sources into ``docs/course/`` (only those that changed, so
    Sphinx and the execution cache see unchanged pages as unchanged) and remove copies of
    notebooks that no longer exist."""
    COURSE.mkdir(exist_ok=True)
    wanted = {}
    for path in course_notebooks():
        wanted[path.name] = _site_text(path.read_text(encoding="utf-8"), path.stem)
    for stale in COURSE.glob("*.md"):
        if NOTEBOOK_NAME.match(stale.name) and stale.name not in wanted:
            stale.unlink()
    for name, text in wanted.items():
        target = COURSE / name
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
    if not wanted:
        LOG.warning("no course notebooks (notebooks/NN_slug.md) found in %s", NOTEBOOKS)


# -- the API reference ----------------------------------------------------------------------

def public_names(module: types.ModuleType) -> list[str]:
    """A module's public names: its ``__all__``, else what it defines without a leading underscore."""
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, o in vars(module).items()
                 if not n.startswith("_") and getattr(o, "__module__", None) == module.__name__]
    return list(names)


def _documented_modules() -> list[types.ModuleType]:
    """Every module the reference documents: the pages' modules and the modules they export."""
    seen: dict[str, types.ModuleType] = {}
    todo = [importlib.import_module(name) for name in API_MODULES]
    while todo:
        module = todo.pop(0)
        if module.__name__ in seen:
            continue
        seen[module.__name__] = module
        for name in public_names(module):
            value = getattr(module, name)
            if isinstance(value, types.ModuleType) and value.__name__.startswith(module.__name__ + "."):
                todo.append(value)
    return list(seen.values())


def canonical(obj: Any, here: str) -> str:
    """The module whose page documents ``obj``: among the documented modules exporting this
    very object, the one its ``__module__`` is deepest inside (else the module at hand)."""
    owner = getattr(obj, "__module__", None) or ""
    best = here
    best_depth = -1
    for module in _documented_modules():
        if not any(getattr(module, n, None) is obj for n in public_names(module)):
            continue
        name = module.__name__
        if (owner == name or owner.startswith(name + ".")) and name.count(".") > best_depth:
            best, best_depth = name, name.count(".")
    return best


def _kind(obj: Any) -> str:
    if isinstance(obj, types.ModuleType):
        return "module"
    if inspect.isclass(obj):
        return "class"
    if callable(obj):
        return "function"
    return "data"


def _relative(target: str, module_name: str) -> str:
    """``target`` as autosummary wants it inside ``module_name`` (relative to it when below it)."""
    return target[len(module_name) + 1:] if target.startswith(module_name + ".") else target


def api_lines(module_name: str, depth: int = 0) -> list[str]:
    """reStructuredText for one module: its docstring, a table of its public names, the
    documentation of the names it owns, then a section per public submodule."""
    module = importlib.import_module(module_name)
    names = public_names(module)
    underline = "=-~^"[depth]
    lines: list[str] = []
    if depth:
        title = f"``{module_name}``"
        lines += [title, underline * len(title), ""]
    lines += [f".. automodule:: {module_name}", "   :no-members:", ""]
    entries, own, submodules = [], [], []
    for name in sorted(names, key=lambda n: (_kind(getattr(module, n)) == "module", n.lower())):
        obj = getattr(module, name)
        kind = _kind(obj)
        if kind == "module":
            target = obj.__name__
            if target.startswith(module_name + ".") and target not in API_MODULES:
                submodules.append(target)
            entries.append(f"   ~{_relative(target, module_name)}")
            continue
        home = canonical(obj, module_name)
        if kind != "data":  # autosummary would show a constant's type's docstring
            entries.append(f"   ~{_relative(f'{home}.{name}', module_name)}")
        if home == module_name:
            own.append((name, kind))
    lines += [".. rubric:: Public names", "", ".. autosummary::", "   :nosignatures:", "", *entries, ""]
    for name, kind in own:
        directive = {"class": "autoclass", "function": "autofunction", "data": "autodata"}[kind]
        lines += [f".. {directive}:: {module_name}.{name}"]
        if kind == "class":
            lines += ["   :members:", "   :show-inheritance:"]
        elif kind == "data" and not isinstance(getattr(module, name), str):
            lines += ["   :no-value:"]
        lines += [""]
    for sub in submodules:
        lines += api_lines(sub, depth + 1)
    return lines


class ApiDirective(SphinxDirective):
    """``.. convviz-api:: convviz.geometry`` -- that module's reference."""

    required_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        lines = api_lines(self.arguments[0])
        container = nodes.section()
        nested_parse_with_titles(self.state, StringList(lines, source=f"<convviz-api {self.arguments[0]}>"),
                                 container)
        return container.children


# -- the compatibility table -------------------------------------------------------------------

def _code_constants(code: types.CodeType) -> set[Any]:
    found = set()
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _code_constants(const)
        else:
            found.add(const)
    return found


def _code_globals(code: types.CodeType) -> set[str]:
    found = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _code_globals(const)
    return found


def _functions_of(obj: Any) -> list[types.FunctionType]:
    """The Python functions that run when ``obj`` is called (a class: its methods and those
    of its bases inside convviz)."""
    if inspect.isclass(obj):
        return [f for cls in obj.__mro__ if cls.__module__.startswith("convviz.")
                for f in vars(cls).values() if isinstance(f, types.FunctionType)]
    return [inspect.unwrap(obj)] if isinstance(inspect.unwrap(obj), types.FunctionType) else []


def ops_run_by(obj: Any) -> set[str]:
    """The convviz ops a compat function or class runs, read from its code: op records named
    by a string constant (``BY_NAME["conv2d"]``, ``run_nn("conv2d", ...)``) and public op
    functions it calls by a global name."""
    import convviz
    from convviz import ops

    publics = {id(getattr(convviz, n)): n for n in ops.__all__}
    found: set[str] = set()
    for function in _functions_of(obj):
        found |= {c for c in _code_constants(function.__code__) if isinstance(c, str) and c in ops.BY_NAME}
        for name in _code_globals(function.__code__):
            value = function.__globals__.get(name)
            if value is not None and id(value) in publics:
                found.add(publics[id(value)])
    return found


def _framework_name(obj: Any, fallback: str) -> str:
    """The framework's own name of a compat entry point, from the first ``literal`` of its
    docstring's first line when it names one (``tf.nn.conv2d``), else ``fallback``."""
    first = (inspect.getdoc(obj) or "").strip().splitlines()[:1]
    match = re.match(r"``((?:tf|torch|mindspore)\.[\w.]+)``", first[0]) if first else None
    return match.group(1) if match else fallback


def compat_rows() -> list[list[str]]:
    """One row per public convviz op: its name and the peers' names, each a link to the drop-in."""
    import convviz
    from convviz import ops
    from convviz.compat import torch as ctorch
    from convviz.compat.mindspore import ops as cms
    from convviz.compat.tf import nn as cnn
    from convviz.compat.tf import raw_ops

    order = [op.name for op in ops.OPS] + [n for n in ops.__all__ if n not in ops.BY_NAME]
    columns: dict[str, list[dict[str, str]]] = {"raw": {}, "nn": {}, "ms": {}, "torch": {}}  # type: ignore[dict-item]
    for op in ops.OPS:
        if op.tf_name:
            if not hasattr(raw_ops, op.tf_name):
                raise RuntimeError(f"convviz.compat.tf.raw_ops has no {op.tf_name} for the record {op.name}")
            columns["raw"].setdefault(op.name, []).append((op.tf_name,
                                                           f"convviz.compat.tf.raw_ops.{op.tf_name}"))
    # (column, module, the framework's namespace, where an alias under the module's own name lives)
    sources = (("nn", cnn, "tf.nn.", "tf.compat.v1.nn."), ("ms", cms, "", ""), ("torch", ctorch, "torch.", "torch."))
    for key, module, prefix, alias_prefix in sources:
        for name in public_names(module):
            obj = getattr(module, name)
            shown = _framework_name(obj, prefix + name)
            target = f"{module.__name__}.{name}"
            run = ops_run_by(obj)
            if not run:
                raise RuntimeError(f"cannot tell which convviz op {target} runs")
            for op_name in run:
                cell = columns[key].setdefault(op_name, [])
                if shown in [s for s, _ in cell]:  # a second name for the same function (an alias)
                    shown = alias_prefix + name
                cell.append((shown, target))
    rows = []
    for name in order:
        cells = [f":func:`{name} <convviz.{name}>`"]
        for key in ("raw", "nn", "ms", "torch"):
            entries = columns[key].get(name, [])
            role = "class" if key == "ms" else "func"
            cells.append(", ".join(f":{role}:`{shown} <{target}>`" for shown, target in entries) or "—")
        rows.append(cells)
    unknown = {op for col in columns.values() for op in col} - set(order)
    if unknown:
        raise RuntimeError(f"compat entries run ops that are not public: {sorted(unknown)}")
    assert all(hasattr(convviz, n) for n in order)
    return rows


class CompatTableDirective(SphinxDirective):
    """``.. convviz-compat-table::`` -- the names side by side."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        header = ["convviz.", "TensorFlow tf.raw_ops.", "TensorFlow Python", "MindSpore mindspore.ops.", "PyTorch"]
        lines = [".. list-table:: convviz's ops and the names other frameworks give them "
                 "(each name links to convviz's drop-in)",
                 "   :header-rows: 1", "   :class: convviz-compat", "   :widths: 21 21 22 18 18", ""]
        for row in [header, *compat_rows()]:
            lines.append(f"   * - {row[0]}")
            lines += [f"     - {cell}" for cell in row[1:]]
        container = nodes.container()
        self.state.nested_parse(StringList(lines, source="<convviz-compat-table>"), self.content_offset, container)
        for literal in list(container.findall(nodes.literal)):
            _break_after_dots(literal)
        return container.children


def _break_after_dots(literal: nodes.literal) -> None:
    """Let a long dotted name wrap after a dot or an underscore or inside CamelCase
    (``<wbr>``), never inside a word: the table stays as wide as the page, and a copied name has no extra character."""
    for text in list(literal.findall(nodes.Text)):
        pieces = re.split(r"(?<=[._])|(?<=[a-z0-9])(?=[A-Z])", str(text))
        if len(pieces) == 1:
            continue
        parent = text.parent
        index = parent.index(text)
        parent.remove(text)
        new: list[nodes.Node] = []
        for piece in pieces:
            if new:
                new.append(nodes.raw("", "<wbr>", format="html"))
            new.append(nodes.Text(piece))
        for offset, node in enumerate(new):
            parent.insert(index + offset, node)


# -- the gallery ---------------------------------------------------------------------------------

class GalleryDirective(SphinxDirective):
    """``.. convviz-gallery::`` -- every gallery entry with its caption and its files."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        from convviz.viz import gallery

        relative = Path(*[".."] * self.env.docname.count("/"), "..", "gallery").as_posix()
        lines: list[str] = []
        for entry in gallery.ENTRIES:
            missing = [f for f in entry.files if not (GALLERY / f).exists()]
            if missing:
                raise self.error(f"gallery/ lacks {missing}: run `convviz gallery --out gallery`")
            # The caption's first clause names the setting ("Kernel 3, stride 2: ..."), else the file name.
            clause = entry.lesson.split(":", 1)[0] if ":" in entry.lesson else ""
            if not clause or len(clause) > 60:
                clause = entry.name.split("_", 1)[1].replace("_", " ")
                clause = clause[0].upper() + clause[1:]
            title = f"{int(entry.name[:2])}. {clause}"
            lines += [title, "-" * len(title), ""]
            lines += [f".. figure:: {relative}/{entry.shown}", f"   :alt: {entry.lesson}",
                      "   :class: convviz-gallery", "", f"   {entry.lesson}", ""]
            links = " · ".join(f":download:`{f.rsplit('.', 1)[1].upper()} <{relative}/{f}>`" for f in entry.files)
            lines += [f"Download: {links}", ""]
        container = nodes.section()
        nested_parse_with_titles(self.state, StringList(lines, source="<convviz-gallery>"), container)
        return container.children


# -- the explorer ------------------------------------------------------------------------------------

def write_explorer(app: Sphinx, exception: Exception | None) -> None:
    """Write ``explorer.html`` (the offline explorer, computing in JavaScript) into the site."""
    if exception is not None or app.builder.format != "html":
        return
    from convviz.explorer import page_html

    (Path(app.outdir) / "explorer.html").write_text(page_html(), encoding="utf-8")


def module_sections_as_rubrics(app: Sphinx, what: str, name: str, obj: Any, options: Any,
                               lines: list[str]) -> None:
    """A constant's docstring is its own, never its type's.

    numpydoc leaves a module docstring as it is, so its ``Examples`` / ``--------``
    sections would become page sections (one per module, all with the same anchor): make
    them rubrics, as numpydoc does for functions and classes."""
    if what == "data":
        type_doc = inspect.getdoc(type(obj)) or ""
        if lines and type_doc and "\n".join(lines).strip() == type_doc.strip():
            lines[:] = []  # a constant without its own docs: not its type's docstring
        if name.endswith(".__version__"):
            lines[:] = ["The version of convviz, as in ``convviz --version``."]
        return
    if what != "module":
        return
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        underline = lines[i + 1] if i + 1 < len(lines) else ""
        if line.strip() and re.fullmatch(r"-{3,}", underline.strip()) and len(underline.strip()) == len(line.strip()):
            out += [f".. rubric:: {line.strip()}", ""]
            i += 2
            continue
        out.append(line)
        i += 1
    lines[:] = out


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def widget_notes(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """A widget needs a running kernel: where a course page shows one, say where to find the
    same view on this site (the standalone explorer), instead of an empty output."""
    if not docname.startswith("course/"):
        return
    for raw in list(doctree.findall(nodes.raw)):
        if WIDGET_VIEW not in raw.astext():
            continue
        depth = docname.count("/")
        href = "../" * depth + "explore.html"
        note = nodes.raw("", (f'<p class="convviz-widget-note">The explorer widget runs in a live notebook. '
                              f'On this site, open a preset link of this page or the '
                              f'<a href="{href}">standalone explorer</a>.</p>'), format="html")
        raw.parent.insert(raw.parent.index(raw) + 1, note)


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("doctree-resolved", widget_notes)
    app.connect("autodoc-process-docstring", module_sections_as_rubrics)
    app.connect("config-inited", sync_course)
    app.connect("build-finished", write_explorer)
    app.add_directive("convviz-api", ApiDirective)
    app.add_directive("convviz-compat-table", CompatTableDirective)
    app.add_directive("convviz-gallery", GalleryDirective)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
