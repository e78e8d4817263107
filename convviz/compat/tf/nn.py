"""``tf.nn``-shaped functions: TensorFlow's Python signatures, computed by convviz.

The v2 functions (``conv2d``, ``conv2d_transpose``, ``depthwise_conv2d``) take
strides and dilations as TensorFlow 2 does (an int, 1, 2 or 4 values); the
tf.compat.v1 ones (``conv2d_backprop_input``, ``conv2d_backprop_filter``, the
depthwise gradients) pass them to the op as they are, where the 2-value
``[height, width]`` form is accepted too.  Everywhere ``padding`` is "SAME",
"VALID" or a list of 4 ``(before, after)`` pairs in ``data_format`` order
(explicit padding), Python float lists become float32, ``name`` is checked but
inert, and errors name the ``tf.nn`` function.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import ops
from ..._validate import as_int_list, tensor_pair
from ...errors import InvalidArgumentError
from ._common import TF_DEFAULT_FLOAT, check_bool, run_nn, spatial_to_four, tf_sequence

__all__ = ["conv2d", "conv2d_backprop_filter", "conv2d_backprop_input", "conv2d_transpose", "depthwise_conv2d",
           "depthwise_conv2d_backprop_filter", "depthwise_conv2d_backprop_input",
           "depthwise_conv2d_native_backprop_filter", "depthwise_conv2d_native_backprop_input"]


def conv2d(
        input: Any, filters: Any, strides: Any, padding: Any, data_format: str = "NHWC", dilations: Any = None,
        name: str | None = None) -> np.ndarray:
    """``tf.nn.conv2d``: 2-D convolution (a cross-correlation), grouped.

    ``input`` may have more than 4 dimensions: all but the inner 3 are batch
    dimensions, as in TensorFlow 2.  ``filters`` is HWIO ``[filter_height,
    filter_width, in_channels / groups, out_channels]``.  ``strides`` and
    ``dilations`` are an int or 1, 2 or 4 values (None: 1).  See
    :func:`convviz.conv2d`.

    Returns
    -------
    numpy.ndarray
        The output, in the dtype of ``input``, with ``input``'s batch shape.

    Examples
    --------
    >>> import numpy as np
    >>> from convviz.compat.tf import nn
    >>> x = np.arange(9, dtype=np.float32).reshape(1, 3, 3, 1)
    >>> nn.conv2d(x, np.ones((2, 2, 1, 1), np.float32), strides=1, padding="VALID")[0, :, :, 0]
    array([[ 8., 12.],
           [20., 24.]], dtype=float32)

    Batch dimensions beyond the first, and explicit padding as pairs:

    >>> nn.conv2d(np.ones((2, 5, 3, 3, 1), np.float32), np.ones((2, 2, 1, 4), np.float32), strides=[1, 1],
    ...           padding=[[0, 0], [1, 0], [0, 0], [0, 0]]).shape
    (2, 5, 3, 2, 4)
    """
    op = "conv2d"
    data_format = "NHWC" if data_format is None else data_format
    strides = tf_sequence(strides, "strides", data_format, op)
    dilations = tf_sequence(dilations, "dilations", data_format, op)
    shape = getattr(input, "shape", None)
    if shape is None:  # a Python list: converted here as the op would (float32, or the filter's dtype)
        input, filters, _ = tensor_pair(input, "input", filters, op, ops.BY_NAME["conv2d"].dtypes,
                                        TF_DEFAULT_FLOAT, second_name="filter")
        shape = input.shape
    if len(shape) <= 4:
        return run_nn("conv2d", op, (input, filters), strides, padding, data_format, dilations, name)
    # batch_shape + 3 inner dimensions: one batch dimension for the op, then back.
    out = run_nn("conv2d", op, (input.reshape((-1, *shape[-3:])), filters), strides, padding, data_format,
                 dilations, name)
    return out.reshape((*shape[:-3], *out.shape[1:]))


def conv2d_backprop_input(
        input_sizes: Any, filter: Any = None, out_backprop: Any = None, strides: Any = None, padding: Any = None,
        use_cudnn_on_gpu: bool = True, data_format: str = "NHWC", dilations: Any = (1, 1, 1, 1),
        name: str | None = None, filters: Any = None) -> np.ndarray:
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
    return run_nn("conv2d_backprop_input", op, (input_sizes, filter if filter is not None else filters,
                                                out_backprop), strides, padding, data_format, dilations, name)


def conv2d_backprop_filter(
        input: Any, filter_sizes: Any, out_backprop: Any, strides: Any, padding: Any, use_cudnn_on_gpu: bool = True,
        data_format: str = "NHWC", dilations: Any = (1, 1, 1, 1), name: str | None = None) -> np.ndarray:
    """``tf.compat.v1.nn.conv2d_backprop_filter``: gradient of conv2d w.r.t. its filter.

    ``filter_sizes`` is the HWIO filter shape (an input depth that is a multiple
    of ``filter_sizes[2]`` is a grouped convolution).  ``padding`` is "SAME",
    "VALID", or a list of 4 ``(before, after)`` pairs.  See
    :func:`convviz.conv2d_backprop_filter`.

    Examples
    --------
    Each tap of a 2x2 filter sees four input cells through a 2x2 output:

    >>> import numpy as np
    >>> from convviz.compat.tf import nn
    >>> nn.conv2d_backprop_filter(np.ones((1, 3, 3, 1), np.float32), [2, 2, 1, 1],
    ...                           np.ones((1, 2, 2, 1), np.float32), [1, 1, 1, 1], "VALID")[:, :, 0, 0]
    array([[4., 4.],
           [4., 4.]], dtype=float32)
    """
    op = "conv2d_backprop_filter"
    check_bool(use_cudnn_on_gpu, "use_cudnn_on_gpu", op)
    return run_nn("conv2d_backprop_filter", op, (input, filter_sizes, out_backprop), strides, padding,
                  data_format, dilations, name)


def conv2d_transpose(
        input: Any, filters: Any, output_shape: Any, strides: Any, padding: Any = "SAME", data_format: str = "NHWC",
        dilations: Any = None, name: str | None = None) -> np.ndarray:
    """``tf.nn.conv2d_transpose``: the transpose (input gradient) of conv2d.

    Exactly ``Conv2DBackpropInput(input_sizes=output_shape, filter=filters,
    out_backprop=input)``, as TensorFlow computes it: ``filters`` is
    ``[height, width, output_channels, in_channels]`` and ``input`` has
    ``in_channels``.  ``strides`` and ``dilations`` are an int or 1, 2 or 4
    values; error messages speak of the raw op's arguments (``out_backprop``
    is ``input``, ``input_sizes`` is ``output_shape``), as TensorFlow's do.
    See :func:`convviz.conv2d_backprop_input`.

    Examples
    --------
    Each input cell scattered through a 3x3 filter of ones with stride 2:
    the windows overlap in the middle row and column.

    >>> import numpy as np
    >>> from convviz.compat.tf import nn
    >>> nn.conv2d_transpose(np.ones((1, 2, 2, 1), np.float32), np.ones((3, 3, 1, 1), np.float32),
    ...                     output_shape=[1, 5, 5, 1], strides=2, padding="VALID")[0, :, :, 0]
    array([[1., 1., 2., 1., 1.],
           [1., 1., 2., 1., 1.],
           [2., 2., 4., 2., 2.],
           [1., 1., 2., 1., 1.],
           [1., 1., 2., 1., 1.]], dtype=float32)
    """
    op = "conv2d_transpose"
    data_format = "NHWC" if data_format is None else data_format
    return run_nn("conv2d_backprop_input", op, (output_shape, filters, input),
                  tf_sequence(strides, "strides", data_format, op), padding, data_format,
                  tf_sequence(dilations, "dilations", data_format, op), name)


def depthwise_conv2d(
        input: Any, filter: Any, strides: Any, padding: Any, data_format: str | None = None, dilations: Any = None,
        name: str | None = None) -> np.ndarray:
    """``tf.nn.depthwise_conv2d``: each input channel convolved with its own filters.

    ``filter`` is ``[filter_height, filter_width, in_channels,
    channel_multiplier]``; output channel ``c * channel_multiplier + m`` is
    input channel ``c`` through ``filter[:, :, c, m]``.  ``data_format`` None
    is "NHWC".  ``dilations`` is TensorFlow's 2-value rate ``[height, width]``
    (None: 1).  Unlike TensorFlow, which warns and computes something else when
    a rate above 1 meets a stride above 1, the result is the exact strided and
    dilated depthwise convolution.  See :func:`convviz.depthwise_conv2d_native`.

    Examples
    --------
    >>> import numpy as np
    >>> from convviz.compat.tf import nn
    >>> x = np.arange(1, 7, dtype=np.float32).reshape(1, 3, 2, 1)
    >>> kernel = np.array([1, 10], np.float32).reshape(1, 1, 1, 2)   # multiplier 2
    >>> nn.depthwise_conv2d(x, kernel, strides=[1, 1, 1, 1], padding="VALID")[0]
    array([[[ 1., 10.],
            [ 2., 20.]],
    <BLANKLINE>
           [[ 3., 30.],
            [ 4., 40.]],
    <BLANKLINE>
           [[ 5., 50.],
            [ 6., 60.]]], dtype=float32)
    """
    op = "depthwise_conv2d"
    data_format = "NHWC" if data_format is None else data_format
    if dilations is None:
        four = [1, 1, 1, 1]
    else:
        rate = as_int_list(dilations, "dilations", op)
        if len(rate) != 2:
            raise InvalidArgumentError(f"{op}: dilations is the rate [height, width] and must have 2 values, "
                                       f"got {len(rate)}: {list(rate)}")
        four = spatial_to_four(rate, data_format)
    return run_nn("depthwise_conv2d_native", op, (input, filter), strides, padding, data_format, four, name)


def depthwise_conv2d_backprop_input(
        input_sizes: Any, filter: Any, out_backprop: Any, strides: Any, padding: Any, data_format: str = "NHWC",
        dilations: Any = (1, 1, 1, 1), name: str | None = None) -> np.ndarray:
    """``tf.nn.depthwise_conv2d_backprop_input``: depthwise conv's gradient w.r.t. its input.

    Also ``tf.compat.v1.nn.depthwise_conv2d_native_backprop_input`` (the same
    function).  ``padding`` is "SAME", "VALID", or a list of 4 ``(before,
    after)`` pairs.  Exact also with dilations, which TensorFlow's CPU kernel
    ignores with SAME padding.  See
    :func:`convviz.depthwise_conv2d_native_backprop_input`.

    Examples
    --------
    >>> import numpy as np
    >>> from convviz.compat.tf import nn
    >>> nn.depthwise_conv2d_backprop_input([1, 3, 3, 1], np.ones((2, 2, 1, 2), np.float32),
    ...                                    np.ones((1, 2, 2, 2), np.float32), [1, 1, 1, 1], "VALID")[0, :, :, 0]
    array([[2., 4., 2.],
           [4., 8., 4.],
           [2., 4., 2.]], dtype=float32)
    """
    return run_nn("depthwise_conv2d_native_backprop_input", "depthwise_conv2d_backprop_input",
                  (input_sizes, filter, out_backprop), strides, padding, data_format, dilations, name)


def depthwise_conv2d_native_backprop_filter(
        input: Any, filter_sizes: Any, out_backprop: Any, strides: Any, padding: Any, data_format: str = "NHWC",
        dilations: Any = (1, 1, 1, 1), name: str | None = None) -> np.ndarray:
    """``tf.nn.depthwise_conv2d_backprop_filter``: depthwise filter gradient.

    Also ``tf.compat.v1.nn.depthwise_conv2d_native_backprop_filter`` (the same
    function).  ``padding`` is "SAME", "VALID", or a list of 4 ``(before,
    after)`` pairs.  See :func:`convviz.depthwise_conv2d_native_backprop_filter`.

    Examples
    --------
    >>> import numpy as np
    >>> from convviz.compat.tf import nn
    >>> nn.depthwise_conv2d_native_backprop_filter(
    ...     np.ones((1, 3, 3, 1), np.float32), [2, 2, 1, 2], np.ones((1, 2, 2, 2), np.float32),
    ...     strides=[1, 1, 1, 1], padding="VALID").shape
    (2, 2, 1, 2)
    """
    return run_nn("depthwise_conv2d_native_backprop_filter", "depthwise_conv2d_native_backprop_filter",
                  (input, filter_sizes, out_backprop), strides, padding, data_format, dilations, name)


# One function under two names, as in TensorFlow (tf.nn and tf.compat.v1.nn).
depthwise_conv2d_backprop_filter = depthwise_conv2d_native_backprop_filter
depthwise_conv2d_native_backprop_input = depthwise_conv2d_backprop_input
