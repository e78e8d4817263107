"""Types of the Cython kernel module ``convviz.ops._depthwise_input_grad`` (see ``_depthwise_input_grad.pyx``)."""

from ._kernel_types import WindowKernel
from ._kernel_types import last_scratch_bytes as last_scratch_bytes

# (out_backprop, filter) -> input gradient [N, H, W, C]
depthwise_input_grad: WindowKernel
