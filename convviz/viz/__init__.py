"""Figures and animations of convolution gradients, drawn from the kernels' own numbers.

Start from a :class:`Setup` (sizes, strides, dilations, padding, and your own
``x``, ``W``, ``dy`` arrays or example numbers), then draw:

* :func:`scatter` -- one output-gradient cell scattered through every tap;
* :func:`coverage` -- how many taps reach each input cell (checkerboards,
  gridding, rows that get no gradient);
* :func:`scatter_vs_gather` -- the same input gradient as scatter and as
  zero-insertion + padding + flipped-kernel correlation;
* :func:`depthwise` -- one tap of the depthwise filter gradient;
* :func:`card` -- the geometry with its formulas filled in;
* :func:`animate_input_gradient`, :func:`animate_depthwise_filter_gradient` -- animations
  (``animate_filter_gradient`` is a deprecated alias of the second).

:func:`save` writes any of them by extension (``.png``, ``.svg``, ``.pdf``,
``.gif``, ``.mp4``, ``.html``); :func:`to_html` shows an animation in a
notebook with the same offline player.  Every figure is drawn in one style, with the
theme chosen by :func:`use_theme` or :func:`theme_context` (``"screen"``,
``"projector"``, ``"print"``) or per call with ``theme=``; :mod:`convviz.viz.checks`
tests a figure's legibility (contrast, overlaps, clipping, font size).

Examples
--------
>>> from convviz import viz
>>> fig = viz.coverage(viz.Setup(input_hw=7, kernel_hw=3, strides=2), theme="projector")
>>> fig.axes[0].get_xlabel()
'input column'
>>> viz.checks.check_figure(fig)
[]
"""

import sys
import types
import warnings
from typing import Any

from . import checks, scene
from ._save import save, to_html
from ._style import THEMES, Theme, current as current_theme, theme_context, use_theme
from .animate import animate_depthwise_filter_gradient, animate_input_gradient
from .scene import Setup, warn_renamed
from .views import card, coverage, depthwise, scatter, scatter_vs_gather

__all__ = ["THEMES", "Setup", "Theme", "animate_depthwise_filter_gradient", "animate_input_gradient", "card",
           "checks", "coverage", "current_theme", "depthwise", "save", "scatter", "scatter_vs_gather",
           "theme_context", "to_html", "use_theme"]

#: Old names that still work, each warning (DeprecationWarning) with its new name.
_RENAMED = {"animate_filter_gradient": "animate_depthwise_filter_gradient"}


class _RenamedModule(types.ModuleType):
    """``convviz.viz.setup``, the old name of :mod:`convviz.viz.scene` (it shared the build
    script's name): each name read from it warns once per use and comes from the new module."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # tools that walk sys.modules ask for __file__ and the like
            raise AttributeError(name)
        warnings.warn("convviz.viz.setup is deprecated, use convviz.viz.scene (the old name was the build "
                      "script's)", DeprecationWarning, stacklevel=2)
        return getattr(scene, name)


sys.modules[f"{__name__}.setup"] = _RenamedModule(f"{__name__}.setup", "Deprecated: use convviz.viz.scene.")


def __getattr__(name: str) -> Any:
    if name == "setup":
        return sys.modules[f"{__name__}.setup"]
    if name in _RENAMED:
        new = _RENAMED[name]
        warn_renamed(f"convviz.viz.{name}", f"convviz.viz.{new}", stacklevel=3)
        return globals()[new]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
