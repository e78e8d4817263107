"""Animations: the input gradient built output cell by output cell, the depthwise dW built tap by tap.

Both return a :class:`matplotlib.animation.FuncAnimation`;
:func:`convviz.viz.save` renders its frames once and writes them as a GIF (one
palette for every frame, the last frame held), an MP4 (when ffmpeg is installed)
or an interactive HTML page that loads nothing from the network.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib import animation
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from . import _kit as kit
from . import _style as style
from .scene import Setup, warn_renamed
from .views import _depthwise_numbers, _depthwise_subtitle, _lattice_handles, _lattice_marks

__all__ = ["animate_depthwise_filter_gradient", "animate_input_gradient"]


class GradientAnimation(animation.FuncAnimation):
    """A FuncAnimation that also holds ``final_frame``, the array its last frame shows (for tests and callers)."""

    final_frame: np.ndarray


def _contributions(setup: Setup, batch: int, in_channel: int,
                   out_channel: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """What each output cell, in row-major order, adds to the input gradient plane, and which cells it reaches.

    Taken from the geometry's tap table; their running sum ends at the kernel's
    own result (checked in the tests).  A reached cell may receive 0 (a zero tap).
    """
    g = setup.geometry
    dy = setup.plane(setup.out_backprop(), batch, out_channel, "out_channel")
    weights = setup.kernel_plane(in_channel, out_channel)
    h, w = g.input_hw
    rows, cols = g.rows.index_table(), g.cols.index_table()
    adds, reached = [], []
    for oh in range(g.output_hw[0]):
        for ow in range(g.output_hw[1]):
            add = np.zeros((h, w))
            reach = np.zeros((h, w), dtype=bool)
            for kh in range(g.kernel_hw[0]):
                for kw in range(g.kernel_hw[1]):
                    i, j = rows[oh, kh], cols[ow, kw]
                    if 0 <= i < h and 0 <= j < w:
                        add[i, j] += weights[kh, kw] * dy[oh, ow]
                        reach[i, j] = True
            adds.append(add)
            reached.append(reach)
    return adds, reached


def _number_grid(ax: Axes, rows: int, cols: int, origin: tuple[int, int] = (0, 0)) -> list[list[Any]]:
    """Empty texts, one per cell, for numbers that change from frame to frame."""
    theme = style.current()
    r0, c0 = origin
    return [[ax.text(c0 + j, r0 + i, "", ha="center", va="center", fontsize=theme.number_pt, zorder=4)
             for j in range(cols)] for i in range(rows)]


def _show_numbers(texts: list[list[Any]], image: Any, values: np.ndarray, shown: np.ndarray) -> None:
    """Write ``values`` where ``shown``, in the ink that contrasts with the image's colour there."""
    inks = style.ink(image.cmap(image.norm(values)))
    for i, row in enumerate(texts):
        for j, text in enumerate(row):
            text.set_text(style.fmt(values[i, j]) if shown[i, j] else "")
            text.set_color(inks[i, j])


@style.themed
def animate_input_gradient(setup: Setup, *, batch: int = 0, in_channel: int = 0, out_channel: int = 0,
                           interval: int = 400) -> GradientAnimation:
    """dL/dx growing as every dL/dy cell is scattered in turn (one frame per output cell, plus the final sum).

    Left: dL/dy with the current cell marked.  Right: the input gradient so far,
    with its numbers, the current window outlined and the padding around it.
    The last frame equals the kernel's input gradient (for one input and one
    output channel); :func:`save` holds it on screen before the loop restarts.

    Examples
    --------
    >>> from convviz.viz import Setup, animate_input_gradient
    >>> anim = animate_input_gradient(Setup(input_hw=5, kernel_hw=3, strides=2))
    >>> anim._save_count  # 2 x 2 output cells, then the final frame
    5
    """
    theme = style.current()
    g = setup.geometry
    contributions, reached = _contributions(setup, batch, in_channel, out_channel)
    running = np.cumsum(np.stack(contributions), axis=0)
    touched = np.logical_or.accumulate(np.stack(reached), axis=0)
    dy = setup.plane(setup.out_backprop(), batch, out_channel, "out_channel")
    h, w = g.input_hw
    padded = kit.padded_width(g)
    fig, (ax_dy, ax_dx) = kit.figure([g.output_hw[1], padded[1]], max(padded[0], g.output_hw[0]), colorbars=1,
                                  legend=True)
    style.draw_grid(ax_dy, dy, theme.signed_cmap, style.signed_norm(dy))  # its own scale: never washed out
    kit.labels(ax_dy, "dL/dy", "output")
    marker = style.outline(ax_dy, 0, 0, 1, 1, color=theme.selected)
    kit.padded_canvas(ax_dx, g)
    norm = style.signed_norm(running)
    image = style.draw_grid(ax_dx, np.zeros((h, w)), theme.signed_cmap, norm, annotate=False)
    texts = _number_grid(ax_dx, h, w) if h * w <= style.MAX_ANNOTATED_CELLS else []
    eff = g.effective_kernel_hw
    window = style.outline(ax_dx, 0, 0, eff[0], eff[1], color=theme.window, linestyle=theme.window_style)
    title = ax_dx.set_title(" ")
    ax_dx.set_xlabel("input column")
    ax_dx.set_ylabel("input row")
    style.colorbar(fig, image, ax_dx, "dL/dx so far")
    handles: list[Artist] = [Line2D([], [], color=theme.window, linestyle=theme.window_style,
                                    linewidth=theme.outline_width, label="window of the current dL/dy cell")]
    if any(g.pads):
        handles.append(kit.padding_patch())
    kit.legend(fig, ax_dx, handles, own_figure=True)
    kit.titles(fig, "Input gradient, one dL/dy cell at a time", setup.describe())
    n_cells = len(contributions)

    def draw(frame: int):
        final = frame >= n_cells
        k = min(frame, n_cells - 1)
        if not final:
            oh, ow = divmod(frame, g.output_hw[1])
            marker.set_xy((ow - 0.5, oh - 0.5))
            i, j = g.input_cell((oh, ow), (0, 0))
            window.set_xy((j - 0.5, i - 0.5))
            title.set_text(f"after dL/dy[{oh}, {ow}] = {style.fmt(dy[oh, ow])}")
        else:
            title.set_text("done: the input gradient dL/dx")
        window.set_visible(not final)
        marker.set_visible(not final)
        shown = np.ma.masked_array(running[k], mask=~touched[k])
        image.set_data(shown)
        if texts:
            _show_numbers(texts, image, running[k], touched[k])
        return image, marker, window, title

    anim = GradientAnimation(fig, draw, frames=n_cells + 1, interval=interval, blit=False)
    anim.final_frame = running[-1]  # for tests and callers: what the last frame shows
    return anim


@style.themed
def animate_depthwise_filter_gradient(setup: Setup, *, batch: int = 0, channel: int = 0, multiplier: int = 0,
                                      interval: int = 600) -> GradientAnimation:
    """The depthwise dW filled in tap by tap: each frame shows the input lattice one tap reads and the sum it yields.

    Left: the input with the cells the current tap reads.  Middle: those cells
    times dL/dy, cell by cell, and their sum.  Right: dW so far, the current
    tap outlined.  One frame per tap, plus the final dW (the convviz kernel's).

    Examples
    --------
    >>> from convviz.viz import Setup, animate_depthwise_filter_gradient
    >>> anim = animate_depthwise_filter_gradient(Setup(input_hw=6, kernel_hw=3, strides=2, padding="SAME"))
    >>> anim._save_count  # 9 taps, then the final frame
    10
    """
    theme = style.current()
    g = setup.depthwise_geometry
    setup.check_depthwise_channel(channel, multiplier)
    taps = [(kh, kw) for kh in range(g.kernel_hw[0]) for kw in range(g.kernel_hw[1])]
    numbers = [_depthwise_numbers(setup, tap, batch, channel, multiplier) for tap in taps]
    x, dw = numbers[0]["x"], numbers[0]["dw"]
    products = np.stack([d["products"] for d in numbers])
    h, w = g.input_hw
    kh_n, kw_n = g.kernel_hw
    oh_n, ow_n = g.output_hw
    padded = kit.padded_width(g)
    fig, (ax_x, ax_p, ax_w) = kit.figure([padded[1], ow_n, kw_n], max(padded[0], oh_n), legend=True)
    kit.padded_canvas(ax_x, g, label_pads=False)
    style.draw_grid(ax_x, x, theme.quiet_cmap, style.quiet_norm(x))
    kit.labels(ax_x, f"x, channel {channel}", "input")
    lattice = _lattice_marks(ax_x, numbers[0]["rows"], numbers[0]["cols"], np.ones((oh_n, ow_n), dtype=bool))
    p_image = style.draw_grid(ax_p, products[0], theme.signed_cmap, style.signed_norm(products), annotate=False)
    p_texts = _number_grid(ax_p, oh_n, ow_n) if oh_n * ow_n <= style.MAX_ANNOTATED_CELLS else []
    kit.labels(ax_p, " ", "output")
    w_norm = style.signed_norm(dw)
    w_image = style.draw_grid(ax_w, np.ma.masked_all(dw.shape), theme.signed_cmap, w_norm, annotate=False)
    w_texts = _number_grid(ax_w, kh_n, kw_n)
    kit.labels(ax_w, "dW so far", "tap")
    tap_box = style.outline(ax_w, 0, 0, 1, 1, color=theme.selected)
    kit.legend(fig, ax_x, _lattice_handles(in_padding=not all(d["valid"].all() for d in numbers)), own_figure=True)
    kit.titles(fig, "Depthwise filter gradient, tap by tap", _depthwise_subtitle(setup, channel, multiplier))
    n_taps = len(taps)

    def draw(frame: int):
        final = frame >= n_taps
        done_flat = np.zeros(n_taps, dtype=bool)  # the taps done by this frame, in row-major order
        done_flat[:frame + 1] = True
        done = done_flat.reshape(kh_n, kw_n)
        w_image.set_data(np.ma.masked_array(dw, mask=~done))
        _show_numbers(w_texts, w_image, dw, done)
        if not final:
            kh, kw = taps[frame]
            d = numbers[frame]
            rr, cc = np.meshgrid(d["rows"], d["cols"], indexing="ij")
            lattice.set_offsets(np.column_stack([cc.ravel(), rr.ravel()]))
            lattice.set_edgecolors([theme.window if v else theme.lost for v in d["valid"].ravel()])
            lattice.set_linestyles(["solid" if v else "dashed" for v in d["valid"].ravel()])
            p_image.set_data(products[frame])
            if p_texts:
                _show_numbers(p_texts, p_image, products[frame], np.ones((oh_n, ow_n), dtype=bool))
            tap_box.set_xy((kw - 0.5, kh - 0.5))
            ax_x.set_title(f"x, read by tap ({kh}, {kw})")
            ax_p.set_title(f"x \u00b7 dL/dy: sum {style.fmt(products[frame].sum())} = dW[{kh}, {kw}]")
        else:
            ax_x.set_title(f"x, channel {channel}")
            ax_p.set_title("every tap done: dW complete")
        lattice.set_visible(not final)
        tap_box.set_visible(not final)
        return w_image, lattice, tap_box

    anim = GradientAnimation(fig, draw, frames=n_taps + 1, interval=interval, blit=False)
    anim.final_frame = dw
    return anim


def __getattr__(name: str) -> Any:
    # The old name, kept working (with a DeprecationWarning) for code that imported it from here.
    if name == "animate_filter_gradient":
        warn_renamed(f"{__name__}.{name}", f"{__name__}.animate_depthwise_filter_gradient")
        return animate_depthwise_filter_gradient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
