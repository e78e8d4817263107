"""Every gallery figure, in every theme, and every animation frame passes the legibility checks.

The checks themselves are shown to catch planted faults in tests/test_figure_checks.py;
here they run over what convviz actually draws: WCAG AA contrast of every number
against its cell, no overlapping text, no text outside the canvas, nothing under
10 pt at the saved size, and no network reference in any HTML convviz writes.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from convviz import viz  # noqa: E402
from convviz.cli import main  # noqa: E402
from convviz.viz import checks, gallery  # noqa: E402

FIGURES = [e for e in gallery.ENTRIES if not e.animated]
ANIMATIONS = [e for e in gallery.ENTRIES if e.animated]
PNG_DPI = 150  # what the gallery and viz.save write
GIF_DPI = 100  # what save() renders animation frames at


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


@pytest.mark.parametrize("theme", ["screen", "projector", "print"])
@pytest.mark.parametrize("entry", FIGURES, ids=[e.name for e in FIGURES])
def test_every_gallery_figure_is_legible(entry, theme):
    with viz.theme_context(theme):
        fig = entry.draw()
    problems = checks.check_figure(fig, dpi=PNG_DPI)
    assert problems == [], "\n".join(map(str, problems))


@pytest.mark.parametrize("entry", ANIMATIONS, ids=[e.name for e in ANIMATIONS])
def test_every_animation_frame_is_legible(entry):
    anim = entry.draw()
    frames = anim._save_count
    for frame in range(frames):
        anim._func(frame)
        problems = checks.check_figure(anim._fig, dpi=GIF_DPI)
        assert problems == [], f"frame {frame}:\n" + "\n".join(map(str, problems))
        if frame == 0:  # as viz.save renders: the first frame's layout is kept for the others
            anim._fig.set_layout_engine("none")


def test_user_arrays_and_decimals_stay_legible():
    """Not only the gallery's small integers: decimals and a user's own arrays."""
    import numpy as np

    rng = np.random.default_rng(3)
    s = viz.Setup(x=rng.normal(size=(6, 6)), W=rng.normal(size=(3, 3)), strides=2, padding="SAME",
                  dy=rng.normal(size=(3, 3)))
    for fig in (viz.scatter(s), viz.scatter_vs_gather(s), viz.depthwise(s, (1, 1)), viz.coverage(s)):
        problems = checks.check_figure(fig, dpi=PNG_DPI)
        assert problems == [], "\n".join(map(str, problems))


def test_the_checks_fail_a_figure_with_the_old_defects():
    """The gallery test can fail: the defects the old figures had are each caught on a real view."""
    fig = viz.coverage(viz.Setup(input_hw=8, kernel_hw=3, strides=2))
    ax = fig.axes[0]
    ax.texts[0].set_fontsize(7)  # the old 7-8 pt labels
    ax.texts[1].set_color("black" if ax.texts[1].get_color() == "white" else "white")  # wrong ink
    ax.text(ax.texts[2].get_position()[0] + 0.1, ax.texts[2].get_position()[1], "X")  # a mark over a number
    fig.colorbar(ax.images[0], ax=ax).set_label("a colour bar label much too long to fit on the canvas " * 3)
    found = {p.check for p in checks.check_figure(fig, dpi=PNG_DPI)}
    assert found == {"contrast", "overlap", "outside", "font size"}


def test_no_html_convviz_writes_loads_anything(tmp_path):
    assert main(["demo", "--out", str(tmp_path), "--quiet"]) == 0
    pages = sorted(tmp_path.glob("*.html"))
    assert [p.name for p in pages] == ["explorer.html", "input_gradient.html"]
    for page in pages:
        assert checks.network_references(page.read_text(encoding="utf-8")) == [], page.name
    # and the check would see a CDN link if one slipped in
    planted = pages[1].read_text(encoding="utf-8").replace(
        "</head>", '<link rel="stylesheet" href="https://cdn.example.org/x.css"></head>')
    assert checks.network_references(planted)


@pytest.mark.parametrize("entry", FIGURES, ids=[e.name for e in FIGURES])
def test_one_short_title_and_one_parameter_line(entry):
    fig = entry.draw()
    lines = fig.get_suptitle().splitlines()
    assert len(lines) == 2 and len(lines[0]) <= 80, lines  # a title, then the parameters
    panel_titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert len(set(panel_titles)) == len(panel_titles)  # no text repeated across panels
    assert all("\n" not in t for t in panel_titles)


def test_the_demo_figures_are_legible():
    """What `convviz demo` draws (its colour bar label was clipped before)."""
    s = viz.Setup(input_hw=7, kernel_hw=3, strides=2, padding="SAME")
    for fig in (viz.coverage(s), viz.scatter(s, (2, 2))):
        problems = checks.check_figure(fig, dpi=PNG_DPI)
        assert problems == [], "\n".join(map(str, problems))
