"""The implementations a case times: convviz through its op record, TensorFlow through
``tf.raw_ops``, PyTorch through one small call per op (:data:`TORCH_CALLS`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..ops import OPS
from ..ops._op import window_arguments
from .cases import PADDING, Case


# -- data and callables ----------------------------------------------------------
class NoPeerCall(LookupError):
    """A peer has no call for the case's op (reported in the table, unlike a peer's error)."""


def convviz_call(case: Case, data: dict[str, Any], n_threads: int | None,
                 device: str = "cpu") -> Callable[[], Any]:
    op = case.record
    if device == "gpu":  # the same op on CuPy arrays, timed to completion on the device
        import cupy as cp

        gpu = {k: cp.asarray(v) if k in op.tensors else v for k, v in data.items()}
        call = convviz_call(case, gpu, None)

        def timed() -> Any:
            out = call()
            cp.cuda.runtime.deviceSynchronize()
            return out
        return timed
    # Positional through the record, as the public function calls it: plain
    # lists and strings keep the call on the plan cache's fast path.
    args = (*(data[name] for name in op.args), *window_arguments(case.geometry, PADDING), n_threads)
    if case.precision != "accurate":
        return lambda: op.run(*args, precision=case.precision)
    return lambda: op.run(*args)


def tensorflow_call(case: Case, data: dict[str, Any]) -> Callable[[], Any]:
    """``tf.raw_ops.<tf_name>`` with the op's arguments and TensorFlow's 4-value window, by keyword."""
    import tensorflow as tf

    op = case.record
    if op.tf_name is None:
        raise NoPeerCall("no TensorFlow op")
    raw_op = getattr(tf.raw_ops, op.tf_name)
    strides, padding, explicit_paddings, data_format, dilations = window_arguments(case.geometry, PADDING)
    keywords = {name: tf.constant(value) if name in op.tensors else value for name, value in data.items()}
    keywords.update(strides=strides, padding=padding, explicit_paddings=explicit_paddings,
                    data_format=data_format, dilations=dilations)
    return lambda: raw_op(**keywords).numpy()


@dataclass
class TorchCase:
    """A case in PyTorch's terms: NCHW tensors, channels-last in memory when the case is NHWC
    (so PyTorch runs its oneDNN channels-last kernels, as TensorFlow and convviz get NHWC),
    contiguous NCHW when the case is NCHW."""

    case: Case
    data: dict[str, Any]
    torch: Any
    device: str  # "cpu" or "cuda"

    @property
    def dtype(self) -> Any:
        return getattr(self.torch, self.case.dtype)

    @property
    def stride(self) -> list[int]:
        return [self.case.stride] * 2

    @property
    def dilation(self) -> list[int]:
        return [self.case.dilation] * 2

    @property
    def symmetric_pad(self) -> list[int]:
        """PyTorch pads symmetrically: with SAME's odd extra row it computes on a
        window shifted by one pixel -- the same work, slightly different numbers,
        which is all a timing needs (and the output size is the same)."""
        return [((self.case.k - 1) * self.case.dilation) // 2] * 2

    def _laid_out(self, t: Any) -> Any:
        return t.contiguous(memory_format=self.torch.channels_last) if self.case.data_format == "NHWC" else t

    def _tensor(self, array: np.ndarray) -> Any:
        # Through float32: from_numpy knows no bfloat16.
        return self.torch.from_numpy(np.ascontiguousarray(array).astype(np.float32)).to(self.device, self.dtype)

    def activation(self, name: str) -> Any:
        """The argument ``name`` (an input or output of the convolution) as NCHW."""
        array = self.data[name]
        return self._laid_out(self._tensor(array.transpose(0, 3, 1, 2) if self.case.data_format == "NHWC" else array))

    def weight(self, name: str = "filter") -> Any:
        """The filter argument ``name``, TensorFlow's HWIO, as PyTorch's OIHW."""
        return self._laid_out(self._tensor(self.data[name].transpose(3, 2, 0, 1)))

    def depthwise_weight(self, name: str = "filter") -> Any:
        """A depthwise filter [KH, KW, C, M] as PyTorch's grouped weight (C * M, 1, KH, KW)."""
        kh, kw, c, m = self.data[name].shape
        return self._laid_out(self._tensor(self.data[name].reshape(kh, kw, 1, c * m).transpose(3, 2, 0, 1)))

    def empty(self, shape: tuple[int, ...], laid_out: bool = True) -> Any:
        """A tensor that only lends its shape (and memory format) to an aten call."""
        t = self.torch.empty(shape, dtype=self.dtype, device=self.device)
        return self._laid_out(t) if laid_out else t


def _torch_convolution(t: TorchCase) -> Callable[[], Any]:
    """PyTorch's call for the case's op, read from its record's arguments: a forward op is
    ``torch.nn.functional.conv2d`` (an odd SAME padding padded first, inside the timed call,
    since TensorFlow's result needs it), a gradient aten's ``convolution_backward`` asked
    for that gradient only (the tensor it is not given only lends shape and layout); a
    depthwise op has one group per input channel."""
    record, c, g = t.case.record, t.case, t.case.geometry
    torch, stride, dilation, groups = t.torch, t.stride, t.dilation, g.groups
    if "filter" in record.tensors:
        weight = t.depthwise_weight("filter") if record.depthwise else t.weight("filter")
    elif record.depthwise:
        weight = t.empty((c.c_in * c.c_out_or_mult, 1, c.k, c.k), laid_out=False)
    else:
        weight = t.empty((c.c_out_or_mult, c.c_in // groups, c.k, c.k))
    if record.result_role == "output":
        conv, pad, x = torch.nn.functional.conv2d, torch.nn.functional.pad, t.activation("input")
        top, bottom, left, right = g.pads
        if (top, left) == (bottom, right):
            return lambda: conv(x, weight, None, stride, [top, left], dilation, groups)
        return lambda: conv(pad(x, (left, right, top, bottom)), weight, None, stride, 0, dilation, groups)
    dy = t.activation("out_backprop")
    x = t.activation("input") if "input" in record.tensors else t.empty((c.n, c.c_in, c.h, c.w))
    backward, pad = torch.ops.aten.convolution_backward, t.symmetric_pad
    which = 0 if record.result_role == "input" else 1
    mask = [which == 0, which == 1, False]
    return lambda: backward(dy, x, weight, None, stride, pad, dilation, False, [0, 0], groups, mask)[which]


#: PyTorch's call for each op (by record name), made from the record (``_torch_convolution``).
TORCH_CALLS: dict[str, Callable[[TorchCase], Callable[[], Any]]] = {op.name: _torch_convolution for op in OPS}


def torch_call(case: Case, data: dict[str, Any], device: str = "cpu") -> Callable[[], Any]:
    """PyTorch's native convolution (:data:`TORCH_CALLS`) on the same values; on the GPU, timed to completion."""
    if case.op not in TORCH_CALLS:
        raise NoPeerCall("no PyTorch call (bench.TORCH_CALLS)")
    import torch

    if device == "gpu":
        # cuDNN rounds float32 convolutions' inputs to TF32 (10-bit mantissa) by default on
        # Ampere and later; convviz sums exact float32 products, so PyTorch is timed doing the same.
        torch.backends.cudnn.allow_tf32 = False
    run = TORCH_CALLS[case.op](TorchCase(case, data, torch, "cuda" if device == "gpu" else "cpu"))
    if device != "gpu":
        return run

    def synchronised() -> Any:
        out = run()
        torch.cuda.synchronize()
        return out
    return synchronised


def _load_peers(wanted: list[str], threads: int) -> dict[str, str]:
    """Import the peers; returns {name: version or 'absent: reason'}."""
    status: dict[str, str] = {}
    if "tensorflow" in wanted:
        try:
            os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
            import tensorflow as tf

            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(1)
            status["tensorflow"] = tf.__version__
        except Exception as err:  # not installed, or broken: report, do not fail
            status["tensorflow"] = f"absent: {type(err).__name__}: {err}"[:120]
    if "torch" in wanted:
        try:
            import torch

            torch.set_num_threads(threads)
            status["torch"] = torch.__version__
        except Exception as err:
            status["torch"] = f"absent: {type(err).__name__}: {err}"[:120]
    return status
