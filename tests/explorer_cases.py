"""The explorer's cross-check: settings to try, and the comparison of core.js's answer with convviz.

``CASES`` is a fixed grid of explorer settings (every op, both padding splits, asymmetric
explicit pads, strides larger than the kernel, dilations, lost rows, multipliers, decimals,
settings where no window fits).  ``check_case`` takes what core.js computed for one setting
(``tests/explorer/dump.mjs`` in Node, or the same code in Chromium) and asserts it equals
convviz: the geometry from :mod:`convviz.geometry`, the example numbers from
``convviz.explorer._setting``, the output from the kernels, and every worked sum.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import numpy as np

from convviz.explorer._setting import compute, defaults, setting_key


def _settings() -> list[dict[str, Any]]:
    rng = random.Random(20261123)
    cases: list[dict[str, Any]] = []
    base = defaults()
    # A structured grid: op x padding x stride/dilation pairs that matter.
    steps = [(1, 1), (2, 1), (3, 1), (2, 2), (4, 1), (1, 3)]
    pads = {"SAME": (0, 0, 0, 0), "VALID": (0, 0, 0, 0), "EXPLICIT": (2, 0, 1, 3)}
    ops = ("input_grad", "depthwise_filter_grad", "forward")
    for op, padding, (stride, dilation) in itertools.product(ops, pads, steps):
        top, bottom, left, right = pads[padding]
        cases.append(dict(base, op=op, padding=padding, input_h=8, input_w=7, kernel_h=3, kernel_w=2,
                          stride_h=stride, stride_w=max(1, stride - 1), dilation_h=dilation, dilation_w=1,
                          pad_top=top, pad_bottom=bottom, pad_left=left, pad_right=right,
                          multiplier=2 if op == "depthwise_filter_grad" and stride == 2 else 1, seed=len(cases)))
    # Random settings across the whole range of every control.
    while len(cases) < 260:
        padding = rng.choice(("SAME", "VALID", "EXPLICIT"))
        cases.append(dict(
            base, op=rng.choice(("input_grad", "depthwise_filter_grad", "forward")), padding=padding,
            input_h=rng.randint(1, 13), input_w=rng.randint(1, 13), kernel_h=rng.randint(1, 5),
            kernel_w=rng.randint(1, 5), stride_h=rng.randint(1, 5), stride_w=rng.randint(1, 5),
            dilation_h=rng.randint(1, 3), dilation_w=rng.randint(1, 3),
            pad_top=rng.randint(0, 4), pad_bottom=rng.randint(0, 4), pad_left=rng.randint(0, 4),
            pad_right=rng.randint(0, 4), multiplier=rng.randint(1, 3), seed=rng.randint(0, 99999),
            values=rng.choice(("integers", "integers", "decimals"))))
    # Named cases a teacher will show.
    named = [
        dict(input_h=8, input_w=8, kernel_h=3, kernel_w=3, stride_h=3, stride_w=3, padding="VALID"),  # lost rows
        dict(input_h=9, input_w=9, kernel_h=2, kernel_w=2, stride_h=3, stride_w=3, padding="VALID"),  # gaps
        dict(input_h=11, input_w=11, kernel_h=3, kernel_w=3, stride_h=2, stride_w=2, dilation_h=2,
             dilation_w=2, padding="SAME"),  # gridding
        dict(input_h=24, input_w=24, kernel_h=5, kernel_w=5, stride_h=1, stride_w=1, padding="SAME"),
        dict(input_h=2, input_w=2, kernel_h=5, kernel_w=5, padding="VALID"),  # no window fits
    ]
    for op in ("input_grad", "depthwise_filter_grad", "forward"):
        for extra in named:
            cases.append(dict(base, op=op, **extra))
    return cases


CASES: list[dict[str, Any]] = _settings()


def _axis(a) -> dict[str, Any]:
    return {"out": a.output_size, "before": a.pad_before, "after": a.pad_after, "eff": a.effective_kernel_size,
            "coverage": a.coverage().tolist(), "lost": a.zero_gradient_indices().tolist()}


def _array(t: dict[str, Any]) -> np.ndarray:
    return np.asarray(t["data"], dtype=np.float64).reshape(t["channels"], t["rows"], t["cols"])


def check_case(params: dict[str, Any], got: dict[str, Any]) -> None:
    """Assert that core.js's answer ``got`` for ``params`` equals convviz's."""
    result = compute(params)
    from convviz.explorer._setting import build_geometry

    g = build_geometry(params)
    assert got["rows"] == _axis(g.rows), ("rows", params)
    assert got["cols"] == _axis(g.cols), ("cols", params)
    if result is None:
        assert "error" in got and "No window fits" in got["error"], params
        return
    assert "error" not in got, params
    assert got["key"] == setting_key(params)
    assert got["output"] == result.output_panel
    for name, plane in result.inputs.items():
        np.testing.assert_array_equal(_array(got["tensors"][name]), plane, err_msg=f"{name} of {params}")
    js = _array(got["tensors"][result.output_panel])
    sums = np.asarray(got["sums"]).reshape(js.shape)
    if params["values"] == "integers":  # small integers: every order of summation is exact
        np.testing.assert_array_equal(js, result.output, err_msg=str(params))
        np.testing.assert_array_equal(sums, result.output, err_msg=str(params))
    else:
        np.testing.assert_allclose(js, result.output, rtol=0, atol=1e-12, err_msg=str(params))
        np.testing.assert_allclose(sums, result.output, rtol=0, atol=1e-12, err_msg=str(params))
