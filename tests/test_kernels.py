"""The SIMD kernels, per instruction set, on shapes that reach every code path.

The property tests draw small shapes; these cover what they rarely reach: the
register-blocked filter-gradient rows (3x3 and 5x5, strides and dilations 1-2,
wide rows with full tiles), the dense filter gradient's tiles (a few input
channels with a kernel row's taps merged, 1x1 to 7x7, narrow and wide rows, output
gradients staged block by block for 128 or more channels), input-gradient tiles
of every width (full, half and quarter tiles, 1- and 2-vector channel blocks,
padded channels, groups), the forward pass's channel blocks (1-4 vectors, packed
whole or unit by unit, split sums), and the in-place versus buffered paths
(NHWC / NCHW, every dtype).
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close_to_reference, random_array, reference_pair_bpi, reference_pair_dwf

import convviz
from convviz import _openmp_info
from convviz._backends import cpu

ISAS = _openmp_info.available_isas()


def _four(data_format, h, w):
    return [1, h, w, 1] if data_format == "NHWC" else [1, 1, h, w]


FILTER_SHAPES = [  # (K, stride, dilation, width, channels, multiplier)
    (3, 1, 1, 37, 32, 1), (3, 2, 1, 41, 16, 1), (3, 1, 2, 29, 48, 1), (3, 2, 2, 33, 16, 1),
    (5, 1, 1, 27, 32, 1), (5, 2, 1, 31, 16, 1), (3, 1, 1, 30, 5, 1), (3, 1, 1, 26, 16, 2),
    (7, 1, 1, 20, 16, 1), (1, 1, 1, 19, 16, 1), (4, 3, 1, 23, 24, 1),
]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("shape", FILTER_SHAPES, ids=lambda s: "k{}s{}d{}w{}c{}m{}".format(*s))
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_filter_gradient_kernels(isa, shape, padding, rng):
    k, s, d, w, c, m = shape
    kwargs = dict(strides=[1, s, s, 1], padding=padding, dilations=[1, d, d, 1])
    x = random_array(rng, (2, 9, w, c), "float32")
    g = convviz.ConvGeometry.build(batch=2, input_hw=(9, w), in_channels=c, out_channels=c * m,
                                   kernel_hw=(k, k), strides=(s, s), dilations=(d, d), padding=padding,
                                   depthwise=True)
    dy = random_array(rng, g.output_shape, "float32")
    exact, bound = reference_pair_dwf(x, [k, k, c, m], dy, **kwargs)
    with cpu.use_isa(isa):
        got = convviz.depthwise_conv2d_native_backprop_filter(x, [k, k, c, m], dy, **kwargs)
        got64 = convviz.depthwise_conv2d_native_backprop_filter(x.astype(np.float64), [k, k, c, m],
                                                                dy.astype(np.float64), **kwargs)
        nchw = convviz.depthwise_conv2d_native_backprop_filter(
            x.transpose(0, 3, 1, 2), [k, k, c, m], dy.transpose(0, 3, 1, 2),
            _four("NCHW", s, s), padding, data_format="NCHW", dilations=_four("NCHW", d, d))
        x16, dy16 = x.astype(np.float16), dy.astype(np.float16)
        nchw16 = convviz.depthwise_conv2d_native_backprop_filter(
            x16.transpose(0, 3, 1, 2), [k, k, c, m], dy16.transpose(0, 3, 1, 2),
            _four("NCHW", s, s), padding, data_format="NCHW", dilations=_four("NCHW", d, d))
    exact16, bound16 = reference_pair_dwf(x16, [k, k, c, m], dy16, **kwargs)
    assert_close_to_reference(nchw16, exact16, bound16, "float16")
    assert_close_to_reference(got, exact, bound, "float32")
    assert_close_to_reference(got64, exact, bound, "float64")
    assert_close_to_reference(nchw, exact, bound, "float32")


INPUT_SHAPES = [  # (K, stride, dilation, width, C_in, C_out, groups)
    (3, 1, 1, 56, 64, 32, 1), (3, 2, 1, 57, 32, 48, 1), (3, 1, 2, 37, 16, 16, 1), (7, 1, 1, 29, 16, 8, 1),
    (3, 1, 1, 13, 3, 8, 1), (3, 2, 1, 30, 48, 16, 2), (1, 1, 1, 50, 40, 24, 1), (4, 3, 2, 31, 24, 12, 3),
    (3, 1, 1, 5, 16, 16, 1), (2, 2, 1, 9, 33, 7, 1),
    # narrow channels: AVX-512's fused tiles (3/5/7 taps a row, window steps 1 and 2, groups, edges)
    (5, 2, 1, 43, 16, 16, 1), (7, 1, 2, 45, 8, 16, 1), (3, 1, 1, 33, 32, 32, 2), (5, 1, 2, 11, 16, 8, 1),
    (7, 2, 1, 60, 16, 4, 1),
    # AVX-512's blocked dy rows: a partial last block of output channels, a 1-vector
    # remainder after 2-vector blocks, 5 taps a row
    (3, 1, 1, 40, 48, 20, 1), (5, 1, 1, 24, 16, 36, 1),
    # two vectors of input channels, 3 taps a row: AVX-512's blocked fused tiles at step 2, plain tiles at step 1
    (3, 1, 2, 53, 64, 24, 1), (3, 1, 1, 19, 32, 40, 1), (3, 1, 1, 70, 96, 16, 2),
    # on the forward kernel: a filter that outweighs dy (channel blocks), a 1x1 filter at
    # stride 2 (three of four phases reached by no tap), a grouped stride-2 phase split
    (3, 1, 1, 7, 160, 200, 1), (1, 2, 1, 28, 32, 64, 1), (3, 2, 1, 12, 64, 96, 4),
]


def test_input_gradient_shapes_cover_both_kernels():
    """The input gradient runs on the forward kernel where the filter outweighs dy
    or dy's rows are narrow, else on its own: the shapes above exercise both."""
    from convviz.ops.input_grad import _on_forward_kernel

    chosen = {_on_forward_kernel(convviz.ConvGeometry.build(
        batch=2, input_hw=(5, w), in_channels=cin, out_channels=cout, kernel_hw=(k, k), strides=(s, s),
        dilations=(d, d), padding="SAME", groups=groups)) for k, s, d, w, cin, cout, groups in INPUT_SHAPES}
    assert chosen == {True, False}


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("shape", INPUT_SHAPES, ids=lambda s: "k{}s{}d{}w{}ci{}co{}g{}".format(*s))
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_input_gradient_kernels(isa, shape, dtype, rng):
    k, s, d, w, cin, cout, groups = shape
    kwargs = dict(strides=[1, s, s, 1], padding="SAME", dilations=[1, d, d, 1])
    g = convviz.ConvGeometry.build(batch=2, input_hw=(5, w), in_channels=cin, out_channels=cout,
                                   kernel_hw=(k, k), strides=(s, s), dilations=(d, d), padding="SAME",
                                   groups=groups)
    filt = random_array(rng, g.filter_shape, dtype)
    dy = random_array(rng, g.output_shape, dtype)
    exact, bound = reference_pair_bpi(list(g.input_shape), filt, dy, **kwargs)
    with cpu.use_isa(isa):
        got = convviz.conv2d_backprop_input(list(g.input_shape), filt, dy, **kwargs)
        nchw = convviz.conv2d_backprop_input(
            [2, cin, 5, w], filt, dy.transpose(0, 3, 1, 2), _four("NCHW", s, s), "SAME",
            data_format="NCHW", dilations=_four("NCHW", d, d))
    assert_close_to_reference(got, exact, bound, dtype)
    assert_close_to_reference(nchw.transpose(0, 2, 3, 1), exact, bound, dtype)


DENSE_FILTER_SHAPES = [  # (K, stride, dilation, width, Cin, Cout, groups)
    (7, 2, 1, 21, 3, 64, 1), (7, 1, 1, 9, 3, 16, 1), (5, 1, 1, 11, 2, 40, 1), (4, 3, 1, 12, 1, 17, 1),
    (3, 1, 1, 37, 3, 8, 1), (7, 2, 1, 30, 8, 32, 1), (5, 1, 2, 13, 3, 16, 1), (3, 1, 1, 14, 6, 12, 2),
    (1, 1, 1, 19, 40, 24, 1), (5, 2, 1, 9, 16, 48, 1),
    # 128 or more output channels: dy staged channel block by channel block
    # (a last block of 1 vector, groups, a merged stem with 4-vector blocks)
    (3, 1, 1, 9, 16, 136, 1), (3, 2, 1, 11, 32, 256, 2), (7, 2, 1, 21, 3, 160, 1), (1, 1, 1, 7, 24, 200, 1),
    # 1x1 with blocked dy: tiles ordered by channel block, each unit staging its own blocks (groups too)
    (1, 1, 1, 9, 32, 256, 2),
]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("shape", DENSE_FILTER_SHAPES, ids=lambda s: "k{}s{}d{}w{}ci{}co{}g{}".format(*s))
def test_dense_filter_gradient_kernels(isa, shape, rng):
    """Every tile shape of the dense filter gradient, with kernels up to 7x7
    (whose per-row tables the scratch must hold), and a kernel row's taps merged
    into one run for a few input channels (Cin <= MR/4, no groups or dilation):
    the interior through the tiles, the border columns pair by pair, so a NaN
    in the output gradient reaches exactly the taps the reference puts it in."""
    k, s, d, w, cin, cout, groups = shape
    kwargs = dict(strides=[1, s, s, 1], padding="SAME", dilations=[1, d, d, 1])
    g = convviz.ConvGeometry.build(batch=2, input_hw=(6, w), in_channels=cin, out_channels=cout,
                                   kernel_hw=(k, k), strides=(s, s), dilations=(d, d), padding="SAME",
                                   groups=groups)
    x = rng.standard_normal(g.input_shape).astype(np.float32)
    dy = rng.standard_normal(g.output_shape).astype(np.float32)
    sizes = list(g.filter_shape)
    x64, dy64 = x.astype(np.float64), dy.astype(np.float64)
    exact = convviz.reference.conv2d_backprop_filter(x64, sizes, dy64, **kwargs)
    bound = convviz.reference.conv2d_backprop_filter(np.abs(x64), sizes, np.abs(dy64), **kwargs)
    nan_dy = dy.copy()
    nan_dy[1, -1, 0, :] = np.nan  # a border column: some taps of a merged row read the padding there
    nan_exact = convviz.reference.conv2d_backprop_filter(x64, sizes, nan_dy.astype(np.float64), **kwargs)
    with cpu.use_isa(isa):
        got = [convviz.conv2d_backprop_filter(x, sizes, dy, n_threads=n, **kwargs) for n in (1, 2, 3)]
        got_nan = convviz.conv2d_backprop_filter(x, sizes, nan_dy, **kwargs)
    assert_close_to_reference(got[0], exact, bound, "float32")
    for other in got[1:]:
        np.testing.assert_array_equal(got[0].view(np.uint32), other.view(np.uint32))
    np.testing.assert_array_equal(np.isnan(got_nan), np.isnan(nan_exact))


FORWARD_SHAPES = [  # (K, stride, batch, height/width, Cin, Cout, groups)
    # channel-block units (the filter outweighs the input), blocks packed by the
    # units themselves: 4-vector blocks on AVX-512 (rows of 7 or fewer columns)
    # with a last block of 3 or 1 vectors, split sums (a block's filter past
    # 128 KiB), groups, a stride
    (3, 1, 1, 6, 40, 296, 1), (3, 1, 1, 7, 64, 304, 1), (3, 2, 1, 9, 48, 520, 2), (3, 1, 1, 5, 256, 1088, 4),
    # output-row units: short rows (4-vector blocks), wide rows, a filter packed
    # block by block (256 or more channels)
    (1, 1, 8, 7, 16, 100, 1), (3, 1, 2, 20, 32, 40, 1), (3, 2, 4, 16, 64, 272, 1),
]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("shape", FORWARD_SHAPES, ids=lambda s: "k{}s{}n{}hw{}ci{}co{}g{}".format(*s))
def test_forward_kernels(isa, shape, rng):
    """The forward pass's channel blocks of every width, packed whole or by the
    units that use them, with split sums; the same bits for any thread count; a
    NaN in one block's corner tap reaches exactly the pixels whose window holds
    it (that block alone takes the exact border path)."""
    k, s, n, hw, cin, cout, groups = shape
    kwargs = dict(strides=[1, s, s, 1], padding="SAME")
    g = convviz.ConvGeometry.build(batch=n, input_hw=(hw, hw), in_channels=cin, out_channels=cout,
                                   kernel_hw=(k, k), strides=(s, s), dilations=(1, 1), padding="SAME",
                                   groups=groups)
    x = rng.standard_normal(g.input_shape).astype(np.float32)
    filt = rng.standard_normal(g.filter_shape).astype(np.float32)
    x64, filt64 = x.astype(np.float64), filt.astype(np.float64)
    exact = convviz.reference.conv2d(x64, filt64, **kwargs)
    bound = convviz.reference.conv2d(np.abs(x64), np.abs(filt64), **kwargs)
    nan_filt = filt.copy()
    nan_filt[0, 0, 1, min(70, cout - 1)] = np.nan  # the top-left tap: reads the padding in row and column 0
    nan_exact = convviz.reference.conv2d(x64, nan_filt.astype(np.float64), **kwargs)
    with cpu.use_isa(isa):
        got = [convviz.conv2d(x, filt, n_threads=t, **kwargs) for t in (1, 2, 3)]
        got64 = convviz.conv2d(x64, filt64, **kwargs)
        got16 = convviz.conv2d(x.astype(np.float16), filt.astype(np.float16), **kwargs)
        got_nan = convviz.conv2d(x, nan_filt, n_threads=2, **kwargs)
    assert_close_to_reference(got[0], exact, bound, "float32")
    assert_close_to_reference(got64, exact, bound, "float64")
    exact16 = convviz.reference.conv2d(x.astype(np.float16).astype(np.float64),
                                       filt.astype(np.float16).astype(np.float64), **kwargs)
    assert_close_to_reference(got16, exact16, bound, "float16")
    for other in got[1:]:
        np.testing.assert_array_equal(got[0].view(np.uint32), other.view(np.uint32))
    np.testing.assert_array_equal(np.isnan(got_nan), np.isnan(nan_exact))
    finite = ~np.isnan(nan_exact)
    assert_close_to_reference(got_nan[finite], nan_exact[finite], bound[finite], "float32")


@pytest.mark.parametrize("isa", ISAS)
def test_input_gradient_reads_wide_dy_rows_in_place(isa, rng):
    """dy rows whose staged copies would pass 4 MB a thread are read in place
    (edge tiles copy their window with zero padding); smaller ones are staged.
    Both give the reference; with an Inf tap, edge tiles go exact."""
    kwargs = dict(strides=[1, 1, 1, 1], padding="SAME")
    for width, cout in ((260, 2048), (19, 64)):  # in place (3 x ~280 x 2048 x 4 B), staged
        filt = rng.standard_normal((3, 3, 8, cout)).astype(np.float32)
        dy = rng.standard_normal((1, 2, width, cout)).astype(np.float32)
        sizes = [1, 2, width, 8]
        exact, bound = reference_pair_bpi(sizes, filt, dy, **kwargs)
        inf_filt = filt.copy()
        inf_filt[0, 0, 2, 5] = np.inf
        inf_exact = convviz.reference.conv2d_backprop_input(sizes, inf_filt.astype(np.float64),
                                                            dy.astype(np.float64), **kwargs)
        with cpu.use_isa(isa):
            got = convviz.conv2d_backprop_input(sizes, filt, dy, **kwargs)
            got_inf = convviz.conv2d_backprop_input(sizes, inf_filt, dy, **kwargs)
        assert_close_to_reference(got, exact, bound, "float32")
        np.testing.assert_array_equal(np.isfinite(got_inf), np.isfinite(inf_exact))


@pytest.mark.parametrize("isa", ISAS)
def test_every_isa_is_deterministic_across_threads(isa, rng, monkeypatch):
    monkeypatch.setattr(cpu, "MIN_PARALLEL_WORK", 0.0)  # parallel even for small work
    x = rng.standard_normal((3, 40, 37, 32)).astype(np.float32)
    dy = rng.standard_normal((3, 40, 37, 32)).astype(np.float32)
    filt = rng.standard_normal((3, 3, 32, 32)).astype(np.float32)
    with cpu.use_isa(isa):
        dws = [convviz.depthwise_conv2d_native_backprop_filter(x, [3, 3, 32, 1], dy, [1] * 4, "SAME", n_threads=n)
               for n in (1, 2, 3, 5)]
        dxs = [convviz.conv2d_backprop_input(list(x.shape), filt, dy, [1] * 4, "SAME", n_threads=n)
               for n in (1, 2, 3, 5)]
    for results in (dws, dxs):
        for other in results[1:]:
            np.testing.assert_array_equal(results[0].view(np.uint32), other.view(np.uint32))


def test_isa_selection():
    assert cpu.current_isa() in ISAS
    assert ISAS[-1] == "generic"
    with pytest.raises(ValueError, match="not available"):
        with cpu.use_isa("sse9"):
            pass
