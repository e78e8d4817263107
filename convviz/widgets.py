"""The static fallback explorer: matplotlib figures redrawn by ipywidgets sliders.

The explorer to use is :func:`convviz.explore` (:mod:`convviz.explorer`): numbered
cells you can hover, pin and walk through, in any notebook front end and as an
offline page.  This module stays for front ends that cannot run JavaScript widgets
and for printing: it needs a live Python kernel for every redraw.

``convviz.widgets.explore()`` shows sliders for the input size, kernel size,
strides and dilations (rows and columns separately), the padding mode with
per-side explicit pads, the op (input gradient or depthwise filter gradient),
the output cell or filter tap to follow, and a play button that walks through
them.  Every change redraws the views from the kernels' numbers; a combination
that cannot be a convolution (a kernel larger than the padded input, say) is
explained in a message instead of raising.

It works with the inline backend (the figure is re-displayed in an Output
widget) and with ipympl (``%matplotlib widget``: the figure's own canvas is
redrawn in place).
"""

from __future__ import annotations

import time
from typing import Any

import ipywidgets as w
import matplotlib
import matplotlib.pyplot as plt
from IPython.display import clear_output, display

from .viz import _style as style
from .viz import views
from .viz.scene import Setup

__all__ = ["Explorer", "explore"]

OPS = ("input gradient", "depthwise filter gradient")
INPUT_VIEWS = ("scatter + coverage", "scatter vs gather", "geometry card")


def _in_kernel() -> bool:
    """True inside a Jupyter kernel (where Output widgets display)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _uses_ipympl() -> bool:
    backend = matplotlib.get_backend().lower()
    return "ipympl" in backend or "widget" in backend


class Explorer:
    """The explorer's widgets, figure and state; display it in a notebook cell.

    Parameters
    ----------
    input_size, kernel_size, strides, dilations : int or (int, int)
        Starting values (rows, columns).
    padding : {"SAME", "VALID", "EXPLICIT"}
    pads : (int, int, int, int)
        Starting explicit pads (top, bottom, left, right).
    op : {"input gradient", "depthwise filter gradient"}
    max_size : int
        Largest input size the sliders offer.

    Attributes
    ----------
    setup : Setup or None
        The convolution on screen (None while the controls are invalid).
    message : ipywidgets.HTML
        Why the current controls are not a convolution, or empty.
    last_update_seconds : float
        How long the last redraw took (figure drawn, not yet displayed).

    Examples
    --------
    >>> from convviz.widgets import Explorer
    >>> ex = Explorer(input_size=8, kernel_size=3, strides=2, padding="SAME")
    >>> ex.setup.geometry.output_hw
    (4, 4)
    >>> ex.controls["stride_h"].value = 3
    >>> ex.setup.geometry.output_hw
    (3, 4)
    >>> ex.controls["kernel_h"].value = 7; ex.controls["padding"].value = "VALID"
    >>> ex.controls["input_h"].value = 5
    >>> ex.setup is None, "no window fits" in ex.message.value
    (True, True)
    """

    def __init__(self, input_size: Any = 8, kernel_size: Any = 3, strides: Any = 2, dilations: Any = 1,
                 padding: str = "SAME", pads: tuple[int, int, int, int] = (0, 0, 0, 0),
                 op: str = "input gradient", max_size: int = 24) -> None:
        pair = lambda v: (v, v) if isinstance(v, int) else tuple(v)  # noqa: E731
        (ih, iw), (kh, kw), (sh, sw), (dh, dw) = map(pair, (input_size, kernel_size, strides, dilations))
        slider = lambda description, value, low, high: w.IntSlider(  # noqa: E731
            value=value, min=low, max=high, description=description, continuous_update=False,
            style={"description_width": "7em"}, layout=w.Layout(width="20em"))
        self.controls: dict[str, w.Widget] = {
            "input_h": slider("input rows", ih, 1, max_size), "input_w": slider("input cols", iw, 1, max_size),
            "kernel_h": slider("kernel rows", kh, 1, 7), "kernel_w": slider("kernel cols", kw, 1, 7),
            "stride_h": slider("stride rows", sh, 1, 4), "stride_w": slider("stride cols", sw, 1, 4),
            "dilation_h": slider("dilation rows", dh, 1, 4), "dilation_w": slider("dilation cols", dw, 1, 4),
            "padding": w.ToggleButtons(options=["SAME", "VALID", "EXPLICIT"], value=padding, description="padding"),
            "pad_top": slider("pad top", pads[0], 0, 6), "pad_bottom": slider("pad bottom", pads[1], 0, 6),
            "pad_left": slider("pad left", pads[2], 0, 6), "pad_right": slider("pad right", pads[3], 0, 6),
            "op": w.ToggleButtons(options=list(OPS), value=op, description="op"),
            "view": w.Dropdown(options=list(INPUT_VIEWS), value=INPUT_VIEWS[0], description="view"),
            "row": slider("cell/tap row", 0, 0, 1), "col": slider("cell/tap col", 0, 0, 1),
            "play": w.Play(value=0, min=0, max=1, step=1, interval=700, description="play"),
        }
        self.message = w.HTML()
        self.setup: Setup | None = None
        self.last_update_seconds = 0.0
        self.canvas_mode = _uses_ipympl()
        with plt.ioff():  # a fixed layout: a layout engine would cost more than the drawing
            self.figure = plt.figure(figsize=(9.5, 4.6), dpi=72)
        self.output = w.Output()
        self._layout: str | None = None
        self._panels: list = []
        self._busy = False
        for name, control in self.controls.items():
            if name == "play":
                control.observe(self._on_play, names="value")
            else:
                control.observe(self._on_change, names="value")
        self.update()

    # -- state --------------------------------------------------------------------
    def _value(self, name: str) -> Any:
        return self.controls[name].value

    def current_setup(self) -> Setup:
        """The Setup the controls describe (raises ValueError/TypeError when they describe none)."""
        return Setup(
            input_hw=(self._value("input_h"), self._value("input_w")),
            kernel_hw=(self._value("kernel_h"), self._value("kernel_w")),
            strides=(self._value("stride_h"), self._value("stride_w")),
            dilations=(self._value("dilation_h"), self._value("dilation_w")),
            padding=self._value("padding"),
            pads=tuple(self._value(k) for k in ("pad_top", "pad_bottom", "pad_left", "pad_right")),
        )

    def _selection_shape(self, setup: Setup) -> tuple[int, int]:
        if self._value("op") == OPS[0]:
            return setup.geometry.output_hw
        return setup.geometry.kernel_hw

    def _on_change(self, change: dict) -> None:
        if not self._busy:
            self.update()

    def _on_play(self, change: dict) -> None:
        if self.setup is None or self._busy:
            return
        rows, cols = self._selection_shape(self.setup)
        frame = int(change["new"]) % (rows * cols)
        self._busy = True
        try:
            self.controls["row"].value, self.controls["col"].value = divmod(frame, cols)
        finally:
            self._busy = False
        self.update()

    # -- drawing ------------------------------------------------------------------
    def update(self) -> None:
        """Redraw from the current controls (called on every change)."""
        start = time.perf_counter()
        explicit = self._value("padding") == "EXPLICIT"
        for side in ("pad_top", "pad_bottom", "pad_left", "pad_right"):
            self.controls[side].disabled = not explicit
        self.controls["view"].disabled = self._value("op") != OPS[0]
        try:
            setup = self.current_setup()
        except (ValueError, TypeError) as err:
            self.setup = None
            self.message.value = f"<b>Not a convolution:</b> {err}"
            self._draw_message(str(err))
            self.last_update_seconds = time.perf_counter() - start
            self._show()
            return
        self.setup = setup
        self.message.value = ""
        rows, cols = self._selection_shape(setup)
        self._busy = True
        try:  # keep the cell/tap sliders and the play range inside the new grid
            for name, size in (("row", rows), ("col", cols)):
                control = self.controls[name]
                control.max = max(size - 1, 0)
                control.value = min(control.value, size - 1)
            self.controls["play"].max = rows * cols - 1
        finally:
            self._busy = False
        self._draw(setup)
        self.figure.canvas.draw()
        self.last_update_seconds = time.perf_counter() - start
        self._show()

    def _draw_message(self, text: str) -> None:
        self._layout = None
        self.figure.clear()
        ax = self.figure.add_subplot()
        ax.axis("off")
        ax.text(0.5, 0.5, "This is not a convolution:\n" + text, ha="center", va="center", wrap=True, fontsize=10)

    def _axes(self, layout: str, count: int) -> list:
        """The figure's axes for this layout, reused across updates (new axes cost more than drawing)."""
        if self._layout != layout:
            self.figure.clear()
            self.figure.subplots_adjust(left=0.06, right=0.98, top=0.86, bottom=0.16, wspace=0.25)
            self._panels = list(self.figure.subplots(1, count)) if count > 1 else [self.figure.add_subplot()]
            self._layout = layout
        for ax in self._panels:
            for artist in (*ax.images, *ax.lines, *ax.collections, *ax.patches, *ax.texts):
                artist.remove()
            if ax.get_legend() is not None:
                ax.get_legend().remove()
            ax.set_title("")
        return self._panels

    def _draw(self, setup: Setup) -> None:
        fig = self.figure
        cell = (self._value("row"), self._value("col"))
        if self._value("op") == OPS[1]:
            left, right = self._axes("depthwise", 2)
            d = views.depthwise_lattice_panel(left, setup, cell)
            views.depthwise_dw_panel(right, d)
            fig.suptitle(f"Depthwise filter gradient - {setup.describe()}", fontsize=10)
            return
        view = self._value("view")
        if view == INPUT_VIEWS[0]:
            left, right = self._axes("scatter", 2)
            views.scatter(setup, cell, ax=left, colorbar=False)
            left.set_title(f"dL/dy cell {cell} scattered through the kernel", fontsize=9)
            views.coverage(setup, ax=right, colorbar=False)
            fig.suptitle(setup.describe(), fontsize=10)
        elif view == INPUT_VIEWS[1]:
            steps = views.gather_steps(setup)
            axes = self._axes("gather", 3)
            norm = style.signed_norm(steps["padded"], steps["result"])
            style.draw_grid(axes[0], steps["padded"], style.SIGNED_CMAP, norm)
            axes[0].set_title("zero-inserted, padded dL/dy", fontsize=9)
            views._tap_grid(axes[1], steps["flipped"], style.signed_norm(steps["flipped"]), flipped=True)
            axes[1].set_title("kernel flipped 180 degrees", fontsize=9)
            style.draw_grid(axes[2], steps["result"], style.SIGNED_CMAP, norm)
            axes[2].set_title("gather = scatter = dL/dx", fontsize=9)
            fig.suptitle(setup.describe(), fontsize=10)
        else:
            self._layout = None
            fig.clear()
            views.card(setup, ax=fig.add_subplot())

    def _show(self) -> None:
        if self.canvas_mode:
            self.figure.canvas.draw_idle()
            return
        if not _in_kernel():
            return  # a script or a test: nothing displays widgets, the figure is up to date
        with self.output:
            clear_output(wait=True)
            display(self.figure)

    # -- display ------------------------------------------------------------------
    @property
    def widget(self) -> w.Widget:
        """The whole explorer as one widget."""
        c = self.controls
        column = lambda *names: w.VBox([c[n] for n in names])  # noqa: E731
        sizes = w.HBox([column("input_h", "input_w", "kernel_h", "kernel_w"),
                        column("stride_h", "stride_w", "dilation_h", "dilation_w"),
                        column("pad_top", "pad_bottom", "pad_left", "pad_right")])
        choose = w.HBox([c["op"], c["view"]])
        follow = w.HBox([c["row"], c["col"], c["play"]])
        shown = self.figure.canvas if self.canvas_mode else self.output
        return w.VBox([sizes, c["padding"], choose, follow, self.message, shown])

    def _ipython_display_(self) -> None:
        display(self.widget)


def explore(**kwargs: Any) -> Explorer:
    """Open the explorer (see :class:`Explorer` for the starting values).

    Examples
    --------
    >>> from convviz.widgets import explore
    >>> ex = explore(input_size=16, kernel_size=3, strides=2, dilations=2)
    >>> ex.setup.describe()
    'input 16x16, kernel 3x3, stride 2, dilation 2, SAME (pads t1 b2 l1 r2)'
    """
    return Explorer(**kwargs)
