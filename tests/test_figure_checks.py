"""The legibility checks catch each planted fault, pass the repaired figure, and leave the figure as it was."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib import patheffects  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from PIL import Image  # noqa: E402

from convviz.viz import checks  # noqa: E402
from convviz.viz.checks import (  # noqa: E402
    Problem,
    check_figure,
    contrast_ratio,
    drawn_texts,
    network_references,
    small_text,
    text_contrast,
    text_outside,
    text_overlaps,
)

DPI = 100  # small canvases keep the renders fast; the rules are the same at any dpi


def cell_figure(value: float, color: str, **text_kwargs) -> tuple[Figure, object]:
    """One PuOr cell filling the figure, a number written on it."""
    fig = Figure(figsize=(2, 2))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    ax.imshow([[value]], cmap="PuOr", vmin=0, vmax=1)
    text = ax.text(0, 0, "3", color=color, ha="center", va="center", fontsize=20, **text_kwargs)
    return fig, text


def texts_of(fig: Figure) -> list[str]:
    return sorted(t.get_text() for t in drawn_texts(fig, dpi=DPI))


# ---------------------------------------------------------------------------------
# Contrast


def test_contrast_ratio_follows_wcag() -> None:
    assert contrast_ratio("black", "white") == pytest.approx(21.0)
    assert contrast_ratio("#777777", "white") == pytest.approx(4.48, abs=0.005)
    assert contrast_ratio((0.2, 0.4, 0.6), (0.2, 0.4, 0.6)) == pytest.approx(1.0)
    assert contrast_ratio("white", "#767676") == pytest.approx(4.54, abs=0.005)  # the lightest AA grey


@pytest.mark.parametrize("value", [0.0, 1.0])  # both PuOr extremes are dark
def test_black_on_dark_cell_fails_white_passes(value: float) -> None:
    fig, text = cell_figure(value, "black")
    problems = text_contrast(fig, dpi=DPI)
    assert [p.check for p in problems] == ["contrast"] and problems[0].text == "3"
    cell = matplotlib.colors.to_hex(matplotlib.colormaps["PuOr"](value))
    assert f"(#000000 on {cell})" in problems[0].detail and problems[0].detail.endswith("needs 4.5:1")
    text.set_color("white")
    assert text_contrast(fig, dpi=DPI) == []


def test_background_is_measured_not_assumed() -> None:
    # Grey #777777 text: fails on white (4.48:1), passes on black; the figure's own colour decides.
    fig = Figure(figsize=(3, 1))
    fig.text(0.1, 0.4, "grey", color="#777777", fontsize=14)
    [problem] = text_contrast(fig, dpi=DPI)
    assert problem.detail == "contrast 4.48:1 (#777777 on #ffffff), needs 4.5:1"  # not rounded up to 4.5
    fig.set_facecolor("black")
    assert text_contrast(fig, dpi=DPI) == []  # 4.69:1 on black
    assert [p.check for p in text_contrast(fig, dpi=DPI, minimum=5)] == ["contrast"]  # the threshold is honoured


def test_background_follows_savefig_facecolor() -> None:
    # savefig paints the figure with rcParams["savefig.facecolor"] when it is not "auto": so do the checks.
    fig = Figure(figsize=(3, 1))
    fig.text(0.1, 0.4, "grey", color="#777777", fontsize=14)
    with matplotlib.rc_context({"savefig.facecolor": "black"}):
        assert text_contrast(fig, dpi=DPI) == []
    assert matplotlib.colors.to_hex(fig.get_facecolor()) == "#ffffff"  # the figure's own colour is kept
    assert len(text_contrast(fig, dpi=DPI)) == 1


def test_text_with_a_bbox_patch_is_judged_against_its_patch() -> None:
    fig, text = cell_figure(1.0, "black", bbox={"facecolor": "white", "edgecolor": "none", "pad": 2})
    assert text_contrast(fig, dpi=DPI) == []
    text.get_bbox_patch().set_facecolor("#2d004b")  # a patch as dark as the cell: the fault again
    assert [p.check for p in text_contrast(fig, dpi=DPI)] == ["contrast"]


def test_translucent_text_and_halo() -> None:
    fig, text = cell_figure(1.0, "white", alpha=0.2)  # white at 20 % on dark purple is still dark
    assert [p.check for p in text_contrast(fig, dpi=DPI)] == ["contrast"]
    text.set_alpha(None)
    text.set_color("black")
    text.set_path_effects([patheffects.withStroke(linewidth=4, foreground="white")])  # a white halo
    assert text_contrast(fig, dpi=DPI) == []


def test_other_texts_do_not_count_as_background() -> None:
    # A big black glyph under a small white label would be measured as "black" if texts were rendered.
    fig = Figure(figsize=(2, 2))
    fig.text(0.5, 0.5, "█", color="black", fontsize=60, ha="center", va="center")
    fig.text(0.5, 0.5, "x", color="white", fontsize=12, ha="center", va="center")
    problems = text_contrast(fig, dpi=DPI)
    assert [p.text for p in problems] == ["x"]  # white on the white figure; the block itself is fine


# ---------------------------------------------------------------------------------
# Overlaps, outside, font size


def test_overlapping_texts_are_found_and_moved_apart_pass() -> None:
    fig = Figure(figsize=(3, 2))
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.text(0.2, 0.5, "scatter", fontsize=12)
    second = ax.text(0.3, 0.5, "gather", fontsize=12)
    [problem] = text_overlaps(fig, dpi=DPI)
    assert problem.check == "overlap" and problem.text == "'scatter' / 'gather'"
    assert str(problem).startswith("overlap: 'scatter' / 'gather' - boxes overlap by ")
    second.set_y(0.1)
    assert text_overlaps(fig, dpi=DPI) == []


def test_overlap_tolerance() -> None:
    fig = Figure(figsize=(3, 2))
    a = fig.text(0.1, 0.5, "left", fontsize=12)
    b = fig.text(0.5, 0.5, "right", fontsize=12)
    fig.draw_without_rendering()
    right_edge = a.get_window_extent().x1
    b.set_x((right_edge - 0.5) / fig.bbox.width)  # half a pixel of overlap at the figure's dpi
    assert text_overlaps(fig, dpi=fig.dpi) == []
    assert len(text_overlaps(fig, dpi=fig.dpi, tolerance_px=0.1)) == 1


def test_many_texts_overlaps_are_vectorised_and_exact() -> None:
    fig = Figure(figsize=(12, 12), dpi=50)
    for i in range(26):
        for j in range(25):  # 650 texts on a grid, well apart
            fig.text(0.02 + 0.038 * i, 0.02 + 0.038 * j, str(i * 25 + j), fontsize=6)
    fig.text(0.02, 0.02, "dup", fontsize=6)  # on top of "0"
    problems = text_overlaps(fig, dpi=50)
    assert [p.text for p in problems] == ["'0' / 'dup'"]


def test_text_outside_the_canvas() -> None:
    fig = Figure(figsize=(3, 2))
    text = fig.text(1.05, 0.5, "lost")
    [problem] = text_outside(fig, dpi=DPI)
    assert problem.check == "outside" and problem.text == "lost"
    assert "past the right edge of the 300 x 200 px canvas" in problem.detail
    text.set_x(0.5)
    assert text_outside(fig, dpi=DPI) == []


def test_long_suptitle_is_outside_and_a_short_one_is_not() -> None:
    fig = Figure(figsize=(3, 2), layout="constrained")
    fig.add_subplot()
    title = fig.suptitle("A suptitle much too long to fit across this small figure", fontsize=14)
    [problem] = text_outside(fig, dpi=DPI)
    assert "left" in problem.detail and "right" in problem.detail and problem.text.startswith("A suptitle")
    assert len(problem.text) == 40  # quoted texts are cut to their first 40 characters
    title.set_text("Short")
    assert text_outside(fig, dpi=DPI) == []


def test_small_tick_label_and_title_are_named() -> None:
    fig = Figure(figsize=(3, 2), layout="constrained")
    ax = fig.add_subplot()
    ax.set_xticks([0.5], ["half"], fontsize=8)
    ax.set_yticks([])
    ax.set_title("Coverage", fontsize=8)
    problems = small_text(fig, dpi=DPI)
    assert sorted(str(p) for p in problems) == [
        "font size: 'Coverage' - 8 pt, needs at least 10 pt",
        "font size: 'half' - 8 pt, needs at least 10 pt",
    ]
    ax.tick_params(labelsize=10)
    ax.title.set_fontsize(10)
    assert small_text(fig, dpi=DPI) == []
    assert len(small_text(fig, dpi=DPI, minimum_pt=12)) == 2


# ---------------------------------------------------------------------------------
# Which texts count


def test_only_texts_that_are_drawn_count() -> None:
    fig = Figure(figsize=(4, 3), layout="constrained")
    ax, off = fig.subplots(1, 2)
    ax.set_xticks([0, 1, 5, 9])  # 5 and 9 end up outside the view: their labels exist, undrawn
    ax.set_yticks([0, 1, -3])
    ax.set(xlim=(0, 1), ylim=(0, 1))
    fig.draw_without_rendering()
    assert {"5", "9", "−3"} <= {t.get_text() for t in fig.findobj(matplotlib.text.Text)}
    ax.text(5, 5, "clipped away", clip_on=True)  # far outside the axes, clipped
    ax.annotate("unclipped annotation", (5, 5))  # xy outside: annotations skip themselves
    ax.plot([0, 1], label="a line")
    ax.legend().set_visible(False)
    off.set_title("off axes title")
    off.set_xticks([0, 1], ["tick", "tick"], fontsize=4)
    off.axis("off")  # no ticks, no tick labels
    hidden = fig.add_axes((0.1, 0.1, 0.2, 0.2))
    hidden.set_title("hidden axes", fontsize=4)
    hidden.set_visible(False)
    fig.text(0.5, 0.5, "   ")  # blank
    fig.text(0.5, 0.6, "transparent", alpha=0, fontsize=4)
    fig.text(0.5, 0.7, "no colour", color="none", fontsize=4)
    fig.text(0.5, 0.8, "invisible", visible=False, fontsize=4)
    assert texts_of(fig) == ["0", "0", "1", "1", "off axes title"]
    assert small_text(fig, dpi=DPI) == []  # none of the 4 pt texts is drawn
    assert text_outside(fig, dpi=DPI) == []


def test_legend_colorbar_and_annotation_texts_count() -> None:
    fig = Figure(figsize=(4, 3), layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow(np.arange(4.0).reshape(2, 2), cmap="cividis")
    ax.set(xticks=[], yticks=[], xlabel="column")
    fig.colorbar(image, ax=ax, ticks=[0, 3]).set_label("count")
    ax.plot([0, 1], [0, 1], label="path")
    ax.legend(loc="upper left")
    ax.annotate("note", (0.5, 0.5), xytext=(0.1, 0.9), textcoords="axes fraction", arrowprops={"arrowstyle": "->"})
    fig.suptitle("All")
    assert texts_of(fig) == ["0", "3", "All", "column", "count", "note", "path"]


def test_a_partly_clipped_text_counts_only_its_visible_part() -> None:
    fig = Figure(figsize=(3, 3))
    ax = fig.add_axes((0.1, 0.1, 0.8, 0.8))
    ax.set_axis_off()
    ax.text(0.95, 0.5, "cut at the axes edge", clip_on=True, fontsize=12)
    assert text_outside(fig, dpi=DPI) == []  # what would run off the canvas is clipped
    assert texts_of(fig) == ["cut at the axes edge"]


# ---------------------------------------------------------------------------------
# Measured at the saved size, and the figure left alone


def test_render_matches_savefig_pixel_for_pixel() -> None:
    def figure() -> Figure:
        fig = Figure(figsize=(4, 3), layout="constrained")
        ax = fig.add_subplot()
        ax.imshow(np.arange(12.0).reshape(3, 4), cmap="PuOr")
        ax.set(title="constrained", xlabel="input column", ylabel="input row")
        return fig

    buffer = io.BytesIO()
    figure().savefig(buffer, format="png", dpi=DPI)
    saved = np.asarray(Image.open(buffer).convert("RGB"), dtype=float) / 255
    render = checks._render(figure(), DPI, background=True, hide_text=False)
    assert render.background.shape == saved.shape
    assert np.abs(render.background - saved).max() < 1e-6
    hidden = checks._render(figure(), DPI, background=True)
    assert np.abs(hidden.background - saved).max() > 0.5  # the texts' glyphs are gone...
    outside = np.ones(saved.shape[:2], dtype=bool)
    for x0, y0, x1, y1 in hidden.boxes:  # ... and nothing else changed
        top, bottom = max(int(saved.shape[0] - y1) - 2, 0), int(saved.shape[0] - y0) + 2
        outside[top:bottom, max(int(x0) - 2, 0):int(x1) + 2] = False
    assert np.abs(hidden.background - saved)[outside].max() < 1e-6


def test_checks_restore_the_figure() -> None:
    backend = matplotlib.get_backend()
    fig = plt.figure(figsize=(3, 2), dpi=72, layout="constrained")
    try:
        ax = fig.add_subplot()
        ax.set_title("title", fontsize=8)
        note = ax.text(0.5, 0.5, "note", alpha=0.7)
        canvas = fig.canvas
        texts = fig.findobj(matplotlib.text.Text)
        state = [(t.get_visible(), t.get_alpha(), t.get_color()) for t in texts]
        assert [p.check for p in check_figure(fig)] == ["font size"]
        for check in (text_contrast, text_overlaps, text_outside, small_text, drawn_texts):
            check(fig)
        assert fig.canvas is canvas and fig.dpi == 72 and matplotlib.get_backend() == backend
        assert fig.get_size_inches() == pytest.approx([3, 2])
        assert [(t.get_visible(), t.get_alpha(), t.get_color()) for t in texts] == state
        assert not any("draw" in vars(t) for t in fig.findobj(matplotlib.text.Text))
        assert note.get_alpha() == 0.7 and ax.title.get_visible()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")  # still saves, at its own dpi
        assert Image.open(buffer).size == (216, 144)
    finally:
        plt.close(fig)


def test_check_figure_runs_all_four_in_order() -> None:
    fig = Figure(figsize=(3, 2))
    ax = fig.add_axes((0.1, 0.1, 0.8, 0.8))
    ax.set_axis_off()
    ax.imshow([[1.0]], cmap="PuOr", vmin=0, vmax=1, extent=(0, 1, 0, 1))
    ax.text(0.1, 0.5, "dark", color="black", fontsize=12)
    ax.text(0.15, 0.5, "on dark", color="white", fontsize=12)
    fig.text(0.98, 0.02, "edge", fontsize=7)
    problems = check_figure(fig, dpi=DPI)
    assert [p.check for p in problems] == ["contrast", "overlap", "outside", "font size"]
    assert [p.text for p in problems] == ["dark", "'dark' / 'on dark'", "edge", "edge"]
    assert check_figure(Figure(figsize=(2, 2)), dpi=DPI) == []


def test_problem_is_a_readable_value() -> None:
    problem = Problem("contrast", "3", "contrast 1.2:1 (#000000 on #2d004b), needs 4.5:1")
    assert str(problem) == "contrast: '3' - contrast 1.2:1 (#000000 on #2d004b), needs 4.5:1"
    assert problem == Problem("contrast", "3", "contrast 1.2:1 (#000000 on #2d004b), needs 4.5:1")
    with pytest.raises(AttributeError):
        problem.text = "4"  # frozen
    with pytest.raises(TypeError):
        drawn_texts(object())


# ---------------------------------------------------------------------------------
# HTML


@pytest.mark.parametrize("planted", [
    '<script src="https://cdn.example.org/lib.js"></script>',
    '<link rel="stylesheet" href="//cdn.example.org/style.css">',
    "<style>.a { background: url(http://example.org/a.png) }</style>",
    '<style>@import "https://fonts.example.org/css";</style>',
    '<script>fetch("https://api.example.org/data")</script>',
    "<script>const r = new XMLHttpRequest(); r.open('GET', 'https://api.example.org/x');</script>",
    '<script type="module">import { f } from "https://esm.example.org/f.js";</script>',
    "<script>import('https://esm.example.org/g.js')</script>",
    '<img srcset="small.png 1x, https://example.org/big.png 2x">',
    '<video poster="https://example.org/p.jpg"></video>',
    '<form action="https://example.org/submit"></form>',
    '<meta http-equiv="refresh" content="0; url=https://example.org/">',
    '<div style="background-image: url(\'//example.org/b.png\')"></div>',
    '<svg><image href="https://example.org/i.png"/></svg>',
    '<img src = "HTTPS://example.org/upper.png">',
    '<img src="&#104;ttps://example.org/entity.png">',
])
def test_network_references_are_found(planted: str) -> None:
    page = f"<!DOCTYPE html><html><head><title>t</title></head><body><p>text</p>{planted}</body></html>"
    found = network_references(page)
    assert len(found) == 1, found
    assert "example.org" in found[0]
    assert network_references(page.replace(planted, "")) == []  # and the page without it is clean


@pytest.mark.parametrize("innocent", [
    '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink"></svg>',
    '<img src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAE=">',
    '<a href="https://example.org/course">the course</a>',
    "<p>See https://example.org/ for more.</p>",
    '<!-- <script src="https://cdn.example.org/old.js"></script> -->',
    '<link rel="canonical" href="https://example.org/page">',
    '<script src="explorer.js"></script><link rel="stylesheet" href="style.css">',
    "<style>.a { background: url(data:image/png;base64,AAAA) }</style>",
    "<script>fetch('data.json'); // see the docs</script>",
])
def test_non_fetching_references_are_not_reported(innocent: str) -> None:
    page = ('<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN" '
            f'"http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd"><html><body>{innocent}</body></html>')
    assert network_references(page) == []


def test_network_references_in_document_order_without_duplicates() -> None:
    page = ('<style>@import url("https://a.example.org/x.css");</style>'
            '<script src="//b.example.org/y.js"></script>'
            '<iframe srcdoc="&lt;script src=&quot;https://c.example.org/z.js&quot;&gt;&lt;/script&gt;"></iframe>')
    found = network_references(page)
    assert len(found) == 3
    assert ["a.example.org" in found[0], "b.example.org" in found[1], "c.example.org" in found[2]] == [True] * 3


def test_animation_html_of_matplotlib() -> None:
    # A real page full of JavaScript: its one CDN link is found, and nothing else is (no false positives).
    import re

    from matplotlib import animation

    fig = Figure(figsize=(1, 1), dpi=20)
    ax = fig.add_subplot()
    (line,) = ax.plot([0, 1], [0, 1])
    anim = animation.FuncAnimation(fig, lambda i: line.set_ydata([0, i]), frames=2)
    page = anim.to_jshtml()
    assert "data:image/png;base64" in page
    [found] = network_references(page)
    assert "font-awesome" in found and found.startswith("<link")
    assert network_references(re.sub(r"<link[^>]*font-awesome[^>]*>", "", page)) == []
