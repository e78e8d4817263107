"""The explorer's cross-check: settings to try, and the comparison of core.js's answer with convviz.

``CASES`` is a fixed grid of explorer settings over all seven ops (both SAME padding splits,
asymmetric explicit pads, strides larger than the kernel, dilations, lost rows, channels,
groups, depthwise multipliers, batch 2, ``output_padding``, decimals, settings with no
window or no valid transposed output).  ``check_case`` takes what core.js computed for one
setting (``tests/explorer/dump.mjs`` in Node, or the same code in Chromium) and asserts it
equals convviz: the geometry from :mod:`convviz.geometry`, the example numbers from
``convviz.explorer._setting``, the result from the kernels (``convviz.conv_transpose2d``
for the transposed mode), every worked sum, and every cell's index in the op's own tensor.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import numpy as np

from convviz.explorer._setting import MODES, OPS, build_geometry, compute, defaults, normalize, setting_key

DENSE = [op for op in OPS if not MODES[op].depthwise and not MODES[op].transposed]
DEPTHWISE = [op for op in OPS if MODES[op].depthwise]


def _channels(rng: random.Random, op: str) -> dict[str, int]:
    """Channels, groups, multiplier and batch that fit the op (groups dividing both channel counts)."""
    batch = rng.choice((1, 1, 2))
    if MODES[op].depthwise:
        return dict(in_channels=rng.randint(1, 3), multiplier=rng.randint(1, 3), batch=batch)
    groups = rng.choice((1, 1, 2, 3, 4))
    per_in, per_out = rng.randint(1, max(1, 4 // groups)), rng.randint(1, max(1, 4 // groups))
    return dict(in_channels=groups * per_in, out_channels=groups * per_out, groups=groups, batch=batch)


def _settings() -> list[dict[str, Any]]:
    rng = random.Random(20261127)
    cases: list[dict[str, Any]] = []
    base = defaults()
    # A structured grid: op x padding x stride/dilation pairs that matter, one channel.
    steps = [(1, 1), (2, 1), (3, 1), (2, 2), (4, 1), (1, 3)]
    pads = {"SAME": (0, 0, 0, 0), "VALID": (0, 0, 0, 0), "EXPLICIT": (2, 0, 1, 3)}
    for op, padding, (stride, dilation) in itertools.product(DENSE + DEPTHWISE, pads, steps):
        top, bottom, left, right = pads[padding]
        cases.append(dict(base, op=op, padding=padding, input_h=8, input_w=7, kernel_h=3, kernel_w=2,
                          stride_h=stride, stride_w=max(1, stride - 1), dilation_h=dilation, dilation_w=1,
                          pad_top=top, pad_bottom=bottom, pad_left=left, pad_right=right,
                          multiplier=2 if MODES[op].depthwise and stride == 2 else 1, seed=len(cases)))
    # The transposed convolution: stride x padding x output_padding, one channel.
    for stride, pad, extra in itertools.product((1, 2, 3), (0, 1, 2), (0, 1, 2)):
        cases.append(dict(base, op="conv_transpose2d", input_h=4, input_w=3, kernel_h=3, kernel_w=2,
                          stride_h=stride, stride_w=stride, pad_top=pad, pad_left=min(pad, 1),
                          output_padding_h=extra, output_padding_w=min(extra, stride - 1), seed=len(cases)))
    # Random settings across the whole range of every control, with channels, groups and batch.
    while len(cases) < 520:
        op = rng.choice(OPS)
        padding = rng.choice(("SAME", "VALID", "EXPLICIT"))
        stride_h, stride_w, dilation_h, dilation_w = (rng.randint(1, 4), rng.randint(1, 4), rng.randint(1, 3),
                                                      rng.randint(1, 3))
        cases.append(dict(
            base, op=op, padding=padding,
            input_h=rng.randint(1, 9), input_w=rng.randint(1, 9), kernel_h=rng.randint(1, 4),
            kernel_w=rng.randint(1, 4), stride_h=stride_h, stride_w=stride_w, dilation_h=dilation_h,
            dilation_w=dilation_w, pad_top=rng.randint(0, 3), pad_bottom=rng.randint(0, 3),
            pad_left=rng.randint(0, 3), pad_right=rng.randint(0, 3),
            output_padding_h=rng.randint(0, max(stride_h, dilation_h) - 1),
            output_padding_w=rng.randint(0, max(stride_w, dilation_w) - 1),
            seed=rng.randint(0, 99999), values=rng.choice(("integers", "integers", "decimals")),
            **_channels(rng, op)))
    # Named cases a teacher will show, and settings with no result.
    named = [
        dict(input_h=8, input_w=8, kernel_h=3, kernel_w=3, stride_h=3, stride_w=3, padding="VALID"),  # lost rows
        dict(input_h=9, input_w=9, kernel_h=2, kernel_w=2, stride_h=3, stride_w=3, padding="VALID"),  # gaps
        dict(input_h=11, input_w=11, kernel_h=3, kernel_w=3, stride_h=2, stride_w=2, dilation_h=2,
             dilation_w=2, padding="SAME"),  # gridding
        dict(input_h=16, input_w=16, kernel_h=3, kernel_w=3, stride_h=1, stride_w=1, padding="SAME",
             in_channels=4, out_channels=4, multiplier=2),  # the latency benchmark's multi-channel row
        dict(input_h=2, input_w=2, kernel_h=5, kernel_w=5, padding="VALID"),  # no window fits
        dict(in_channels=3, out_channels=2, groups=2),  # groups do not divide the channels (dense ops)
    ]
    for op in OPS:
        for extra in named:
            cases.append(dict(base, op=op, **extra))
    cases.append(dict(base, op="conv_transpose2d", input_h=2, input_w=2, kernel_h=2, kernel_w=2, pad_top=2,
                      stride_h=1, stride_w=1))  # padding crops everything
    cases.append(dict(base, op="conv_transpose2d", stride_h=2, output_padding_h=2))  # output_padding >= stride
    return cases


CASES: list[dict[str, Any]] = _settings()


def _axis(a) -> dict[str, Any]:
    return {"out": a.output_size, "before": a.pad_before, "after": a.pad_after, "eff": a.effective_kernel_size,
            "coverage": a.coverage().tolist(), "lost": a.zero_gradient_indices().tolist()}


def _transposed_axis(p: dict[str, Any], a: str) -> dict[str, Any]:
    """A transposed axis by PyTorch's definition: input cell o, tap t write output o*s - p + t*d."""
    size, k, s, d = p[f"input_{a}"], p[f"kernel_{a}"], p[f"stride_{a}"], p[f"dilation_{a}"]
    pad, extra = p["pad_top" if a == "h" else "pad_left"], p[f"output_padding_{a}"]
    out_size = (size - 1) * s - 2 * pad + d * (k - 1) + extra + 1
    coverage = [0] * out_size
    for o in range(size):
        for t in range(k):
            if 0 <= o * s - pad + t * d < out_size:
                coverage[o * s - pad + t * d] += 1
    return {"out": size, "before": pad, "after": pad - extra, "eff": (k - 1) * d + 1, "coverage": coverage,
            "lost": [i for i, n in enumerate(coverage) if n == 0]}


def _array(t: dict[str, Any]) -> np.ndarray:
    return np.asarray(t["data"], dtype=np.float64).reshape(t["batch"], t["channels"], t["rows"], t["cols"])


def canonical_query(params: dict[str, Any]) -> dict[str, Any]:
    """The setting a link names (``core.canonical``): what the op does not use at its default."""
    p = normalize(params)
    d = defaults()
    mode = MODES[p["op"]]
    unused = [] if p["padding"] == "EXPLICIT" else ["pad_top", "pad_bottom", "pad_left", "pad_right"]
    unused += [] if mode.transposed else ["output_padding_h", "output_padding_w"]
    unused += ["out_channels", "groups"] if mode.depthwise else ["multiplier"]
    return dict(p, **{name: d[name] for name in unused})


def check_case(params: dict[str, Any], got: dict[str, Any]) -> None:
    """Assert that core.js's answer ``got`` for ``params`` equals convviz's."""
    p = normalize(params)
    assert got["reparsed"] == canonical_query(params), (got["query"], params)
    try:
        result = compute(params)
    except ValueError as err:  # groups, output_padding or padding that PyTorch / TensorFlow refuse
        assert "error" in got, (params, str(err))
        words = str(err).split(":")[0]
        assert words in got["error"], (got["error"], str(err))
        return
    if MODES[p["op"]].transposed:
        assert got["rows"] == _transposed_axis(p, "h"), ("rows", params)
        assert got["cols"] == _transposed_axis(p, "w"), ("cols", params)
    else:
        g = build_geometry(params)
        assert got["rows"] == _axis(g.rows), ("rows", params)
        assert got["cols"] == _axis(g.cols), ("cols", params)
    if result is None:
        assert "error" in got and "No window fits" in got["error"], params
        return
    assert "error" not in got, params
    assert got["key"] == setting_key(params)
    assert got["output"] == result.output_panel
    for name, panel in result.inputs.items():
        np.testing.assert_array_equal(_array(got["tensors"][name]), panel, err_msg=f"{name} of {params}")
    js = _array(got["tensors"][result.output_panel])
    sums = np.asarray(got["sums"]).reshape(js.shape)
    if p["values"] == "integers":  # small integers: every order of summation is exact
        np.testing.assert_array_equal(js, result.output, err_msg=str(params))
        np.testing.assert_array_equal(sums, result.output, err_msg=str(params))
    else:
        np.testing.assert_allclose(js, result.output, rtol=0, atol=1e-12, err_msg=str(params))
        np.testing.assert_allclose(sums, result.output, rtol=0, atol=1e-12, err_msg=str(params))
    # data-index: every cell's index, in the tensor convviz takes or returns for the op, holds its value
    for name, array in result.arrays.items():
        values = _array(got["tensors"][name]).ravel()
        index = tuple(np.asarray(got["indices"][name]).T)
        assert np.asarray(got["indices"][name]).shape == (array.size, 4), name
        if name == result.output_panel and p["values"] != "integers":
            np.testing.assert_allclose(array[index], values, rtol=0, atol=1e-12, err_msg=f"data-index of {name}")
        else:
            np.testing.assert_array_equal(array[index], values, err_msg=f"data-index of {name} in {params}")
