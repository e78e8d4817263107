"""Drawing a figure off screen, as ``savefig`` does, and laying it out until it is still.

One place for what saving, animating and checking a figure all need: a borrowed
Agg canvas at a given dpi (the user's backend is never switched), the layout
engine switched off for draws whose layout is done, and a layout drawn until it
has converged.  Constrained layout converges over draws (each pass about 15
times closer), so a figure drawn once can sit a pixel or two away from where
the next draw puts it: two saves of one figure would differ, and the frames of
an animation would jitter.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from matplotlib import rcParams
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = ["agg_canvas", "draw_settled", "layout_frozen", "settle"]


@contextmanager
def agg_canvas(fig: Figure, dpi: float) -> Iterator[FigureCanvasAgg]:
    """Put ``fig`` on a fresh Agg canvas at ``dpi`` as savefig does; put everything back after.

    The backend is never switched (``matplotlib.use`` is not called): the Agg
    canvas only borrows the figure.  Its idle redraw is a no-op (the caller
    draws), and it is marked as saving, so animated artists are drawn and an
    animation's timer does not start.
    """
    old_canvas, old_dpi = fig.canvas, fig.dpi
    had_original_dpi = hasattr(fig, "_original_dpi")
    old_original_dpi = getattr(fig, "_original_dpi", None)  # a new canvas overwrites it on some versions
    old_facecolor = fig.get_facecolor()
    canvas, repaint = None, False
    try:
        canvas = FigureCanvasAgg(fig)  # attaches itself as fig.canvas; manager None: no GUI resize
        canvas._is_saving = True  # type: ignore[attr-defined]  # matplotlib's private flag, not in its stubs
        canvas.draw_idle = lambda *args, **kwargs: None  # type: ignore[method-assign]
        fig.dpi = dpi
        facecolor = rcParams["savefig.facecolor"]  # what savefig paints the figure with
        repaint = not (isinstance(facecolor, str) and facecolor == "auto")
        if repaint:
            fig.set_facecolor(facecolor)
        yield canvas
    finally:
        if canvas is not None:
            if repaint:
                fig.set_facecolor(old_facecolor)
            fig.dpi = old_dpi  # while the Agg canvas is attached, so no window is resized
            if had_original_dpi:
                fig._original_dpi = old_original_dpi  # type: ignore[attr-defined]  # private, not in the stubs
        fig.set_canvas(old_canvas)


@contextmanager
def layout_frozen(fig: Figure) -> Iterator[None]:
    """Turn the layout engine off, keeping the positions it found, and back on after."""
    engine = fig.get_layout_engine()
    if engine is None:
        yield
        return
    fig.set_layout_engine("none")
    try:
        yield
    finally:
        fig.set_layout_engine(engine)


def _positions(fig: Figure) -> np.ndarray:
    """Where the layout engine put things, in pixels: every axes' box and the figure-level titles."""
    boxes = [ax.get_position().bounds for ax in fig.axes]
    texts = [t.get_position() + t.get_position() for t in (getattr(fig, name, None) for name in
             ("_suptitle", "_supxlabel", "_supylabel")) if t is not None]
    scale = np.tile(fig.bbox.size, 2)
    return np.array(boxes + texts, float).reshape(-1, 4) * scale


def draw_settled(fig: Figure, canvas: FigureCanvasAgg, *, tolerance_px: float = 0.25, max_draws: int = 4) -> int:
    """Draw the figure; with a layout engine, again until nothing moved by more than ``tolerance_px``.

    matplotlib's ``Animation.save`` hides the slow convergence by laying each
    frame out twice; here the figure is drawn again only when its layout moved.
    Returns the number of draws.

    Examples
    --------
    >>> fig = Figure(figsize=(3, 2), layout="constrained")
    >>> ax = fig.add_subplot(); _ = fig.suptitle("a title")
    >>> canvas = FigureCanvasAgg(fig)
    >>> draw_settled(fig, canvas) > 1, draw_settled(fig, canvas)  # settled once, then one draw suffices
    (True, 1)
    """
    if fig.get_layout_engine() is None:
        canvas.draw()
        return 1
    before = _positions(fig)
    for draws in range(1, max_draws + 1):
        canvas.draw()
        after = _positions(fig)
        if after.shape == before.shape and np.abs(after - before).max(initial=0) <= tolerance_px:
            break
        before = after
    return draws


def settle(fig: Figure, dpi: float | None = None) -> int:
    """Lay ``fig`` out until it is still, at ``dpi`` (its own by default), so every later draw is the same.

    The figure functions call it last, so the first draw a notebook shows is
    the settled layout and later draws and saves move nothing by more than
    ``tolerance_px`` of :func:`draw_settled`.  Returns the number of draws.

    Examples
    --------
    >>> fig = Figure(figsize=(3, 2), layout="constrained")
    >>> _ = fig.add_subplot().set_title("a panel"); _ = fig.suptitle("a title")
    >>> settle(fig) > 1, settle(fig)
    (True, 1)
    """
    with agg_canvas(fig, dpi or fig.dpi) as canvas:
        return draw_settled(fig, canvas)
