"""Inputs in every form a user may hand over, and the edge cases of the semantics."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import convviz
from convviz import reference
from convviz.ops import OPS

F32 = np.float32


@pytest.fixture
def problem(rng):
    filt = rng.standard_normal((3, 2, 3, 4)).astype(F32)
    dy = rng.standard_normal((2, 4, 5, 4)).astype(F32)
    kwargs = dict(strides=[1, 2, 1, 1], padding="SAME", dilations=[1, 1, 2, 1])
    expected = convviz.conv2d_backprop_input([2, 7, 5, 3], filt, dy, **kwargs)
    return filt, dy, kwargs, expected


def test_python_lists(problem):
    filt, dy, kwargs, expected = problem
    got = convviz.conv2d_backprop_input((2, 7, 5, 3), filt.tolist(), dy, **kwargs)
    assert got.dtype == F32  # the list took the array's dtype
    np.testing.assert_array_equal(got, expected)
    both = convviz.conv2d_backprop_input([2, 7, 5, 3], filt.tolist(), dy.tolist(), **kwargs)
    assert both.dtype == np.float64  # NumPy's default for Python floats
    np.testing.assert_allclose(both, expected, rtol=1e-5, atol=1e-5)
    ints = convviz.conv2d_backprop_input([1, 2, 2, 1], [[[[1]]]], [[[[2], [3]], [[4], [5]]]],
                                         [1, 1, 1, 1], "VALID")
    assert ints.dtype == np.int32 and ints.ravel().tolist() == [2, 3, 4, 5]


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
@pytest.mark.parametrize("listed", [0, 1])
@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_a_list_takes_the_other_tensors_dtype_from_its_own_values(op, listed, dtype, rng):
    # One rule in every op: a nested list beside an array becomes that array's dtype, converted
    # from the list's own values (float64 values are never rounded through float32 on the way).
    args = list(op.example(rng, dtype, "NHWC", (1, 1), (1, 1), "SAME"))
    want = op.run(*args, None)
    position = op.tensor_positions[listed]
    args[position] = args[position].tolist()
    got = op.run(*args, None)
    assert got.dtype == want.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("listed", ["input", "weight"])
def test_conv_transpose2d_takes_the_same_rule(listed, rng):
    x = rng.standard_normal((1, 3, 5, 5)) / 7  # float64 values that float32 would round
    w = rng.standard_normal((3, 4, 3, 3)) / 3
    want = convviz.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1)
    got = convviz.conv_transpose2d(x.tolist() if listed == "input" else x, w.tolist() if listed == "weight" else w,
                                   stride=2, padding=1, output_padding=1)
    assert got.dtype == want.dtype == np.float64
    np.testing.assert_array_equal(got, want)
    both = convviz.conv_transpose2d(x.tolist(), w.tolist(), stride=2, padding=1, output_padding=1)
    assert both.dtype == np.float32  # two lists: PyTorch's default dtype


def test_non_contiguous_read_only_fortran_and_reversed_views(problem):
    filt, dy, kwargs, expected = problem
    wide = np.zeros((2, 4, 10, 8), F32)
    wide[:, :, ::2, ::2] = dy
    strided_dy = wide[:, :, ::2, ::2]
    assert not strided_dy.flags.c_contiguous
    fortran_filter = np.asfortranarray(filt)
    read_only = dy.copy()
    read_only.flags.writeable = False
    reversed_view = dy[:, ::-1][:, ::-1]
    for f, d in [(filt, strided_dy), (fortran_filter, dy), (filt, read_only), (filt, reversed_view)]:
        np.testing.assert_array_equal(convviz.conv2d_backprop_input([2, 7, 5, 3], f, d, **kwargs), expected)


def test_big_endian_arrays(problem):
    filt, dy, kwargs, expected = problem
    got = convviz.conv2d_backprop_input([2, 7, 5, 3], filt.astype(">f4"), dy.astype(">f4"), **kwargs)
    np.testing.assert_array_equal(got, expected)


def test_sizes_as_arrays_of_any_integer_type(problem):
    filt, dy, kwargs, expected = problem
    for sizes in (np.array([2, 7, 5, 3], np.int32), np.array([2, 7, 5, 3], np.int64),
                  np.array([2, 7, 5, 3], np.uint16), [np.int64(2), 7, 5, np.int8(3)]):
        np.testing.assert_array_equal(convviz.conv2d_backprop_input(sizes, filt, dy, **kwargs), expected)


def test_filter_gradient_inputs_in_every_form(rng):
    x = rng.standard_normal((2, 6, 6, 3))
    dy = rng.standard_normal((2, 3, 3, 6))
    kwargs = dict(strides=[1, 2, 2, 1], padding="SAME")
    expected = convviz.depthwise_conv2d_native_backprop_filter(x, [3, 3, 3, 2], dy, **kwargs)
    np.testing.assert_array_equal(
        convviz.depthwise_conv2d_native_backprop_filter(x.tolist(), np.array([3, 3, 3, 2]), dy.tolist(), **kwargs),
        expected)
    read_only = x.copy()
    read_only.flags.writeable = False
    np.testing.assert_array_equal(
        convviz.depthwise_conv2d_native_backprop_filter(read_only, (3, 3, 3, 2), np.asfortranarray(dy), **kwargs),
        expected)


def test_inputs_are_not_modified(problem):
    filt, dy, kwargs, _ = problem
    before = filt.copy(), dy.copy()
    convviz.conv2d_backprop_input([2, 7, 5, 3], filt, dy, **kwargs)
    np.testing.assert_array_equal(before[0], filt)
    np.testing.assert_array_equal(before[1], dy)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64, np.int32])
def test_result_dtype_is_the_input_dtype(dtype):
    dx = convviz.conv2d_backprop_input([1, 3, 3, 1], np.ones((2, 2, 1, 1), dtype),
                                       np.ones((1, 2, 2, 1), dtype), [1] * 4, "VALID")
    assert dx.dtype == np.dtype(dtype)
    assert dx.astype(np.float64)[0, :, :, 0].tolist() == [[1, 2, 1], [2, 4, 2], [1, 2, 1]]


def test_half_types_accumulate_in_float32():
    # 4096 terms of 1 + 2**-11: float16 accumulation would stall at 2048; float32 does not.
    dy = np.full((1, 64, 64, 1), 1.0, np.float16)
    dw = convviz.depthwise_conv2d_native_backprop_filter(
        np.full((1, 64, 64, 1), 1 + 2**-10, np.float16), [1, 1, 1, 1], dy, [1] * 4, "VALID")
    assert float(dw.ravel()[0]) == pytest.approx(4096 * (1 + 2**-10), rel=2**-10)


def test_int32_wraps_like_tensorflow():
    """TensorFlow's int32 arithmetic wraps modulo 2**32; so does convviz, exactly."""
    big = 1_000_000
    filt = np.full((3, 3, 2, 4), big, np.int32)
    dy = np.full((1, 4, 4, 4), 100_000, np.int32)
    dx = convviz.conv2d_backprop_input([1, 4, 4, 2], filt, dy, [1, 1, 1, 1], "SAME")
    coverage = np.array([2, 3, 3, 2])
    exact = np.multiply.outer(coverage, coverage) * 4 * big * 100_000  # Python-int sized values
    wrapped = ((exact + 2**31) % 2**32 - 2**31).astype(np.int32)
    np.testing.assert_array_equal(dx[0, :, :, 0], wrapped)
    assert dx[0, 0, 0, 0] == -2022801408  # TensorFlow 2.21 gives this value on this case


def test_empty_batch_gives_zeros_of_the_right_shape():
    dx = convviz.conv2d_backprop_input([0, 5, 5, 2], np.ones((3, 3, 2, 4), F32), np.ones((0, 5, 5, 4), F32),
                                       [1, 1, 1, 1], "SAME")
    assert dx.shape == (0, 5, 5, 2) and dx.dtype == F32
    dx = convviz.conv2d_backprop_input([5, 5], np.ones((3, 3, 2, 4), F32), np.ones((0, 5, 5, 4), F32),
                                       [1, 1, 1, 1], "SAME")
    assert dx.shape == (0, 5, 5, 2)
    dw = convviz.depthwise_conv2d_native_backprop_filter(
        np.ones((0, 5, 5, 2), F32), [3, 3, 2, 1], np.ones((0, 5, 5, 2), F32), [1, 1, 1, 1], "SAME")
    assert dw.shape == (3, 3, 2, 1) and not dw.any()


def test_filter_larger_than_input_gives_an_empty_output_and_zero_gradient():
    """VALID with a kernel wider than the input: no window fits, out is 0 x 0."""
    dx = convviz.conv2d_backprop_input([1, 2, 2, 1], np.ones((3, 3, 1, 1), F32),
                                       np.ones((1, 0, 0, 1), F32), [1, 1, 1, 1], "VALID")
    assert dx.shape == (1, 2, 2, 1) and not dx.any()


def test_zero_height_input():
    dx = convviz.conv2d_backprop_input([1, 0, 4, 2], np.ones((3, 3, 2, 4), F32), np.ones((1, 0, 4, 4), F32),
                                       [1, 1, 1, 1], "SAME")
    assert dx.shape == (1, 0, 4, 2)


def test_rows_no_window_reads_get_exactly_zero(rng):
    """in=8, k=3, s=3, VALID: windows cover rows 0-5, rows 6 and 7 are never read."""
    geometry = convviz.ConvGeometry.build(batch=1, input_hw=(8, 8), in_channels=1, out_channels=1,
                                          kernel_hw=(3, 3), strides=(3, 3), dilations=(1, 1), padding="VALID")
    assert geometry.zero_gradient_rows().tolist() == [6, 7]
    dy = rng.standard_normal((1, 2, 2, 1)).astype(F32) + 5
    dx = convviz.conv2d_backprop_input([1, 8, 8, 1], np.ones((3, 3, 1, 1), F32), dy, [1, 3, 3, 1], "VALID")
    assert not dx[0, 6:, :, 0].any() and not dx[0, :, 6:, 0].any()
    assert dx[0, :6, :6, 0].all()


def test_gcd_of_stride_and_dilation_leaves_residue_classes_empty():
    """stride 2 and dilation 2 read only even rows: odd rows get zero gradient (gridding)."""
    dx = convviz.conv2d_backprop_input([1, 9, 9, 1], np.ones((3, 3, 1, 1)), np.ones((1, 3, 3, 1)),
                                       [1, 2, 2, 1], "VALID", dilations=[1, 2, 2, 1])
    assert not dx[0, 1::2, :, 0].any() and dx[0, ::2, ::2, 0].all()


def test_two_value_input_sizes_take_batch_and_depth_from_the_tensors(rng):
    filt = rng.standard_normal((2, 2, 3, 5))
    dy = rng.standard_normal((4, 3, 3, 5))
    a = convviz.conv2d_backprop_input([4, 4], filt, dy, [1, 1, 1, 1], "VALID")
    b = convviz.conv2d_backprop_input([4, 4, 4, 3], filt, dy, [1, 1, 1, 1], "VALID")
    np.testing.assert_array_equal(a, b)


def test_unequal_strides_and_dilations_in_the_filter_gradient(rng):
    """TensorFlow's CPU kernel refuses unequal strides and ignores dilations here."""
    x = rng.standard_normal((2, 9, 11, 3))
    kwargs = dict(strides=[1, 3, 2, 1], padding="SAME", dilations=[1, 2, 3, 1])
    dy = rng.standard_normal((2, 3, 6, 3))
    got = convviz.depthwise_conv2d_native_backprop_filter(x, [2, 3, 3, 1], dy, **kwargs)
    expected = reference.depthwise_conv2d_native_backprop_filter(x, [2, 3, 3, 1], dy, **kwargs)
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_repeated_calls_reuse_a_plan_and_still_validate(rng):
    """A repeated call skips validation only when its arguments match a valid call exactly."""
    from convviz.ops import _op

    filt = rng.standard_normal((3, 3, 2, 4)).astype(F32)
    dy = rng.standard_normal((1, 5, 5, 4)).astype(F32)
    first = convviz.conv2d_backprop_input([1, 5, 5, 2], filt, dy, [1, 1, 1, 1], "SAME")
    assert any(key[0] == "conv2d_backprop_input" and key[1] == (1, 5, 5, 2) for key in _op._PLANS)
    again = convviz.conv2d_backprop_input([1, 5, 5, 2], filt, dy * 2, [1, 1, 1, 1], "SAME")
    np.testing.assert_allclose(again, 2 * first, rtol=1e-6)
    # Same shapes, but parameters that must still be refused:
    with pytest.raises(TypeError, match="strides"):
        convviz.conv2d_backprop_input([1, 5, 5, 2], filt, dy, [1, 1.0, 1, 1], "SAME")
    with pytest.raises(TypeError, match="strides"):
        convviz.conv2d_backprop_input([1, 5, 5, 2], filt, dy, [1, True, 1, 1], "SAME")
    with pytest.raises(TypeError, match="out_backprop"):
        convviz.conv2d_backprop_input([1, 5, 5, 2], filt, dy.astype(np.float64), [1, 1, 1, 1], "SAME")
    with pytest.raises(convviz.InvalidArgumentError, match="n_threads"):
        convviz.conv2d_backprop_input([1, 5, 5, 2], filt, dy, [1, 1, 1, 1], "SAME", n_threads=0)
    # A converted input (a list) is validated every time and never cached.
    convviz.depthwise_conv2d_native_backprop_filter(dy.tolist(), [3, 3, 4, 1], dy, [1] * 4, "SAME")
    assert not any(key[0] == "depthwise_conv2d_native_backprop_filter" and key[1] == (1, 5, 5, 4)
                   and key[2] == np.float64 for key in _op._PLANS)


def test_command_line_version_and_bench(capsys):
    from convviz.cli import main

    assert main(["version"]) == 0
    assert "openmp" in capsys.readouterr().out
    assert main(["bench", "--only", "bpi_tiny,dwf_tiny", "--no-peers", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "bpi_tiny 1,8,8,3,8,3,1,1" in out and "dwf_tiny" in out and "GFLOP/s" in out
    with pytest.raises(SystemExit):
        main(["bench", "--only", "no_such_case"])
    assert main([]) == 2
