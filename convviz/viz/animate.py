"""Animations: the input gradient built output cell by output cell, dW built tap by tap.

Both return a :class:`matplotlib.animation.FuncAnimation`; :func:`save` writes
it as a GIF (pillow), an MP4 (when ffmpeg is installed) or a self-contained
interactive HTML page that loads nothing from the network, printing progress for
long renders.  :func:`save` also writes figures (PNG, SVG, PDF).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Callable

import matplotlib.pyplot as plt
import numpy as np
from matplotlib import animation
from matplotlib.figure import Figure

from . import _style as style
from .setup import Setup
from .views import _check_cell, _labels, _padded_canvas

__all__ = ["animate_filter_gradient", "animate_input_gradient", "save"]


def _contributions(setup: Setup, batch: int, in_channel: int, out_channel: int) -> list[np.ndarray]:
    """What each output cell, in row-major order, adds to the input gradient plane.

    Taken from the geometry's tap table; their running sum ends at the kernel's
    own result (checked in the tests).
    """
    g = setup.geometry
    dy = setup.plane(setup.out_backprop(), batch, out_channel, "out_channel")
    weights = setup.kernel_plane(in_channel, out_channel)
    h, w = g.input_hw
    rows, cols = g.rows.index_table(), g.cols.index_table()
    frames = []
    for oh in range(g.output_hw[0]):
        for ow in range(g.output_hw[1]):
            add = np.zeros((h, w))
            for kh in range(g.kernel_hw[0]):
                for kw in range(g.kernel_hw[1]):
                    i, j = rows[oh, kh], cols[ow, kw]
                    if 0 <= i < h and 0 <= j < w:
                        add[i, j] += weights[kh, kw] * dy[oh, ow]
            frames.append(add)
    return frames


def animate_input_gradient(setup: Setup, *, batch: int = 0, in_channel: int = 0, out_channel: int = 0,
                           interval: int = 400) -> animation.FuncAnimation:
    """dL/dx growing as every dL/dy cell is scattered in turn (one frame per output cell, plus the final sum).

    Left: dL/dy with the current cell marked.  Right: the input gradient so far,
    the current window outlined, padding hatched.  The last frame equals the
    kernel's input gradient (for one input and one output channel).

    Examples
    --------
    >>> from convviz.viz import Setup, animate_input_gradient
    >>> anim = animate_input_gradient(Setup(input_hw=5, kernel_hw=3, strides=2))
    >>> anim._save_count  # 2 x 2 output cells, then the final frame
    5
    """
    g = setup.geometry
    contributions = _contributions(setup, batch, in_channel, out_channel)
    running = np.cumsum(np.stack(contributions), axis=0)
    dy = setup.plane(setup.out_backprop(), batch, out_channel, "out_channel")
    h, w = g.input_hw
    fig, (ax_dy, ax_dx) = plt.subplots(1, 2, figsize=(8.2, 4.0), layout="constrained")
    norm = style.signed_norm(running, dy)
    style.draw_grid(ax_dy, dy, style.SIGNED_CMAP, norm)
    _labels(ax_dy, "output gradient dL/dy", "output")
    marker = style.outline(ax_dy, 0, 0, 1, 1, color=style.ORANGE, linewidth=3)
    _padded_canvas(ax_dx, g)
    image = ax_dx.imshow(np.zeros((h, w)), cmap=style.SIGNED_CMAP, norm=norm, interpolation="nearest",
                         extent=(-0.5, w - 0.5, h - 0.5, -0.5), zorder=1)
    style.grid_lines(ax_dx, h, w)
    eff = g.effective_kernel_hw
    window = style.outline(ax_dx, 0, 0, eff[0], eff[1], color=style.BLUE, linewidth=2, linestyle="--")
    title = ax_dx.set_title("", fontsize=9)
    ax_dx.set_xlabel("input column", fontsize=8)
    ax_dx.set_ylabel("input row", fontsize=8)
    fig.colorbar(image, ax=ax_dx, shrink=0.7, label="dL/dx so far")
    fig.suptitle(f"Input gradient, cell by cell - {setup.describe()}", fontsize=10)
    n_cells = len(contributions)

    def draw(frame: int):
        if frame < n_cells:
            oh, ow = divmod(frame, g.output_hw[1])
            marker.set_xy((ow - 0.5, oh - 0.5))
            i, j = g.input_cell((oh, ow), (0, 0))
            window.set_xy((j - 0.5, i - 0.5))
            window.set_visible(True)
            title.set_text(f"after dL/dy cell ({oh}, {ow}) = {dy[oh, ow]:g}")
            image.set_data(running[frame])
        else:
            window.set_visible(False)
            marker.set_visible(False)
            title.set_text("final: the input gradient dL/dx")
            image.set_data(running[-1])
        return image, marker, window, title

    anim = animation.FuncAnimation(fig, draw, frames=n_cells + 1, interval=interval, blit=False)
    anim.final_frame = running[-1]  # for tests and callers: what the last frame shows
    return anim


def animate_filter_gradient(setup: Setup, *, batch: int = 0, channel: int = 0, multiplier: int = 0,
                            interval: int = 600) -> animation.FuncAnimation:
    """dW filled in tap by tap: each frame shows the input lattice one tap reads and the value it yields.

    One frame per tap, plus the final dW (from the convviz kernel).

    Examples
    --------
    >>> from convviz.viz import Setup, animate_filter_gradient
    >>> anim = animate_filter_gradient(Setup(input_hw=6, kernel_hw=3, strides=2, padding="SAME"))
    >>> anim._save_count  # 9 taps, then the final frame
    10
    """
    g = setup.depthwise_geometry
    setup.check_depthwise_channel(channel, multiplier)
    x = setup.plane(setup.input(), batch, channel)
    dy = setup.plane(setup.out_backprop(depthwise=True), batch, channel * setup.multiplier + multiplier)
    dw = setup.filter_gradient_plane(channel, multiplier)
    h, w = g.input_hw
    kh_n, kw_n = g.kernel_hw
    rows_t, cols_t = g.rows.index_table(), g.cols.index_table()
    fig, (ax_x, ax_dy, ax_w) = plt.subplots(1, 3, figsize=(11.0, 3.9), layout="constrained")
    _padded_canvas(ax_x, g)
    style.draw_grid(ax_x, x, style.BACKGROUND_CMAP, style.quiet_norm(x))
    _labels(ax_x, f"input x, channel {channel}", "input")
    style.draw_grid(ax_dy, dy, style.SIGNED_CMAP, style.signed_norm(dy))
    _labels(ax_dy, "output gradient dL/dy", "output")
    filled = np.ma.masked_all(dw.shape)
    w_norm = style.signed_norm(dw)
    w_image = ax_w.imshow(filled, cmap=style.SIGNED_CMAP, norm=w_norm, interpolation="nearest",
                          extent=(-0.5, kw_n - 0.5, kh_n - 0.5, -0.5))
    rgba = w_image.cmap(w_norm(dw))
    ink = np.where(0.299 * rgba[..., 0] + 0.587 * rgba[..., 1] + 0.114 * rgba[..., 2] > 0.5, "black", "white")
    style.grid_lines(ax_w, kh_n, kw_n)
    ax_w.set_xlim(-0.5, kw_n - 0.5)
    ax_w.set_ylim(kh_n - 0.5, -0.5)
    _labels(ax_w, "dW so far", "tap")
    texts = [[ax_w.text(j, i, "", ha="center", va="center", fontsize=8, color=ink[i, j]) for j in range(kw_n)]
             for i in range(kh_n)]
    tap_box = style.outline(ax_w, 0, 0, 1, 1, color=style.ORANGE, linewidth=3)
    lattice = ax_x.scatter([], [], s=120, marker="s", facecolors="none", edgecolors=style.BLUE, linewidths=2,
                           zorder=5)
    fig.suptitle(f"Depthwise filter gradient, tap by tap - {setup.describe()}", fontsize=10)
    n_taps = kh_n * kw_n

    def draw(frame: int):
        shown = min(frame, n_taps - 1)
        for t in range(n_taps):
            i, j = divmod(t, kw_n)
            if t <= shown or frame >= n_taps:
                filled[i, j] = dw[i, j]
                texts[i][j].set_text(f"{dw[i, j]:g}")
            else:
                filled[i, j] = np.ma.masked
                texts[i][j].set_text("")
        w_image.set_data(filled)
        if frame < n_taps:
            kh, kw = divmod(frame, kw_n)
            rr, cc = np.meshgrid(rows_t[:, kh], cols_t[:, kw], indexing="ij")
            lattice.set_offsets(np.column_stack([cc.ravel(), rr.ravel()]))
            tap_box.set_xy((kw - 0.5, kh - 0.5))
            tap_box.set_visible(True)
            ax_x.set_title(f"tap ({kh}, {kw}) reads these input cells", fontsize=9)
        else:
            lattice.set_offsets(np.empty((0, 2)))
            tap_box.set_visible(False)
            ax_x.set_title("every tap done: dW complete", fontsize=9)
        return w_image, lattice, tap_box

    anim = animation.FuncAnimation(fig, draw, frames=n_taps + 1, interval=interval, blit=False)
    anim.final_frame = dw
    return anim


def _progress(label: str) -> Callable[[int, int], None]:
    def report(i: int, n: int) -> None:
        stream = sys.stderr  # looked up per call, so redirections apply
        if n and (i + 1 == n or (i + 1) % max(1, n // 10) == 0):
            stream.write(f"\r  {label}: frame {i + 1}/{n}")
            if i + 1 == n:
                stream.write("\n")
            stream.flush()
    return report


# matplotlib's HTMLWriter links Font Awesome from a CDN for its button icons: offline the
# buttons are blank.  The saved page gets text labels instead and loads nothing.
_FONT_AWESOME = re.compile(r'<link rel="stylesheet"\s*href="https?://[^"]*font-awesome[^"]*">')
_ICON_LABELS = {"fa-minus": ("\u2212", "slower"), "fa-fast-backward": ("|\u25c0", "first frame"),
                "fa-step-backward": ("\u25c0|", "step back"), "fa-play fa-flip-horizontal": ("\u25c0", "play backward"),
                "fa-pause": ("\u2016", "pause"), "fa-play": ("\u25b6", "play"), "fa-step-forward": ("|\u25b6", "step"),
                "fa-fast-forward": ("\u25b6|", "last frame"), "fa-plus": ("+", "faster")}
FIGURE_FORMATS = (".png", ".svg", ".pdf")
ANIMATION_FORMATS = (".gif", ".mp4", ".html", ".htm")


def offline_html(html: str) -> str:
    """An HTMLWriter page without its Font Awesome link, its icons replaced by text labels.

    Examples
    --------
    >>> offline_html('<link rel="stylesheet"\\nhref="https://maxcdn.bootstrapcdn.com/font-awesome/4.4.0/css/'
    ...              'font-awesome.min.css"><button><i class="fa fa-pause"></i></button>')
    '<button><span title="pause" aria-label="pause">\u2016</span></button>'
    """
    html = _FONT_AWESOME.sub("", html)
    for icon, (glyph, words) in _ICON_LABELS.items():  # glyphs fit matplotlib's narrow buttons
        html = html.replace(f'<i class="fa {icon}"></i>', f'<span title="{words}" aria-label="{words}">{glyph}</span>')
    return html


def save(obj: Figure | animation.Animation, path: str | Path, *, fps: int = 3, dpi: int | None = None,
         progress: bool = True) -> Path:
    """Write a figure or an animation, by file extension.

    Figures: ``.png`` (150 dpi unless ``dpi`` says otherwise), ``.svg``, ``.pdf``.
    Animations: ``.gif`` (pillow), ``.mp4`` (ffmpeg) or ``.html``: a self-contained page
    (frames embedded) with play/step controls that loads nothing from the network.
    With ``progress`` the frame count goes to stderr as frames render.

    Raises
    ------
    RuntimeError
        For ``.mp4`` when ffmpeg is not installed.
    ValueError
        For an extension the object cannot be written as.
    TypeError
        For an object that is neither a figure nor an animation.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from convviz.viz import Setup, animate_input_gradient, coverage, save
    >>> anim = animate_input_gradient(Setup(input_hw=4, kernel_hw=2, strides=2))
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     out = save(anim, pathlib.Path(folder) / "a.gif", progress=False)
    ...     png = save(coverage(Setup(input_hw=5)), pathlib.Path(folder) / "c.png")
    ...     out.stat().st_size > 0, png.suffix
    (True, '.png')
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if isinstance(obj, Figure):
        if suffix not in FIGURE_FORMATS:
            raise ValueError(f"a figure is written as {', '.join(FIGURE_FORMATS)}, got {suffix!r}")
        path.parent.mkdir(parents=True, exist_ok=True)
        obj.savefig(path, dpi=dpi or 150)
        return path
    if not isinstance(obj, animation.Animation):
        raise TypeError(f"save writes a matplotlib Figure or Animation, got {type(obj).__name__}")
    callback = _progress(path.name) if progress else None
    if suffix == ".gif":
        writer = animation.PillowWriter(fps=fps)
    elif suffix == ".mp4":
        if not animation.writers.is_available("ffmpeg"):
            raise RuntimeError("writing .mp4 needs ffmpeg on the PATH; save as .gif or .html instead")
        writer = animation.FFMpegWriter(fps=fps)
    elif suffix in (".html", ".htm"):
        writer = animation.HTMLWriter(fps=fps, embed_frames=True, default_mode="once")
    else:
        raise ValueError(f"an animation is written as {', '.join(ANIMATION_FORMATS)}, got {suffix!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    obj.save(str(path), writer=writer, dpi=dpi or 80, progress_callback=callback)
    if suffix in (".html", ".htm"):
        path.write_text(offline_html(path.read_text(encoding="utf-8")), encoding="utf-8")
    plt.close(obj._fig)
    return path
