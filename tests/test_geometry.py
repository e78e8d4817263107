"""The geometry module: sizes, pad split, lost rows, coverage -- and that it is what the kernels compute."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import convviz
from convviz.geometry import AxisGeometry, ConvGeometry, effective_kernel_size, same_padding


@pytest.mark.parametrize("k, d, eff", [(1, 1, 1), (3, 1, 3), (3, 2, 5), (4, 3, 10), (1, 7, 1)])
def test_effective_kernel(k, d, eff):
    assert effective_kernel_size(k, d) == eff


@pytest.mark.parametrize("size, k, s, d, pads, out", [
    (8, 3, 2, 1, (0, 1), 4),     # odd extra goes after
    (7, 3, 1, 2, (2, 2), 7),
    (5, 2, 1, 1, (0, 1), 5),
    (10, 1, 3, 1, (0, 0), 4),
    (1, 5, 1, 1, (2, 2), 1),
    (6, 4, 4, 1, (1, 1), 2),     # need = (2-1)*4 + 4 - 6 = 2
    (0, 3, 1, 1, (1, 1), 0),
])
def test_same_padding_and_output_size(size, k, s, d, pads, out):
    assert same_padding(size, k, s, d) == pads
    axis = AxisGeometry.from_padding(size, k, s, d, "SAME")
    assert (axis.pad_before, axis.pad_after, axis.output_size) == (*pads, out)


@pytest.mark.parametrize("size, k, s, d, out, unread", [
    (8, 3, 3, 1, 2, 2), (9, 3, 3, 1, 3, 0), (7, 3, 2, 2, 2, 0), (2, 3, 1, 1, 0, 2), (5, 5, 4, 1, 1, 0),
])
def test_valid_output_size_and_unread_tail(size, k, s, d, out, unread):
    axis = AxisGeometry.from_padding(size, k, s, d, "VALID")
    assert axis.output_size == out and axis.unread_after == unread


def test_explicit_padding_is_taken_as_given():
    axis = AxisGeometry.from_padding(5, 3, 2, 1, "EXPLICIT", (3, 0))
    assert (axis.pad_before, axis.pad_after, axis.padded_size, axis.output_size) == (3, 0, 8, 3)
    assert axis.input_index(0, 0) == -3 and axis.input_index(2, 2) == 3


@given(size=st.integers(0, 30), k=st.integers(1, 6), s=st.integers(1, 5), d=st.integers(1, 4),
       mode=st.sampled_from(["SAME", "VALID", "EXPLICIT"]), before=st.integers(0, 6), after=st.integers(0, 6))
def test_axis_invariants(size, k, s, d, mode, before, after):
    axis = AxisGeometry.from_padding(size, k, s, d, mode, (before, after))
    if mode == "SAME":
        assert axis.output_size == -(-size // s)
        assert axis.pad_after - axis.pad_before in (0, 1)
    table = axis.index_table()
    for tap in range(k):
        inside = np.flatnonzero((table[:, tap] >= 0) & (table[:, tap] < size))
        assert list(axis.output_range(tap)) == inside.tolist()  # contiguous, and exactly these
    counts = np.bincount(table[(table >= 0) & (table < size)], minlength=size) if size else np.zeros(0)
    np.testing.assert_array_equal(axis.coverage(), counts)
    assert axis.zero_gradient_indices().tolist() == np.flatnonzero(counts == 0).tolist()
    if axis.output_size:
        assert (axis.output_size - 1) * s + axis.effective_kernel_size + axis.unread_after == axis.padded_size


@given(size=st.integers(1, 30), k=st.integers(1, 6), s=st.integers(1, 5), d=st.sampled_from([1, 2, 3, 7, 2**31 - 1]),
       mode=st.sampled_from(["SAME", "VALID", "EXPLICIT"]), before=st.integers(0, 6), after=st.integers(0, 40))
def test_input_phases_hold_exactly_the_terms_of_the_input_gradient(size, k, s, d, mode, before, after):
    """Each stride phase's stride-1 convolution adds exactly the (input cell, tap,
    output cell) terms of the direct sum -- none twice, none missing -- and stays
    as small as its terms (a dilation far past the input leaves one tap or none)."""
    axis = AxisGeometry.from_padding(size, k, s, d, mode, (before, after))
    direct = {(axis.input_index(o, tap), tap, o) for o in range(axis.output_size) for tap in range(k)
              if 0 <= axis.input_index(o, tap) < size}
    phases = axis.input_phases()
    assert [p.first for p in phases] == list(range(min(s, size)))
    assert sum(p.count for p in phases) == size
    terms = []
    for p in phases:
        if p.taps is None:
            continue
        taps = list(range(k))[p.taps]
        assert taps == sorted(taps, reverse=True) and taps
        assert p.crop == 0 or p.pad_before == 0
        assert (len(taps) - 1) * p.dilation <= size + axis.output_size and p.pad_before <= size + axis.output_size
        for i in range(p.count):
            for j, tap in enumerate(taps):  # the forward convolution: cell i reads dy cell crop + i - pad + j * dil
                o = p.crop + i - p.pad_before + j * p.dilation
                if p.crop <= o < axis.output_size:
                    terms.append((p.first + i * s, tap, o))
    assert len(terms) == len(set(terms)) and set(terms) == direct


@given(h=st.integers(1, 12), w=st.integers(1, 12), kh=st.integers(1, 4), kw=st.integers(1, 4),
       sh=st.integers(1, 3), sw=st.integers(1, 3), dh=st.integers(1, 3), dw=st.integers(1, 3),
       padding=st.sampled_from(["SAME", "VALID", "EXPLICIT"]), pads=st.tuples(*[st.integers(0, 3)] * 4))
def test_coverage_equals_input_gradient_of_ones(h, w, kh, kw, sh, sw, dh, dw, padding, pads):
    """Coverage is conv2d_backprop_input(ones, ones) on one channel -- the identity the figures rely on."""
    g = ConvGeometry.build(batch=1, input_hw=(h, w), in_channels=1, out_channels=1, kernel_hw=(kh, kw),
                           strides=(sh, sw), dilations=(dh, dw), padding=padding, explicit_paddings=pads)
    explicit = [0, 0, pads[0], pads[1], pads[2], pads[3], 0, 0] if padding == "EXPLICIT" else []
    dx = convviz.conv2d_backprop_input([1, h, w, 1], np.ones((kh, kw, 1, 1)), np.ones(g.output_shape),
                                       [1, sh, sw, 1], padding, explicit, dilations=[1, dh, dw, 1])
    np.testing.assert_array_equal(dx[0, :, :, 0], g.coverage())
    zero_rows = g.zero_gradient_rows()
    assert not dx[0, zero_rows].any()


def test_shapes_in_both_layouts():
    kwargs = dict(batch=2, input_hw=(7, 9), in_channels=6, out_channels=4, kernel_hw=(3, 2),
                  strides=(2, 3), dilations=(1, 2), padding="SAME", groups=2)
    nhwc = ConvGeometry.build(**kwargs)
    nchw = ConvGeometry.build(**kwargs, data_format="NCHW")
    assert nhwc.output_hw == nchw.output_hw == (4, 3)
    assert nhwc.input_shape == (2, 7, 9, 6) and nchw.input_shape == (2, 6, 7, 9)
    assert nhwc.output_shape == (2, 4, 3, 4) and nchw.output_shape == (2, 4, 4, 3)
    assert nhwc.filter_shape == (3, 2, 3, 4)
    assert nhwc.pads == (1, 1, 0, 0)  # columns: need = 2 * 3 + 3 - 9 = 0


def test_depthwise_geometry():
    g = ConvGeometry.build(batch=1, input_hw=(5, 5), in_channels=3, out_channels=6, kernel_hw=(3, 3),
                           strides=(1, 1), dilations=(1, 1), padding="SAME", depthwise=True)
    assert g.groups == 3 and g.multiplier == 2 and g.filter_shape == (3, 3, 3, 2)


def test_input_cell_and_padding():
    g = ConvGeometry.build(batch=1, input_hw=(4, 4), in_channels=1, out_channels=1, kernel_hw=(3, 3),
                           strides=(2, 2), dilations=(1, 1), padding="EXPLICIT", explicit_paddings=(1, 0, 1, 0))
    assert g.input_cell((0, 0), (0, 0)) == (-1, -1) and g.is_padding((-1, -1))
    assert g.input_cell((1, 1), (2, 1)) == (3, 2) and not g.is_padding((3, 2))
