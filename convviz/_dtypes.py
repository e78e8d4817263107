"""The dtypes convviz computes in, and their names: a module of its own so that the backends,
the validator and the views share them without importing each other."""

from __future__ import annotations

import ml_dtypes
import numpy as np

BFLOAT16: np.dtype = np.dtype(ml_dtypes.bfloat16)
HALF_DTYPES: tuple[np.dtype, ...] = (np.dtype(np.float16), BFLOAT16)
FLOAT_DTYPES: tuple[np.dtype, ...] = (np.dtype(np.float16), BFLOAT16, np.dtype(np.float32), np.dtype(np.float64))
FLOAT_AND_INT32_DTYPES: tuple[np.dtype, ...] = FLOAT_DTYPES + (np.dtype(np.int32),)


def dtype_name(dtype: np.dtype) -> str:
    """A dtype's name as users write it: NumPy's, or the type's name for ml_dtypes' numbers.

    >>> dtype_name(np.dtype(np.float32)), dtype_name(BFLOAT16)
    ('float32', 'bfloat16')
    """
    return getattr(dtype.type, "__name__", str(dtype)) if dtype.kind == "V" else str(dtype)


def dtype_names(dtypes: tuple[np.dtype, ...]) -> str:
    """``float16, bfloat16, ...``: a list of dtypes for a message."""
    return ", ".join(dtype_name(d) for d in dtypes)
