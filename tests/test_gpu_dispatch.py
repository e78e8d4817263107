"""Device dispatch, tested on the CPU: which path a call takes, and which error it raises.

A stand-in "cupy" module and array type let these run without CuPy or a GPU;
tests/test_gpu.py runs the real CUDA kernels when a device is present.
"""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import convviz
from convviz import ops
from convviz._backends import cuda
from convviz.compat import tf as cvtf

F32 = np.float32


class FakeCupyArray:
    """Looks like a CuPy array to convviz's checks (shape, dtype, module name)."""

    __module__ = "cupy._core.core"

    def __init__(self, array: np.ndarray):
        self._a = np.asarray(array)
        self.shape, self.dtype, self.ndim, self.size = self._a.shape, self._a.dtype, self._a.ndim, self._a.size

    def transpose(self, *axes):
        return FakeCupyArray(self._a.transpose(*axes))


class _FakePlan:
    def run(self, *tensors):
        return "gpu-result"


def _fake_cupy(devices: int):
    module = types.ModuleType("cupy")
    runtime = types.SimpleNamespace(getDeviceCount=lambda: devices, getDevice=lambda: 0)
    module.cuda = types.SimpleNamespace(runtime=runtime, Device=lambda *a: types.SimpleNamespace(
        mem_info=(2**33, 2**34), id=0))
    module.__version__ = "0.0-fake"
    return module


@pytest.fixture
def no_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # "import cupy" raises ImportError


@pytest.fixture
def fake_gpu(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(devices=1))
    calls = []
    for op in ops.OPS:  # every op's GPU plan records its validated call instead
        monkeypatch.setattr(op, "plan_gpu", lambda call, name=op.name: calls.append((name, call)) or _FakePlan())
    return calls


ARGS = dict(input_sizes=[1, 4, 4, 2], strides=[1, 1, 1, 1], padding="SAME")


def test_numpy_arrays_stay_on_the_cpu(fake_gpu):
    dx = convviz.conv2d_backprop_input(filter=np.ones((3, 3, 2, 4), F32), out_backprop=np.ones((1, 4, 4, 4), F32),
                                       **ARGS)
    assert isinstance(dx, np.ndarray) and not fake_gpu


def test_cupy_arrays_go_to_the_gpu_after_the_same_validation(fake_gpu):
    filt, dy = FakeCupyArray(np.ones((3, 3, 2, 4), F32)), FakeCupyArray(np.ones((1, 4, 4, 4), F32))
    assert convviz.conv2d_backprop_input(filter=filt, out_backprop=dy, **ARGS) == "gpu-result"
    kind, call = fake_gpu[-1]
    assert kind == "conv2d_backprop_input" and call.geometry.output_shape == (1, 4, 4, 4) and call.filter is filt
    with pytest.raises(convviz.InvalidArgumentError, match="out_backprop must have shape"):
        convviz.conv2d_backprop_input(filter=filt, out_backprop=FakeCupyArray(np.ones((1, 3, 3, 4), F32)), **ARGS)
    x = FakeCupyArray(np.ones((1, 4, 4, 2), F32))
    assert convviz.depthwise_conv2d_native_backprop_filter(
        x, [3, 3, 2, 2], dy, [1, 1, 1, 1], "SAME") == "gpu-result"
    assert fake_gpu[-1][0] == "depthwise_conv2d_native_backprop_filter"


def test_device_gpu_sends_numpy_inputs_to_the_gpu(fake_gpu):
    assert convviz.conv2d_backprop_input(filter=np.ones((3, 3, 2, 4), F32), out_backprop=np.ones((1, 4, 4, 4), F32),
                                         device="gpu", **ARGS) == "gpu-result"


def test_compat_namespaces_dispatch_the_same_way(fake_gpu):
    filt, dy = FakeCupyArray(np.ones((3, 3, 2, 4), F32)), FakeCupyArray(np.ones((1, 4, 4, 4), F32))
    assert cvtf.raw_ops.Conv2DBackpropInput(filter=filt, out_backprop=dy, **ARGS) == "gpu-result"
    assert cvtf.nn.conv2d_backprop_input(ARGS["input_sizes"], filt, dy, [1, 1, 1, 1], "SAME") == "gpu-result"
    from convviz.compat.mindspore import ops as msops
    op = msops.Conv2DBackpropInput(out_channel=4, kernel_size=3, pad_mode="same")
    assert op(FakeCupyArray(np.ones((1, 4, 4, 4), F32)), FakeCupyArray(np.ones((4, 2, 3, 3), F32)),
              (1, 2, 4, 4)) == "gpu-result"


def test_mixing_numpy_and_cupy_is_a_type_error(fake_gpu):
    with pytest.raises(TypeError, match="same device"):
        convviz.conv2d_backprop_input(filter=np.ones((3, 3, 2, 4), F32),
                                      out_backprop=FakeCupyArray(np.ones((1, 4, 4, 4), F32)), **ARGS)


def test_device_cpu_with_cupy_arrays_is_a_type_error(fake_gpu):
    with pytest.raises(TypeError, match="device='cpu'"):
        convviz.conv2d_backprop_input(filter=FakeCupyArray(np.ones((3, 3, 2, 4), F32)),
                                      out_backprop=FakeCupyArray(np.ones((1, 4, 4, 4), F32)), device="cpu", **ARGS)


def test_gpu_without_cupy_is_a_device_error(no_cupy):
    with pytest.raises(convviz.DeviceError, match="CuPy is not installed"):
        convviz.conv2d_backprop_input(filter=np.ones((3, 3, 2, 4), F32), out_backprop=np.ones((1, 4, 4, 4), F32),
                                      device="gpu", **ARGS)
    assert issubclass(convviz.DeviceError, RuntimeError)
    assert convviz.show_versions(as_dict=True)["cupy"] is None


def test_gpu_without_a_device_is_a_device_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(devices=0))
    with pytest.raises(convviz.DeviceError, match="needs a CUDA device"):
        convviz.depthwise_conv2d_native_backprop_filter(np.ones((1, 4, 4, 2)), [3, 3, 2, 1], np.ones((1, 4, 4, 2)),
                                                        [1] * 4, "SAME", device="gpu")


def test_bad_device_names(fake_gpu):
    with pytest.raises(convviz.InvalidArgumentError, match="device must be"):
        convviz.conv2d_backprop_input(filter=np.ones((3, 3, 2, 4), F32), out_backprop=np.ones((1, 4, 4, 4), F32),
                                      device="tpu", **ARGS)


def test_cupy_arrays_are_recognised_by_module():
    assert cuda.is_cupy_array(FakeCupyArray(np.ones(2)))
    assert not cuda.is_cupy_array(np.ones(2)) and not cuda.is_cupy_array([1.0])
    assert ops.select_device("op", None, np.ones(2), [1.0]) == "cpu"


def test_numpy_subclasses_never_look_for_a_gpu_plan(monkeypatch):
    # An ndarray subclass misses the CPU plan cache; the GPU plan lookup must turn it away by
    # its type at once (asking for CuPy's device without CuPy cost 60 us of failed imports).
    class Sub(np.ndarray):
        pass

    monkeypatch.setattr(cuda, "current_device", lambda: pytest.fail("looked for a GPU plan for NumPy arrays"))
    dy = np.ones((1, 4, 4, 4), F32).view(Sub)
    for _ in range(2):
        dx = convviz.conv2d_backprop_input(filter=np.ones((3, 3, 2, 4), F32), out_backprop=dy, **ARGS)
    assert isinstance(dx, np.ndarray)
