"""``tf.raw_ops``-shaped functions: keyword-only, TensorFlow's argument names."""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import ops
from ._common import TF_DEFAULT_FLOAT, check_bool, check_four, check_name

__all__ = ["Conv2DBackpropInput", "DepthwiseConv2dNativeBackpropFilter"]


def Conv2DBackpropInput(
    *,
    input_sizes: Any,
    filter: Any,
    out_backprop: Any,
    strides: Any,
    padding: Any,
    use_cudnn_on_gpu: bool = True,
    explicit_paddings: Any = (),
    data_format: str = "NHWC",
    dilations: Any = (1, 1, 1, 1),
    name: str | None = None,
) -> np.ndarray:
    """``tf.raw_ops.Conv2DBackpropInput``: gradient of conv2d with respect to its input.

    Same keyword-only arguments as TensorFlow's; ``use_cudnn_on_gpu`` and
    ``name`` are accepted (and type-checked) but do not change the result.
    Python lists become float32 as in TensorFlow.  See
    :func:`convviz.conv2d_backprop_input` for the semantics.

    Returns
    -------
    numpy.ndarray
        Shape ``input_sizes``, dtype of ``filter``.

    Examples
    --------
    >>> import numpy as np
    >>> from convviz.compat.tf import raw_ops
    >>> dx = raw_ops.Conv2DBackpropInput(
    ...     input_sizes=[1, 3, 3, 1], filter=[[[[1.0]], [[2.0]]]],
    ...     out_backprop=np.ones((1, 3, 2, 1), np.float32), strides=[1, 1, 1, 1],
    ...     padding="VALID")
    >>> dx[0, :, :, 0], dx.dtype
    (array([[1., 3., 2.],
           [1., 3., 2.],
           [1., 3., 2.]], dtype=float32), dtype('float32'))
    """
    op = "Conv2DBackpropInput"
    check_bool(use_cudnn_on_gpu, "use_cudnn_on_gpu", op)
    check_name(name, op)
    check_four(strides, "strides", op)
    check_four(dilations, "dilations", op)
    return ops.run_conv2d_backprop_input(
        input_sizes, filter, out_backprop, strides, padding, explicit_paddings,
        data_format, dilations, None, op=op, default_float=TF_DEFAULT_FLOAT,
    )


def DepthwiseConv2dNativeBackpropFilter(
    *,
    input: Any,
    filter_sizes: Any,
    out_backprop: Any,
    strides: Any,
    padding: Any,
    explicit_paddings: Any = (),
    data_format: str = "NHWC",
    dilations: Any = (1, 1, 1, 1),
    name: str | None = None,
) -> np.ndarray:
    """``tf.raw_ops.DepthwiseConv2dNativeBackpropFilter``: depthwise filter gradient.

    Same keyword-only arguments as TensorFlow's.  Unlike TensorFlow's CPU kernel,
    dilations are honoured and row/column strides may differ.  See
    :func:`convviz.depthwise_conv2d_native_backprop_filter`.

    Returns
    -------
    numpy.ndarray
        Shape ``filter_sizes``, dtype of ``input``.

    Examples
    --------
    With dilation 2 the 3x3 kernel spans 5x5; on an all-ones 5x5 input each
    tap's gradient counts the output cells for which it lands on a real pixel:

    >>> import numpy as np
    >>> from convviz.compat.tf import raw_ops
    >>> raw_ops.DepthwiseConv2dNativeBackpropFilter(
    ...     input=np.ones((1, 5, 5, 2), np.float32), filter_sizes=[3, 3, 2, 1],
    ...     out_backprop=np.ones((1, 5, 5, 2), np.float32), strides=[1, 1, 1, 1],
    ...     padding="SAME", dilations=[1, 2, 2, 1])[:, :, 0, 0]
    array([[ 9., 15.,  9.],
           [15., 25., 15.],
           [ 9., 15.,  9.]], dtype=float32)
    """
    op = "DepthwiseConv2dNativeBackpropFilter"
    check_name(name, op)
    check_four(strides, "strides", op)
    check_four(dilations, "dilations", op)
    return ops.run_depthwise_conv2d_native_backprop_filter(
        input, filter_sizes, out_backprop, strides, padding, explicit_paddings,
        data_format, dilations, None, op=op, default_float=TF_DEFAULT_FLOAT,
    )
