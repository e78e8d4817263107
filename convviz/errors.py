"""The exceptions convviz raises on purpose.

Both are also importable from :mod:`convviz` itself.  Wrong types and dtypes
raise the built-in ``TypeError``; everything else convviz refuses is one of these.
"""

from __future__ import annotations

__all__ = ["DeviceError", "InvalidArgumentError"]


class InvalidArgumentError(ValueError):
    """An argument has a wrong value or shape.

    A ``ValueError``, so ``except ValueError`` catches it; the message names the
    argument, the expected and the actual value.

    Examples
    --------
    >>> import numpy as np, convviz
    >>> try:
    ...     convviz.conv2d_backprop_input([1, 4, 4, 1], np.ones((3, 3, 1, 1)),
    ...                                   np.ones((1, 3, 3, 1)), [1, 1, 1, 1], "SAME")
    ... except convviz.errors.InvalidArgumentError as err:
    ...     print(err)
    conv2d_backprop_input: out_backprop must have shape (1, 4, 4, 1) (computed from input_sizes, filter, strides, dilations and padding), got (1, 3, 3, 1)
    """


class DeviceError(RuntimeError):
    """A GPU was asked for but cannot be used (no CuPy, or no CUDA device).

    Examples
    --------
    >>> import numpy as np, convviz
    >>> issubclass(convviz.errors.DeviceError, RuntimeError)
    True
    """
