"""The visualization layer: every view is built, labelled, and shows the kernels' own numbers."""

from __future__ import annotations


import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from matplotlib import animation  # noqa: E402
from PIL import Image  # noqa: E402

import convviz  # noqa: E402
from convviz import viz  # noqa: E402
from convviz.viz import views  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _image_data(ax) -> np.ndarray:
    """The array shown by the last image of an Axes."""
    return np.ma.filled(np.ma.asarray(ax.images[-1].get_array()), 0.0)


# -- Setup ---------------------------------------------------------------------------
def test_setup_numbers_are_deterministic_and_exact():
    s = viz.Setup(input_hw=6, kernel_hw=3, strides=2, padding="SAME", seed=3)
    np.testing.assert_array_equal(s.filter(), viz.Setup(input_hw=6, kernel_hw=3, strides=2, padding="SAME",
                                                        seed=3).filter())
    assert set(np.unique(s.filter())) <= {-2.0, -1.0, 1.0, 2.0, 3.0}
    dx = s.input_gradient()
    expected = convviz.reference.conv2d_backprop_input([1, 6, 6, 1], s.filter(), s.out_backprop(),
                                                       [1, 2, 2, 1], "SAME")
    np.testing.assert_array_equal(dx, expected)  # integers: exact in float64
    assert s.replace(data_format="NCHW").input_gradient().shape == (1, 1, 6, 6)


@pytest.mark.parametrize("kwargs, message", [
    (dict(input_hw=2, kernel_hw=5), "no window fits"),
    (dict(strides=0), "strides must be at least 1"),
    (dict(padding="FULL"), "padding must be one of"),
    (dict(padding="EXPLICIT", pads=(1, 1, -1, 0)), "pads must be at least 0"),
    (dict(in_channels=0), "in_channels must be at least 1"),
])
def test_setup_refuses_what_is_not_a_convolution(kwargs, message):
    with pytest.raises(ValueError, match=message):
        viz.Setup(**kwargs)


def test_setup_type_errors():
    with pytest.raises(TypeError, match="kernel_hw"):
        viz.Setup(kernel_hw="3")
    with pytest.raises(TypeError, match="pads"):
        viz.Setup(padding="EXPLICIT", pads=(1, 1))


# -- scatter -------------------------------------------------------------------------
@pytest.mark.parametrize("setup, cell", [
    (viz.Setup(input_hw=6, kernel_hw=3, padding="SAME"), (0, 0)),
    (viz.Setup(input_hw=7, kernel_hw=3, strides=2, dilations=2, padding="SAME"), (1, 2)),
    (viz.Setup(input_hw=6, kernel_hw=(2, 3), padding="EXPLICIT", pads=(2, 0, 1, 3)), (0, 5)),
    (viz.Setup(input_hw=6, kernel_hw=3, padding="SAME", data_format="NCHW", in_channels=2, out_channels=3), (2, 2)),
])
def test_scatter_shows_one_cell_through_every_tap(setup, cell):
    fig = viz.scatter(setup, cell, in_channel=1 if setup.in_channels > 1 else 0,
                      out_channel=2 if setup.out_channels > 2 else 0)
    ax_dy, ax_w, ax_dx = fig.axes[:3]
    assert ax_dy.get_title().startswith(f"dL/dy, cell {tuple(cell)}") and ax_w.get_title() == "kernel W"
    assert ax_dx.get_xlabel() == "input column" and setup.describe() in fig.get_suptitle()
    # What the panel shows is W[kh, kw] * dy[cell] at each tap's input cell -- by the geometry...
    g = setup.geometry
    ci, co = (1, 2) if setup.in_channels > 1 else (0, 0)
    dy = setup.plane(setup.out_backprop(), 0, co)[cell]
    expected = np.zeros(g.input_hw)
    dropped = []
    for kh in range(g.kernel_hw[0]):
        for kw in range(g.kernel_hw[1]):
            i, j = g.input_cell(cell, (kh, kw))
            if g.is_padding((i, j)):
                dropped.append((j, i, f"{setup.filter()[kh, kw, ci, co] * dy:g}"))
            else:
                expected[i, j] += setup.filter()[kh, kw, ci, co] * dy
    np.testing.assert_array_equal(_image_data(ax_dx), expected)
    # ... and the same as the kernel's input gradient of a one-hot dL/dy.
    one = np.zeros_like(setup.out_backprop())
    index = (0, *cell, co) if setup.data_format == "NHWC" else (0, co, *cell)
    one[index] = dy
    np.testing.assert_array_equal(
        setup.plane(setup.input_gradient(one), 0, ci), expected)
    # Products of taps in the padding are written, in italics, where they are dropped.
    italic = sorted((round(t.get_position()[0]), round(t.get_position()[1]), t.get_text())
                    for t in ax_dx.texts if t.get_style() == "italic")
    assert italic == sorted(dropped)
    assert not ax_dx.lines  # no X marks


def _hatched_boxes(ax) -> list:
    """Every hatched rectangle drawn on an Axes (padding strips), in data coordinates."""
    from matplotlib.collections import PatchCollection

    boxes = [p.get_bbox() for p in ax.patches if p.get_hatch()]
    for coll in ax.collections:
        if isinstance(coll, PatchCollection) and coll.get_hatch():
            boxes += [path.get_extents() for path in coll.get_paths()]
    return boxes


@pytest.mark.parametrize("draw", [
    lambda s: viz.scatter(s, (0, 0)).axes[2:], lambda s: viz.coverage(s).axes,
    lambda s: viz.depthwise(s, (0, 0)).axes, lambda s: viz.animate_input_gradient(s)._fig.axes[1:],
    lambda s: viz.animate_depthwise_filter_gradient(s)._fig.axes,
])
def test_padding_is_drawn_around_the_input_never_over_it(draw):
    s = viz.Setup(input_hw=6, kernel_hw=3, padding="EXPLICIT", pads=(2, 0, 1, 3))
    axes = draw(s)  # the panels that draw the input
    hatched = [box for ax in axes[:1] for box in _hatched_boxes(ax)]
    assert hatched  # the padding strips are there ...
    assert not any(_over_input(box) for box in hatched)  # ... and none covers a real cell
    # The fault this test is for: one hatched rectangle behind the whole padded input.
    from matplotlib.patches import Rectangle
    _, ax = plt.subplots()
    ax.add_patch(Rectangle((-1.5, -2.5), 10, 8, hatch="//"))
    assert _over_input(_hatched_boxes(ax)[0])


def _over_input(box, size: int = 6) -> bool:
    """Whether a box covers part of the real input [-0.5, size - 0.5]^2."""
    return (min(box.x1, size - 0.5) - max(box.x0, -0.5) > 1e-9
            and min(box.y1, size - 0.5) - max(box.y0, -0.5) > 1e-9)


def test_scatter_on_given_axes_and_bad_cell():
    fig, ax = plt.subplots()
    assert viz.scatter(viz.Setup(), (0, 0), ax=ax, colorbar=False) is fig
    assert len(fig.axes) == 1
    with pytest.raises(ValueError, match="outside"):
        viz.scatter(viz.Setup(input_hw=5, kernel_hw=3), (3, 0))


# -- coverage --------------------------------------------------------------------------
@pytest.mark.parametrize("setup, words, zero_rows", [
    (viz.Setup(input_hw=8, kernel_hw=3, strides=2), "checkerboard", [7]),
    (viz.Setup(input_hw=10, kernel_hw=4, strides=2, padding="SAME"), "even overlap", []),
    (viz.Setup(input_hw=11, kernel_hw=3, strides=2, dilations=2), "gridding", [1, 3, 5, 7, 9]),
    (viz.Setup(input_hw=9, kernel_hw=2, strides=4), "never read", [2, 3, 6, 7, 8]),
])
def test_coverage_counts_and_patterns(setup, words, zero_rows):
    fig = viz.coverage(setup)
    ax = fig.axes[0]
    shown = _image_data(ax)
    np.testing.assert_array_equal(shown, setup.geometry.coverage())
    legend = fig.legends[0]
    assert words in legend.get_title().get_text()
    assert list(setup.geometry.zero_gradient_rows()) == zero_rows
    if zero_rows:
        assert f"rows {', '.join(map(str, zero_rows))}" in legend.get_texts()[0].get_text()
        assert (shown[zero_rows] == 0).all()
        # zeros are written as 0 (on the band's colour), never crossed out
        zeros = [t for t in ax.texts if t.get_text() == "0"]
        assert len(zeros) == int((shown == 0).sum()) and not ax.lines
    assert ax.get_ylabel() == "input row"
    # one colour and one integer tick per count: no 1.5 / 2.5 ticks
    ticks = fig.axes[1].get_yticks()
    assert np.array_equal(ticks, np.round(ticks))


def test_coverage_is_the_input_gradient_of_ones():
    s = viz.Setup(input_hw=(7, 9), kernel_hw=(3, 2), strides=(2, 3), dilations=(2, 1), padding="SAME")
    ones = convviz.conv2d_backprop_input([1, 7, 9, 1], np.ones((3, 2, 1, 1)), np.ones((1, *s.geometry.output_hw, 1)),
                                         [1, 2, 3, 1], "SAME", dilations=[1, 2, 1, 1])
    np.testing.assert_array_equal(_image_data(viz.coverage(s).axes[0]), ones[0, :, :, 0])


# -- scatter vs gather -----------------------------------------------------------------
@given(h=st.integers(2, 9), w=st.integers(2, 9), k=st.integers(1, 4), sh=st.integers(1, 3), sw=st.integers(1, 3),
       dh=st.integers(1, 3), dw=st.integers(1, 2), padding=st.sampled_from(["SAME", "VALID", "EXPLICIT"]),
       pads=st.tuples(*[st.integers(0, 5)] * 4))
def test_gather_equals_scatter(h, w, k, sh, sw, dh, dw, padding, pads):
    try:
        s = viz.Setup(input_hw=(h, w), kernel_hw=k, strides=(sh, sw), dilations=(dh, dw), padding=padding, pads=pads)
    except ValueError:
        return  # no window fits
    steps = views.gather_steps(s)
    np.testing.assert_array_equal(steps["result"], s.plane(s.input_gradient()))


def test_scatter_vs_gather_figure():
    s = viz.Setup(input_hw=7, kernel_hw=3, strides=2, padding="SAME")
    fig = viz.scatter_vs_gather(s)
    assert "max |scatter - gather| = 0" in fig.get_suptitle()
    titles = [ax.get_title() for ax in fig.axes]
    assert "6. W flipped" in titles and "7. correlate 5 with 6" in titles
    flipped_ax = next(ax for ax in fig.axes if "flipped" in ax.get_title())
    first_label = next(t.get_text() for t in flipped_ax.texts)
    assert first_label.startswith("i")  # tap i (bottom right) is now at the top left
    # Step 5 tells dL/dy's numbers, inserted zeros and padding zeros apart.
    steps = views.gather_steps(s)
    padded_ax = next(ax for ax in fig.axes if ax.get_title().startswith("5."))
    origin = steps["padded_origin"]
    styles = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_style() for t in padded_ax.texts}
    for (i, j), slant in styles.items():
        assert slant == ("italic" if origin[i, j] == views.PADDING_ZERO else "normal")
    assert {views.FROM_DY, views.INSERTED_ZERO, views.PADDING_ZERO} == set(np.unique(origin))
    assert len(styles) == origin.size


# -- depthwise -------------------------------------------------------------------------
@pytest.mark.parametrize("setup, tap, channel, multiplier", [
    (viz.Setup(input_hw=8, kernel_hw=3, strides=2, padding="SAME"), (0, 1), 0, 0),
    (viz.Setup(input_hw=7, kernel_hw=3, padding="SAME", in_channels=2, multiplier=2, data_format="NCHW"),
     (1, 1), 1, 1),
    (viz.Setup(input_hw=9, kernel_hw=3, dilations=2, strides=2), (2, 2), 0, 0),
])
def test_depthwise_view(setup, tap, channel, multiplier):
    fig = viz.depthwise(setup, tap, channel=channel, multiplier=multiplier)
    dw = setup.depthwise_filter_gradient()[:, :, channel, multiplier]
    ax_w = fig.axes[3]
    np.testing.assert_array_equal(_image_data(ax_w), dw)
    products = _image_data(fig.axes[2])
    assert products.sum() == dw[tap]
    assert ax_w.get_title() == f"4. dW[{tap[0]}, {tap[1]}] = {dw[tap]:g}"
    assert f"sum {products.sum():g}" in fig.axes[2].get_title()
    with pytest.raises(ValueError):
        viz.depthwise(setup, (5, 5))


# -- card and layouts ------------------------------------------------------------------
def test_card_fills_in_the_formulas():
    s = viz.Setup(input_hw=8, kernel_hw=3, strides=3, padding="SAME")
    text = views.card_text(s)
    assert "out = ceil(8 / 3) = 3" in text and "need = max(0, (3 - 1) * 3 + 3 - 8) = 1" in text
    assert "before = need // 2 = 0, after = need - before = 1" in text
    valid = views.card_text(viz.Setup(input_hw=8, kernel_hw=3, strides=3))
    assert "out = (8 + 0 + 0 - 3) // 3 + 1 = 2" in valid and "no gradient: [6, 7]" in valid
    fig = viz.card(s)
    assert fig.axes[0].texts[0].get_text() == "\n".join(text.splitlines()[2:])
    assert s.describe() in fig.get_suptitle()
    # the strip: one window (a line with a dot per tap) per output index, both axes alike here
    strip = fig.axes[1]
    assert strip.get_title(loc="left").startswith("rows and columns")
    assert [len(line.get_xdata()) for line in strip.lines[1::2]] == [3, 3, 3]
    lost = viz.card(viz.Setup(input_hw=(8, 9), kernel_hw=(3, 2), strides=3, padding="SAME"))
    assert [ax.get_title(loc="left").split(":")[0] for ax in lost.axes[1:]] == ["rows", "columns"]


def test_nhwc_and_nchw_give_the_same_picture():
    from convviz.viz.gallery import layouts

    s = viz.Setup(input_hw=6, kernel_hw=3, strides=2, padding="SAME")
    fig = layouts(s)
    assert "max |NHWC - NCHW| = 0" in fig.get_suptitle()
    # the memory strips hold the same numbers in two orders
    nhwc = s.replace(in_channels=2, out_channels=3)
    dx = nhwc.input_gradient()
    memory = fig.axes[1]
    shown = [t.get_text() for t in memory.texts]
    assert shown[:12] == [f"{v:g}" for v in dx.ravel()[:12]]
    assert shown[12:] == [f"{v:g}" for v in dx.transpose(0, 3, 1, 2).ravel()[:12]]


# -- animations --------------------------------------------------------------------------
def test_input_gradient_animation(tmp_path):
    s = viz.Setup(input_hw=6, kernel_hw=3, strides=2, padding="SAME")
    anim = viz.animate_input_gradient(s)
    cells = s.geometry.output_hw[0] * s.geometry.output_hw[1]
    assert anim._save_count == cells + 1
    np.testing.assert_array_equal(anim.final_frame, s.plane(s.input_gradient()))
    path = viz.save(anim, tmp_path / "dx.gif", progress=False)
    with Image.open(path) as gif:
        assert gif.n_frames == cells + 1


def test_depthwise_filter_gradient_animation_and_html(tmp_path, capsys):
    s = viz.Setup(input_hw=6, kernel_hw=(2, 3), strides=2, padding="SAME")
    anim = viz.animate_depthwise_filter_gradient(s)
    assert anim._save_count == 2 * 3 + 1
    np.testing.assert_array_equal(anim.final_frame, s.depthwise_filter_gradient()[:, :, 0, 0])
    path = viz.save(anim, tmp_path / "dw.html", progress=True)
    html = path.read_text()
    assert html.count("data:image/png;base64") == 7 and "<script" in html  # frames embedded, controls included
    assert "7/7" in capsys.readouterr().err  # progress was reported


def test_the_old_filter_gradient_names_still_work_and_warn():
    """The depthwise filter gradient's old names (before a dense one could claim them) work, with a warning."""
    new = "animate_depthwise_filter_gradient"
    with pytest.warns(DeprecationWarning, match=f"use convviz.viz.{new}") as caught:
        from convviz.viz import animate_filter_gradient
    assert animate_filter_gradient is viz.animate_depthwise_filter_gradient
    assert caught[0].filename == __file__  # the warning points at the importing line
    with pytest.warns(DeprecationWarning, match=f"use convviz.viz.{new}"):
        assert viz.animate_filter_gradient is viz.animate_depthwise_filter_gradient
    with pytest.warns(DeprecationWarning, match=f"use convviz.viz.animate.{new}"):
        from convviz.viz.animate import animate_filter_gradient as from_module
    assert from_module is viz.animate_depthwise_filter_gradient
    assert "animate_filter_gradient" not in viz.__all__
    with pytest.raises(AttributeError, match="animate_nothing"):
        viz.animate_nothing  # noqa: B018

    s = viz.Setup(input_hw=6, kernel_hw=3, strides=2, in_channels=2, multiplier=2, padding="SAME")
    with pytest.warns(DeprecationWarning, match="use Setup.depthwise_filter_gradient:") as caught:
        old = s.filter_gradient()
    assert caught[0].filename == __file__
    np.testing.assert_array_equal(old, s.depthwise_filter_gradient())
    with pytest.warns(DeprecationWarning, match="use Setup.depthwise_filter_gradient_plane"):
        old = s.filter_gradient_plane(1, 1)
    np.testing.assert_array_equal(old, s.depthwise_filter_gradient_plane(1, 1))
    with pytest.warns(DeprecationWarning), pytest.raises(IndexError, match="multiplier"):
        s.filter_gradient_plane(0, 2)


def test_save_formats(tmp_path):
    anim = viz.animate_input_gradient(viz.Setup(input_hw=4, kernel_hw=2, strides=2))
    with pytest.raises(ValueError, match="an animation is written as .gif, .mp4, .html, .htm, got '.avi'"):
        viz.save(anim, tmp_path / "a.avi", progress=False)
    if animation.writers.is_available("ffmpeg"):
        assert viz.save(anim, tmp_path / "a.mp4", progress=False).stat().st_size > 0
    else:
        with pytest.raises(RuntimeError, match="ffmpeg"):
            viz.save(anim, tmp_path / "a.mp4", progress=False)
    assert viz.save(anim, tmp_path / "a.gif", progress=False).exists()


def test_save_writes_figures_by_extension(tmp_path):
    fig = viz.coverage(viz.Setup(input_hw=6, kernel_hw=3, strides=2))
    png = viz.save(fig, tmp_path / "c.png")
    with Image.open(png) as image:
        assert image.info["dpi"][0] >= 149  # 150 dpi by default
    assert viz.save(fig, tmp_path / "c.svg").read_text().lstrip().startswith("<?xml")
    assert viz.save(fig, tmp_path / "c.pdf").read_bytes().startswith(b"%PDF")
    with pytest.raises(ValueError, match="a figure is written as .png, .svg, .pdf, got '.gif'"):
        viz.save(fig, tmp_path / "c.gif")
    with pytest.raises(TypeError, match="save writes a matplotlib Figure or Animation, got list"):
        viz.save([], tmp_path / "c.png")


def test_html_animation_loads_nothing_from_the_network(tmp_path):
    anim = viz.animate_input_gradient(viz.Setup(input_hw=4, kernel_hw=2, strides=2))
    html = viz.save(anim, tmp_path / "a.html", progress=False).read_text()
    assert viz.checks.network_references(html) == []
    assert 'aria-label="play"' in html and "fa fa-" not in html  # the buttons have labels offline


def _numbers(ax) -> list[float]:
    """The numbers written on an Axes (its words left out)."""
    out = []
    for t in ax.texts:
        try:
            out.append(float(t.get_text()))
        except ValueError:
            pass
    return out


def test_animations_show_their_numbers_frame_by_frame():
    s = viz.Setup(input_hw=5, kernel_hw=3, strides=2, padding="SAME")
    anim = viz.animate_input_gradient(s)
    ax_dy, ax_dx = anim._fig.axes[:2]
    anim._func(0)  # the first dL/dy cell: its window's products, nothing else
    first = sorted(_numbers(ax_dx))
    one = np.zeros_like(s.out_backprop())
    one[0, 0, 0, 0] = s.out_backprop()[0, 0, 0, 0]
    # a 2x2 corner of its 3x3 window is in the real input (SAME pads the top and left by 1)
    assert first == sorted(s.plane(s.input_gradient(one))[:2, :2].ravel().tolist())
    anim._func(anim._save_count - 1)  # the final frame: every reached cell's number is the kernel's
    assert sorted(_numbers(ax_dx)) == sorted(anim.final_frame.ravel().tolist())
    # dL/dy keeps its own colour scale: its extremes reach the ends of the map (not washed out)
    norm = ax_dy.images[0].norm
    dy = s.plane(s.out_backprop())
    assert max(abs(norm(dy.min()) - 0.5), abs(norm(dy.max()) - 0.5)) == pytest.approx(0.5)
    # the depthwise animation writes each tap's products and their sum
    fa = viz.animate_depthwise_filter_gradient(s)
    fa._func(4)
    ax_x, ax_p, ax_w = fa._fig.axes[:3]
    products = _numbers(ax_p)
    assert f"sum {sum(products):g} = dW[1, 1]" in ax_p.get_title() and sum(products) == fa.final_frame[1, 1]


def test_channel_indices_out_of_range_raise_instead_of_wrapping():
    s = viz.Setup(input_hw=5, kernel_hw=3, in_channels=2, out_channels=3, multiplier=2)
    with pytest.raises(IndexError, match=r"in_channel must be in \[0, 2\) for this .*, got 2"):
        viz.scatter(s, in_channel=2)
    with pytest.raises(IndexError, match=r"in_channel must be in \[0, 2\)"):
        viz.scatter(s, in_channel=-1)  # NumPy would take the last channel
    with pytest.raises(IndexError, match=r"out_channel must be in \[0, 3\)"):
        viz.animate_input_gradient(s, out_channel=3)
    with pytest.raises(IndexError, match=r"multiplier must be in \[0, 2\) for this setup \(channel multiplier 2\)"):
        viz.depthwise(s, channel=0, multiplier=2)
    with pytest.raises(IndexError, match=r"channel must be in \[0, 2\)"):
        viz.animate_depthwise_filter_gradient(s, channel=5)
    with pytest.raises(TypeError, match="channel must be an int, got float 1.0"):
        s.plane(s.input(), channel=1.0)


def test_figures_use_colour_blind_safe_maps():
    s = viz.Setup(input_hw=6, kernel_hw=3, strides=2, padding="SAME")
    figures = [viz.scatter(s), viz.coverage(s), viz.scatter_vs_gather(s), viz.depthwise(s)]
    names = {image.get_cmap().name for fig in figures for ax in fig.axes for image in ax.images}
    assert names <= {"PuOr", "cividis", "Greys"}
    for fig in figures:  # no red/green pair anywhere
        colors = {c for ax in fig.axes for line in ax.lines for c in [line.get_color()]}
        assert not ({"red", "green", "r", "g"} & colors)


def test_to_html_shows_an_animation_in_a_notebook_offline():
    anim = viz.animate_input_gradient(viz.Setup(input_hw=4, kernel_hw=2, strides=2))
    html = viz.to_html(anim, progress=False)
    assert html.startswith("<iframe srcdoc=") and html.count("data:image/png;base64") == 5
    assert viz.checks.network_references(html) == []  # srcdoc is searched too
    # matplotlib's own notebook HTML is what this replaces: it links a CDN
    other = viz.animate_input_gradient(viz.Setup(input_hw=4, kernel_hw=2, strides=2))
    assert viz.checks.network_references(other.to_jshtml())


def test_the_old_module_name_of_the_scene_still_imports_with_a_warning():
    """``convviz.viz.setup`` (it shared the build script's name) is now ``convviz.viz.scene``."""
    from convviz.viz.scene import Setup as new

    with pytest.warns(DeprecationWarning, match=r"convviz\.viz\.scene"):
        from convviz.viz.setup import Setup as old
    assert old is new
