"""Float64 NumPy reference implementations: slow, obvious loops.

These take the same arguments as the fast ops (and go through the same
validation and geometry), but compute in float64 with a plain loop over output
cells and filter taps.  The tests compare the Cython kernels against them, and
small figures may use them.  The forward convolutions are here too, for the
adjoint identity ``<conv2d(x, W), dy> == <x, conv2d_backprop_input(dy, W)>``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _validate
from .ops import depthwise_filter_grad as _depthwise_filter_grad
from .ops import input_grad as _input_grad
from .geometry import ConvGeometry

__all__ = [
    "conv2d",
    "conv2d_backprop_input",
    "depthwise_conv2d",
    "depthwise_conv2d_native_backprop_filter",
]


def _nhwc(array: np.ndarray, data_format: str) -> np.ndarray:
    return array if data_format == "NHWC" else array.transpose(0, 2, 3, 1)


def _from_nhwc(array: np.ndarray, data_format: str) -> np.ndarray:
    return array if data_format == "NHWC" else array.transpose(0, 3, 1, 2)


def _taps(geometry: ConvGeometry):
    """Yield (oh, ow, kh, kw, ih, iw) for every tap that reads a real input cell."""
    for oh in range(geometry.rows.output_size):
        for kh in range(geometry.rows.kernel_size):
            ih = geometry.rows.input_index(oh, kh)
            if not 0 <= ih < geometry.rows.input_size:
                continue
            for ow in range(geometry.cols.output_size):
                for kw in range(geometry.cols.kernel_size):
                    iw = geometry.cols.input_index(ow, kw)
                    if 0 <= iw < geometry.cols.input_size:
                        yield oh, ow, kh, kw, ih, iw


def _groups(g: ConvGeometry):
    """Yield (input-channel slice, output-channel slice) of each group."""
    cin_g, cout_g = g.in_channels // g.groups, g.out_channels // g.groups
    for group in range(g.groups):
        yield (slice(group * cin_g, (group + 1) * cin_g),
               slice(group * cout_g, (group + 1) * cout_g))


def conv2d_backprop_input(
    input_sizes: Any, filter: Any, out_backprop: Any, strides: Any, padding: Any,
    explicit_paddings: Any = (), data_format: Any = "NHWC", dilations: Any = (1, 1, 1, 1),
) -> np.ndarray:
    """Float64 reference for :func:`convviz.conv2d_backprop_input`.

    Examples
    --------
    >>> import numpy as np
    >>> from convviz import reference
    >>> reference.conv2d_backprop_input([1, 3, 3, 1], np.ones((2, 2, 1, 1)),
    ...                                 np.ones((1, 2, 2, 1)), [1, 1, 1, 1], "VALID")[0, :, :, 0]
    array([[1., 2., 1.],
           [2., 4., 2.],
           [1., 2., 1.]])
    """
    call = _input_grad.validate(
        input_sizes, filter, out_backprop, strides, padding, explicit_paddings,
        data_format, dilations, 1, op="reference.conv2d_backprop_input",
    )
    g = call.geometry
    w = call.filter.astype(np.float64)
    dy = _nhwc(call.out_backprop.astype(np.float64), g.data_format)
    n, h, wd = g.batch, *g.input_hw
    dx = np.zeros((n, h, wd, g.in_channels))
    for oh, ow, kh, kw, ih, iw in _taps(g):
        for ins, outs in _groups(g):
            # dx[n, ih, iw, ci] += sum_co dy[n, oh, ow, co] * w[kh, kw, ci, co]
            dx[:, ih, iw, ins] += dy[:, oh, ow, outs] @ w[kh, kw, :, outs].T
    return _from_nhwc(dx, g.data_format)


def depthwise_conv2d_native_backprop_filter(
    input: Any, filter_sizes: Any, out_backprop: Any, strides: Any, padding: Any,
    explicit_paddings: Any = (), data_format: Any = "NHWC", dilations: Any = (1, 1, 1, 1),
) -> np.ndarray:
    """Float64 reference for :func:`convviz.depthwise_conv2d_native_backprop_filter`.

    Examples
    --------
    >>> import numpy as np
    >>> from convviz import reference
    >>> reference.depthwise_conv2d_native_backprop_filter(
    ...     np.arange(9.).reshape(1, 3, 3, 1), [2, 2, 1, 1], np.ones((1, 2, 2, 1)),
    ...     [1, 1, 1, 1], "VALID")[:, :, 0, 0]
    array([[ 8., 12.],
           [20., 24.]])
    """
    call = _depthwise_filter_grad.validate(
        input, filter_sizes, out_backprop, strides, padding, explicit_paddings,
        data_format, dilations, 1, op="reference.depthwise_conv2d_native_backprop_filter",
    )
    g = call.geometry
    x = _nhwc(call.input.astype(np.float64), g.data_format)
    dy = _nhwc(call.out_backprop.astype(np.float64), g.data_format)
    channels, multiplier = g.in_channels, g.multiplier
    dy = dy.reshape(dy.shape[:3] + (channels, multiplier))
    dw = np.zeros(g.filter_shape)
    for oh, ow, kh, kw, ih, iw in _taps(g):
        # dw[kh, kw, c, m] += sum_n x[n, ih, iw, c] * dy[n, oh, ow, c, m]
        dw[kh, kw] += np.einsum("nc,ncm->cm", x[:, ih, iw, :], dy[:, oh, ow])
    return dw


def _forward_geometry(x: np.ndarray, filter_shape: tuple[int, ...], strides: Any, padding: Any,
                      explicit_paddings: Any, data_format: Any, dilations: Any, op: str,
                      depthwise: bool) -> ConvGeometry:
    window = _validate.validate_window(strides, padding, explicit_paddings, data_format, dilations, op)
    n, h, w, c = _validate.spatial(x.shape, window)
    kh, kw, fi, fo = filter_shape
    if depthwise:
        out_channels, groups = c * fo, c
    else:
        if c % fi:
            raise _validate.InvalidArgumentError(
                f"{op}: input depth {c} must be a multiple of filter in-depth {fi}")
        out_channels, groups = fo, c // fi
    return ConvGeometry.build(
        batch=n, input_hw=(h, w), in_channels=c, out_channels=out_channels, kernel_hw=(kh, kw),
        strides=window.strides, dilations=window.dilations, padding=window.padding,
        explicit_paddings=window.pads, groups=groups, depthwise=depthwise,
        data_format=window.data_format,
    )


def conv2d(
    input: Any, filter: Any, strides: Any, padding: Any, explicit_paddings: Any = (),
    data_format: Any = "NHWC", dilations: Any = (1, 1, 1, 1),
) -> np.ndarray:
    """Float64 reference forward (grouped) conv2d, TensorFlow semantics (cross-correlation).

    Examples
    --------
    >>> import numpy as np
    >>> from convviz import reference
    >>> reference.conv2d(np.arange(9.).reshape(1, 3, 3, 1), np.ones((2, 2, 1, 1)),
    ...                  [1, 1, 1, 1], "VALID")[0, :, :, 0]
    array([[ 8., 12.],
           [20., 24.]])
    """
    x = np.asarray(input, dtype=np.float64)
    w = np.asarray(filter, dtype=np.float64)
    g = _forward_geometry(x, w.shape, strides, padding, explicit_paddings, data_format,
                          dilations, "reference.conv2d", depthwise=False)
    x = _nhwc(x, g.data_format)
    y = np.zeros((g.batch, *g.output_hw, g.out_channels))
    for oh, ow, kh, kw, ih, iw in _taps(g):
        for ins, outs in _groups(g):
            y[:, oh, ow, outs] += x[:, ih, iw, ins] @ w[kh, kw, :, outs]
    return _from_nhwc(y, g.data_format)


def depthwise_conv2d(
    input: Any, filter: Any, strides: Any, padding: Any, explicit_paddings: Any = (),
    data_format: Any = "NHWC", dilations: Any = (1, 1, 1, 1),
) -> np.ndarray:
    """Float64 reference forward depthwise conv2d; filter ``[KH, KW, C, M]``.

    Examples
    --------
    >>> import numpy as np
    >>> from convviz import reference
    >>> reference.depthwise_conv2d(np.ones((1, 3, 3, 2)), np.ones((2, 2, 2, 1)),
    ...                            [1, 1, 1, 1], "VALID").shape
    (1, 2, 2, 2)
    """
    x = np.asarray(input, dtype=np.float64)
    w = np.asarray(filter, dtype=np.float64)
    g = _forward_geometry(x, w.shape, strides, padding, explicit_paddings, data_format,
                          dilations, "reference.depthwise_conv2d", depthwise=True)
    x = _nhwc(x, g.data_format)
    channels, multiplier = g.in_channels, g.multiplier
    y = np.zeros((g.batch, *g.output_hw, channels, multiplier))
    for oh, ow, kh, kw, ih, iw in _taps(g):
        y[:, oh, ow] += x[:, ih, iw, :, None] * w[kh, kw]
    return _from_nhwc(y.reshape(g.batch, *g.output_hw, channels * multiplier), g.data_format)
