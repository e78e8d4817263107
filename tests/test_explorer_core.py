"""The explorer's JavaScript core (core.js) against convviz, under Node.

* Node's own test runner runs ``tests/explorer/core.test.mjs`` (unit tests of core.js);
* ``tests/explorer/dump.mjs`` computes every setting of ``tests/explorer_cases.CASES``
  with core.js, and each answer is checked against convviz's geometry, example
  numbers, kernels and worked sums.

Node 20 is on every machine of this project; outside CI a missing ``node`` skips,
in CI it fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from convviz.explorer._setting import PARAMS, example_tensor, hash32
from explorer_cases import CASES, check_case

ROOT = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
NODE = shutil.which("node")


def _need_node() -> str:
    if NODE is None:
        if IN_CI:
            pytest.fail("node is not installed (the explorer's JavaScript is tested with Node)")
        pytest.skip("node is not installed")
    return NODE


@pytest.fixture(scope="module")
def node_results():
    node = _need_node()
    run = subprocess.run([node, str(ROOT / "tests" / "explorer" / "dump.mjs")], input=json.dumps(CASES),
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_node_unit_tests():
    node = _need_node()
    run = subprocess.run([node, "--test", str(ROOT / "tests" / "explorer" / "core.test.mjs")],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "# fail 0" in run.stdout and "# pass " in run.stdout


def test_the_grid_is_wide_enough():
    assert len(CASES) >= 200
    ops = {c["op"] for c in CASES}
    assert ops == {"input_grad", "depthwise_filter_grad", "forward"}
    assert any(c["padding"] == "EXPLICIT" and c["pad_top"] != c["pad_bottom"] for c in CASES)
    assert any(c["stride_h"] > c["kernel_h"] for c in CASES)
    assert any(c["dilation_h"] > 1 for c in CASES)
    assert any(c["values"] == "decimals" for c in CASES)


def test_the_explorer_ops_are_the_records_explorer_ids():
    """The menu lists exactly the ops whose record names an explorer id, and each
    op's panels come from its arguments' roles (the input gradient: W and dL/dy)."""
    from convviz.explorer._setting import OPS, RECORDS, build_geometry, defaults, input_shapes
    from convviz.ops import OPS as RECORD_LIST

    assert sorted(OPS) == sorted(op.explorer for op in RECORD_LIST if op.explorer)
    assert RECORDS["input_grad"].name == "conv2d_backprop_input"
    params = defaults()
    assert set(input_shapes(params, build_geometry(params))) == {"w", "dy"}


def test_parameter_tables_agree(node_results):
    js = node_results["params"]
    assert list(js) == list(PARAMS)
    for name, spec in PARAMS.items():
        assert js[name]["default"] == spec[0], name
        if len(spec) == 2:
            assert tuple(js[name]["choices"]) == spec[1], name
        else:
            assert (js[name]["min"], js[name]["max"]) == spec[1:], name


@pytest.mark.parametrize("index", range(len(CASES)))
def test_core_js_equals_convviz(node_results, index):
    check_case(CASES[index], node_results["results"][index])


def test_some_cases_lose_rows_and_some_fit_no_window(node_results):
    results = node_results["results"]
    assert sum(1 for r in results if r["rows"]["lost"] or r["cols"]["lost"]) >= 20
    assert sum(1 for r in results if "error" in r) >= 3


@pytest.mark.parametrize("index", range(0, len(CASES), 7))
def test_the_url_query_round_trips(node_results, index):
    result = node_results["results"][index]
    if "error" in result:
        return
    expected = dict(CASES[index])
    for name in ("pad_top", "pad_bottom", "pad_left", "pad_right"):
        if expected["padding"] != "EXPLICIT":
            expected[name] = 0  # the query leaves out pads that are not used
    if expected["op"] != "depthwise_filter_grad":
        expected["multiplier"] = 1
    assert result["reparsed"] == expected, result["query"]


def test_python_values_mirror_the_hash():
    assert hash32(0, 1, [0, 1, 2, 3]).tolist() == [3338833744, 273988755, 81517689, 741570629]
    ints = example_tensor(3, 1, 10, 10, 2, "integers")
    assert set(ints.ravel()) <= {-2.0, -1.0, 1.0, 2.0, 3.0}
    decimals = example_tensor(3, 1, 10, 10, 1, "decimals")
    assert (decimals != 0).all() and (abs(decimals) <= 0.9).all()
