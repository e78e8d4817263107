"""``tf.raw_ops``-shaped functions: keyword-only, TensorFlow's argument names.

One function per op record with a TensorFlow name (``Op.tf_name``), made from
the record: a raw op's arguments are the op's own (``Op.args``), the window
arguments, the inert TensorFlow attributes the op lists (``Op.tf_attrs``, such
as ``use_cudnn_on_gpu``) and ``name``, all keyword-only.  Strides and
dilations take TensorFlow's 4 values only; Python float lists become float32 as
in TensorFlow; errors name the TensorFlow op.

Examples
--------
>>> from convviz.compat.tf import raw_ops
>>> "Conv2DBackpropInput" in raw_ops.__all__
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...ops import OPS, Op
from ._common import TF_DEFAULT_FLOAT, check_bool, check_four, check_name

# The generic example of a raw op whose record brings no Examples of its own.
_EXAMPLE = """\
Examples
--------
The same call as :func:`convviz.{name}`, with keywords:

>>> import numpy as np
>>> import convviz
>>> from convviz.compat.tf import raw_ops
>>> op = convviz.ops.BY_NAME["{name}"]
>>> args = op.example(np.random.default_rng(0), np.float32)
>>> keywords = dict(zip(op.args + ("strides", "padding", "explicit_paddings",
...                                "data_format", "dilations"), args))
>>> np.array_equal(raw_ops.{tf_name}(**keywords), convviz.{name}(*args))
True
"""


def _raw_op(op: Op) -> Callable[..., np.ndarray]:
    """The ``tf.raw_ops`` function of ``op``, with a real keyword-only signature."""
    assert op.tf_name is not None and op.tf_name.isidentifier()
    inert = ", ".join(f"{attr}: bool = True" for attr in op.tf_attrs)
    parameters = ", ".join([
        *(f"{arg}: Any" for arg in op.args), "strides: Any", "padding: Any", *([inert] if inert else []),
        "explicit_paddings: Any = ()", 'data_format: str = "NHWC"', "dilations: Any = (1, 1, 1, 1)",
        "name: str | None = None"])
    op_name = repr(op.tf_name)
    checks = "".join(f"    check_bool({attr}, {attr!r}, {op_name})\n" for attr in op.tf_attrs)
    source = (
        f"def {op.tf_name}(*, {parameters}) -> np.ndarray:\n"
        f"{checks}"
        f"    check_name(name, {op_name})\n"
        f"    check_four(strides, 'strides', {op_name})\n"
        f"    check_four(dilations, 'dilations', {op_name})\n"
        f"    return _RUN[{op_name}]({', '.join(op.args)}, strides, padding, explicit_paddings, data_format,\n"
        f"                          dilations, None, op={op_name}, default_float=TF_DEFAULT_FLOAT)\n")
    _RUN[op.tf_name] = op.run
    # Made in this module's namespace, so that it is this module's function
    # (for doctest, pickle and help) and finds the checks above.
    exec(compile(source, __file__, "exec"), globals())  # noqa: S102 -- our own template, no user input
    function: Callable[..., np.ndarray] = globals()[op.tf_name]
    function.__doc__ = _docstring(op)
    return function


def _docstring(op: Op) -> str:
    inert = "".join(f"``{attr}`` and " for attr in op.tf_attrs) or "``name`` is accepted (and\n"
    if op.tf_attrs:
        inert += "``name`` are accepted (and\n"
    doc = (
        f"``tf.raw_ops.{op.tf_name}``: the {op.result} of :func:`convviz.{op.name}`.\n\n"
        f"Same keyword-only arguments as TensorFlow's; {inert}"
        "type-checked) but do not change the result.  ``strides`` and ``dilations`` take\n"
        "4 values, as TensorFlow's raw ops do.  Python float lists become float32, as\n"
        f"in TensorFlow.  See :func:`convviz.{op.name}` for the semantics.\n\n"
        "Returns\n-------\nnumpy.ndarray\n"
        f"    The {op.result}, in the dtype of the arrays.\n")
    if op.tf_notes:
        doc += "\nNotes\n-----\n" + op.tf_notes.strip("\n") + "\n"
    if op.tf_examples:
        doc += "\n" + op.tf_examples.strip("\n") + "\n"
    else:
        doc += "\n" + _EXAMPLE.format(name=op.name, tf_name=op.tf_name)
    return doc


_RUN: dict[str, Callable[..., np.ndarray]] = {}  # each raw op's pipeline entry
__all__ = sorted(_raw_op(op).__name__ for op in OPS if op.tf_name is not None)


def __getattr__(name: str) -> Callable[..., np.ndarray]:
    # Never reached for a raw op (they are module globals); it tells type
    # checkers that the raw ops, made at import, are functions returning arrays.
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
