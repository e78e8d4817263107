"""Figures and animations of convolution gradients, drawn from the kernels' own numbers.

Start from a :class:`Setup` (sizes, strides, dilations, padding, example
numbers), then draw:

* :func:`scatter` -- one output-gradient cell scattered through every tap;
* :func:`coverage` -- how many taps reach each input cell (checkerboards,
  gridding, rows that get no gradient);
* :func:`scatter_vs_gather` -- the same input gradient as scatter and as
  zero-insertion + padding + flipped-kernel correlation;
* :func:`depthwise` -- one tap of the depthwise filter gradient;
* :func:`card` -- the geometry with its formulas filled in;
* :func:`animate_input_gradient`, :func:`animate_filter_gradient` and
  :func:`save` -- animations as GIF, MP4 or interactive HTML.

Examples
--------
>>> from convviz import viz
>>> fig = viz.coverage(viz.Setup(input_hw=7, kernel_hw=3, strides=2))
>>> fig.axes[0].get_xlabel()
'input column'
"""

from .animate import animate_filter_gradient, animate_input_gradient, save
from .setup import Setup
from .views import card, coverage, depthwise, scatter, scatter_vs_gather

__all__ = ["Setup", "animate_filter_gradient", "animate_input_gradient", "card", "coverage", "depthwise",
           "save", "scatter", "scatter_vs_gather"]
