"""Sphinx configuration of the convviz site.

Build it (offline, every notebook executed, warnings as errors) from the repository root:

    python -m sphinx -W --keep-going -b html docs docs/_build/html

The course pages are the notebooks' MyST sources (``notebooks/NN_slug.md``), copied
into ``docs/course/`` at build time (see ``_sphinxext/convviz_docs.py``); the API
reference, the compatibility table, the gallery and ``explorer.html`` are generated
from the package at build time too, so nothing here is maintained by hand twice.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_sphinxext"))

import convviz  # noqa: E402

project = "convviz"
author = "convviz developers"
copyright = "convviz developers, Apache License 2.0"
release = convviz.__version__
version = release

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "convviz_docs",
]

root_doc = "index"
exclude_patterns = ["_build", "jupyter_execute", ".jupyter_cache", "**.ipynb_checkpoints", "README.md"]
templates_path: list[str] = []

# -- MyST and the notebooks ---------------------------------------------------
myst_enable_extensions = ["colon_fence", "dollarmath", "deflist", "html_image"]
myst_heading_anchors = 3
# Every notebook runs when the site is built; an error in a cell fails the build.
nb_execution_mode = "cache"
nb_execution_raise_on_error = True
nb_execution_timeout = 300
nb_execution_in_temp = True  # a notebook writes its files into a temporary folder, not into the repository
nb_execution_show_tb = True
nb_merge_streams = True
nb_render_markdown_format = "myst"  # Markdown outputs (tables) rendered as the pages are
# The site loads nothing from the network: no require.js / widget manager from a CDN.
nb_ipywidgets_js: dict = {}

# -- API reference ---------------------------------------------------------
autosummary_generate = False  # the convviz-api directive writes each module's page itself
autodoc_default_options = {"members": False}
add_function_parentheses = False
autodoc_typehints = "none"  # signatures stay readable; numpydoc's Parameters say the types
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_validation_checks: set[str] = set()

# -- HTML --------------------------------------------------------------------
html_theme = "furo"
html_title = f"convviz {release}"
html_static_path = ["_static"]
html_css_files = ["convviz.css"]
html_copy_source = False
html_show_sourcelink = False
html_theme_options = {
    "sidebar_hide_name": False,
    "navigation_with_keys": True,
    # Darker links and ink than furo's defaults: legible on a projector.
    "light_css_variables": {
        "color-brand-primary": "#0b4f8a",
        "color-brand-content": "#0b4f8a",
        "color-foreground-primary": "#111111",
        "color-foreground-secondary": "#333333",
    },
    "dark_css_variables": {
        "color-brand-primary": "#8cc4ff",
        "color-brand-content": "#8cc4ff",
    },
}
