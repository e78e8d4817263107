"""Types of the Cython kernel module ``convviz.ops._depthwise_filter_grad`` (see ``_depthwise_filter_grad.pyx``)."""

from ._kernel_types import TapsKernel
from ._kernel_types import last_scratch_bytes as last_scratch_bytes

# (input, out_backprop) -> filter gradient [KH, KW, C, M] (C-contiguous); count: the reduction's blocks
depthwise_filter_grad: TapsKernel
