"""PyTorch-shaped functions: ``torch.nn.grad.conv2d_input``, ``conv2d_weight`` and
``torch.nn.functional.conv_transpose2d``, computed by convviz.

PyTorch's arguments (NCHW, weight ``(C_out, C_in / groups, kH, kW)``, symmetric
int-or-pair ``padding``, ``groups``) become TensorFlow's: the weight is an HWIO
view (no copy), the padding explicit, and :func:`convviz.conv2d_backprop_input`
or :func:`convviz.conv2d_backprop_filter` computes with ``data_format="NCHW"``.
Arguments may be NumPy arrays, anything with ``__array__`` (CPU torch tensors,
also with ``requires_grad``; bfloat16 ones become ``ml_dtypes.bfloat16``) or
CuPy arrays (computed on their GPU); results are NumPy (or CuPy) arrays.
Python float lists become float32, PyTorch's default dtype.  Errors name the
PyTorch function; those about sizes come from the op and speak of its
arguments (``out_backprop`` is ``grad_output``).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from .. import ops
from .._validate import BFLOAT16, as_int, as_int_list, check_range, check_rank4, tensor_pair
from ..errors import InvalidArgumentError
from ..geometry import explicit_paddings
from ..ops._docs import fill_doc
from ..ops.transpose import conv_transpose2d as _conv_transpose2d
from ._window import spatial_values

__all__ = ["conv2d_input", "conv2d_weight", "conv_transpose2d"]


def _array(value: Any, name: str, op: str) -> Any:
    """A torch tensor as a NumPy array (detached, no copy); anything else as it is."""
    if type(value).__module__.split(".")[0] != "torch" or not hasattr(value, "detach"):
        return value
    tensor = value.detach()
    if tensor.device.type != "cpu":
        raise TypeError(f"{op}: {name} is a tensor on {tensor.device}; give a CPU tensor, a NumPy array, "
                        "or a CuPy array to compute on the GPU")
    if str(tensor.dtype) == "torch.bfloat16":  # NumPy has no bfloat16: the same bits as ml_dtypes'
        import torch

        return tensor.view(torch.int16).numpy().view(BFLOAT16)
    return tensor.numpy()


def _pair(value: Any, name: str, op: str, low: int) -> tuple[int, int]:
    """PyTorch's int, 1 or 2 ints (``_pair`` and ATen's expansion), each at least ``low``."""
    if isinstance(value, (str, bytes)):
        # torch.nn.grad hands padding straight to ATen, which takes no "same"/"valid".
        raise TypeError(f"{op}: {name} must be an int or 2 ints, got {type(value).__name__} {value!r} "
                        "(torch.nn.grad takes no 'same' or 'valid' strings)")
    h, w = spatial_values(value, name, op)
    check_range((h, w), name, op, low=low)
    return h, w


def _tensors(first: Any, first_name: str, grad_output: Any, record: str, op: str) -> tuple[Any, Any]:
    """The op's two tensors as arrays of one of its dtypes (torch tensors converted)."""
    first, grad_output, _ = tensor_pair(_array(first, first_name, op), first_name,
                                        _array(grad_output, "grad_output", op), op, ops.BY_NAME[record].dtypes,
                                        np.float32, second_name="grad_output")
    return first, grad_output


def _run(record: str, op: str, args: tuple, stride: Any, padding: Any, dilation: Any) -> Any:
    """Run the op record ``record`` on TensorFlow's arguments for PyTorch's window (NCHW, explicit padding)."""
    sh, sw = _pair(stride, "stride", op, 1)
    ph, pw = _pair(padding, "padding", op, 0)
    dh, dw = _pair(dilation, "dilation", op, 1)
    return ops.BY_NAME[record].run(*args, [1, 1, sh, sw], "EXPLICIT", explicit_paddings((ph, ph, pw, pw), "NCHW"),
                                   "NCHW", [1, 1, dh, dw], None, op=op, default_float=np.float32)


def _check_groups(groups: Any, in_channels: int, weight_shape: tuple[int, ...], source: str, op: str) -> None:
    """PyTorch's grouped-conv checks on the weight shape ``(C_out, C_in / groups, kH, kW)``."""
    count = as_int(groups, "groups", op)
    if count < 1:
        raise InvalidArgumentError(f"{op}: groups must be positive, got {count}")
    if weight_shape[0] % count:
        raise InvalidArgumentError(f"{op}: the weight's C_out ({weight_shape[0]}) must be divisible by groups "
                                   f"({count})")
    if in_channels != weight_shape[1] * count:
        raise InvalidArgumentError(
            f"{op}: {source} has {in_channels} channels, but the weight {tuple(weight_shape)} with groups={count} "
            f"expects C_in / groups * groups = {weight_shape[1] * count}")


# The window arguments of torch.nn.grad's functions, documented once.
_WINDOW_DOC = {"window": """\
stride, padding, dilation : int or pair of ints, optional
    As in ``torch.nn.functional.conv2d``; ``padding`` is added on both sides.
groups : int, optional
    Blocked connections from input to output channels."""}


def _four_ints(value: Any, name: str, layout: str, op: str) -> tuple[int, ...]:
    sizes = as_int_list(value, name, op)
    if len(sizes) != 4:
        raise InvalidArgumentError(f"{op}: {name} must have 4 values {layout}, got {len(sizes)}: {list(sizes)}")
    return sizes


@partial(fill_doc, entries=_WINDOW_DOC)
def conv2d_input(
        input_size: Any, weight: Any, grad_output: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
        groups: int = 1) -> np.ndarray:
    """``torch.nn.grad.conv2d_input``: gradient of conv2d with respect to its input.

    Parameters
    ----------
    input_size : sequence of 4 ints
        Shape of the forward input, ``(N, C_in, H, W)``.
    weight : array_like
        ``(C_out, C_in / groups, kH, kW)``.
    grad_output : array_like
        Gradient with respect to the output, ``(N, C_out, H_out, W_out)``,
        same dtype as ``weight``.
    %(window)s

    Returns
    -------
    numpy.ndarray
        ``(N, C_in, H, W)``, dtype of ``weight``.  Input rows and columns that
        no window reads (when the stride does not tile the input) get zero.

    Examples
    --------
    >>> import numpy as np
    >>> from convviz.compat import torch as ctorch
    >>> dx = ctorch.conv2d_input((1, 1, 4, 4), np.ones((1, 1, 3, 3), np.float32),
    ...                          np.ones((1, 1, 4, 4), np.float32), padding=1)
    >>> dx[0, 0]
    array([[4., 6., 6., 4.],
           [6., 9., 9., 6.],
           [6., 9., 9., 6.],
           [4., 6., 6., 4.]], dtype=float32)
    """
    op = "conv2d_input"
    weight, grad_output = _tensors(weight, "weight", grad_output, "conv2d_backprop_input", op)
    sizes = _four_ints(input_size, "input_size", "(N, C_in, H, W)", op)
    check_rank4(weight, "weight", op, "(C_out, C_in / groups, kH, kW)")
    _check_groups(groups, sizes[1], weight.shape, "input_size", op)
    return _run("conv2d_backprop_input", op, (list(sizes), weight.transpose(2, 3, 1, 0), grad_output),
                stride, padding, dilation)


@partial(fill_doc, entries=_WINDOW_DOC)
def conv2d_weight(
        input: Any, weight_size: Any, grad_output: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
        groups: int = 1) -> np.ndarray:
    """``torch.nn.grad.conv2d_weight``: gradient of conv2d with respect to its weight.

    Parameters
    ----------
    input : array_like
        The forward input, ``(N, C_in, H, W)``.
    weight_size : sequence of 4 ints
        Shape of the weight, ``(C_out, C_in / groups, kH, kW)``.
    grad_output : array_like
        Gradient with respect to the output, ``(N, C_out, H_out, W_out)``,
        same dtype as ``input``.
    %(window)s

    Returns
    -------
    numpy.ndarray
        ``weight_size``, dtype of ``input``: a ``(C_out, C_in / groups, kH, kW)``
        view of the HWIO filter gradient :func:`convviz.conv2d_backprop_filter`
        computes.

    Examples
    --------
    Each of the 2x2 taps sees four input cells through a 2x2 output:

    >>> import numpy as np
    >>> from convviz.compat import torch as ctorch
    >>> dw = ctorch.conv2d_weight(np.ones((1, 1, 3, 3), np.float32), (1, 1, 2, 2),
    ...                           np.ones((1, 1, 2, 2), np.float32))
    >>> dw[0, 0]
    array([[4., 4.],
           [4., 4.]], dtype=float32)
    """
    op = "conv2d_weight"
    input, grad_output = _tensors(input, "input", grad_output, "conv2d_backprop_filter", op)
    c_out, c_in_per_group, kh, kw = _four_ints(weight_size, "weight_size", "(C_out, C_in / groups, kH, kW)", op)
    check_rank4(input, "input", op, "(N, C_in, H, W)")
    _check_groups(groups, input.shape[1], (c_out, c_in_per_group, kh, kw), "input", op)
    hwio = _run("conv2d_backprop_filter", op, (input, [kh, kw, c_in_per_group, c_out], grad_output),
                stride, padding, dilation)
    return hwio.transpose(3, 2, 0, 1)


def conv_transpose2d(
        input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0, output_padding: Any = 0,
        groups: int = 1, dilation: Any = 1) -> np.ndarray:
    """``torch.nn.functional.conv_transpose2d``: :func:`convviz.conv_transpose2d`,
    also for torch tensors.

    ``input`` is ``(N, C_in, H, W)`` or ``(C_in, H, W)``, ``weight``
    ``(C_in, C_out / groups, kH, kW)``; see :func:`convviz.conv_transpose2d`
    for the arguments and the geometry of ``output_padding``.

    Examples
    --------
    >>> import numpy as np
    >>> from convviz.compat import torch as ctorch
    >>> ctorch.conv_transpose2d(np.ones((1, 1, 2, 2), np.float32), np.ones((1, 1, 3, 3), np.float32),
    ...                         stride=2, padding=1, output_padding=1)[0, 0]
    array([[1., 2., 1., 1.],
           [2., 4., 2., 2.],
           [1., 2., 1., 1.],
           [1., 2., 1., 1.]], dtype=float32)
    """
    op = "conv_transpose2d"
    return _conv_transpose2d(_array(input, "input", op), _array(weight, "weight", op),
                             None if bias is None else _array(bias, "bias", op),
                             stride, padding, output_padding, groups, dilation)
