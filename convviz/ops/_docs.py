"""One source for the docstring text the ops share (as scipy's ``doccer`` does).

A docstring line holding only ``%(name)s`` is replaced by the entry ``name``
below, indented like the placeholder.  Every op documents its window
arguments (``%(window)s``: the five of them), threads and device
(``%(options)s``) and errors (``%(raises)s``, with its heading) with the
same words.

Examples
--------
>>> from convviz.ops._docs import fill_doc
>>> @fill_doc
... def f():
...     '''Do it.
...
...     Parameters
...     ----------
...     %(n_threads)s
...     '''
>>> print(f.__doc__.splitlines()[4])
    n_threads : int, optional
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from typing import TypeVar

__all__ = ["DOCS", "fill_doc"]

DOCS = {
    "strides": """\
strides : sequence of 4 or 2 ints
    Window step: 4 values in ``data_format`` order with 1 for batch and depth
    (as TensorFlow's raw ops take them), or 2 values ``[height, width]`` (as
    ``tf.nn`` takes them).""",
    "padding": """\
padding : {"SAME", "VALID", "EXPLICIT"}
    SAME puts the odd extra padding row/column at the bottom/right.""",
    "explicit_paddings": """\
explicit_paddings : sequence of 8 ints, optional
    With ``padding="EXPLICIT"``: a (before, after) pair per dimension in
    ``data_format`` order, non-negative, zero for batch and depth (build it with
    :func:`convviz.geometry.explicit_paddings`).  Must be empty otherwise.""",
    "data_format": """\
data_format : {"NHWC", "NCHW"}, optional
    Layout of the 4-D arrays (the filter is always HWIO).""",
    "dilations": """\
dilations : sequence of 4 or 2 ints, optional
    Gap between filter taps, in the same two forms as ``strides``.""",
    "n_threads": """\
n_threads : int, optional
    Threads to use.  None (default) reads, at each call, OpenMP's limit
    (``OMP_NUM_THREADS``, or a ``threadpoolctl`` limit in force) and, unless
    ``OMP_NUM_THREADS`` is set, the CPUs this process may use (affinity and
    container quota).  The result is bitwise the same for any value.""",
    "device": """\
device : {None, "cpu", "gpu"}, optional
    Where to compute.  None (default): on the GPU when the arrays are CuPy
    arrays (the result is then a CuPy array on their device), else on the
    CPU.  "gpu" moves NumPy inputs to the current CUDA device.  Mixing NumPy
    and CuPy arrays is a TypeError; "gpu" without CuPy or without a CUDA
    device raises :class:`convviz.errors.DeviceError`.""",
    "precision": """\
precision : {"accurate", "fast"}, optional
    "accurate" (default): half types are multiplied and summed in float32
    and rounded once.  "fast", where the AVX-512 kernels run: bfloat16 runs
    on the CPU's bfloat16 dot-product instruction (AVX512_BF16
    ``vdpbf16ps``) where it outruns the float32 FMA (measured once): still
    summed in float32, in pairs of output channels, with subnormal values
    flushed to zero, so a result may differ from the accurate one by one
    bfloat16 unit in the last place.  float16 with at least 32 input
    channels per group runs on the float16 FMA (AVX512_FP16
    ``vfmadd231ph``): chains of up to 32 products summed in float16 on
    operands scaled by powers of two, the chains summed in float32; the
    error grows to a few float16 units in the last place (bounds in
    BENCHMARKS.md).  Elsewhere, on the GPU, for other dtypes, and for a
    filter holding NaN or infinity, "fast" computes as "accurate".
    Bitwise the same for any thread count either way.""",
    "raises": """\
Raises
------
InvalidArgumentError
    (a ``ValueError``, :class:`convviz.errors.InvalidArgumentError`) for wrong
    values or shapes: the message names the argument with the expected and
    actual values.  Raised before any allocation or kernel call.
TypeError
    For unsupported or mismatched dtypes and non-integer parameters.""",
    "nonfinite": """\
NaN and infinity propagate exactly as in the float64 reference: a term is
added only for an (output cell, tap) pair that exists, so a NaN in one tap
reaches only the cells that tap touches -- never through the zeros between
dilated taps or through the padding.""",
}

# The window arguments every op takes after its own, and the keyword options after them.
DOCS["window"] = "\n".join(DOCS[name] for name in ("strides", "padding", "explicit_paddings", "data_format",
                                                   "dilations"))
DOCS["options"] = DOCS["n_threads"] + "\n" + DOCS["device"]

_PLACEHOLDER = re.compile(r"^(?P<indent>[ \t]*)%\((?P<name>\w+)\)s[ \t]*$", re.MULTILINE)

F = TypeVar("F", bound=Callable)


def fill_doc(function: F, entries: dict[str, str] | None = None) -> F:
    """Replace each ``%(name)s`` line of ``function``'s docstring by ``DOCS[name]``
    (or ``entries[name]``: an op's own, such as the Returns section its record writes)."""
    doc = function.__doc__
    table = DOCS if entries is None else {**DOCS, **entries}
    if doc:
        def indented(match: re.Match) -> str:
            return textwrap.indent(table[match["name"]], match["indent"])

        function.__doc__ = _PLACEHOLDER.sub(indented, doc)
    return function
