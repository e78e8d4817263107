"""The CUDA kernels, through the GPU backend: the CPU tests' cases, run on "CuPy".

Every test runs twice:

* ``cuda``: real CuPy on a real device; skips cleanly without CuPy or a CUDA device.
  Run it on a GPU machine with ``python -m pytest tests/test_gpu.py``.
* ``emulated``: ``cupy_emulator`` stands in for CuPy and runs the same
  CUDA source compiled as host C++, one GPU thread after another.  This
  checks the kernels' arithmetic and the backend's parameter and stride packing on
  any machine with a C++ compiler; it says nothing about speed or NVRTC.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import cupy_emulator
import numpy as np
import pytest
from helpers import DTYPES, assert_close_to_reference, random_array, reference_pair_bpi, reference_pair_dwf

import convviz
from convviz._backends import cuda
from convviz.ops import OPS
from convviz.ops._op import clear_gpu_plans


def _real_gpu() -> bool:
    real = cuda.cupy_module()
    try:
        return real is not None and real.cuda.runtime.getDeviceCount() > 0
    except Exception:  # CuPy without a driver
        return False


@pytest.fixture(params=["cuda", "emulated"])
def cp(request, monkeypatch):
    """The CuPy module the test runs on (installed as ``cupy`` for convviz to find)."""
    if request.param == "cuda":
        if not _real_gpu():
            pytest.skip("needs CuPy and a CUDA device")
        module = sys.modules["cupy"]
    else:
        if cupy_emulator.compiler() is None:
            pytest.skip("the CuPy emulator needs a C++ compiler")
        module = cupy_emulator.as_module()
        monkeypatch.setitem(sys.modules, "cupy", module)
    cuda._module.cache_clear()  # compiled kernels and plans belong to one CuPy
    clear_gpu_plans()
    yield module
    cuda._module.cache_clear()
    clear_gpu_plans()


DATA = Path(__file__).parent / "data"


def _bf16_supported(cp) -> bool:
    try:
        cp.empty(1, dtype=DTYPES["bfloat16"])
    except Exception:
        return False
    return True


def _cases():
    if not (DATA / "tf_semantics.npz").exists():
        return []
    archive = np.load(DATA / "tf_semantics.npz")
    return json.loads(archive["meta"].tobytes())


@pytest.mark.parametrize("case", _cases(), ids=lambda c: f"{c['id']}-{c['op']}-{c['dtype']}")
def test_oracle_cases_on_the_gpu(case, cp):
    archive = np.load(DATA / "tf_semantics.npz")
    i, name = case["id"], case["dtype"]
    if name == "bfloat16" and not _bf16_supported(cp):
        pytest.skip("this CuPy has no bfloat16 dtype")
    dtype = DTYPES[name]
    window = dict(strides=case["strides"], padding=case["padding"], explicit_paddings=case["explicit_paddings"],
                  data_format=case["data_format"], dilations=case["dilations"])
    if case["op"] == "bpi":
        filt = archive[f"{i}_filter"].astype(dtype)
        dy = archive[f"{i}_out_backprop"].astype(dtype)
        got = convviz.conv2d_backprop_input(case["input_sizes"], cp.asarray(filt), cp.asarray(dy), **window)
        exact, bound = reference_pair_bpi(case["input_sizes"], filt, dy, **window)
    else:
        x = archive[f"{i}_input"].astype(dtype)
        dy = archive[f"{i}_out_backprop"].astype(dtype)
        got = convviz.depthwise_conv2d_native_backprop_filter(cp.asarray(x), case["filter_sizes"], cp.asarray(dy),
                                                              **window)
        exact, bound = reference_pair_dwf(x, case["filter_sizes"], dy, **window)
    assert isinstance(got, cp.ndarray)
    assert_close_to_reference(cp.asnumpy(got), exact, bound, name)


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("padding", ["SAME", "VALID", "EXPLICIT"])
def test_every_op_matches_its_reference_on_the_gpu(op, data_format, padding, rng, cp):
    """Every record's example, every dtype the device has, on the op's CUDA kernels."""
    for dtype in op.dtypes:
        name = "bfloat16" if np.dtype(dtype).name == "bfloat16" else str(np.dtype(dtype))
        if name == "bfloat16" and not _bf16_supported(cp):
            continue
        for strides, dilations in [((1, 1), (1, 1)), ((2, 1), (1, 2)), ((3, 2), (2, 3))]:
            args = op.example(rng, dtype, data_format, strides, dilations, padding)
            on_device = [cp.asarray(a) if i in op.tensor_positions else a for i, a in enumerate(args)]
            got = cp.asnumpy(op.run(*on_device, None))
            magnitudes = list(args)
            for i in op.tensor_positions:
                magnitudes[i] = np.abs(args[i].astype(np.float64))
            assert got.dtype == np.dtype(dtype)
            assert_close_to_reference(got, op.reference(*args), op.reference(*magnitudes), name)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32"])
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("shape", [(3, 1, 1, 2, 1), (3, 2, 1, 1, 2), (5, 2, 2, 1, 1), (2, 3, 1, 3, 3)])
def test_input_gradient_matches_the_cpu(dtype, data_format, shape, rng, cp):
    k, s, d, groups, n = shape
    g = convviz.ConvGeometry.build(batch=n, input_hw=(11, 9), in_channels=4 * groups, out_channels=3 * groups,
                                   kernel_hw=(k, k), strides=(s, s), dilations=(d, d), padding="SAME",
                                   groups=groups, data_format=data_format)
    filt = random_array(rng, g.filter_shape, dtype)
    dy = random_array(rng, g.output_shape, dtype)
    four = [1, s, s, 1] if data_format == "NHWC" else [1, 1, s, s]
    dil = [1, d, d, 1] if data_format == "NHWC" else [1, 1, d, d]
    kwargs = dict(strides=four, padding="SAME", data_format=data_format, dilations=dil)
    got = cp.asnumpy(convviz.conv2d_backprop_input(list(g.input_shape), cp.asarray(filt), cp.asarray(dy), **kwargs))
    exact, bound = reference_pair_bpi(list(g.input_shape), filt, dy, **kwargs)
    assert_close_to_reference(got, exact, bound, dtype)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("shape", [(3, 1, 1, 1), (3, 2, 1, 2), (5, 1, 2, 1), (3, 2, 2, 3)])
def test_filter_gradient_matches_the_cpu(dtype, data_format, shape, rng, cp):
    k, s, d, m = shape
    g = convviz.ConvGeometry.build(batch=3, input_hw=(40, 37), in_channels=5, out_channels=5 * m,
                                   kernel_hw=(k, k), strides=(s, s), dilations=(d, d), padding="SAME",
                                   depthwise=True, data_format=data_format)
    x = random_array(rng, g.input_shape, dtype)
    dy = random_array(rng, g.output_shape, dtype)
    four = [1, s, s, 1] if data_format == "NHWC" else [1, 1, s, s]
    dil = [1, d, d, 1] if data_format == "NHWC" else [1, 1, d, d]
    kwargs = dict(strides=four, padding="SAME", data_format=data_format, dilations=dil)
    got = cp.asnumpy(convviz.depthwise_conv2d_native_backprop_filter(cp.asarray(x), [k, k, 5, m], cp.asarray(dy),
                                                                     **kwargs))
    exact, bound = reference_pair_dwf(x, [k, k, 5, m], dy, **kwargs)
    assert_close_to_reference(got, exact, bound, dtype)


def test_repeated_runs_are_bitwise_identical(rng, cp):
    x = cp.asarray(rng.standard_normal((8, 56, 56, 64)).astype(np.float32))
    dy = cp.asarray(rng.standard_normal((8, 56, 56, 64)).astype(np.float32))
    first = convviz.depthwise_conv2d_native_backprop_filter(x, [3, 3, 64, 1], dy, [1] * 4, "SAME")
    for _ in range(3):
        again = convviz.depthwise_conv2d_native_backprop_filter(x, [3, 3, 64, 1], dy, [1] * 4, "SAME")
        assert cp.array_equal(first.view(cp.uint32), again.view(cp.uint32))
    f = cp.asarray(rng.standard_normal((3, 3, 64, 64)).astype(np.float32))
    a = convviz.conv2d_backprop_input([8, 56, 56, 64], f, dy, [1] * 4, "SAME")
    b = convviz.conv2d_backprop_input([8, 56, 56, 64], f, dy, [1] * 4, "SAME")
    assert cp.array_equal(a.view(cp.uint32), b.view(cp.uint32))


def test_results_stay_on_the_device_and_numpy_inputs_move_there(cp):
    dx = convviz.conv2d_backprop_input([1, 4, 4, 1], np.ones((3, 3, 1, 1), np.float32),
                                       np.ones((1, 4, 4, 1), np.float32), [1] * 4, "SAME", device="gpu")
    assert isinstance(dx, cp.ndarray) and dx.device.id == cp.cuda.Device().id
    with pytest.raises(TypeError, match="same device"):
        convviz.conv2d_backprop_input([1, 4, 4, 1], np.ones((3, 3, 1, 1), np.float32),
                                      cp.ones((1, 4, 4, 1), np.float32), [1] * 4, "SAME")


def test_show_versions_reports_the_gpu(cp):
    info = convviz.show_versions(as_dict=True)
    assert info["cupy"] and info["cuda_devices"] >= 1 and info["gpu"]


def test_filter_gradient_when_the_work_does_not_fit_one_grid(rng, cp, monkeypatch):
    # More (tap group, channel block) pairs than gridDim.y may hold (80 channels in blocks of 32
    # make 3): the kernel loops over the rest.
    monkeypatch.setattr(cuda, "MAX_GRID_Y", 2)
    x = random_array(rng, (2, 19, 17, 40), "float32")
    dy = random_array(rng, (2, 19, 17, 80), "float32")
    got = cp.asnumpy(convviz.depthwise_conv2d_native_backprop_filter(cp.asarray(x), [3, 5, 40, 2], cp.asarray(dy),
                                                                     [1] * 4, "SAME"))
    exact, bound = reference_pair_dwf(x, [3, 5, 40, 2], dy, strides=[1] * 4, padding="SAME")
    assert_close_to_reference(got, exact, bound, "float32")


def _assert_lands_like_the_cpu(got: np.ndarray, want: np.ndarray, dtype_name: str = "float32") -> None:
    """NaN and infinity in exactly the cells where the CPU result has them, the rest within 1e-4
    (float32) or a unit in the last place of a half type (CPU and GPU sum in other groupings, so
    a result may round to the neighbouring half value)."""
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    got, want = got[finite].astype(np.float64), want[finite].astype(np.float64)
    tolerance = {"float16": 2.0**-10, "bfloat16": 2.0**-7}.get(dtype_name, 1e-4)
    atol = tolerance * (max(1.0, float(np.abs(want).max(initial=0))) if dtype_name != "float32" else 1.0)
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=atol)


@pytest.mark.parametrize("op_name", ["forward", "input_grad"])
@pytest.mark.parametrize("k, s, d, m", [(3, 1, 1, 1), (5, 1, 1, 1), (7, 1, 1, 1), (8, 1, 1, 1), (3, 2, 1, 1),
                                        (3, 1, 2, 1), (3, 1, 1, 2)])
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_depthwise_row_and_strip_kernels_match_the_cpu(op_name, k, s, d, m, data_format, rng, cp, monkeypatch):
    # The strips kernels (stride and dilation 1, windows up to 7, multiplier 1 for the input
    # gradient) and the row kernels elsewhere; rows of 21 pixels end in a partial tile of either,
    # and an infinite weight must reach only the cells whose sums read it.
    clear_gpu_plans()
    launched = []
    real_launch = cuda.loop_launch
    monkeypatch.setattr(cuda, "loop_launch",
                        lambda cp_, name, *args: launched.append(name) or real_launch(cp_, name, *args))
    x = random_array(rng, (2, 9, 21, 6), "float32")
    f = random_array(rng, (k, k, 6, m), "float32")
    f[0, k - 1, 2, 0] = np.inf
    window = dict(strides=[1, s, s, 1], padding="SAME", dilations=[1, d, d, 1])
    if data_format == "NCHW":
        x = x.transpose(0, 3, 1, 2).copy()
        window = dict(strides=[1, 1, s, s], padding="SAME", dilations=[1, 1, d, d], data_format="NCHW")
    if op_name == "forward":
        want = convviz.depthwise_conv2d_native(x, f, **window)
        got = cp.asnumpy(convviz.depthwise_conv2d_native(cp.asarray(x), cp.asarray(f), **window))
    else:
        dy = random_array(rng, convviz.depthwise_conv2d_native(x, f, **window).shape, "float32")
        want = convviz.depthwise_conv2d_native_backprop_input(list(x.shape), f, dy, **window)
        got = cp.asnumpy(convviz.depthwise_conv2d_native_backprop_input(list(x.shape), cp.asarray(f),
                                                                        cp.asarray(dy), **window))
    strips = s == 1 and d == 1 and k <= 7 and (op_name == "forward" or m == 1)
    assert len(launched) == 1 and ("strips" in launched[0]) == strips, launched
    assert np.isinf(want).any() and np.isfinite(want).any()
    _assert_lands_like_the_cpu(got, want)


def test_nchw_filter_gradient_loops_over_its_blocks_and_tap_groups(rng, cp, monkeypatch):
    # NCHW blocks hold 8 channels by 32 pixel phases, up to 9 taps a thread: 80 channels of a
    # 5x5 window make 30 (tap group, channel block) pairs for 4 blocks, so the blocks loop; 3
    # images of 19 x 17 pixels give chunks that end mid-row and phases that wrap images.
    monkeypatch.setattr(cuda, "MAX_GRID_Y", 4)
    x = random_array(rng, (3, 40, 19, 17), "float32")
    dy = random_array(rng, (3, 80, 19, 17), "float32")
    window = dict(strides=[1] * 4, padding="SAME", data_format="NCHW")
    got = cp.asnumpy(convviz.depthwise_conv2d_native_backprop_filter(cp.asarray(x), [5, 5, 40, 2], cp.asarray(dy),
                                                                     **window))
    exact, bound = reference_pair_dwf(x, [5, 5, 40, 2], dy, **window)
    assert_close_to_reference(got, exact, bound, "float32")


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_depthwise_filter_gradient_nan_and_inf_land_where_the_cpu_puts_them(data_format, rng, cp):
    # Each kernel adds only the taps that read a real input cell: an Inf at an image's corner
    # reaches the taps that read it, not those that would read padding there.
    x = rng.standard_normal((2, 9, 11, 6)).astype(np.float32)
    x[0, 0, 0, 1], x[1, 4, 5, 2] = np.inf, np.nan
    dy = rng.standard_normal((2, 9, 11, 6)).astype(np.float32)
    if data_format == "NCHW":
        x, dy = x.transpose(0, 3, 1, 2).copy(), dy.transpose(0, 3, 1, 2).copy()
    window = dict(strides=[1] * 4, padding="SAME", data_format=data_format)
    want = convviz.depthwise_conv2d_native_backprop_filter(x, [3, 3, 6, 1], dy, **window)
    got = cp.asnumpy(convviz.depthwise_conv2d_native_backprop_filter(cp.asarray(x), [3, 3, 6, 1], cp.asarray(dy),
                                                                     **window))
    assert np.isnan(want).any() and np.isinf(want).any() and np.isfinite(want).any()
    _assert_lands_like_the_cpu(got, want)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("stride, dilation, padding", [(1, 1, "SAME"), (2, 1, "SAME"), (1, 2, "VALID"), (2, 2, "SAME")])
def test_nan_and_inf_land_where_the_cpu_puts_them(stride, dilation, padding, dtype, rng, cp):
    # The tiled kernels load a term that does not exist (padding, a stride gap) as 0; a NaN
    # weight or out_backprop cell must still not reach the cells whose sums skip it (the half
    # types: also on the tensor cores' path, whose steps with such a value take the careful loop).
    if dtype == "bfloat16" and not _bf16_supported(cp):
        pytest.skip("this CuPy has no bfloat16 dtype")
    x = random_array(rng, (2, 9, 11, 24), dtype)
    f = random_array(rng, (3, 3, 24, 40), dtype)
    f[0, 2, 5, 7], f[2, 0, 3, 1] = np.nan, np.inf
    window = dict(strides=[1, stride, stride, 1], padding=padding, dilations=[1, dilation, dilation, 1])
    y = convviz.conv2d(x, f, **window)
    dy = random_array(rng, y.shape, dtype)
    dx = convviz.conv2d_backprop_input(list(x.shape), f, dy, **window)
    dy_bad = dy.copy()
    dy_bad[0, 0, 0, 3], dy_bad[1, -1, -1, 9] = np.inf, np.nan
    dw = convviz.conv2d_backprop_filter(x, list(f.shape), dy_bad, **window)
    on_gpu = [convviz.conv2d(cp.asarray(x), cp.asarray(f), **window),
              convviz.conv2d_backprop_input(list(x.shape), cp.asarray(f), cp.asarray(dy), **window),
              convviz.conv2d_backprop_filter(cp.asarray(x), list(f.shape), cp.asarray(dy_bad), **window)]
    for want, got in zip([y, dx, dw], on_gpu):
        got = cp.asnumpy(got)
        assert np.isnan(want).any() and np.isinf(want).any()
        _assert_lands_like_the_cpu(got, want, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("stride, dilation", [(1, 1), (2, 1), (1, 2)])
def test_subnormal_products_are_kept(dtype, stride, dilation, rng, cp):
    # CuPy compiles with -ftz=true, so the kernels' sums name the IEEE instructions themselves;
    # and tensor cores may flush subnormals, so a half-type step holding a value that small (a
    # float16 subnormal, or a bfloat16 value whose products could fall below float32's normal
    # range) takes the careful loop.  Sums of products near 2^-128 come out as the float64
    # reference says, as on the CPU.
    if dtype == "bfloat16" and not _bf16_supported(cp):
        pytest.skip("this CuPy has no bfloat16 dtype")
    # float32 and bfloat16: both operands tiny (products near 2^-128, float32 subnormals);
    # float16: one operand subnormal (2^-16), the other normal.
    scale_first, scale_second = (2.0**-16, 1.0) if dtype == "float16" else (2.0**-64, 2.0**-64)
    window = dict(strides=[1, stride, stride, 1], padding="SAME", dilations=[1, dilation, dilation, 1])
    x = random_array(rng, (2, 9, 11, 24), dtype)
    x[0, :6, :7] = (x[0, :6, :7].astype(np.float64) * scale_first).astype(x.dtype)  # a tiny block
    f = (random_array(rng, (3, 3, 24, 40), dtype).astype(np.float64) * scale_second).astype(x.dtype)
    dy = random_array(rng, convviz.conv2d(x, f, **window).shape, dtype)
    dy[0, :4, :4] = (dy[0, :4, :4].astype(np.float64) * scale_first).astype(x.dtype)
    x_all = (x.astype(np.float64) * scale_first).astype(x.dtype)  # the filter gradient: every product tiny
    dy_all = (dy.astype(np.float64) * scale_second).astype(x.dtype)
    calls = [("conv2d", (x, f)), ("conv2d_backprop_input", (list(x.shape), f, dy)),
             ("conv2d_backprop_filter", (x_all, list(f.shape), dy_all))]
    for name, args in calls:
        record = next(o for o in OPS if o.name == name)
        on_device = [cp.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
        got = cp.asnumpy(getattr(convviz, name)(*on_device, **window))
        exact = record.reference(*args, **window)
        magnitudes = [np.abs(a.astype(np.float64)) if isinstance(a, np.ndarray) else a for a in args]
        tiny = (exact != 0) & (np.abs(exact) < (2.0**-10 if dtype == "float16" else 2.0**-100))
        assert tiny.any()  # the case reaches the range it is about
        assert_close_to_reference(got, exact, record.reference(*magnitudes, **window), dtype)


def test_a_repeated_call_reuses_its_plan_and_new_strides_get_their_own(rng, cp, monkeypatch):
    op = next(o for o in OPS if o.name == "conv2d_backprop_input")
    validated = []
    validate = op.validate
    monkeypatch.setattr(op, "validate", lambda *a, **k: validated.append(1) or validate(*a, **k))
    f = cp.asarray(random_array(rng, (3, 3, 8, 16), "float32"))
    dy_host = random_array(rng, (2, 6, 6, 16), "float32")
    dy = cp.asarray(dy_host)
    first = convviz.conv2d_backprop_input([2, 6, 6, 8], f, dy, [1] * 4, "SAME")
    again = convviz.conv2d_backprop_input([2, 6, 6, 8], f, dy, [1] * 4, "SAME")
    assert len(validated) == 1 and cp.array_equal(first, again)
    # The same shape with other strides (an NCHW array seen as NHWC) is another signature.
    dy_view = cp.asarray(np.ascontiguousarray(dy_host.transpose(0, 3, 1, 2))).transpose(0, 2, 3, 1)
    third = convviz.conv2d_backprop_input([2, 6, 6, 8], f, dy_view, [1] * 4, "SAME")
    assert len(validated) == 2 and cp.array_equal(first, third)
    # And a plan never outlives a bad argument: a wrong size is still refused.
    with pytest.raises(ValueError):
        convviz.conv2d_backprop_input([2, 6, 6, 9], f, dy, [1] * 4, "SAME")


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32"])
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("stride, dilation, groups", [(1, 1, 1), (2, 1, 2), (3, 2, 1), (2, 3, 1)])
def test_split_sums_match_the_reference(dtype, data_format, stride, dilation, groups, rng, cp, monkeypatch):
    # Small products whose tiles are too few: their terms are split into chunks (on a real GPU
    # only for shapes like 8x7x7x512 -> 512; here forced with short chunks), then merged; the
    # filter gradient's pixels likewise (short chunks here, one chunk on such small shapes).
    monkeypatch.setattr(cuda, "MIN_CHUNK_TERMS", 16)
    monkeypatch.setattr(cuda, "MIN_CHUNK_PIXELS", 16)
    g = convviz.ConvGeometry.build(batch=2, input_hw=(9, 10), in_channels=24 * groups, out_channels=20 * groups,
                                   kernel_hw=(3, 4), strides=(stride, stride), dilations=(dilation, dilation),
                                   padding="SAME", groups=groups, data_format=data_format)
    assert cuda.split_terms(1, 3 * 4 * 24)[0] > 1
    x = random_array(rng, g.input_shape, dtype)
    f = random_array(rng, g.filter_shape, dtype)
    dy = random_array(rng, g.output_shape, dtype)
    four = [1, stride, stride, 1] if data_format == "NHWC" else [1, 1, stride, stride]
    dil = [1, dilation, dilation, 1] if data_format == "NHWC" else [1, 1, dilation, dilation]
    window = dict(strides=four, padding="SAME", data_format=data_format, dilations=dil)
    y = cp.asnumpy(convviz.conv2d(cp.asarray(x), cp.asarray(f), **window))
    dx = cp.asnumpy(convviz.conv2d_backprop_input(list(x.shape), cp.asarray(f), cp.asarray(dy), **window))
    results = [(y, "conv2d", (x, f)), (dx, "conv2d_backprop_input", (list(x.shape), f, dy))]
    if dtype != "int32":  # the filter gradient serves the float dtypes
        dw = cp.asnumpy(convviz.conv2d_backprop_filter(cp.asarray(x), list(f.shape), cp.asarray(dy), **window))
        results.append((dw, "conv2d_backprop_filter", (x, list(f.shape), dy)))
    for got, op, args in results:
        record = next(o for o in OPS if o.name == op)
        exact = record.reference(*args, **window)
        magnitudes = [np.abs(a.astype(np.float64)) if isinstance(a, np.ndarray) else a for a in args]
        assert got.dtype == np.dtype(dtype)
        assert_close_to_reference(got, exact, record.reference(*magnitudes, **window), dtype)


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_the_64_bit_kernels_match_the_reference(op, rng, cp, monkeypatch):
    # Arrays past 2^31 elements get the i64 variants (and no tiles); force them on small ones.
    monkeypatch.setattr(cuda, "offsets_fit", lambda *arrays, count=0: False)
    for dtype in (np.float32, np.float64):
        for strides, dilations in [((1, 1), (1, 1)), ((3, 2), (2, 3))]:
            args = op.example(rng, dtype, "NCHW", strides, dilations, "EXPLICIT")
            on_device = [cp.asarray(a) if i in op.tensor_positions else a for i, a in enumerate(args)]
            got = cp.asnumpy(op.run(*on_device, None))
            magnitudes = list(args)
            for i in op.tensor_positions:
                magnitudes[i] = np.abs(args[i].astype(np.float64))
            assert_close_to_reference(got, op.reference(*args), op.reference(*magnitudes), str(np.dtype(dtype)))
