"""conv_transpose2d: PyTorch's transposed convolution, run by the input-gradient kernels.

Checked against PyTorch when installed (random geometries: groups, dilation,
output_padding, bias), against the float64 reference of the input gradient
for every dtype, as the adjoint of conv2d, and for its own errors.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import DTYPES, assert_close_to_reference

import convviz
from convviz import reference
from convviz.geometry import explicit_paddings
from convviz.ops.transpose import transposed_output_size


def _random_case(rng):
    groups = int(rng.integers(1, 4))
    c_in, c_out = groups * int(rng.integers(1, 3)), groups * int(rng.integers(1, 3))
    kernel = (int(rng.integers(1, 5)), int(rng.integers(1, 5)))
    stride = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
    dilation = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
    padding = (int(rng.integers(0, 3)), int(rng.integers(0, 3)))
    extra = tuple(int(rng.integers(0, max(s, d))) for s, d in zip(stride, dilation))
    hw = (int(rng.integers(1, 7)), int(rng.integers(1, 7)))
    return groups, c_in, c_out, kernel, stride, dilation, padding, extra, hw


def test_agrees_with_pytorch_on_random_geometries(rng):
    torch = pytest.importorskip("torch")
    checked = 0
    for _ in range(200):
        groups, c_in, c_out, kernel, stride, dilation, padding, extra, hw = _random_case(rng)
        x = rng.standard_normal((2, c_in, *hw))
        w = rng.standard_normal((c_in, c_out // groups, *kernel))
        b = rng.standard_normal(c_out)
        try:
            expected = torch.nn.functional.conv_transpose2d(
                torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), stride, padding, extra, groups,
                dilation).numpy()
        except RuntimeError:  # PyTorch refuses it (an empty output): so must we
            with pytest.raises(convviz.InvalidArgumentError):
                convviz.conv_transpose2d(x, w, b, stride, padding, extra, groups, dilation)
            continue
        got = convviz.conv_transpose2d(x, w, b, stride, padding, extra, groups, dilation)
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
        checked += 1
    assert checked > 100


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int32"])
def test_every_dtype_against_the_reference(dtype, rng):
    for _ in range(20):
        groups, c_in, c_out, kernel, stride, dilation, padding, extra, hw = _random_case(rng)
        shape = [transposed_output_size(*a) for a in zip(hw, kernel, stride, padding, extra, dilation)]
        if min(shape) < 1:
            continue
        if dtype == "int32":
            x = rng.integers(-4, 5, (2, c_in, *hw)).astype(np.int32)
            w = rng.integers(-4, 5, (c_in, c_out // groups, *kernel)).astype(np.int32)
        else:
            x = rng.standard_normal((2, c_in, *hw)).astype(DTYPES[dtype])
            w = rng.standard_normal((c_in, c_out // groups, *kernel)).astype(DTYPES[dtype])
        got = convviz.conv_transpose2d(x, w, None, stride, padding, extra, groups, dilation)
        assert got.dtype == x.dtype and got.shape == (2, c_out, *shape)
        # The same scatter, written out: the full scatter (a VALID input gradient), on a
        # canvas with room for output_padding, cropped by `padding` on each side.
        full = [(hw[i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1 for i in range(2)]
        big = [max(full[i], shape[i] + padding[i]) for i in range(2)]
        filt = w.transpose(2, 3, 1, 0).astype(np.float64)
        exact, bound = (np.zeros((2, c_out, *big)) for _ in range(2))
        exact[:, :, :full[0], :full[1]] = reference.conv2d_backprop_input(
            [2, c_out, *full], filt, x.astype(np.float64), list(stride), "VALID", (), "NCHW", list(dilation))
        bound[:, :, :full[0], :full[1]] = reference.conv2d_backprop_input(
            [2, c_out, *full], np.abs(filt), np.abs(x.astype(np.float64)), list(stride), "VALID", (), "NCHW",
            list(dilation))
        crop = (slice(None), slice(None), slice(padding[0], padding[0] + shape[0]),
                slice(padding[1], padding[1] + shape[1]))
        if dtype == "int32":
            np.testing.assert_array_equal(got, exact[crop])
        else:
            assert_close_to_reference(got, exact[crop], bound[crop], dtype)


def test_adjoint_of_conv2d(rng):
    """<conv2d(y, W), x> == <y, conv_transpose2d(x, W)> with PyTorch's symmetric padding."""
    for _ in range(20):
        groups, c_in, c_out, kernel, stride, dilation, padding, extra, hw = _random_case(rng)
        shape = [transposed_output_size(*a) for a in zip(hw, kernel, stride, padding, extra, dilation)]
        if min(shape) < 1:
            continue
        x = rng.standard_normal((2, c_in, *hw))
        w = rng.standard_normal((c_in, c_out // groups, *kernel))
        y = rng.standard_normal((2, c_out, *shape))
        # The forward conv: y (C_out channels) -> C_in channels, pads (p, p - output_padding).
        pads = [padding[0], padding[0] - extra[0], padding[1], padding[1] - extra[1]]
        if min(pads) < 0:
            continue
        forward = convviz.conv2d(y, w.transpose(2, 3, 1, 0), list(stride), "EXPLICIT",
                                 explicit_paddings(tuple(pads), "NCHW"), "NCHW", list(dilation))
        assert np.vdot(forward, x) == pytest.approx(np.vdot(y, convviz.conv_transpose2d(
            x, w, None, stride, padding, extra, groups, dilation)), rel=1e-12, abs=1e-12)


def test_unbatched_input_bias_and_output_padding():
    x = np.ones((1, 2, 2))
    w = np.ones((1, 1, 3, 3))
    y = convviz.conv_transpose2d(x, w, np.array([10.0]), stride=2, padding=1, output_padding=1)
    assert y.shape == (1, 4, 4)
    # Row 3 is the extra row output_padding asks for: the window of input row 1 reaches it.
    np.testing.assert_array_equal(y[0] - 10, [[1, 2, 1, 1], [2, 4, 2, 2], [1, 2, 1, 1], [1, 2, 1, 1]])


def test_its_own_errors():
    x = np.ones((1, 4, 5, 5), np.float32)
    w = np.ones((4, 3, 3, 3), np.float32)
    with pytest.raises(convviz.InvalidArgumentError, match=r"^conv_transpose2d: output_padding must be smaller "
                                                           r"than stride or dilation"):
        convviz.conv_transpose2d(x, w, stride=2, output_padding=2)
    with pytest.raises(convviz.InvalidArgumentError, match=r"^conv_transpose2d: weight.shape\[0\] must equal"):
        convviz.conv_transpose2d(x, np.ones((3, 3, 3, 3), np.float32))
    with pytest.raises(convviz.InvalidArgumentError, match=r"^conv_transpose2d: groups must be a positive divisor"):
        convviz.conv_transpose2d(x, w, groups=3)
    with pytest.raises(convviz.InvalidArgumentError, match=r"^conv_transpose2d: bias must have shape \(3,\)"):
        convviz.conv_transpose2d(x, w, bias=np.ones(4, np.float32))
    with pytest.raises(convviz.InvalidArgumentError, match=r"^conv_transpose2d: input must be 3-D .* or 4-D"):
        convviz.conv_transpose2d(x[0, 0], w)
    with pytest.raises(TypeError, match=r"^conv_transpose2d: weight must have the same dtype as input"):
        convviz.conv_transpose2d(x, w.astype(np.float64))
    with pytest.raises(TypeError, match=r"^conv_transpose2d: stride must be an int"):
        convviz.conv_transpose2d(x, w, stride=1.5)
    with pytest.raises(convviz.InvalidArgumentError, match=r"^conv_transpose2d: the output would be"):
        convviz.conv_transpose2d(np.ones((1, 1, 1, 1)), np.ones((1, 1, 1, 1)), padding=1)
