"""The ipywidgets explorer: every control redraws the views; bad settings give a message, not a traceback."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from convviz.widgets import OPS, Explorer, explore  # noqa: E402


@pytest.fixture
def explorer():
    ex = Explorer(input_size=8, kernel_size=3, strides=2, padding="SAME")
    yield ex
    plt.close("all")


def _shown(ex: Explorer) -> list[np.ndarray]:
    return [np.ma.filled(np.ma.asarray(ax.images[-1].get_array()), 0.0) for ax in ex.figure.axes if ax.images]


def test_starts_with_a_valid_picture(explorer):
    assert explorer.setup.geometry.output_hw == (4, 4)
    assert explorer.message.value == ""
    coverage = _shown(explorer)[1]
    np.testing.assert_array_equal(coverage, explorer.setup.geometry.coverage())


@pytest.mark.parametrize("control, value", [
    ("input_h", 11), ("input_w", 5), ("kernel_h", 2), ("kernel_w", 5), ("stride_h", 1), ("stride_w", 3),
    ("dilation_h", 2), ("dilation_w", 3), ("padding", "VALID"),
])
def test_every_control_redraws(explorer, control, value):
    before = [a.copy() for a in _shown(explorer)]
    explorer.controls[control].value = value
    assert explorer.message.value == ""
    after = _shown(explorer)
    assert any(a.shape != b.shape or not np.array_equal(a, b) for a, b in zip(before, after))
    np.testing.assert_array_equal(after[1], explorer.setup.geometry.coverage())


def test_explicit_pads_are_enabled_only_for_explicit_padding(explorer):
    assert explorer.controls["pad_top"].disabled
    explorer.controls["padding"].value = "EXPLICIT"
    assert not explorer.controls["pad_top"].disabled
    explorer.controls["pad_top"].value = 3
    assert explorer.setup.geometry.pads[0] == 3


def test_cell_sliders_follow_the_output_size_and_play_walks_through_cells(explorer):
    assert explorer.controls["row"].max == 3 and explorer.controls["play"].max == 15
    explorer.controls["stride_h"].value = 1
    assert explorer.controls["row"].max == 7
    explorer.controls["play"].value = 10
    assert (explorer.controls["row"].value, explorer.controls["col"].value) == (2, 2)
    assert "(2, 2)" in explorer.figure.axes[0].get_title()


def test_depthwise_op_and_views(explorer):
    explorer.controls["op"].value = OPS[1]
    assert explorer.controls["view"].disabled
    assert explorer.controls["row"].max == 2  # taps of the 3x3 kernel
    explorer.controls["row"].value, explorer.controls["col"].value = 1, 2
    dw = explorer.setup.depthwise_filter_gradient()[:, :, 0, 0]
    np.testing.assert_array_equal(_shown(explorer)[1], dw)
    assert f"dW[1, 2] = {dw[1, 2]:g}" in explorer.figure.axes[1].get_title()
    explorer.controls["op"].value = OPS[0]
    for view in ("scatter vs gather", "geometry card", "scatter + coverage"):
        explorer.controls["view"].value = view
        assert explorer.message.value == ""
    assert "geometry" not in explorer.figure.axes[0].get_title()


@pytest.mark.parametrize("changes, words", [
    ({"padding": "VALID", "kernel_h": 7, "input_h": 4}, "no window fits"),
    ({"padding": "VALID", "kernel_w": 5, "dilation_w": 3, "input_w": 6}, "no window fits"),
])
def test_invalid_settings_give_a_message_not_a_traceback(explorer, changes, words):
    for name, value in changes.items():
        explorer.controls[name].value = value
    assert explorer.setup is None
    assert words in explorer.message.value
    assert "not a convolution" in explorer.figure.axes[0].texts[0].get_text()
    explorer.controls["input_h"].value = 16
    explorer.controls["input_w"].value = 16  # valid again
    assert explorer.setup is not None and explorer.message.value == ""


def test_widget_tree_and_explore():
    ex = explore(input_size=16, kernel_size=3, strides=2, dilations=2)
    tree = ex.widget
    assert ex.output in tree.children or ex.figure.canvas in tree.children
    assert ex.last_update_seconds > 0
    plt.close("all")


def test_ipympl_canvas_mode():
    """With ipympl (%matplotlib widget) the figure's own canvas widget is shown and redrawn in place."""
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("ipympl") is None:  # importing it here would switch this process's backend
        pytest.skip("ipympl is not installed")

    code = (
        "import matplotlib; matplotlib.use('module://ipympl.backend_nbagg')\n"
        "from convviz.widgets import Explorer\n"
        "ex = Explorer(input_size=8)\n"
        "assert ex.canvas_mode and type(ex.figure.canvas).__name__ == 'Canvas'\n"
        "ex.controls['stride_h'].value = 1\n"
        "assert ex.setup.geometry.output_hw == (8, 4)\n"
        "assert ex.widget.children[-1] is ex.figure.canvas\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().endswith("ok")
