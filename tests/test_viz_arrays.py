"""Setup(x=..., W=..., dy=...): your own arrays, checked, inferred from, and drawn by every view."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import re  # noqa: E402

import ml_dtypes  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from convviz import reference, viz  # noqa: E402
from convviz.geometry import ConvGeometry  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _nchw(nhwc: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(nhwc.transpose(0, 3, 1, 2))


def _reference_dx(s: viz.Setup, w: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """The reference input gradient of a setup's geometry, for 4-D ``w`` (HWIO) and ``dy`` (data_format)."""
    return reference.conv2d_backprop_input(list(s.geometry.input_shape), w, dy, **s._op_kwargs())


def _reference_dw(s: viz.Setup, x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    sizes = [*s.kernel_hw, s.in_channels, s.multiplier]
    return reference.depthwise_conv2d_native_backprop_filter(x, sizes, dy, **s._op_kwargs())


def _images(fig) -> list[np.ndarray]:
    """Every image a figure shows, masked cells as NaN."""
    return [np.ma.filled(np.ma.asarray(image.get_array()).astype(float), np.nan)
            for ax in fig.axes for image in ax.images]


def _shows(fig, plane: np.ndarray) -> bool:
    return any(image.shape == plane.shape and np.array_equal(image, plane) for image in _images(fig))


# Distinctive numbers: quarters, which no drawn example (integers or normal) produces.
X6 = np.arange(36.0).reshape(6, 6) / 4 - 3.0
W3 = np.array([[0.25, -1.5, 2.0], [1.0, 0.0, -0.75], [3.5, -2.25, 0.5]])
DY3 = np.array([[1.25, -0.5, 2.0], [0.0, 3.0, -1.75], [-2.5, 0.75, 1.5]])
GEOMETRY = dict(strides=2, padding="SAME")  # input 6x6, kernel 3x3 -> output 3x3


def _mine(**kwargs) -> viz.Setup:
    return viz.Setup(**{"x": X6, "W": W3, "dy": DY3, **GEOMETRY, **kwargs})


# -- sizes from the arrays -------------------------------------------------------------
def test_example_from_the_brief():
    s = viz.Setup(x=np.arange(36.).reshape(6, 6), W=np.ones((3, 3)), strides=2, padding="SAME")
    assert (s.input_hw, s.kernel_hw, s.in_channels, s.out_channels, s.batch) == ((6, 6), (3, 3), 1, 1, 1)
    assert s.geometry.output_hw == (3, 3)
    assert s.describe() == "input 6x6, kernel 3x3, stride 2, SAME (pads t0 b1 l0 r1), your x, W"


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_sizes_are_inferred_from_4d_arrays(data_format):
    x = np.ones((2, 5, 7, 3))
    w = np.ones((2, 3, 3, 4))
    s = viz.Setup(x=x if data_format == "NHWC" else _nchw(x), W=w, data_format=data_format)
    assert (s.batch, s.input_hw, s.in_channels, s.kernel_hw, s.out_channels) == (2, (5, 7), 3, (2, 3), 4)
    assert s.geometry.output_hw == (4, 5)
    assert s.input().shape == (x.shape if data_format == "NHWC" else _nchw(x).shape)


def test_each_size_comes_from_the_array_that_fixes_it():
    assert viz.Setup(W=np.ones((2, 4, 3, 5))).in_channels == 3  # no x: from W
    s = viz.Setup(dy=np.ones((2, 6, 6, 4)), input_hw=8)  # no W: out_channels (and batch) from dy
    assert (s.out_channels, s.batch, s.in_channels, s.kernel_hw) == (4, 2, 1, (3, 3))
    s = viz.Setup(x=np.ones((5, 5)))
    assert (s.input_hw, s.kernel_hw, s.geometry.output_hw) == ((5, 5), (3, 3), (3, 3))
    assert viz.Setup() == viz.Setup(input_hw=8, kernel_hw=3, in_channels=1, out_channels=1, batch=1)
    assert viz.Setup().input_hw == (8, 8) and viz.Setup().describe() == "input 8x8, kernel 3x3, stride 1, VALID"


def test_given_sizes_win_and_are_checked_against_the_arrays():
    s = viz.Setup(x=X6, input_hw=6, kernel_hw=(3, 3), **GEOMETRY)
    assert s == viz.Setup(x=X6, **GEOMETRY)
    with pytest.raises(ValueError, match=r"x must have shape \(8, 8\) \(rows, cols\) for input 8x8.*got \(6, 6\)"):
        viz.Setup(x=X6, input_hw=8)
    with pytest.raises(ValueError, match=r"W must have shape \(5, 5\) .*kernel 5x5.*got \(3, 3\)"):
        viz.Setup(W=W3, kernel_hw=5)


def test_dy_alone_does_not_fix_the_input_size():
    with pytest.raises(ValueError, match="input_hw is needed.*several input sizes give the same output size"):
        viz.Setup(dy=DY3, **GEOMETRY)
    assert viz.Setup(dy=DY3, input_hw=6, **GEOMETRY).input_hw == (6, 6)
    assert viz.Setup(dy=DY3, input_hw=5, **GEOMETRY).geometry.output_hw == (3, 3)  # 5 and 6 both give 3
    assert viz.Setup(x=X6, dy=DY3, **GEOMETRY).input_hw == (6, 6)


def test_dy_checked_against_the_default_kernel_says_so():
    with pytest.raises(ValueError, match=r"dy must have shape \(4, 4\) \(out rows, out cols\) for input 6x6, kernel "
                                         r"3x3, stride 1, VALID \(kernel_hw not given: 3x3 by default\), got \(5, 5\)"):
        viz.Setup(x=X6, dy=np.ones((5, 5)))
    assert viz.Setup(x=X6, dy=np.ones((5, 5)), kernel_hw=2).kernel_hw == (2, 2)


def test_sizes_must_be_ints():
    with pytest.raises(TypeError, match="in_channels must be an int, got float 2.0"):
        viz.Setup(in_channels=2.0)
    with pytest.raises(TypeError, match="input_hw must be an int or a pair of ints"):
        viz.Setup(input_hw=6.0)


def test_values_and_seed_still_draw_the_arrays_not_given():
    for values in ("integers", "normal"):
        drawn = viz.Setup(input_hw=6, seed=3, values=values, **GEOMETRY)
        mine = viz.Setup(x=X6, seed=3, values=values, **GEOMETRY)
        np.testing.assert_array_equal(mine.filter(), drawn.filter())
        np.testing.assert_array_equal(mine.out_backprop(), drawn.out_backprop())
        np.testing.assert_array_equal(mine.input(), X6[None, :, :, None])


# -- 2-D and 4-D forms, both layouts ---------------------------------------------------------
def test_2d_and_4d_forms_in_nhwc_and_nchw_give_the_same_planes():
    planes = _mine()
    nhwc = _mine(x=X6[None, :, :, None], W=W3[:, :, None, None], dy=DY3[None, :, :, None])
    nchw = _mine(x=X6[None, None], W=W3[:, :, None, None], dy=DY3[None, None], data_format="NCHW")
    nchw_planes = _mine(data_format="NCHW")
    for s in (planes, nhwc, nchw, nchw_planes):
        np.testing.assert_array_equal(s.plane(s.input()), X6)
        np.testing.assert_array_equal(s.kernel_plane(), W3)
        np.testing.assert_array_equal(s.plane(s.out_backprop()), DY3)
        np.testing.assert_array_equal(s.plane(s.out_backprop(depthwise=True)), DY3)
        np.testing.assert_array_equal(s.plane(s.input_gradient()), planes.plane(planes.input_gradient()))
        np.testing.assert_array_equal(s.depthwise_filter_gradient_plane(), planes.depthwise_filter_gradient_plane())
    assert planes == nhwc and hash(planes) == hash(nhwc)
    assert nchw == nchw_planes and nchw != nhwc  # data_format is a parameter


def test_replace_moves_4d_arrays_to_a_new_data_format():
    x = np.arange(2 * 5 * 5 * 3, dtype=float).reshape(2, 5, 5, 3)
    dy = np.arange(2 * 3 * 3 * 2, dtype=float).reshape(2, 3, 3, 2)
    s = viz.Setup(x=x, dy=dy, kernel_hw=3, **GEOMETRY)
    t = s.replace(data_format="NCHW")
    assert (t.batch, t.input_hw, t.in_channels, t.out_channels) == (2, (5, 5), 3, 2)
    np.testing.assert_array_equal(t.x, _nchw(x))
    np.testing.assert_array_equal(t.input(), _nchw(x))
    np.testing.assert_array_equal(t.plane(t.input_gradient(), 1, 2), s.plane(s.input_gradient(), 1, 2))
    assert t.replace(data_format="NHWC") == s


# -- gradients: the reference's ---------------------------------------------------------------
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_gradients_of_user_arrays_equal_the_reference(data_format):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 7, 6, 2))
    w = rng.standard_normal((3, 2, 2, 3))
    dy = rng.standard_normal((2, 4, 5, 3))
    dy_dw = rng.standard_normal((2, 4, 5, 4))  # in_channels x multiplier = 2 x 2
    layout = (lambda a: a) if data_format == "NHWC" else _nchw
    s = viz.Setup(x=layout(x), W=w, dy=layout(dy), strides=(2, 1), dilations=(1, 2), padding="EXPLICIT",
                  pads=(2, 1, 0, 1), data_format=data_format)
    assert s.geometry.output_hw == (4, 5)
    np.testing.assert_allclose(s.input_gradient(), _reference_dx(s, w, layout(dy)), rtol=1e-12, atol=1e-12)
    d = s.replace(dy=layout(dy_dw), multiplier=2)  # 4 = 2 x 2 channels: for the depthwise views only
    np.testing.assert_allclose(d.depthwise_filter_gradient(), _reference_dw(d, layout(x), layout(dy_dw)),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(d.depthwise_filter_gradient_plane(1, 1),
                               _reference_dw(d, layout(x), layout(dy_dw))[:, :, 1, 1], rtol=1e-12, atol=1e-12)


# -- every view draws your numbers -------------------------------------------------------------
def _dx_plane(s: viz.Setup) -> np.ndarray:
    return s.plane(_reference_dx(s, s.filter(), s.out_backprop()))


def _dw_plane(s: viz.Setup) -> np.ndarray:
    return _reference_dw(s, s.input(), s.out_backprop(depthwise=True))[:, :, 0, 0]


def test_scatter_shows_your_dy_and_w():
    fig = viz.scatter(_mine(), (1, 1))
    assert _shows(fig, DY3) and _shows(fig, W3)


def test_scatter_vs_gather_shows_your_numbers_and_their_input_gradient():
    s = _mine()
    fig = viz.scatter_vs_gather(s)
    assert _shows(fig, DY3) and _shows(fig, _dx_plane(s))


def test_depthwise_shows_your_x_dy_and_their_filter_gradient():
    s = _mine()
    fig = viz.depthwise(s, (1, 1))
    assert _shows(fig, _dw_plane(s)) and _shows(fig, DY3)
    np.testing.assert_array_equal(_images(fig)[-1], _dw_plane(s))  # the last panel: dW


def test_animations_end_on_the_reference_gradients_of_your_arrays():
    s = _mine()
    np.testing.assert_allclose(viz.animate_input_gradient(s).final_frame, _dx_plane(s), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(viz.animate_depthwise_filter_gradient(s).final_frame, _dw_plane(s),
                               rtol=1e-12, atol=1e-12)


def _text(fig) -> str:
    """All the words a figure shows, whitespace collapsed (titles may be wrapped)."""
    return " ".join(" ".join([fig.get_suptitle()] + [t.get_text() for t in fig.texts]
                     + [t.get_text() for ax in fig.axes for t in ax.texts]
                     + [ax.get_title() for ax in fig.axes]).split())


def test_coverage_and_card_take_a_setup_of_your_arrays():
    s = _mine()
    fig = viz.coverage(s)
    assert _shows(fig, s.geometry.coverage().astype(float)) and s.describe() in _text(fig)
    assert "your x, W, dy" in _text(viz.card(s))


# -- errors, before any kernel call --------------------------------------------------------------
@pytest.mark.parametrize("name", ["x", "W", "dy"])
@pytest.mark.parametrize("value, dtype", [
    (np.array([["a", "b"], ["c", "d"]]), "<U1"),
    (np.array([[1, None], [2, 3]], dtype=object), "object"),
    (np.ones((3, 3)) * (1 + 1j), "complex128"),
    (np.zeros((3, 3), dtype="datetime64[s]"), "datetime64"),
    ("abc", "<U3"),
])
def test_arrays_of_anything_but_real_numbers_are_type_errors(name, value, dtype):
    with pytest.raises(TypeError, match=rf"{name} must hold real numbers .*got dtype {dtype}"):
        viz.Setup(input_hw=6, **{name: value})


def test_a_ragged_list_is_a_type_error():
    with pytest.raises(TypeError, match="W must be an array of real numbers"):
        viz.Setup(W=[[1.0, 2.0], [3.0]])


@pytest.mark.parametrize("name", ["x", "W", "dy"])
@pytest.mark.parametrize("shape", [(), (3,), (1, 3, 3), (1, 1, 3, 3, 1)])
def test_arrays_that_are_not_2d_or_4d_are_value_errors(name, shape):
    with pytest.raises(ValueError, match=rf"{name} must have shape 2-D .* or 4-D .*got {len(shape)}-D shape "
                                         rf"{re.escape(str(shape))}"):
        viz.Setup(input_hw=6, **{name: np.ones(shape)})


@pytest.mark.parametrize("name", ["x", "W", "dy"])
def test_empty_arrays_are_value_errors(name):
    with pytest.raises(ValueError, match=rf"{name} must not be empty .*got shape \(0, 3\)"):
        viz.Setup(input_hw=6, **{name: np.ones((0, 3))})


@pytest.mark.parametrize("name", ["x", "W", "dy"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_values_are_value_errors(name, bad):
    value = {"x": X6, "W": W3, "dy": DY3}[name].copy()
    value[1, 2] = bad
    with pytest.raises(ValueError, match=rf"{name} must be finite .*1 non-finite value\(s\), the first .* at \(1, 2\)"):
        _mine(**{name: value})
    with pytest.raises(ValueError, match=rf"{name} must be finite"):  # in any dtype
        _mine(**{name: value.astype(np.float16)})


def test_shape_errors_name_the_argument_and_both_shapes():
    four = dict(x=X6[None, :, :, None], W=W3[:, :, None, None])
    message = (r"dy must have shape \(1, 3, 3, 1\) \(NHWC: batch, out rows, out cols, out channels\) "
               r"for input 6x6, kernel 3x3, stride 2, SAME \(pads t0 b1 l0 r1\), got \(1, 4, 4, 1\)")
    with pytest.raises(ValueError, match=message):
        viz.Setup(**four, dy=np.ones((1, 4, 4, 1)), **GEOMETRY)
    with pytest.raises(ValueError, match=r"dy must have shape \(1, 1, 3, 3\) \(NCHW: batch, out channels, out rows, "
                                         r"out cols\) .*got \(1, 1, 4, 4\)"):
        viz.Setup(x=X6[None, None], dy=np.ones((1, 1, 4, 4)), data_format="NCHW", **GEOMETRY)
    with pytest.raises(ValueError, match=r"dy must have shape \(3, 3\) \(out rows, out cols\) .*got \(4, 4\)"):
        viz.Setup(x=X6, dy=np.ones((4, 4)), **GEOMETRY)
    with pytest.raises(ValueError, match=r"W must have shape \(3, 3, 2, 1\) \(HWIO: kernel rows, kernel cols, in "
                                         r"channels, out channels\) for kernel 3x3, in_channels 2 \(from x\), "
                                         r"out_channels 1, got \(3, 3, 1, 1\)"):
        viz.Setup(x=np.ones((1, 6, 6, 2)), W=W3[:, :, None, None])
    with pytest.raises(ValueError, match=r"dy must have shape \(2, 3, 3, 1\) .*batch 2 \(from x\), got \(1, 3, 3, 1\)"):
        viz.Setup(x=np.ones((2, 6, 6, 1)), dy=DY3[None, :, :, None], **GEOMETRY)


def test_a_2d_plane_where_channels_or_batch_are_not_1():
    with pytest.raises(ValueError, match=r"x must have shape \(1, 6, 6, 2\) \(NHWC: batch, rows, cols, in channels\) "
                                         r".*got \(6, 6\) \(a 2-D plane is accepted only with batch 1 and "
                                         r"in_channels 1"):
        viz.Setup(x=X6, in_channels=2)
    with pytest.raises(ValueError, match=r"W must have shape \(3, 3, 1, 2\) .*got \(3, 3\) \(a 2-D plane is "
                                         r"accepted only with in_channels 1 and out_channels 1"):
        viz.Setup(W=W3, out_channels=2)
    with pytest.raises(ValueError, match=r"x must have shape \(2, 6, 6, 1\) .*got \(6, 6\)"):
        viz.Setup(x=X6, batch=2)
    with pytest.raises(ValueError, match=r"W must have shape \(3, 3, 1, 1\) .*in_channels 1 \(from x\).*"
                                         r"got \(3, 3, 2, 1\)"):
        viz.Setup(x=X6, W=np.ones((3, 3, 2, 1)))  # a 2-D x means one input channel


def test_dy_with_the_wrong_channels_for_the_view_that_asks():
    # 2 output channels for the ordinary views; the depthwise views need in_channels x multiplier = 1.
    s = viz.Setup(x=X6, dy=np.ones((1, 3, 3, 2)), **GEOMETRY)
    assert s.out_channels == 2 and s.input_gradient().shape == (1, 6, 6, 1)
    depthwise = (r"dy must have shape \(1, 3, 3, 1\) \(NHWC: batch, out rows, out cols, in_channels x multiplier\) "
                 r"for the depthwise views of input 6x6.*got \(1, 3, 3, 2\)")
    with pytest.raises(ValueError, match=depthwise):
        s.out_backprop(depthwise=True)
    with pytest.raises(ValueError, match=depthwise):
        viz.depthwise(s)
    with pytest.raises(ValueError, match=depthwise):
        viz.animate_depthwise_filter_gradient(s)
    # 4 channels = 2 x 2 for the depthwise views, while W says 3 output channels: refused by the ordinary ones.
    t = viz.Setup(x=np.ones((1, 6, 6, 2)), W=np.ones((3, 3, 2, 3)), dy=np.ones((1, 3, 3, 4)), multiplier=2,
                  **GEOMETRY)
    assert t.depthwise_filter_gradient().shape == (3, 3, 2, 2)
    with pytest.raises(ValueError, match=r"dy must have shape \(1, 3, 3, 3\) \(NHWC: batch, out rows, out cols, out "
                                         r"channels\) .*out_channels 3 \(from W\), got \(1, 3, 3, 4\)"):
        t.input_gradient()
    with pytest.raises(ValueError, match=r"dy must have shape \(1, 3, 3, 3\) .*got \(1, 3, 3, 5\); the depthwise "
                                         r"views would need \(1, 3, 3, 4\)"):
        t.replace(dy=np.ones((1, 3, 3, 5)))  # fits neither: refused at once
    with pytest.raises(ValueError, match=r"dy must have shape \(1, 3, 3, 3\) .*got \(1, 4, 4, 4\)$"):
        t.replace(dy=np.ones((1, 4, 4, 4)))  # not a matter of channels: no word of the depthwise views


def test_replace_keeps_your_arrays_and_checks_them_again():
    s = _mine()
    assert s.replace() == s and s.replace(seed=5) != s
    np.testing.assert_array_equal(s.replace(seed=5).x, X6)
    with pytest.raises(ValueError, match=r"dy must have shape \(2, 2\) \(out rows, out cols\) for input 6x6, kernel "
                                         r"3x3, stride 3, SAME, got \(3, 3\)"):
        s.replace(strides=3)
    assert s.replace(strides=3, dy=np.ones((2, 2))).geometry.output_hw == (2, 2)
    with pytest.raises(ValueError, match=r"W must have shape \(2, 2\) \(kernel rows, kernel cols\) .*got \(3, 3\)"):
        s.replace(kernel_hw=2)
    # Sizes that were not given follow the new arrays; given ones stay and are checked.
    bigger = s.replace(x=np.ones((8, 8)), dy=np.ones((4, 4)))
    assert bigger.input_hw == (8, 8)
    with pytest.raises(ValueError, match=r"x must have shape \(6, 6\)"):
        viz.Setup(x=X6, input_hw=6, **GEOMETRY).replace(x=np.ones((8, 8)))
    assert s.replace(x=None, dy=None).input_hw == (8, 8)  # as if built without them
    with pytest.raises(ValueError, match="input_hw is needed"):
        s.replace(x=None)


# -- equality and hash --------------------------------------------------------------------------
def test_equality_and_hash_go_by_values():
    a, b = _mine(), _mine(x=X6.copy(), W=W3.tolist(), dy=DY3.copy())
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1 and {a: 1}[b] == 1
    assert a != _mine(x=X6 + 1) and a != _mine(dy=None) and a != _mine(W=W3.T)
    assert _mine(dy=None) != viz.Setup(x=X6, W=W3, **GEOMETRY, seed=1)
    assert viz.Setup(x=X6, **GEOMETRY) != viz.Setup(input_hw=6, **GEOMETRY)  # yours vs drawn
    drawn = viz.Setup(input_hw=6, **GEOMETRY)
    assert viz.Setup(x=drawn.input(), **GEOMETRY) != drawn
    ints = viz.Setup(x=np.arange(36).reshape(6, 6), **GEOMETRY)
    assert ints == viz.Setup(x=np.arange(36.0).reshape(6, 6), **GEOMETRY)
    zero = viz.Setup(W=np.zeros((3, 3)))
    negative_zero = viz.Setup(W=-np.zeros((3, 3)))
    assert zero == negative_zero and hash(zero) == hash(negative_zero)
    assert viz.Setup() == viz.Setup() and hash(viz.Setup()) == hash(viz.Setup())
    assert (a == "not a setup") is False


def test_pickle_and_copy_rebuild_an_equal_setup_with_read_only_arrays():
    import copy
    import pickle

    s = _mine()
    for t in (pickle.loads(pickle.dumps(s)), copy.copy(s), copy.deepcopy(s)):
        assert t == s and hash(t) == hash(s) and not t.x.flags.writeable
        assert t.replace(x=np.ones((8, 8)), dy=np.ones((4, 4))).input_hw == (8, 8)  # still inferred, not given


# -- dtypes, copies, read-only ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.int8, np.int64, np.uint16, np.float16, np.float32, ml_dtypes.bfloat16])
def test_real_dtypes_are_kept_as_float64(dtype):
    s = viz.Setup(x=X6.astype(dtype), W=W3.astype(dtype), **GEOMETRY)
    for array in (s.x, s.W, s.input(), s.filter()):
        assert array.dtype == np.float64
    np.testing.assert_array_equal(s.x, X6.astype(dtype).astype(np.float64))


def test_bool_arrays_are_numbers():
    mask = np.eye(3, dtype=bool)
    np.testing.assert_array_equal(viz.Setup(W=mask).kernel_plane(), np.eye(3))


def test_your_arrays_are_copied_read_only_and_never_changed():
    x, w, dy = X6.copy(), W3.copy(), DY3.copy()
    s = viz.Setup(x=x, W=w, dy=dy, **GEOMETRY)
    s.input_gradient(), s.depthwise_filter_gradient(), viz.scatter(s), viz.depthwise(s)
    np.testing.assert_array_equal(x, X6)
    np.testing.assert_array_equal(w, W3)
    np.testing.assert_array_equal(dy, DY3)
    for held, yours in ((s.x, x), (s.W, w), (s.dy, dy)):
        assert held.dtype == np.float64 and not held.flags.writeable and not np.shares_memory(held, yours)
        with pytest.raises(ValueError, match="read-only"):
            held[0, 0] = 99.0
    before = s.plane(s.input_gradient())
    x[:] = 0.0
    w[:] = 0.0
    dy[:] = 0.0
    np.testing.assert_array_equal(s.plane(s.input_gradient()), before)
    # What the accessors return is the caller's to change; the setup keeps its own.
    got = s.input()
    got[:] = 0.0
    np.testing.assert_array_equal(s.plane(s.input()), X6)


# -- property: right shapes always build, and the gradient is the reference's ------------------------
@st.composite
def _convolutions(draw):
    data_format = draw(st.sampled_from(["NHWC", "NCHW"]))
    h, w = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilations = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = draw(st.sampled_from(["VALID", "SAME", "EXPLICIT"]))
    pads = tuple(draw(st.integers(0, 2)) for _ in range(4)) if padding == "EXPLICIT" else (0, 0, 0, 0)
    batch, cin, cout = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 2))
    g = ConvGeometry.build(batch=batch, input_hw=(h, w), in_channels=cin, out_channels=cout, kernel_hw=(kh, kw),
                           strides=strides, dilations=dilations, padding=padding, explicit_paddings=pads)
    assume(0 not in g.output_hw)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    numbers = lambda *shape: rng.integers(-3, 4, size=shape).astype(float)  # noqa: E731  exact sums
    x, w4, dy = numbers(batch, h, w, cin), numbers(kh, kw, cin, cout), numbers(batch, *g.output_hw, cout)
    planes = draw(st.booleans())
    if planes and batch == cin == 1:
        x = x[0, :, :, 0]
    if planes and cin == cout == 1:
        w4 = w4[:, :, 0, 0]
    if planes and batch == cout == 1:
        dy = dy[0, :, :, 0]
    elif data_format == "NCHW":
        dy = _nchw(dy)
    if x.ndim == 4 and data_format == "NCHW":
        x = _nchw(x)
    params = dict(strides=strides, dilations=dilations, padding=padding, pads=pads, data_format=data_format)
    return x, w4, dy, params


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_convolutions())
def test_any_right_shaped_arrays_build_and_give_the_reference_gradient(case):
    x, w, dy, params = case
    s = viz.Setup(x=x, W=w, dy=dy, **params)
    expected = _reference_dx(s, s.filter(), s.out_backprop())
    np.testing.assert_array_equal(s.input_gradient(), expected)
    w4 = w if w.ndim == 4 else w[:, :, None, None]
    np.testing.assert_array_equal(s.filter(), w4)
    assert s == s.replace() and hash(s) == hash(s.replace())
