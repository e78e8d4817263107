"""Drop-in namespaces for TensorFlow and MindSpore users.

* :mod:`convviz.compat.tf` -- ``raw_ops.Conv2DBackpropInput``,
  ``raw_ops.DepthwiseConv2dNativeBackpropFilter``, ``nn.conv2d_backprop_input``,
  ``nn.depthwise_conv2d_native_backprop_filter``;
* :mod:`convviz.compat.mindspore` -- ``ops.Conv2DBackpropInput``.

They translate their arguments and call :mod:`convviz.ops`; results are NumPy
arrays.
"""

from . import mindspore, tf

__all__ = ["mindspore", "tf"]
