"""Expected outputs produced with TensorFlow 2.21 and MindSpore 2.10 (tests/data).

tf_semantics.npz holds the exact (float64) gradients of 160 random cases over both
ops, every padding, both layouts, strides, dilations, groups and dtypes, cross-
checked against PyTorch autograd; for 44 of them TensorFlow's CPU kernel erred or
returned wrong values.  mindspore.npz holds MindSpore's own outputs for 40
Conv2DBackpropInput cases.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import DTYPES, assert_close_to_reference, reference_pair_bpi, reference_pair_dwf

import convviz
from convviz.compat import tf as cvtf
from convviz.compat.mindspore import ops as msops

DATA = Path(__file__).parent / "data"


def _load(name: str):
    archive = np.load(DATA / name)
    return archive, json.loads(archive["meta"].tobytes())


TF_ARCHIVE, TF_CASES = _load("tf_semantics.npz")
MS_ARCHIVE, MS_CASES = _load("mindspore.npz")


def _case_id(case: dict) -> str:
    tf_said = case["tf"].split(":")[0].split(" ")[0]
    return f"{case['id']}-{case['op']}-{case['padding']}-{case['data_format']}-{case['dtype']}-tf_{tf_said}"


def _window(case: dict) -> dict:
    return dict(strides=case["strides"], padding=case["padding"],
                explicit_paddings=case["explicit_paddings"], data_format=case["data_format"],
                dilations=case["dilations"])


def test_oracle_files_cover_what_they_claim():
    ops = {c["op"] for c in TF_CASES}
    assert len(TF_CASES) == 160 and ops == {"bpi", "dwf"}
    assert sum(c["tf"].startswith("differs") for c in TF_CASES) == 21
    assert {c["dtype"] for c in TF_CASES} == {"float16", "bfloat16", "float32", "float64"}
    assert len(MS_CASES) == 40


@pytest.mark.parametrize("case", TF_CASES, ids=_case_id)
def test_tensorflow_oracle(case):
    i, dtype_name = case["id"], case["dtype"]
    expected = TF_ARCHIVE[f"{i}_expected"]
    window = _window(case)
    if case["op"] == "bpi":
        filt = TF_ARCHIVE[f"{i}_filter"].astype(DTYPES[dtype_name])
        dy = TF_ARCHIVE[f"{i}_out_backprop"].astype(DTYPES[dtype_name])
        got = convviz.conv2d_backprop_input(case["input_sizes"], filt, dy, **window)
        # The same call through the tf.raw_ops-shaped namespace gives the same bits.
        raw = cvtf.raw_ops.Conv2DBackpropInput(input_sizes=case["input_sizes"], filter=filt,
                                               out_backprop=dy, **window)
        exact, bound = reference_pair_bpi(case["input_sizes"], filt, dy, **window)
        if len(case["input_sizes"]) == 4:
            assert tuple(case["input_sizes"]) == got.shape
    else:
        x = TF_ARCHIVE[f"{i}_input"].astype(DTYPES[dtype_name])
        dy = TF_ARCHIVE[f"{i}_out_backprop"].astype(DTYPES[dtype_name])
        got = convviz.depthwise_conv2d_native_backprop_filter(x, case["filter_sizes"], dy, **window)
        raw = cvtf.raw_ops.DepthwiseConv2dNativeBackpropFilter(
            input=x, filter_sizes=case["filter_sizes"], out_backprop=dy, **window)
        exact, bound = reference_pair_dwf(x, case["filter_sizes"], dy, **window)
        assert tuple(case["filter_sizes"]) == got.shape
    np.testing.assert_array_equal(raw, got)
    assert_close_to_reference(got, exact, bound, dtype_name)
    if dtype_name == "float64":
        # The inputs are exact in float64: the oracle itself is the target.
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())
    else:
        # The oracle was computed from unrounded inputs: allow for input rounding.
        input_rounding = {"float32": 1e-6, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype_name]
        scale = np.abs(expected).max() if expected.size else 1.0
        np.testing.assert_allclose(got.astype(np.float64), expected, rtol=0,
                                   atol=4 * input_rounding * max(scale, 1e-30) + 1e-6)


def _tuple(value):
    return tuple(value) if isinstance(value, list) else value


@pytest.mark.parametrize("case", MS_CASES, ids=lambda c: f"{c['id']}-{c['pad_mode']}-g{c['group']}")
def test_mindspore_oracle(case):
    i = case["id"]
    op = msops.Conv2DBackpropInput(
        case["out_channel"], _tuple(case["kernel_size"]), pad_mode=case["pad_mode"],
        pad=_tuple(case["pad"]), stride=_tuple(case["stride"]), dilation=_tuple(case["dilation"]),
        group=case["group"])
    dout = MS_ARCHIVE[f"{i}_dout"].astype(np.float32)
    weight = MS_ARCHIVE[f"{i}_weight"].astype(np.float32)
    got = op(dout, weight, tuple(case["input_size"]))
    expected = MS_ARCHIVE[f"{i}_expected"]
    assert got.shape == tuple(case["input_size"]) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(expected).max()))
