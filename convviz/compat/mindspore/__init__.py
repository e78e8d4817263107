"""MindSpore-shaped entry points: ``ops.Conv2D``, ``ops.Conv2DBackpropInput``, ``ops.Conv2DTranspose``.

Examples
--------
>>> import numpy as np
>>> from convviz.compat.mindspore import ops
>>> op = ops.Conv2DBackpropInput(out_channel=32, kernel_size=3)
>>> op(np.ones([10, 32, 30, 30], np.float32), np.ones([32, 32, 3, 3], np.float32),
...    (10, 32, 32, 32)).shape
(10, 32, 32, 32)
"""

from . import ops

__all__ = ["ops"]
