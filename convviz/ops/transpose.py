"""Transposed convolution with PyTorch's semantics (``torch.nn.functional.conv_transpose2d``).

A transposed convolution *is* the input gradient of a convolution: it scatters
each input cell through the filter, exactly as ``conv2d_backprop_input``
scatters ``out_backprop``.  So this module only translates PyTorch's arguments
(NCHW, weight ``(C_in, C_out / groups, kH, kW)``, symmetric ``padding``,
``output_padding``) into that op's and runs its kernels (CPU or GPU); the
geometry of ``output_padding`` is explained in :func:`conv_transpose2d`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _validate as v
from .._backends import cuda
from ..errors import InvalidArgumentError
from ..geometry import explicit_paddings
from .input_grad import OP as INPUT_GRAD

__all__ = ["conv_transpose2d"]

OP_NAME = "conv_transpose2d"


def transposed_output_size(size: int, kernel: int, stride: int, padding: int, output_padding: int,
                           dilation: int) -> int:
    """PyTorch's output size of a transposed convolution along one axis.

    ``(size - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1``.

    Examples
    --------
    >>> from convviz.ops.transpose import transposed_output_size
    >>> [transposed_output_size(4, 3, 2, 1, op, 1) for op in (0, 1)]
    [7, 8]
    """
    return (size - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1


def translate(input: Any, weight: Any, bias: Any, stride: Any, padding: Any, output_padding: Any, groups: Any,
              dilation: Any) -> tuple[tuple, tuple[int, ...], bool, Any]:
    """Check PyTorch's arguments; return ``conv2d_backprop_input``'s, the output
    shape, whether ``input`` had no batch dimension, and the checked bias (or None)."""
    # Python lists become float32, PyTorch's default dtype.
    input, weight, dtype = v.tensor_pair(input, "input", weight, OP_NAME, v.FLOAT_AND_INT32_DTYPES, np.float32,
                                         second_name="weight")
    if input.ndim not in (3, 4):
        raise InvalidArgumentError(f"{OP_NAME}: input must be 3-D (C_in, H, W) or 4-D (N, C_in, H, W), got "
                                   f"{input.ndim}-D with shape {tuple(input.shape)}")
    unbatched = input.ndim == 3
    if unbatched:
        input = input[None]
    if weight.ndim != 4:
        raise InvalidArgumentError(f"{OP_NAME}: weight must be 4-D (C_in, C_out / groups, kH, kW), got "
                                   f"{weight.ndim}-D with shape {tuple(weight.shape)}")
    strides = v.int_pair(stride, "stride", OP_NAME, low=1)
    pads = v.int_pair(padding, "padding", OP_NAME, low=0)
    extra = v.int_pair(output_padding, "output_padding", OP_NAME, low=0)
    dilations = v.int_pair(dilation, "dilation", OP_NAME, low=1)
    group_count = v.as_int(groups, "groups", OP_NAME)
    n, c_in, h, w = input.shape
    w_in, c_out_g, kh, kw = weight.shape
    if group_count < 1 or c_in % group_count:
        raise InvalidArgumentError(f"{OP_NAME}: groups must be a positive divisor of the input's channels "
                                   f"({c_in}), got {group_count}")
    if w_in != c_in:
        raise InvalidArgumentError(f"{OP_NAME}: weight.shape[0] must equal the input's channels ({c_in}), got "
                                   f"{w_in} (weight is (C_in, C_out / groups, kH, kW))")
    for axis, (s, d, op) in enumerate(zip(strides, dilations, extra)):
        if op >= max(s, d):
            raise InvalidArgumentError(
                f"{OP_NAME}: output_padding must be smaller than stride or dilation on each axis, got "
                f"output_padding[{axis}] = {op} with stride {s} and dilation {d}")
    sizes = [transposed_output_size(size, k, s, p, op, d)
             for size, k, s, p, op, d in zip((h, w), (kh, kw), strides, pads, extra, dilations)]
    if min(sizes) < 1:
        raise InvalidArgumentError(f"{OP_NAME}: the output would be {sizes[0]}x{sizes[1]}; padding {pads} is too "
                                   f"large for this input, kernel, stride and dilation")
    c_out = c_out_g * group_count
    if bias is not None:
        bias = v.as_tensor(bias, "bias", OP_NAME, like=input)
        if tuple(bias.shape) != (c_out,):
            raise InvalidArgumentError(f"{OP_NAME}: bias must have shape ({c_out},) (C_out), got "
                                       f"{tuple(bias.shape)}")
        v.check_same_dtype(bias, "bias", input, "input", OP_NAME)
    # The forward conv that this transposes has pads (p, p - output_padding).  Where
    # output_padding exceeds p, the last output_padding - p rows (columns) are
    # reached by no window: they are left out of the scatter and added as zeros.
    crop = (max(extra[0] - pads[0], 0), max(extra[1] - pads[1], 0))
    forward_pads = (pads[0], max(pads[0] - extra[0], 0), pads[1], max(pads[1] - extra[1], 0))
    filt = weight.transpose(2, 3, 1, 0)  # HWIO of the forward conv: (kH, kW, C_out / groups, C_in)
    args = ([n, c_out, sizes[0] - crop[0], sizes[1] - crop[1]], filt, input, list(strides), "EXPLICIT",
            explicit_paddings(forward_pads, "NCHW"), "NCHW", list(dilations))
    return args, (n, c_out, *sizes), unbatched, bias


def conv_transpose2d(
    input: Any,
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
    *,
    n_threads: int | None = None,
    device: str | None = None,
    precision: str = "accurate",
) -> Any:
    """2-D transposed convolution with PyTorch's semantics (``torch.nn.functional.conv_transpose2d``).

    Each input cell is scattered through the filter into the output: the
    gradient of ``conv2d`` with respect to its input, applied to ``input``
    (which is why it is computed by :func:`conv2d_backprop_input`'s kernels).

    Parameters
    ----------
    input : array_like
        ``(N, C_in, H, W)``, or ``(C_in, H, W)`` without a batch dimension;
        float16, bfloat16, float32, float64 or int32.
    weight : array_like
        ``(C_in, C_out / groups, kH, kW)``, same dtype as ``input``.
    bias : array_like, optional
        ``(C_out,)``, added to every output cell of its channel (after the sum,
        in the output's dtype).
    stride, padding, dilation : int or pair of ints, optional
        As in the convolution this transposes; here ``padding`` removes that
        many rows and columns from each border of the full scatter.
    output_padding : int or pair of ints, optional
        Rows (columns) added at the bottom (right) of the output; must be
        smaller than ``stride`` or ``dilation``.  See Notes.
    groups : int, optional
        Blocked connections: ``C_in`` and ``C_out`` split into ``groups``.
    n_threads : int, optional
        CPU threads (the result is bitwise the same for any value); see
        :func:`conv2d_backprop_input`.
    device : {None, "cpu", "gpu"}, optional
        Where to compute, as in :func:`conv2d_backprop_input`.
    precision : {"accurate", "fast"}, optional
        "fast" lets bfloat16 run on the CPU's bfloat16 dot-product
        instruction, as in :func:`conv2d_backprop_input`.

    Returns
    -------
    numpy.ndarray
        ``(N, C_out, H_out, W_out)`` (or without ``N``), dtype of ``input``, with
        ``H_out = (H - 1) * stride - 2 * padding + dilation * (kH - 1) + output_padding + 1``.

    Raises
    ------
    InvalidArgumentError
        A shape, size or value that does not fit (named, with the expected and
        the actual value), before any allocation.
    TypeError
        A wrong type (a float for an int, different dtypes).

    See Also
    --------
    conv2d_backprop_input : the same scatter with TensorFlow's arguments.
    convviz.ops.transpose.transposed_output_size : the output size, per axis.

    Notes
    -----
    **Why output_padding exists.**  A convolution with stride ``s`` maps
    several input sizes to the same output size: with ``k = 3, s = 2,
    padding = 1``, inputs of 7 and 8 rows both give ``floor((n + 2 - 3) / 2) + 1
    = 4`` output rows (with 8 rows the bottom padding row is read by no window,
    with 7 the last window ends on it).  Its transpose must therefore be told which of those
    sizes to produce: ``output_padding = 0`` gives the smallest (7), and each
    step adds one more row at the bottom (8), up to ``max(stride, dilation) - 1``.
    The added rows get only what the filter scatters into them -- zero where no
    window of the forward convolution reaches.

    Examples
    --------
    A 2x2 input scattered through a 3x3 filter of ones with stride 2:
    overlapping windows add up in the shared row and column.

    >>> import numpy as np
    >>> import convviz
    >>> y = convviz.conv_transpose2d(np.ones((1, 1, 2, 2)), np.ones((1, 1, 3, 3)), stride=2)
    >>> y[0, 0]
    array([[1., 1., 2., 1., 1.],
           [1., 1., 2., 1., 1.],
           [2., 2., 4., 2., 2.],
           [1., 1., 2., 1., 1.],
           [1., 1., 2., 1., 1.]])

    ``padding=1`` crops one border row and column; ``output_padding=1`` asks for
    the larger of the two sizes that stride 2 cannot tell apart:

    >>> [convviz.conv_transpose2d(np.ones((1, 1, 2, 2)), np.ones((1, 1, 3, 3)), stride=2, padding=1,
    ...                           output_padding=op).shape[-1] for op in (0, 1)]
    [3, 4]
    """
    args, shape, unbatched, bias = translate(input, weight, bias, stride, padding, output_padding, groups, dilation)
    out = INPUT_GRAD.run(*args, n_threads, op=OP_NAME, default_float=np.float32, device=device,
                         precision=precision)
    if tuple(out.shape) != shape:  # rows (columns) that no window reaches: zeros
        xp = cuda.cupy_module() if cuda.is_cupy_array(out) else np
        full = xp.zeros(shape, dtype=out.dtype)
        full[:, :, :out.shape[2], :out.shape[3]] = out
        out = full
    if bias is not None:
        # Added in the output's dtype, on the output's device.
        if cuda.is_cupy_array(out) and not cuda.is_cupy_array(bias):
            bias = cuda.cupy_module().asarray(bias)
        out += bias[None, :, None, None]
    return out[0] if unbatched else out
