"""The ops: one module per op, one record per op, one pipeline for all.

Each op is one unit (see ARCHITECTURE.md and CONTRIBUTING.md): its module
``convviz/ops/<op>.py`` holds the public function and its documentation, the
validator, the CPU plan around its Cython kernel (``_<op>.pyx`` beside it, C++
in ``_ext/``), the GPU launcher and an :class:`Op` record.  :data:`OPS` lists the
records; the compat namespaces, the tests and the benchmark iterate over it.

Examples
--------
>>> from convviz.ops import BY_NAME
>>> BY_NAME["conv2d_backprop_input"].tf_name
'Conv2DBackpropInput'
"""

from __future__ import annotations

from ._op import Op, select_device
from .depthwise_filter_grad import OP as DEPTHWISE_CONV2D_NATIVE_BACKPROP_FILTER
from .depthwise_filter_grad import depthwise_conv2d_native_backprop_filter
from .depthwise_forward import OP as DEPTHWISE_CONV2D_NATIVE
from .depthwise_forward import depthwise_conv2d_native
from .depthwise_input_grad import OP as DEPTHWISE_CONV2D_NATIVE_BACKPROP_INPUT
from .depthwise_input_grad import depthwise_conv2d_native_backprop_input
from .filter_grad import OP as CONV2D_BACKPROP_FILTER
from .filter_grad import conv2d_backprop_filter
from .forward import OP as CONV2D
from .forward import conv2d
from .input_grad import OP as CONV2D_BACKPROP_INPUT
from .input_grad import conv2d_backprop_input
from .transpose import conv_transpose2d

# The public op functions: convviz re-exports exactly these (``from .ops import *``).
__all__ = ["conv2d", "conv2d_backprop_filter", "conv2d_backprop_input", "conv_transpose2d",
           "depthwise_conv2d_native", "depthwise_conv2d_native_backprop_filter",
           "depthwise_conv2d_native_backprop_input"]

#: Every op, in the order the documentation lists them.
OPS: tuple[Op, ...] = (CONV2D, CONV2D_BACKPROP_INPUT, CONV2D_BACKPROP_FILTER, DEPTHWISE_CONV2D_NATIVE,
                       DEPTHWISE_CONV2D_NATIVE_BACKPROP_INPUT, DEPTHWISE_CONV2D_NATIVE_BACKPROP_FILTER)

#: Ops by public name.
BY_NAME: dict[str, Op] = {op.name: op for op in OPS}

# Entry points of the compat namespaces (validate and run with a caller's name
# and default float dtype): all positional, then op=, default_float=, device=.
run_conv2d_backprop_input = CONV2D_BACKPROP_INPUT.run
run_depthwise_conv2d_native_backprop_filter = DEPTHWISE_CONV2D_NATIVE_BACKPROP_FILTER.run
