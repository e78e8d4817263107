"""convviz: compute and show the gradients of 2-D convolution.

The compute core implements the 2-D convolution layer with TensorFlow's exact
semantics: :func:`conv2d` (``Conv2D``), its gradients :func:`conv2d_backprop_input`
(``Conv2DBackpropInput``) and :func:`conv2d_backprop_filter`
(``Conv2DBackpropFilter``), the depthwise forward
:func:`depthwise_conv2d_native` and its gradients
:func:`depthwise_conv2d_native_backprop_input` and
:func:`depthwise_conv2d_native_backprop_filter`, and PyTorch's
:func:`conv_transpose2d`.  :mod:`convviz.layers` wraps them as layer objects
with :func:`gradcheck`; :mod:`convviz.exercises` checks the course's exercises.

:func:`explore` opens the interactive explorer in a notebook (and
:func:`convviz.explorer.page_html` makes it a standalone offline page).

Drop-in namespaces for TensorFlow, MindSpore and PyTorch users live in
:mod:`convviz.compat`; the shape arithmetic in :mod:`convviz.geometry`; a float64
NumPy reference in :mod:`convviz.reference`.

Examples
--------
>>> import numpy as np, convviz
>>> convviz.conv2d_backprop_input([1, 4, 4, 1], np.ones((3, 3, 1, 1)),
...                               np.ones((1, 2, 2, 1)), [1, 2, 2, 1], "SAME").shape
(1, 4, 4, 1)
"""

from ._version import __version__
from . import _wait_policy

_wait_policy.load_runtime()  # before any other compiled module: libgomp reads its spin count as it loads
from .errors import DeviceError, InvalidArgumentError  # noqa: E402
from ._info import openmp_enabled, show_versions
from .geometry import AxisGeometry, ConvGeometry
from . import ops
from .ops import *  # noqa: F403 -- every op's public function (convviz.ops.__all__)
from . import compat, errors, geometry, reference
from . import layers
from .layers import gradcheck

__all__ = [
    "AxisGeometry",
    "ConvGeometry",
    "DeviceError",
    "InvalidArgumentError",
    "__version__",
    "compat",
    "errors",
    "explore",
    "geometry",
    "gradcheck",
    "layers",
    "openmp_enabled",
    "reference",
    "show_versions",
]
__all__ += ops.__all__


def __getattr__(name: str):
    # The explorer's widget needs anywidget; load it only when asked for.
    if name == "explore":
        from .explorer.widget import explore

        return explore
    raise AttributeError(f"module 'convviz' has no attribute {name!r}")
