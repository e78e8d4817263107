"""The explorer: a browser-native, direct-manipulation view of convolution and its gradients.

One ES module (``explorer.js`` over the pure numeric ``core.js``, styled by
``explorer.css``) runs in two hosts:

* :func:`explore` returns an anywidget for JupyterLab 4, Notebook 7 and VS Code
  notebooks, whose output numbers come from the convviz kernels;
* :func:`page_html` / :func:`write_page` (and ``convviz page --out FILE``) make a
  single offline HTML file that computes in JavaScript, with presets in its URL query.

The DOM contract (stable, relied on by the tests and by course material): every
numbered cell has ``data-panel`` (``x``, ``w``, ``dy``, ``dx``, ``dw`` or ``y``),
``data-row``, ``data-col``, ``data-value`` (full precision), ``data-index`` (its full
index, comma-separated, in the tensor convviz takes or returns for the op, in that
tensor's own layout: NHWC activations, HWIO or ``[kh, kw, c, m]`` filters, NCHW and
``(C_in, C_out / groups, kH, kW)`` for ``conv_transpose2d``), ``data-plane``,
``data-channel`` when the panel has several channels, and an ``aria-label``; padding
cells carry ``data-pad`` and no ``data-index``; the worked sum is ``[data-role="sum"]`` with ``data-value``;
every control's ``name`` is its parameter (see :data:`PARAMS`), plus ``play``,
``step`` and ``speed``.
"""

from __future__ import annotations

from typing import Any

from ._setting import OPS, PARAMS, compute, defaults, example_tensor, setting_key
from .page import page_html, write_page

__all__ = ["OPS", "PARAMS", "Explorer", "compute", "defaults", "example_tensor", "explore", "page_html",
           "setting_key", "write_page"]


def __getattr__(name: str) -> Any:
    # anywidget (and ipywidgets behind it) loads only when a widget is asked for.
    if name in ("Explorer", "explore"):
        from . import widget

        return getattr(widget, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
