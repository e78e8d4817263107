"""Types of the Cython kernel module ``convviz.ops._depthwise_forward`` (see ``_depthwise_forward.pyx``)."""

from ._kernel_types import WindowKernel
from ._kernel_types import last_scratch_bytes as last_scratch_bytes

# (input, filter) -> output [N, OH, OW, C * M]
depthwise_forward: WindowKernel
