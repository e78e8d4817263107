"""Automated legibility checks for matplotlib figures and HTML outputs.

The project's legibility rules, as checks a test (or a course author) can run
on any :class:`~matplotlib.figure.Figure`:

* :func:`text_contrast` -- text contrasts at least 4.5:1 (WCAG AA) with what
  is drawn under it;
* :func:`text_overlaps` -- no two texts overlap;
* :func:`text_outside` -- no text runs off the canvas;
* :func:`small_text` -- no font smaller than 10 pt at the saved size;
* :func:`check_figure` -- all four at once, sharing one render;
* :func:`network_references` -- an HTML output fetches nothing over the
  network by itself.

Every figure check measures the figure as ``fig.savefig(path, dpi=dpi)``
(without ``bbox_inches="tight"``) would draw it: on a temporary Agg canvas at
``dpi``, with the same layout pass savefig runs.  The user's backend, canvas,
dpi and artists are left as they were.

Limits
------
* A text's background is the per-channel median of what is drawn under its
  box: text across a sharp colour edge is judged against the majority colour.
  A stroke path effect with an explicit ``foreground`` (a halo) counts as the
  text's background.  Transparent parts of the figure are judged over white.
* Boxes are the texts' own extents (glyphs, not their bbox patches or
  annotation arrows); a rotated text's box is the upright box around it.
* Only :class:`~matplotlib.text.Text` artists are checked; numbers drawn as
  paths or images are invisible to these checks.

Examples
--------
>>> from matplotlib.figure import Figure
>>> fig = Figure(figsize=(3, 2), layout="constrained")
>>> ax = fig.add_subplot()
>>> _ = ax.set_title("much too small", fontsize=7)
>>> for problem in check_figure(fig):
...     print(problem)
font size: 'much too small' - 7 pt, needs at least 10 pt
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from matplotlib import colors as mcolors
from matplotlib import patheffects
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.transforms import Bbox, TransformedPath

from ..ops._docs import fill_doc
from ._offline import network_references
from ._render import agg_canvas, layout_frozen
from ._style import contrast_ratio

__all__ = ["Problem", "check_figure", "contrast_ratio", "drawn_texts", "network_references", "small_text",
           "text_contrast", "text_outside", "text_overlaps"]

_SNIPPET = 40  # characters of a text quoted in a problem
_TOLERANCE_OUTSIDE_PX = 0.5
_PAIR_BLOCK = 512  # rows of the pairwise overlap test done at once (bounds memory to ~block * n)


@dataclass(frozen=True)
class Problem:
    """One legibility problem found in a figure.

    Attributes
    ----------
    check : str
        Which rule: ``"contrast"``, ``"overlap"``, ``"outside"`` or ``"font size"``.
    text : str
        The offending text (its first 40 characters); for an overlap, the pair
        as ``"'a' / 'b'"``.
    detail : str
        What is wrong, with the numbers, e.g.
        ``"contrast 1.2:1 (#000000 on #2d004b), needs 4.5:1"``.

    Examples
    --------
    >>> print(Problem("font size", "x", "8 pt, needs at least 10 pt"))
    font size: 'x' - 8 pt, needs at least 10 pt
    >>> print(Problem("overlap", "'a' / 'b'", "boxes overlap by 5 x 3 px at 150 dpi"))
    overlap: 'a' / 'b' - boxes overlap by 5 x 3 px at 150 dpi
    """

    check: str
    text: str
    detail: str

    def __str__(self) -> str:
        # An overlap's text is already a quoted pair; every other text is quoted here.
        text = self.text if self.check == "overlap" else repr(self.text)
        return f"{self.check}: {text} - {self.detail}"


# ---------------------------------------------------------------------------------
# Colour


# Parameters several checks document alike.
_DOCS = {"figure_dpi": """\
fig : Figure
    The figure.
dpi : float, default 150
    Resolution the figure is saved at."""}

def _hex(rgb: Any) -> str:
    return mcolors.to_hex(np.clip(np.asarray(rgb, dtype=float)[:3], 0.0, 1.0))


def _format_ratio(ratio: float, minimum: float) -> str:
    # One decimal, unless rounding would print a failing ratio as passing (4.48 -> "4.5").
    text = f"{ratio:.1f}"
    return f"{ratio:.2f}" if float(text) >= minimum > ratio else text


# ---------------------------------------------------------------------------------
# Rendering at the saved size


@dataclass
class _Render:
    """What one savefig-like draw produced: the drawn texts, their boxes, the background."""

    texts: list[Text]
    boxes: np.ndarray  # (n, 4) window extents x0, y0, x1, y1 in pixels, origin bottom-left
    background: np.ndarray | None  # (height, width, 3) float RGB in [0, 1], texts hidden, top row first
    width: int
    height: int
    dpi: float


def _require_figure(fig: Any) -> Figure:
    if not isinstance(fig, Figure):
        raise TypeError(f"expected a matplotlib Figure, got {type(fig).__name__}")
    return fig


@contextmanager
def _recording(texts: list[Text], drawn: dict[int, Text], hide: bool) -> Iterator[None]:
    """Wrap each text's ``draw`` to record that it was drawn, and (``hide``) draw it without glyphs.

    Recording the draw itself is what makes :func:`drawn_texts` exact: tick labels
    outside the view, axes turned off, hidden legends... are not drawn, so not recorded.
    Glyphs are hidden by a transient alpha of 0, which leaves a text's bbox patch and
    arrow drawn (they are part of what is under it) and changes no layout.
    """
    wrapped = []
    for text in texts:
        own = text.__dict__.get("draw")  # an instance-level draw someone else installed
        original = own if own is not None else type(text).draw.__get__(text)

        def draw(renderer: Any, _text: Text = text, _original: Any = original) -> Any:
            drawn.setdefault(id(_text), _text)
            if not hide:
                return _original(renderer)
            alpha = _text.get_alpha()
            _text.set_alpha(0.0)
            try:
                return _original(renderer)
            finally:
                _text.set_alpha(alpha)

        setattr(text, "draw", draw)  # an instance attribute shadowing the method (mypy refuses method assignment)
        wrapped.append((text, own))
    try:
        yield
    finally:
        for text, own in wrapped:
            if own is not None:
                setattr(text, "draw", own)
            else:
                del text.draw


def _all_texts(fig: Figure) -> list[Text]:
    return fig.findobj(Text)


def _text_box(text: Text, renderer: Any) -> Bbox:
    """The box of the text's glyphs (an annotation's own extent includes its arrow)."""
    if text.get_wrap() and hasattr(text, "_get_wrapped_text") and hasattr(text, "_cm_set"):
        # Older matplotlib wraps only while drawing; measure the wrapped lines.
        with text._cm_set(text=text._get_wrapped_text()):
            return Text.get_window_extent(text, renderer)
    return Text.get_window_extent(text, renderer)


def _clip_bounds(text: Text) -> Bbox | None:
    """The window-space box a clipped text is cut to, or None when it is not clipped."""
    if not text.get_clip_on():
        return None
    boxes: list[Bbox] = []
    clip_box = text.get_clip_box()
    if clip_box is not None:
        boxes.append(clip_box)
    path = text.get_clip_path()  # set_clip_path stores a TransformedPath (TransformedPatchPath for a patch)
    if isinstance(path, TransformedPath):
        boxes.append(path.get_fully_transformed_path().get_extents())
    if not boxes:
        return None
    clip = boxes[0]
    for box in boxes[1:]:
        clip = Bbox.intersection(clip, box) or Bbox.null()
    return clip


def _is_shown(text: Text, box: Bbox, renderer: Any) -> bool:
    """Whether a text that was asked to draw put any glyph on the canvas."""
    if not text.get_visible() or not text.get_text().strip():
        return False
    if text.get_alpha() == 0 or mcolors.to_rgba(text.get_color(), text.get_alpha())[3] == 0:
        return False
    check_xy = getattr(text, "_check_xy", None)  # annotations skip drawing when xy is clipped
    if check_xy is not None and not check_xy(renderer):
        return False
    if not np.all(np.isfinite(box.extents)) or box.width <= 0 or box.height <= 0:
        return False
    return True


def _visible_part(text: Text, box: Bbox) -> Bbox | None:
    """The part of ``box`` its clipping leaves drawn (None when nothing is)."""
    clip = _clip_bounds(text)
    if clip is None:
        return box
    part = Bbox.intersection(box, clip)
    if part is None or part.width <= 0 or part.height <= 0:
        return None
    return part


def _render(fig: Figure, dpi: float, *, background: bool, hide_text: bool = True) -> _Render:
    """Draw ``fig`` as ``savefig(dpi=dpi)`` would, recording the texts drawn and (optionally) the pixels."""
    _require_figure(fig)
    with agg_canvas(fig, dpi) as canvas:
        # savefig's first pass: a draw without output, where the layout engine runs.
        fig.draw_without_rendering()
        for _ in range(3):  # a draw that creates texts (new ticks) missed them: draw again
            before = _all_texts(fig)
            drawn: dict[int, Text] = {}
            with layout_frozen(fig), _recording(before, drawn, hide_text):
                canvas.draw()
            if {id(t) for t in _all_texts(fig)} <= {id(t) for t in before}:
                break
        renderer = canvas.get_renderer()
        width, height = (int(round(v)) for v in fig.bbox.size)
        texts, boxes = [], []
        for text in drawn.values():
            if not text.get_visible() or not text.get_text().strip():
                continue
            box = _text_box(text, renderer)
            if not _is_shown(text, box, renderer):
                continue
            part = _visible_part(text, box)
            if part is None:
                continue  # clipped away entirely
            texts.append(text)
            boxes.append(part.extents)
        image = None
        if background:
            rgba = np.asarray(canvas.buffer_rgba(), dtype=float) / 255.0
            # Straight (not premultiplied) alpha; transparent parts are judged over white paper.
            image = rgba[..., :3] * rgba[..., 3:] + (1.0 - rgba[..., 3:])
    return _Render(texts=texts, boxes=np.asarray(boxes, dtype=float).reshape(-1, 4), background=image,
                   width=width, height=height, dpi=float(dpi))


def _label(text: Text) -> str:
    return text.get_text().strip()[:_SNIPPET]


# ---------------------------------------------------------------------------------
# The checks


def drawn_texts(fig: Figure, *, dpi: float = 150) -> list[Text]:
    """Every text the figure actually draws when saved at ``dpi``, in drawing order.

    Found by drawing the figure (on a temporary Agg canvas, the user's canvas
    and backend untouched) and recording which :class:`~matplotlib.text.Text`
    artists drew glyphs: visible, not blank, not fully transparent, inside
    visible parents, not clipped away.  Tick labels of ticks outside the view,
    texts of an ``ax.axis("off")`` axes or of a hidden legend are not drawn, so
    not returned.

    Parameters
    ----------
    fig : Figure
        The figure.
    dpi : float, default 150
        Resolution of the draw (constrained layout, hence which ticks show,
        can depend on it).

    Returns
    -------
    list of Text

    Examples
    --------
    >>> from matplotlib.figure import Figure
    >>> fig = Figure(figsize=(3, 2), layout="constrained")
    >>> ax = fig.add_subplot()
    >>> _ = ax.set_xticks([0, 1, 5])
    >>> _ = ax.set_xlim(0, 1)  # the tick at 5 is now outside the view: not drawn
    >>> _ = ax.set_yticks([])
    >>> _ = ax.set_title("T")
    >>> sorted(t.get_text() for t in drawn_texts(fig))
    ['0', '1', 'T']
    >>> ax.set_axis_off()
    >>> [t.get_text() for t in drawn_texts(fig)]
    ['T']
    """
    return _render(fig, dpi, background=False).texts


def _contrast(render: _Render, minimum: float) -> list[Problem]:
    assert render.background is not None
    problems = []
    for text, (x0, y0, x1, y1) in zip(render.texts, render.boxes):
        # Pixel window inside the box, shrunk by 1 px (anti-aliased edges belong to neighbours).
        cols = _pixel_span(x0, x1, render.width)
        rows = _pixel_span(render.height - y1, render.height - y0, render.height)
        if cols is None or rows is None:
            continue  # entirely off the canvas: text_outside reports it
        under = render.background[rows[0]:rows[1], cols[0]:cols[1]].reshape(-1, 3)
        background = np.median(under, axis=0)
        background = _halo(text, background)
        fg = np.asarray(mcolors.to_rgba(text.get_color(), text.get_alpha()))
        colour = fg[:3] * fg[3] + background * (1.0 - fg[3])  # translucent text over what is under it
        ratio = contrast_ratio(colour, background)
        if ratio < minimum:
            problems.append(Problem("contrast", _label(text),
                                    f"contrast {_format_ratio(ratio, minimum)}:1 ({_hex(colour)} on "
                                    f"{_hex(background)}), needs {minimum:g}:1"))
    return problems


def _pixel_span(lo: float, hi: float, size: int) -> tuple[int, int] | None:
    """Integer pixel range [a, b) inside [lo, hi] shrunk by 1 px, clamped to [0, size); None if empty."""
    a, b = int(np.ceil(lo + 1.0)), int(np.floor(hi - 1.0))
    if b <= a:  # too thin to shrink: the pixels it touches
        a, b = int(np.floor(lo)), int(np.ceil(hi))
    a, b = max(a, 0), min(b, size)
    return (a, b) if b > a else None


def _halo(text: Text, background: np.ndarray) -> np.ndarray:
    """The background as the text sees it: a stroke path effect with its own colour is a halo."""
    for effect in text.get_path_effects() or []:
        if isinstance(effect, patheffects.Stroke):
            foreground = getattr(effect, "_gc", {}).get("foreground")
            if foreground is not None:
                halo = np.asarray(mcolors.to_rgba(foreground, getattr(effect, "_gc", {}).get("alpha")))
                background = halo[:3] * halo[3] + background * (1.0 - halo[3])
    return background


def text_contrast(fig: Figure, *, minimum: float = 4.5, dpi: float = 150) -> list[Problem]:
    """Texts whose colour contrasts less than ``minimum`` with what is drawn under them.

    The background is measured, not guessed: the figure is rendered at
    ``dpi`` with every text's glyphs hidden (bbox patches and arrows kept) and
    the per-channel median of the pixels inside each text's box (shrunk by
    1 px) is the colour under it.  The text's colour, composited with its alpha
    over that background, must contrast at least ``minimum`` (WCAG AA: 4.5).

    Parameters
    ----------
    fig : Figure
        The figure.
    minimum : float, default 4.5
        Least contrast ratio allowed.
    dpi : float, default 150
        Resolution the figure is saved at.

    Returns
    -------
    list of Problem
        One per text whose contrast with what lies behind it is below
        ``minimum``, in drawing order.

    Examples
    --------
    >>> from matplotlib.figure import Figure
    >>> fig = Figure(figsize=(2, 2))
    >>> ax = fig.add_axes((0, 0, 1, 1))
    >>> ax.set_axis_off()
    >>> _ = ax.imshow([[1.0]], cmap="PuOr", vmin=0, vmax=1)  # darkest purple
    >>> label = ax.text(0, 0, "3", color="black", ha="center", va="center", fontsize=20)
    >>> for problem in text_contrast(fig):
    ...     print(problem)
    contrast: '3' - contrast 1.2:1 (#000000 on #2d004b), needs 4.5:1
    >>> label.set_color("white")
    >>> text_contrast(fig)
    []
    """
    render = _render(fig, dpi, background=True)
    return _contrast(render, minimum)


def _overlaps(render: _Render, tolerance_px: float) -> list[Problem]:
    boxes, n = render.boxes, len(render.texts)
    problems = []
    for start in range(0, n, _PAIR_BLOCK):  # blocks of rows: vectorised, memory bounded
        a = boxes[start:start + _PAIR_BLOCK, None, :]
        width = np.minimum(a[..., 2], boxes[None, :, 2]) - np.maximum(a[..., 0], boxes[None, :, 0])
        height = np.minimum(a[..., 3], boxes[None, :, 3]) - np.maximum(a[..., 1], boxes[None, :, 1])
        rows = np.arange(start, start + a.shape[0])[:, None]
        hit = ((width > 0) & (height > 0) & (width >= tolerance_px) & (height >= tolerance_px)
               & (np.arange(n)[None, :] > rows))  # each pair once
        for i, j in zip(*np.nonzero(hit)):
            pair = f"{_label(render.texts[start + i])!r} / {_label(render.texts[j])!r}"
            problems.append(Problem("overlap", pair, f"boxes overlap by {width[i, j]:.0f} x {height[i, j]:.0f} px "
                                                     f"at {render.dpi:g} dpi"))
    return problems


@partial(fill_doc, entries=_DOCS)
def text_overlaps(fig: Figure, *, dpi: float = 150, tolerance_px: float = 1.0) -> list[Problem]:
    """Pairs of drawn texts whose boxes overlap at ``dpi``.

    Boxes are the texts' window extents (their glyphs' bounding boxes); an
    overlap thinner than ``tolerance_px`` in either direction is ignored
    (boxes that merely touch).

    Parameters
    ----------
    %(figure_dpi)s
    tolerance_px : float, default 1.0
        Overlaps smaller than this, in pixels, in width or height are ignored.

    Returns
    -------
    list of Problem
        One per overlapping pair, the first drawn first.

    Examples
    --------
    >>> from matplotlib.figure import Figure
    >>> fig = Figure(figsize=(3, 2))
    >>> _ = fig.text(0.3, 0.5, "input gradient")
    >>> second = fig.text(0.4, 0.5, "output")
    >>> [p.text for p in text_overlaps(fig)]
    ["'input gradient' / 'output'"]
    >>> second.set_y(0.2)
    >>> text_overlaps(fig)
    []
    """
    return _overlaps(_render(fig, dpi, background=False), tolerance_px)


def _outside(render: _Render) -> list[Problem]:
    problems = []
    tol = _TOLERANCE_OUTSIDE_PX
    for text, (x0, y0, x1, y1) in zip(render.texts, render.boxes):
        beyond = {"left": -x0, "right": x1 - render.width, "bottom": -y0, "top": y1 - render.height}
        edges = [(edge, d) for edge, d in beyond.items() if d > tol]
        if edges:
            where = " and ".join(f"{d:.0f} px past the {edge}" for edge, d in edges)
            problems.append(Problem("outside", _label(text),
                                    f"{where} edge of the {render.width} x {render.height} px canvas "
                                    f"at {render.dpi:g} dpi"))
    return problems


def text_outside(fig: Figure, *, dpi: float = 150) -> list[Problem]:
    """Drawn texts that run, even partly, off the saved canvas.

    Parameters
    ----------
    fig : Figure
        The figure.
    dpi : float, default 150
        Resolution the figure is saved at (its canvas is ``figsize * dpi`` pixels).

    Returns
    -------
    list of Problem
        One per text whose box leaves the canvas by more than 0.5 px.

    Examples
    --------
    >>> from matplotlib.figure import Figure
    >>> fig = Figure(figsize=(3, 2))
    >>> label = fig.text(1.05, 0.5, "lost")
    >>> print(*text_outside(fig))  # doctest: +ELLIPSIS
    outside: 'lost' - ... px past the right edge of the 450 x 300 px canvas at 150 dpi
    >>> label.set_x(0.5)
    >>> text_outside(fig)
    []
    """
    return _outside(_render(fig, dpi, background=False))


def _points(text: Text) -> float:
    """The text's font size in points (``get_fontsize`` returns a number, though typed ``float | str``)."""
    return float(text.get_fontsize())


def _small(texts: list[Text], minimum_pt: float) -> list[Problem]:
    # Points are absolute: at the saved size (figsize in inches) a point is 1/72 inch whatever the dpi.
    return [Problem("font size", _label(t), f"{_points(t):g} pt, needs at least {minimum_pt:g} pt")
            for t in texts if _points(t) < minimum_pt]


def small_text(fig: Figure, *, minimum_pt: float = 10.0, dpi: float = 150) -> list[Problem]:
    """Drawn texts set smaller than ``minimum_pt`` points.

    Parameters
    ----------
    fig : Figure
        The figure.
    minimum_pt : float, default 10.0
        Smallest font size allowed, in points at the saved size.
    dpi : float, default 150
        Resolution of the draw that decides which texts are drawn.

    Returns
    -------
    list of Problem
        One per text drawn smaller than ``minimum_pt`` points, in drawing order.

    Examples
    --------
    >>> from matplotlib.figure import Figure
    >>> fig = Figure(figsize=(3, 2))
    >>> ax = fig.add_subplot()
    >>> _ = ax.set_xticks([0.5], ["half"], fontsize=8)
    >>> _ = ax.set_yticks([])
    >>> print(*small_text(fig))
    font size: 'half' - 8 pt, needs at least 10 pt
    >>> ax.tick_params(labelsize=10)
    >>> small_text(fig)
    []
    """
    return _small(_render(fig, dpi, background=False).texts, minimum_pt)


@partial(fill_doc, entries=_DOCS)
def check_figure(fig: Figure, *, dpi: float = 150, minimum_pt: float = 10.0,
                 minimum_contrast: float = 4.5) -> list[Problem]:
    """Every legibility check on one figure, from a single render.

    Runs, in this order, :func:`text_contrast`, :func:`text_overlaps`,
    :func:`text_outside` and :func:`small_text`.

    Parameters
    ----------
    %(figure_dpi)s
    minimum_pt : float, default 10.0
        Smallest font size allowed, in points.
    minimum_contrast : float, default 4.5
        Least contrast ratio allowed between a text and what is under it.

    Returns
    -------
    list of Problem
        Empty when the figure passes.

    Examples
    --------
    >>> from matplotlib.figure import Figure
    >>> fig = Figure(figsize=(3, 2), layout="constrained")
    >>> ax = fig.add_subplot()
    >>> _ = ax.set(title="coverage", xlabel="input column", ylabel="input row")
    >>> check_figure(fig)
    []
    >>> _ = fig.text(0.5, 0.5, "pale", color="#aaaaaa", fontsize=8)
    >>> [p.check for p in check_figure(fig)]
    ['contrast', 'font size']
    """
    render = _render(fig, dpi, background=True)
    return (_contrast(render, minimum_contrast) + _overlaps(render, 1.0) + _outside(render)
            + _small(render.texts, minimum_pt))
