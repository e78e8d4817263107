"""``tf.nn``-shaped functions (the tf.compat.v1 signatures, plus ``dilations``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import ops
from ._common import TF_DEFAULT_FLOAT, check_bool, check_name, split_padding

__all__ = ["conv2d_backprop_input", "depthwise_conv2d_native_backprop_filter"]


def conv2d_backprop_input(
    input_sizes: Any,
    filter: Any = None,
    out_backprop: Any = None,
    strides: Any = None,
    padding: Any = None,
    use_cudnn_on_gpu: bool = True,
    data_format: str = "NHWC",
    dilations: Any = (1, 1, 1, 1),
    name: str | None = None,
    filters: Any = None,
) -> np.ndarray:
    """``tf.compat.v1.nn.conv2d_backprop_input``: gradient of conv2d w.r.t. its input.

    ``padding`` is "SAME", "VALID", or a list of 4 ``(before, after)`` pairs in
    ``data_format`` order (explicit padding).  ``filters`` is the newer alias of
    ``filter``.  See :func:`convviz.conv2d_backprop_input`.

    Examples
    --------
    >>> import numpy as np
    >>> from convviz.compat.tf import nn
    >>> nn.conv2d_backprop_input(
    ...     [1, 4, 4, 1], np.ones((3, 3, 1, 1), np.float32), np.ones((1, 4, 4, 1), np.float32),
    ...     strides=[1, 1, 1, 1], padding=[[0, 0], [1, 1], [1, 1], [0, 0]])[0, 0, :, 0]
    array([4., 6., 6., 4.], dtype=float32)
    """
    op = "conv2d_backprop_input"
    if filter is None and filters is None:
        raise TypeError(f"{op}: missing argument 'filter' (or 'filters')")
    if filter is not None and filters is not None:
        raise TypeError(f"{op}: give 'filter' or 'filters', not both")
    for required, value in (("out_backprop", out_backprop), ("strides", strides), ("padding", padding)):
        if value is None:
            raise TypeError(f"{op}: missing argument {required!r}")
    check_bool(use_cudnn_on_gpu, "use_cudnn_on_gpu", op)
    check_name(name, op)
    padding, explicit_paddings = split_padding(padding, op)
    return ops.run_conv2d_backprop_input(
        input_sizes, filter if filter is not None else filters, out_backprop, strides,
        padding, explicit_paddings, data_format, dilations, None,
        op=op, default_float=TF_DEFAULT_FLOAT,
    )


def depthwise_conv2d_native_backprop_filter(
    input: Any,
    filter_sizes: Any,
    out_backprop: Any,
    strides: Any,
    padding: Any,
    data_format: str = "NHWC",
    dilations: Any = (1, 1, 1, 1),
    name: str | None = None,
) -> np.ndarray:
    """``tf.nn.depthwise_conv2d_native_backprop_filter``: depthwise filter gradient.

    ``padding`` is "SAME", "VALID", or a list of 4 ``(before, after)`` pairs.
    See :func:`convviz.depthwise_conv2d_native_backprop_filter`.

    Examples
    --------
    >>> import numpy as np
    >>> from convviz.compat.tf import nn
    >>> nn.depthwise_conv2d_native_backprop_filter(
    ...     np.ones((1, 3, 3, 1), np.float32), [2, 2, 1, 2], np.ones((1, 2, 2, 2), np.float32),
    ...     strides=[1, 1, 1, 1], padding="VALID").shape
    (2, 2, 1, 2)
    """
    op = "depthwise_conv2d_native_backprop_filter"
    check_name(name, op)
    padding, explicit_paddings = split_padding(padding, op)
    return ops.run_depthwise_conv2d_native_backprop_filter(
        input, filter_sizes, out_backprop, strides, padding, explicit_paddings,
        data_format, dilations, None, op=op, default_float=TF_DEFAULT_FLOAT,
    )
