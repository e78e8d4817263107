"""The explorer's JavaScript core (core.js) against convviz, under Node.

* Node's own test runner runs ``tests/explorer/core.test.mjs`` (unit tests of core.js);
* ``tests/explorer/dump.mjs`` computes every setting of ``tests/explorer_cases.CASES``
  with core.js, and each answer is checked against convviz's geometry, example
  numbers, kernels and worked sums.

Node 20 is on every machine of this project; outside CI a missing ``node`` skips,
in CI it fails.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from convviz.explorer._setting import (MODES, OP_ALIASES, OPS, PARAMS, compute, defaults, example_tensor, hash32,
                                      input_shapes)
from explorer_cases import CASES, DENSE, DEPTHWISE, check_case

ROOT = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
NODE = shutil.which("node")


def _need_node() -> str:
    if NODE is None:
        if IN_CI:
            pytest.fail("node is not installed (the explorer's JavaScript is tested with Node)")
        pytest.skip("node is not installed")
    return NODE


def _node_json(script: Path, settings: list[dict[str, Any]]) -> Any:
    """What a Node script of tests/explorer/ writes for these settings (JSON on stdin and stdout)."""
    node = _need_node()
    run = subprocess.run([node, str(script)], input=json.dumps(settings), capture_output=True, text=True, timeout=120,
                         check=False)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@pytest.fixture(scope="module")
def node_results():
    return _node_json(ROOT / "tests" / "explorer" / "dump.mjs", CASES)


def test_node_unit_tests():
    node = _need_node()
    run = subprocess.run([node, "--test", str(ROOT / "tests" / "explorer" / "core.test.mjs")],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "# fail 0" in run.stdout and "# pass " in run.stdout


def test_the_grid_is_wide_enough(node_results):
    computed = [c for c, r in zip(CASES, node_results["results"]) if "error" not in r]
    assert len(computed) >= 400
    assert {c["op"] for c in computed} == set(OPS)
    assert any(c["padding"] == "EXPLICIT" and c["pad_top"] != c["pad_bottom"] for c in computed)
    assert any(c["stride_h"] > c["kernel_h"] for c in computed)
    assert any(c["dilation_h"] > 1 for c in computed)
    assert any(c["values"] == "decimals" for c in computed)
    assert any(c["groups"] > 1 and c["groups"] < c["in_channels"] and c["op"] in DENSE for c in computed)
    assert any(c["in_channels"] > 1 and c["multiplier"] > 1 and c["op"] in DEPTHWISE for c in computed)
    assert sum(c["batch"] == 2 for c in computed) >= 50
    for op in OPS:
        assert sum(c["op"] == op for c in computed) >= 40, op
    transposed = [c for c in computed if c["op"] == "conv_transpose2d"]
    assert any(c["output_padding_h"] > 0 and c["groups"] > 1 for c in transposed)
    assert any(c["output_padding_h"] > c["pad_top"] for c in transposed)  # rows that no input reaches


def test_the_explorer_modes_are_the_op_records(node_results):
    """The menu lists every op record by its public name, then conv_transpose2d; each mode's
    panels come from its record's arguments (the input gradient: W and dL/dy), and core.js's
    table says the same."""
    from convviz.ops import OPS as RECORD_LIST

    assert OPS == (*(op.name for op in RECORD_LIST), "conv_transpose2d")
    assert set(input_shapes(defaults())) == {"w", "dy"}
    js = node_results["records"]
    assert list(js) == list(OPS)
    for name, mode in MODES.items():
        assert (tuple(js[name]["given"]), js[name]["result"], js[name]["depthwise"], js[name]["transposed"]) == (
            mode.given, mode.result, mode.depthwise, mode.transposed), name
    assert OP_ALIASES == {"forward": "conv2d", "input_grad": "conv2d_backprop_input",
                          "depthwise_filter_grad": "depthwise_conv2d_native_backprop_filter",
                          "filter_grad": "depthwise_conv2d_native_backprop_filter"}


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
    assert sum(1 for r in results if r["rows"].get("lost") or r["cols"].get("lost")) >= 20
    assert sum(1 for r in results if "error" in r and "No window fits" in r["error"]) >= 3
    for words in ("groups must divide", "output_padding must be smaller", "padding crops more"):
        assert any(words in r.get("error", "") for r in results), words


def test_python_values_mirror_the_hash():
    assert hash32(0, 1, [0, 1, 2, 3]).tolist() == [3338833744, 273988755, 81517689, 741570629]
    ints = example_tensor(3, 1, 10, 10, 2, "integers")
    assert set(ints.ravel()) <= {-2.0, -1.0, 1.0, 2.0, 3.0}
    decimals = example_tensor(3, 1, 10, 10, 1, "decimals")
    assert (decimals != 0).all() and (abs(decimals) <= 0.9).all()


# Every op, channels, groups, batch, explicit pads, dilation, output_padding: one setting in 6.
CODE_CASES = CASES[::6]


@pytest.fixture(scope="module")
def exported_code():
    return _node_json(ROOT / "tests" / "explorer" / "code.mjs", CODE_CASES)


def _run_exported(code: dict[str, str]) -> np.ndarray:
    namespace: dict[str, Any] = {}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(code["code"], "<exported>", "exec"), namespace)  # noqa: S102 - the page's own code, tested
    return np.asarray(namespace[code["result"]])


def test_the_exported_convviz_code_computes_the_numbers_shown(exported_code):
    ran = {op: 0 for op in OPS}
    for params, code in zip(CODE_CASES, exported_code):
        if code is None:
            continue
        ref = compute(params)
        expected = ref.arrays[ref.output_panel]
        got = _run_exported(code["convviz"])
        np.testing.assert_array_equal(got, expected, err_msg=str(params))  # the same kernel, the same arrays
        ran[params["op"]] += 1
    assert min(ran.values()) >= 3, ran


@pytest.mark.parametrize("lang", ["pytorch", "tensorflow"])
def test_the_exported_peer_code_computes_the_numbers_shown(exported_code, lang):
    pytest.importorskip({"pytorch": "torch", "tensorflow": "tensorflow"}[lang])
    checked = 0
    for params, code in zip(CODE_CASES, exported_code):
        if code is None or code[lang].get("caveat"):  # TensorFlow may refuse it: the code says so
            continue
        ref = compute(params)
        got = _run_exported(code[lang])
        tol = 1e-12 if lang == "pytorch" else 1e-4  # TensorFlow's code runs in float32
        np.testing.assert_allclose(got, ref.arrays[ref.output_panel], rtol=tol, atol=tol, err_msg=str(params))
        checked += 1
    assert checked >= 30, checked


# Mutations of core.js, each a plausible slip, each of which the cross-check must catch:
# (what it breaks, the exact text, what it becomes).  The text must occur exactly as many
# times as given, so that a rewrite of core.js cannot leave a mutation silently unapplied.
MUTATIONS = [
    ("SAME puts the odd cell before", "return [Math.floor(need / 2), need - Math.floor(need / 2), need];",
     "return [Math.ceil(need / 2), need - Math.ceil(need / 2), need];", 1),
    ("a tap reads one row off", "return o * axis.stride - axis.before + t * axis.dilation;",
     "return o * axis.stride - axis.before + t * axis.dilation + (t > 1 ? 1 : 0);", 1),
    ("the transposed output's padding is symmetric",
     '"EXPLICIT", padding, padding - outputPadding);', '"EXPLICIT", padding, padding);', 1),
    ("a group reads the wrong input channels", "const ci = group * ch.inPerGroup + i;",
     "const ci = i;", 1),
    ("the depthwise multiplier indexes the filter wrongly", "co % ch.multiplier : co }",
     "Math.floor(co / ch.convIn) % ch.multiplier : co }", 1),
    ("padding reads count as x values", "if (xi >= 0) o[yi] += x[xi] * w[wi];",
     "if (xi >= 0) o[yi] += x[xi] * w[wi]; else o[yi] += w[wi];", 1),
    ("an input cell's worked sum skips the last output channel of its group",
     "for (let co = group * ch.outPerGroup; co < (group + 1) * ch.outPerGroup; co++)",
     "for (let co = group * ch.outPerGroup; co < (group + 1) * ch.outPerGroup - (ch.outPerGroup > 1 ? 1 : 0); co++)", 1),
    ("data-index of a dense filter swaps I and O", 'return role === "filter" ? [r, c, a, b] : [a, r, c, b];',
     'return role === "filter" ? [r, c, b, a] : [a, r, c, b];', 1),
]


@pytest.mark.parametrize("what, text, mutant, count", MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_the_cross_check_catches_a_mutated_core(tmp_path, what, text, mutant, count):
    source = (ROOT / "convviz" / "explorer" / "core.js").read_text(encoding="utf-8")
    assert source.count(text) == count, f"the mutation's text is no longer in core.js: {text}"
    (tmp_path / "core.js").write_text(source.replace(text, mutant), encoding="utf-8")
    (tmp_path / "describe.mjs").write_text((ROOT / "tests" / "explorer" / "describe.mjs").read_text(encoding="utf-8"),
                                           encoding="utf-8")
    (tmp_path / "dump.mjs").write_text((ROOT / "tests" / "explorer" / "dump.mjs").read_text(encoding="utf-8").replace(
        "../../convviz/explorer/core.js", "./core.js"), encoding="utf-8")
    results = _node_json(tmp_path / "dump.mjs", CASES)["results"]
    caught = 0
    for params, got in zip(CASES, results):
        try:
            check_case(params, got)
        except (AssertionError, IndexError):  # IndexError: a data-index outside convviz's array
            caught += 1
    assert caught > 0, f"no setting caught: {what}"
