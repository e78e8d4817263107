"""Drop-in namespaces for TensorFlow, MindSpore and PyTorch users.

* :mod:`convviz.compat.tf` -- ``raw_ops.<TensorFlow op>`` for every op record
  (``Conv2D``, ``Conv2DBackpropInput``, ...) and ``nn.conv2d``,
  ``nn.conv2d_backprop_input``, ``nn.conv2d_backprop_filter``,
  ``nn.conv2d_transpose``, ``nn.depthwise_conv2d``,
  ``nn.depthwise_conv2d_backprop_input``, ``nn.depthwise_conv2d_backprop_filter``;
* :mod:`convviz.compat.mindspore` -- ``ops.Conv2D``, ``ops.Conv2DBackpropInput``,
  ``ops.Conv2DTranspose``;
* :mod:`convviz.compat.torch` -- ``conv2d_input`` and ``conv2d_weight``
  (``torch.nn.grad``), ``conv_transpose2d`` (``torch.nn.functional``).

They translate their arguments and call :mod:`convviz.ops`; results are NumPy
arrays.
"""

from . import mindspore, tf, torch

__all__ = ["mindspore", "tf", "torch"]
