"""TensorFlow-shaped entry points: ``raw_ops`` and ``nn``.

Replace ``tf.raw_ops.Conv2DBackpropInput(...)`` by
``convviz.compat.tf.raw_ops.Conv2DBackpropInput(...)`` with the same keyword
arguments and get a NumPy array with TensorFlow's semantics -- also for the
cases TensorFlow's CPU kernels refuse or get wrong.

Examples
--------
>>> import numpy as np
>>> from convviz.compat import tf
>>> tf.raw_ops.Conv2DBackpropInput(
...     input_sizes=[1, 4, 4, 1], filter=np.ones((3, 3, 1, 1), np.float32),
...     out_backprop=np.ones((1, 2, 2, 1), np.float32), strides=[1, 2, 2, 1],
...     padding="SAME").shape
(1, 4, 4, 1)
"""

from . import nn, raw_ops

__all__ = ["nn", "raw_ops"]
