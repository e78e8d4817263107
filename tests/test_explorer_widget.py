"""The explorer's Python side: convviz.explore's arguments, the widget's traits and the
kernels' numbers it sends, the standalone page's HTML, and ``convviz page``."""

from __future__ import annotations

import re

import numpy as np
import pytest
import traitlets

import convviz
from convviz import reference
from convviz.cli import main
from convviz.explorer import Explorer, explore, page_html, write_page
from convviz.explorer._setting import PARAMS, compute, defaults, setting_key


def _output(ex: Explorer) -> np.ndarray:
    r = ex.kernel_result
    return np.asarray(r["data"]).reshape(r["batch"], r["channels"], r["rows"], r["cols"])[0]


def test_convviz_explore_is_the_widget():
    ex = convviz.explore()
    assert isinstance(ex, Explorer)
    assert ex.params == defaults()
    assert ex.kernel_result["key"] == setting_key(ex.params)


def test_input_gradient_comes_from_the_kernel():
    ex = explore(input=(7, 9), kernel=(3, 2), stride=(2, 3), dilation=(1, 2), pads=(1, 0, 2, 1), seed=5)
    assert ex.padding == "EXPLICIT"
    c = compute(ex.params)
    w, dy = c.inputs["w"][0, 0], c.inputs["dy"][0, 0]
    expected = convviz.conv2d_backprop_input(
        [1, 7, 9, 1], w[:, :, None, None], dy[None, :, :, None], [1, 2, 3, 1], "EXPLICIT",
        explicit_paddings=[0, 0, 1, 0, 2, 1, 0, 0], dilations=[1, 1, 2, 1])
    np.testing.assert_array_equal(_output(ex)[0], expected[0, :, :, 0])
    assert ex.kernel_result["source"].startswith("convviz.conv2d_backprop_input")


def test_depthwise_filter_gradient_with_a_multiplier_comes_from_the_kernel():
    ex = explore(op="depthwise_filter_grad", input=8, kernel=3, stride=2, padding="SAME", multiplier=3,
                 values="decimals")
    c = compute(ex.params)
    x, dy = c.inputs["x"][0, 0], c.inputs["dy"][0]
    expected = convviz.depthwise_conv2d_native_backprop_filter(
        x[None, :, :, None], [3, 3, 1, 3], dy.transpose(1, 2, 0)[None], [1, 2, 2, 1], "SAME")
    out = _output(ex)
    assert out.shape == (3, 3, 3)
    np.testing.assert_array_equal(out, expected[:, :, 0, :].transpose(2, 0, 1))


def test_forward_matches_the_reference():
    ex = explore(op="forward", input=6, kernel=3, stride=1, dilation=2, padding="SAME")
    c = compute(ex.params)
    expected = reference.conv2d(c.inputs["x"][0, 0][None, :, :, None], c.inputs["w"][0, 0][:, :, None, None],
                                [1, 1, 1, 1], "SAME", dilations=[1, 2, 2, 1])
    np.testing.assert_array_equal(_output(ex)[0], expected[0, :, :, 0])


def test_every_trait_change_recomputes():
    ex = explore()
    before = ex.kernel_result
    for name, value in [("stride_h", 1), ("kernel_w", 2), ("padding", "VALID"), ("seed", 3), ("op", "forward"),
                        ("values", "decimals"), ("input_w", 9), ("dilation_h", 2)]:
        setattr(ex, name, value)
        assert ex.kernel_result["key"] == setting_key(ex.params), name
        assert ex.kernel_result != before, name
        before = ex.kernel_result
    key = ex.kernel_result
    ex.theme = "dark"  # the theme, symbols and practice do not change the numbers
    ex.symbols = "on"
    ex.practice = "on"
    assert ex.kernel_result is key and key["key"] == setting_key(ex.params)


def test_a_setting_where_no_window_fits_sends_no_numbers():
    ex = explore(padding="VALID", input=4, kernel=3)
    ex.kernel_h = 7
    assert "data" not in ex.kernel_result and ex.kernel_result["key"] == setting_key(ex.params)
    ex.kernel_h = 3
    assert "data" in ex.kernel_result


@pytest.mark.parametrize("name, value, words", [
    ("stride_h", 0, "stride_h must be between 1 and 6, got 0"),
    ("input_w", 33, "input_w must be between 1 and 32, got 33"),
    ("padding", "same", "padding must be one of"),
    ("op", "backward", "op must be one of"),
])
def test_bad_trait_values_are_refused(name, value, words):
    ex = explore()
    with pytest.raises(traitlets.TraitError, match=re.escape(words)):
        setattr(ex, name, value)


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(stride=0), ValueError, "stride_h must be between 1 and 6, got 0"),
    (dict(stride=1.5), TypeError, "stride must be an int, a pair (rows, cols) or 'HxW', got 1.5"),
    (dict(kernel="3x"), TypeError, "kernel must be an int"),
    (dict(padding="same"), ValueError, "padding must be one of ('SAME', 'VALID', 'EXPLICIT'), got 'same'"),
    (dict(pads=(1, 2)), TypeError, "pads must be 4 ints (top, bottom, left, right), got (1, 2)"),
    (dict(op="conv"), ValueError, "op must be one of"),
    (dict(x=np.ones(5)), ValueError, "x must be 2-D (rows, cols) or 4-D (NHWC), got shape (5,)"),
    (dict(W=np.ones((3, 3, 1))), ValueError, "W must be 2-D (rows, cols) or 4-D (HWIO), got shape (3, 3, 1)"),
    (dict(x=np.array([["a", "b"]])), TypeError, "x must hold real numbers, got dtype <U1"),
    (dict(x=np.full((3, 3), np.nan)), ValueError, "x must hold finite numbers"),
    (dict(x=np.ones((40, 4))), ValueError, "x is too large for the explorer: input_h must be between 1 and 32"),
    (dict(x=np.ones((1, 5, 5, 2)), channel=2), ValueError, "channel: x has 2 channels (shape (1, 5, 5, 2), NHWC), got 2"),
    (dict(W=np.ones((3, 3, 2, 4)), channel=(0, 4)), ValueError, "channel: W has 4 out_channels"),
    (dict(dy=np.ones((2, 2)), input=6, stride=2), ValueError, "dy must have shape (3, 3)"),
    (dict(input=2, kernel=5, padding="VALID"), ValueError, "kernel: no window fits"),
    (dict(data_format="NCWH"), ValueError, "data_format must be one of ('NHWC', 'NCHW'), got 'NCWH'"),
])
def test_bad_arguments_name_the_argument(kwargs, error, words):
    with pytest.raises(error, match=re.escape(words)):
        explore(**kwargs)
    with pytest.raises(error, match=re.escape(words)):
        page_html(**kwargs)


def test_user_arrays_are_shown_and_computed_with():
    x = np.arange(30.0).reshape(5, 6) / 10
    w = np.array([[1.0, -1.0], [2.0, 0.5]])
    ex = explore(x=x, W=w, stride=1, padding="VALID")
    assert ex.op == "conv2d" and (ex.input_h, ex.input_w, ex.kernel_h, ex.kernel_w) == (5, 6, 2, 2)
    assert set(ex.locked) == {"input_h", "input_w", "kernel_h", "kernel_w"}
    assert ex.arrays["x"]["data"] == x.ravel().tolist() and ex.arrays["x"]["caption"] == "your x, 5\u00d76"
    expected = reference.conv2d(x[None, :, :, None], w[:, :, None, None], [1, 1, 1, 1], "VALID")
    np.testing.assert_array_equal(_output(ex)[0], expected[0, :, :, 0])


def test_a_channel_of_4d_arrays_with_its_layout_stated():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 7, 7))  # NCHW
    dy = rng.standard_normal((2, 4, 4, 4))
    ex = explore(x=x, dy=dy, data_format="NCHW", channel=(1, 2), stride=2, kernel=3)
    assert ex.op == "depthwise_conv2d_native_backprop_filter"
    assert ex.arrays["x"]["caption"] == "your x, batch 0, channel 1 of a (2, 3, 7, 7) NCHW array"
    assert "channel 2" in ex.arrays["dy"]["caption"]
    expected = convviz.depthwise_conv2d_native_backprop_filter(
        x[:1, 1:2], [3, 3, 1, 1], dy[:1, 2:3], [1, 1, 2, 2], "SAME", data_format="NCHW")
    np.testing.assert_allclose(_output(ex)[0], expected[:, :, 0, 0], rtol=1e-12)


def _result(ex: Explorer) -> np.ndarray:
    """The widget's result in the op's own layout (as convviz returns it)."""
    return compute(ex.params, ex._given).arrays[compute(ex.params, ex._given).output_panel]


def test_whole_4d_arrays_are_shown_with_their_channels_groups_and_batch():
    rng = np.random.default_rng(3)
    x = rng.integers(-3, 4, (2, 6, 5, 4)).astype(float)  # NHWC: 2 images, 4 channels
    w = rng.integers(-2, 3, (3, 3, 2, 4)).astype(float)  # HWIO: 2 input channels a group -> 2 groups
    ex = explore(x=x, W=w, stride=1, padding="SAME")
    assert ex.op == "conv2d" and (ex.batch, ex.in_channels, ex.out_channels, ex.groups) == (2, 4, 4, 2)
    assert {"batch", "in_channels", "out_channels", "groups", "input_h", "kernel_w"} <= set(ex.locked)
    assert ex.arrays["x"]["caption"] == "your x, a (2, 6, 5, 4) NHWC array"
    assert (ex.arrays["x"]["batch"], ex.arrays["x"]["channels"]) == (2, 4)
    np.testing.assert_array_equal(_result(ex), convviz.conv2d(x, w, [1, 1, 1, 1], "SAME"))
    got = np.asarray(ex.kernel_result["data"]).reshape(2, 4, 6, 5)  # the kernel's reply: [image, channel, row, col]
    np.testing.assert_array_equal(got.transpose(0, 2, 3, 1), convviz.conv2d(x, w, [1, 1, 1, 1], "SAME"))

    x_nchw, dy = rng.standard_normal((1, 3, 7, 7)), rng.standard_normal((1, 6, 4, 4))
    ex = explore(x=x_nchw, dy=dy, data_format="NCHW", stride=2, kernel=3)
    assert ex.op == "depthwise_conv2d_native_backprop_filter" and (ex.in_channels, ex.multiplier) == (3, 2)
    expected = convviz.depthwise_conv2d_native_backprop_filter(x_nchw, [3, 3, 3, 2], dy, [1, 1, 2, 2], "SAME",
                                                               data_format="NCHW")
    np.testing.assert_allclose(_result(ex), expected, rtol=1e-12)


def test_conv_transpose2d_takes_pytorchs_tensors():
    rng = np.random.default_rng(4)
    x = rng.integers(-3, 4, (1, 2, 3, 4)).astype(float)  # (N, C_in, H, W)
    w = rng.integers(-2, 3, (2, 3, 3, 3)).astype(float)  # (C_in, C_out / groups, kH, kW)
    ex = explore(op="conv_transpose2d", x=x, W=w, stride=2, padding=1, output_padding=1)
    assert (ex.in_channels, ex.out_channels, ex.groups, ex.input_h, ex.input_w) == (2, 3, 1, 3, 4)
    assert ex.arrays["w"]["caption"] == "your W, a (2, 3, 3, 3) (C_in, C_out/groups, kH, kW) array"
    expected = convviz.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1)
    np.testing.assert_array_equal(_result(ex), expected)
    with pytest.raises(ValueError, match="conv_transpose2d takes x .its input. and W"):
        explore(op="conv_transpose2d", dy=np.ones((1, 2, 3, 3)))
    with pytest.raises(ValueError, match="x and W must be whole tensors"):
        explore(op="conv_transpose2d", x=x, channel=1)


def test_arrays_too_large_for_whole_planes_show_channel_0_and_conflicts_are_named():
    rng = np.random.default_rng(5)
    ex = explore(x=rng.standard_normal((1, 5, 5, 8)), W=rng.standard_normal((3, 3, 8, 16)))
    assert ex.arrays["x"]["caption"] == "your x, batch 0, channel 0 of a (1, 5, 5, 8) NHWC array"
    assert ex.in_channels == 1 and ex.arrays["x"]["channels"] == 1
    x, w = np.ones((2, 6, 5, 4)), np.ones((3, 3, 2, 4))
    with pytest.raises(ValueError, match=re.escape("in_channels: your arrays have 4, got in_channels=3")):
        explore(x=x, W=w, in_channels=3)
    with pytest.raises(ValueError, match=re.escape("W must have shape (3, 3, 4, 4) (HWIO) in this setting")):
        explore(x=x, W=np.ones((3, 3, 3, 4)))
    with pytest.raises(ValueError, match=re.escape("dy must have shape (2, 6, 5, 4) (NHWC) in this setting")):
        explore(op="conv2d_backprop_filter", x=x, dy=np.ones((2, 3, 3, 4)), stride=1)


def test_user_dy_that_stops_fitting_falls_back_to_example_numbers():
    dy = np.ones((3, 3))
    ex = explore(dy=dy, W=np.ones((3, 3)), input=6, stride=2)
    np.testing.assert_array_equal(compute(ex.params, ex._given).inputs["dy"], dy[None, None])
    ex.stride_h = 1  # output 6x3: the user's 3x3 dy no longer fits
    used = compute(ex.params, ex._given).inputs["dy"]
    assert used.shape == (1, 1, 6, 3) and not np.array_equal(used[0, 0, :3], dy)


def test_the_page_is_one_offline_file(tmp_path):
    page = page_html(op="depthwise_filter_grad", multiplier=2, theme="dark")
    body = page.split("<body>", 1)[1]
    assert not re.search(r"<[a-z]+[^>]*\s(src|href)\s*=", body, re.I), "the page loads nothing"
    assert "http://" not in page and "https://" not in page
    assert "default-src 'none'" in page  # and the browser refuses to load anything else
    assert 'import * as core' not in page and page.count("<script") == 2
    assert '"op":"depthwise_conv2d_native_backprop_filter"' in page and '"multiplier":2' in page
    path = write_page(tmp_path / "sub" / "explorer.html", input=5)
    assert path.read_text(encoding="utf-8").startswith("<!doctype html>")


def test_the_old_op_name_filter_grad_still_works_and_warns(tmp_path, capsys):
    """op="filter_grad" (the name before a dense filter gradient could claim it) is the depthwise filter
    gradient; the first explorer's other short names (input_grad, forward, depthwise_filter_grad) work without a warning."""
    renamed = "op='filter_grad' is deprecated, use op='depthwise_conv2d_native_backprop_filter'"
    with pytest.warns(DeprecationWarning, match=renamed) as w:
        ex = explore(op="filter_grad", input=7, stride=2, multiplier=2, seed=4)
    assert w[0].filename == __file__  # pointed at the caller, so a notebook shows it
    now = explore(op="depthwise_filter_grad", input=7, stride=2, multiplier=2, seed=4)
    assert ex.op == "depthwise_conv2d_native_backprop_filter" and ex.kernel_result == now.kernel_result
    with pytest.warns(DeprecationWarning, match="depthwise_conv2d_native_backprop_filter") as w:
        ex.op = "input_grad"
        ex.op = "filter_grad"
    assert ex.op == "depthwise_conv2d_native_backprop_filter" and w[0].filename == __file__
    with pytest.warns(DeprecationWarning):
        assert Explorer(op="filter_grad").op == "depthwise_conv2d_native_backprop_filter"
    with pytest.warns(DeprecationWarning) as w:
        page = page_html(op="filter_grad", multiplier=2)
    assert w[0].filename == __file__
    assert '"op":"depthwise_conv2d_native_backprop_filter"' in page and '"filter_grad"' not in page.split("<script", 2)[1]
    with pytest.warns(DeprecationWarning):
        write_page(tmp_path / "old.html", op="filter_grad")
    assert '"op":"depthwise_conv2d_native_backprop_filter"' in (tmp_path / "old.html").read_text(encoding="utf-8")
    assert main(["page", "--out", str(tmp_path / "cli.html"), "--op", "filter_grad"]) == 0
    assert '"op":"depthwise_conv2d_native_backprop_filter"' in (tmp_path / "cli.html").read_text(encoding="utf-8")
    assert "filter_grad" not in PARAMS["op"][1]
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [explore(op=old).op for old in ("input_grad", "forward", "depthwise_filter_grad")] == [
            "conv2d_backprop_input", "conv2d", "depthwise_conv2d_native_backprop_filter"]
    with pytest.raises(ValueError, match="op must be one of"):
        explore(op="filter_gradient")


def test_the_page_embeds_user_arrays_safely():
    page = page_html(x=np.ones((4, 4)), W=np.ones((2, 2)), title="</script><b>")
    assert "<title>&lt;/script&gt;&lt;b&gt;</title>" in page
    assert '"x":{"rows":4,"cols":4,"channels":1' in page


def test_cli_page_writes_a_preset(tmp_path, capsys):
    out = tmp_path / "explorer.html"
    assert main(["page", "--out", str(out), "--input", "7x9", "--stride", "2", "--pads", "1,0,2,1",
                 "--op", "depthwise_filter_grad", "--multiplier", "2", "--seed", "4"]) == 0
    assert "wrote" in capsys.readouterr().out
    text = out.read_text(encoding="utf-8")
    for part in ('"input_h":7', '"input_w":9', '"padding":"EXPLICIT"', '"pad_left":2', '"multiplier":2', '"seed":4'):
        assert part in text


def test_cli_page_refuses_bad_settings(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["page", "--out", str(tmp_path / "e.html"), "--stride", "9"])
    assert "stride_h must be between 1 and 6, got 9" in capsys.readouterr().err


def test_parameters_cover_the_issue_list():
    assert {"input_h", "input_w", "kernel_h", "kernel_w", "stride_h", "stride_w", "dilation_h", "dilation_w",
            "padding", "pad_top", "pad_bottom", "pad_left", "pad_right", "output_padding_h", "output_padding_w",
            "op", "in_channels", "out_channels", "groups", "multiplier", "batch", "seed",
            "values", "symbols", "practice", "theme"} == set(PARAMS)


@pytest.mark.parametrize("op", ["conv2d", "conv2d_backprop_input", "conv2d_backprop_filter", "depthwise_conv2d_native",
                                "depthwise_conv2d_native_backprop_input", "depthwise_conv2d_native_backprop_filter",
                                "conv_transpose2d"])
def test_every_mode_sends_the_kernels_numbers_with_channels_groups_and_batch(op):
    ex = explore(op=op, input=6, kernel=3, stride=2, in_channels=2, out_channels=4, groups=2, multiplier=2, batch=2,
                 output_padding=1 if op == "conv_transpose2d" else None, padding=1 if op == "conv_transpose2d" else None)
    r = ex.kernel_result
    c = compute(ex.params)
    assert r["key"] == setting_key(ex.params) and r["panel"] == c.output_panel
    got = np.asarray(r["data"]).reshape(r["batch"], r["channels"], r["rows"], r["cols"])
    np.testing.assert_array_equal(got, c.output)
    assert r["source"].startswith(f"convviz.{op}")


def test_a_setting_the_kernels_refuse_says_why_in_the_view():
    ex = explore(op="conv2d", in_channels=3, out_channels=2)
    ex.groups = 2
    assert "groups must divide in_channels and out_channels" in ex.error and "data" not in ex.kernel_result
    ex.op = "conv_transpose2d"
    ex.groups = 1
    ex.stride_h = 1
    ex.output_padding_h = 2
    assert "output_padding must be smaller than stride or dilation" in ex.error
