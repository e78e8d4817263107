"""The static views: scatter, coverage, scatter vs gather, depthwise filter gradient, geometry card.

Each function takes a :class:`~convviz.viz.Setup`, computes its numbers with the
convviz kernels and its shapes with :mod:`convviz.geometry`, and returns a
matplotlib Figure (or draws on the Axes it is given).
"""

from __future__ import annotations

from math import gcd
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from .. import ops
from ..geometry import AxisGeometry, ConvGeometry
from . import _style as style
from .setup import Setup

__all__ = ["card", "coverage", "depthwise", "gather_steps", "scatter", "scatter_vs_gather"]


def _figure(ncols: int, nrows: int = 1, width: float = 3.6, height: float = 3.4) -> tuple[Figure, np.ndarray]:
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False,
                             layout="constrained")
    return fig, axes


def _padded_canvas(ax: Axes, g: ConvGeometry, label_pads: bool = True) -> None:
    """Hatched padding around the real input, with the per-side amounts written on it."""
    top, bottom, left, right = g.pads
    h, w = g.input_hw
    if any(g.pads):
        ax.add_patch(Rectangle((-left - 0.5, -top - 0.5), w + left + right, h + top + bottom,
                               facecolor=style.PADDING_GREY, edgecolor="#7f7f7f", hatch="///", linewidth=0.0,
                               zorder=0, label="zero padding"))
    style.outline(ax, 0, 0, h, w, color="black", linewidth=1.5)
    ax.set_xlim(-left - 0.5, w + right - 0.5)
    ax.set_ylim(h + bottom - 0.5, -top - 0.5)
    if label_pads and any(g.pads):
        kw = dict(fontsize=7, color="#404040", ha="center", va="center")
        if top:
            ax.text((w - 1) / 2, -top / 2 - 0.5, f"pad top {top}", **kw)
        if bottom:
            ax.text((w - 1) / 2, h - 0.5 + bottom / 2, f"pad bottom {bottom}", **kw)
        if left:
            ax.text(-left / 2 - 0.5, (h - 1) / 2, f"pad left {left}", rotation=90, **kw)
        if right:
            ax.text(w - 0.5 + right / 2, (h - 1) / 2, f"pad right {right}", rotation=90, **kw)


def _labels(ax: Axes, title: str, what: str) -> None:
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(f"{what} column".strip(), fontsize=8)
    ax.set_ylabel(f"{what} row".strip(), fontsize=8)
    ax.tick_params(labelsize=7)


def _one_hot(setup: Setup, batch: int, cell: tuple[int, int], channel: int) -> tuple[np.ndarray, float]:
    dy = setup.out_backprop()
    value = float(setup.plane(dy, batch, channel, "out_channel")[cell])
    one = np.zeros_like(dy)
    if setup.data_format == "NHWC":
        one[batch, cell[0], cell[1], channel] = value
    else:
        one[batch, channel, cell[0], cell[1]] = value
    return one, value


def _check_cell(cell: tuple[int, int], shape: tuple[int, int], what: str) -> tuple[int, int]:
    i, j = int(cell[0]), int(cell[1])
    if not (0 <= i < shape[0] and 0 <= j < shape[1]):
        raise ValueError(f"{what} {cell} is outside the {shape[0]}x{shape[1]} grid")
    return i, j


# ------------------------------------------------------------------------ scatter
def scatter(setup: Setup, out_cell: tuple[int, int] | None = None, *, batch: int = 0, in_channel: int = 0,
            out_channel: int = 0, ax: Axes | None = None, colorbar: bool = True) -> Figure:
    """One output-gradient cell scattered back through every tap of the kernel.

    The selected cell of dL/dy reaches, through tap (kh, kw), the input cell
    ``(oh*sh - pad_top + kh*dh, ow*sw - pad_left + kw*dw)`` and adds
    ``W[kh, kw] * dL/dy[oh, ow]`` there.  Taps that land in the (hatched)
    padding carry their contribution nowhere: they are marked with a cross.
    The numbers are the kernel's own: the input gradient of a one-hot dL/dy.

    Parameters
    ----------
    setup : Setup
        The convolution.
    out_cell : (int, int), optional
        Output-gradient cell (row, column); the centre by default.
    batch, in_channel, out_channel : int, optional
        Which image and which input/output channel pair to show.
    ax : matplotlib Axes, optional
        Draw only the input panel here; by default a figure with the output
        gradient, the kernel and the input panel.
    colorbar : bool, optional
        Add a colour bar for the contributions.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> from convviz.viz import Setup, scatter
    >>> fig = scatter(Setup(input_hw=5, kernel_hw=3, strides=2, padding="SAME"), (0, 0))
    >>> [a.get_title().split(":")[0] for a in fig.axes[:3]]
    ['output gradient dL/dy', 'kernel W', 'scattered into the input gradient dL/dx']
    """
    g = setup.geometry
    if out_cell is None:
        out_cell = (g.output_hw[0] // 2, g.output_hw[1] // 2)
    oh, ow = _check_cell(out_cell, g.output_hw, "out_cell")
    one, value = _one_hot(setup, batch, (oh, ow), out_channel)
    contribution = setup.plane(setup.input_gradient(one), batch, in_channel, "in_channel")
    weights = setup.kernel_plane(in_channel, out_channel)

    if ax is None:
        fig, axes = _figure(3)
        ax_dy, ax_w, ax = axes[0]
        dy = setup.plane(setup.out_backprop(), batch, out_channel, "out_channel")
        style.draw_grid(ax_dy, dy, style.SIGNED_CMAP, style.signed_norm(dy))
        style.outline(ax_dy, oh, ow, 1, 1, color=style.ORANGE, linewidth=3)
        _labels(ax_dy, f"output gradient dL/dy: cell ({oh}, {ow}) = {value:g}", "output")
        style.draw_grid(ax_w, weights, style.SIGNED_CMAP, style.signed_norm(weights))
        _labels(ax_w, f"kernel W: {g.kernel_hw[0]}x{g.kernel_hw[1]} taps", "tap")
    else:
        fig = ax.figure
    _padded_canvas(ax, g)
    norm = style.signed_norm(contribution, weights * value)
    h, w = g.input_hw
    image = ax.imshow(np.ma.masked_equal(contribution, 0.0), cmap=style.SIGNED_CMAP, norm=norm,
                      interpolation="nearest", extent=(-0.5, w - 0.5, h - 0.5, -0.5), zorder=1)
    style.grid_lines(ax, h, w)
    # Every tap: where it lands, and what it brings.
    lost = 0
    for kh in range(g.kernel_hw[0]):
        for kw in range(g.kernel_hw[1]):
            i, j = g.input_cell((oh, ow), (kh, kw))
            if g.is_padding((i, j)):
                ax.plot(j, i, marker="x", color=style.VERMILLION, markersize=9, markeredgewidth=2, zorder=4)
                lost += 1
            elif h * w <= style.MAX_ANNOTATED_CELLS * 2:
                ax.text(j, i, f"{contribution[i, j]:g}", ha="center", va="center", fontsize=7, zorder=4)
    window = g.input_cell((oh, ow), (0, 0))
    eff = g.effective_kernel_hw
    style.outline(ax, window[0], window[1], eff[0], eff[1], color=style.BLUE, linewidth=2, linestyle="--")
    _labels(ax, "scattered into the input gradient dL/dx: W x dL/dy", "input")
    handles = [Line2D([], [], color=style.BLUE, linestyle="--", label=f"window ({eff[0]}x{eff[1]} effective)")]
    if lost:
        handles.append(Line2D([], [], color=style.VERMILLION, marker="x", linestyle="", label=f"{lost} taps in padding"))
    if any(g.pads):
        handles.append(Patch(facecolor=style.PADDING_GREY, hatch="///", edgecolor="#7f7f7f", label="zero padding"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.12), fontsize=7, ncol=2, frameon=False)
    if colorbar:
        fig.colorbar(image, ax=ax, shrink=0.7, label="contribution")
    if len(fig.axes) > 1 and fig.get_suptitle() == "":
        fig.suptitle(f"Input gradient, one output cell at a time - {setup.describe()}", fontsize=10)
    return fig


# ------------------------------------------------------------------------ coverage
def _axis_pattern(axis: AxisGeometry, name: str) -> list[str]:
    """What the coverage along one axis shows, in a few words."""
    s, d, k = axis.stride, axis.dilation, axis.kernel_size
    if gcd(s, d) > 1 and k > 1:
        return [f"{name}: gridding, gcd(stride {s}, dilation {d}) = {gcd(s, d)}: 1 {name[:-1]} in {gcd(s, d)} is read"]
    if s > (k - 1) * d + 1:
        return [f"{name}: stride {s} > kernel span {(k - 1) * d + 1}: some {name} are skipped"]
    if s > 1 and k % s:
        return [f"{name}: kernel {k} not a multiple of stride {s}: uneven overlap (checkerboard)"]
    if s > 1:
        return [f"{name}: kernel {k} a multiple of stride {s}: even overlap"]
    return []


def coverage(setup: Setup, *, ax: Axes | None = None, colorbar: bool = True) -> Figure:
    """How many (output cell, tap) pairs reach each input cell.

    This is the input gradient of an all-ones dL/dy through an all-ones
    single-channel kernel, computed by the convviz kernel (and equal, cell for
    cell, to :meth:`convviz.ConvGeometry.coverage`).  Strides that do not divide
    the kernel make a checkerboard; gcd(stride, dilation) > 1 leaves whole rows
    and columns unread (gridding); rows and columns no window reads get exactly
    zero gradient and are marked.

    Examples
    --------
    >>> from convviz.viz import Setup, coverage
    >>> fig = coverage(Setup(input_hw=8, kernel_hw=3, strides=3))
    >>> "no gradient" in fig.axes[0].get_title()
    True
    """
    g = setup.geometry
    h, w = g.input_hw
    counts = ops.conv2d_backprop_input(
        [1, h, w, 1], np.ones((*g.kernel_hw, 1, 1)), np.ones((1, *g.output_hw, 1)),
        [1, *setup.strides, 1], setup.padding,
        [0, 0, *g.pads[:2], *g.pads[2:], 0, 0] if setup.padding == "EXPLICIT" else [],
        dilations=[1, *setup.dilations, 1])[0, :, :, 0]
    if ax is None:
        fig, axes = _figure(1, width=5.2, height=4.8)
        ax = axes[0, 0]
    else:
        fig = ax.figure
    _padded_canvas(ax, g)
    image = style.draw_grid(ax, counts, style.COUNT_CMAP)
    zero_rows, zero_cols = g.zero_gradient_rows(), g.zero_gradient_cols()
    for r in zero_rows:
        style.outline(ax, r, 0, 1, w, color=style.VERMILLION, linewidth=2)
    for c in zero_cols:
        style.outline(ax, 0, c, h, 1, color=style.VERMILLION, linewidth=2)
    zero_cells = [(int(i), int(j)) for i, j in zip(*np.nonzero(counts == 0))]
    style.mark_cells(ax, zero_cells)
    unread = []
    if len(zero_rows):
        unread.append(f"rows {list(map(int, zero_rows))}")
    if len(zero_cols):
        unread.append(f"columns {list(map(int, zero_cols))}")
    title = "coverage: taps reaching each input cell"
    if unread:
        title += f"\nno gradient (never read): {', '.join(unread)}"
    _labels(ax, title, "input")
    notes = _axis_pattern(g.rows, "rows") + _axis_pattern(g.cols, "columns")
    handles = []
    if zero_cells:
        handles.append(Line2D([], [], color=style.VERMILLION, marker="x", linestyle="", label="zero gradient"))
    if any(g.pads):
        handles.append(Patch(facecolor=style.PADDING_GREY, hatch="///", edgecolor="#7f7f7f", label="zero padding"))
    if handles:
        ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.1), fontsize=7, ncol=2,
                  frameon=False)
    if colorbar:
        fig.colorbar(image, ax=ax, shrink=0.7, label="(output cell, tap) pairs")
    if fig.get_suptitle() == "":
        fig.suptitle(setup.describe() + ("\n" + "\n".join(notes) if notes else ""), fontsize=8)
    return fig


# ------------------------------------------------------------------------ gather
def gather_steps(setup: Setup, batch: int = 0, in_channel: int = 0, out_channel: int = 0) -> dict[str, Any]:
    """The gather form of the input gradient, step by step, for one channel pair.

    ``zero_inserted``: dL/dy with ``stride - 1`` zeros between neighbours;
    ``padded``: that, padded (or cropped) so that a plain correlation lines up;
    ``flipped``: the kernel rotated 180 degrees; ``result``: the correlation of
    ``padded`` with the flipped, dilated kernel -- the input gradient.

    Examples
    --------
    >>> from convviz.viz import Setup
    >>> from convviz.viz.views import gather_steps
    >>> steps = gather_steps(Setup(input_hw=5, kernel_hw=3, strides=2, padding="VALID"))
    >>> steps["zero_inserted"].shape, steps["padded"].shape, steps["result"].shape
    ((3, 3), (7, 7), (5, 5))
    """
    g = setup.geometry
    dy = setup.plane(setup.out_backprop(), batch, out_channel, "out_channel")
    weights = setup.kernel_plane(in_channel, out_channel)
    (sh, sw), (dh, dw) = setup.strides, setup.dilations
    z = np.zeros(((dy.shape[0] - 1) * sh + 1, (dy.shape[1] - 1) * sw + 1))
    z[::sh, ::sw] = dy
    padded = z
    for axis, geo in ((0, g.rows), (1, g.cols)):
        before = geo.effective_kernel_size - 1 - geo.pad_before  # may be negative: crop instead
        after = geo.input_size + geo.effective_kernel_size - 1 - before - padded.shape[axis]
        widths = [(0, 0), (0, 0)]
        widths[axis] = (max(before, 0), max(after, 0))
        padded = np.pad(padded, widths)
        start = max(-before, 0)
        stop = padded.shape[axis] - max(-after, 0)
        padded = padded[start:stop] if axis == 0 else padded[:, start:stop]
    flipped = weights[::-1, ::-1]
    kh, kw = weights.shape
    result = np.zeros(g.input_hw)
    for a in range(kh):
        for b in range(kw):
            result += flipped[a, b] * padded[a * dh:a * dh + g.input_hw[0], b * dw:b * dw + g.input_hw[1]]
    return {"out_backprop": dy, "weights": weights, "zero_inserted": z, "padded": padded, "flipped": flipped,
            "result": result}


def scatter_vs_gather(setup: Setup, *, batch: int = 0, in_channel: int = 0, out_channel: int = 0) -> Figure:
    """The same input gradient two ways: scatter (top) and gather (bottom).

    Top: every dL/dy cell scattered through W (the convviz kernel's result for
    this channel pair).  Bottom: insert ``stride - 1`` zeros between the dL/dy
    cells, pad by ``effective kernel - 1 - pad_before`` (cropping when that is
    negative), flip the kernel 180 degrees and correlate -- a plain stride-1
    convolution, the "transposed convolution" view.  Both give the same numbers.

    Examples
    --------
    >>> from convviz.viz import Setup, scatter_vs_gather
    >>> fig = scatter_vs_gather(Setup(input_hw=6, kernel_hw=3, strides=2, padding="SAME"))
    >>> "max |scatter - gather| = 0" in fig.get_suptitle()
    True
    """
    steps = gather_steps(setup, batch, in_channel, out_channel)
    g = setup.geometry
    # The kernel's answer for this channel pair: one input and one output channel.
    f = setup.kernel_plane(in_channel, out_channel)[:, :, None, None]
    dy = steps["out_backprop"][None, :, :, None]
    kwargs = setup._op_kwargs()
    kwargs.update(data_format="NHWC", strides=[1, *setup.strides, 1], dilations=[1, *setup.dilations, 1])
    if setup.padding == "EXPLICIT":
        kwargs["explicit_paddings"] = [0, 0, *g.pads, 0, 0]
    scattered = ops.conv2d_backprop_input([1, *g.input_hw, 1], f, dy, **kwargs)[0, :, :, 0]
    difference = float(np.max(np.abs(scattered - steps["result"])))

    fig, axes = _figure(4, 2, width=3.3, height=3.3)
    norm = style.signed_norm(scattered, steps["result"], steps["out_backprop"])
    wnorm = style.signed_norm(steps["weights"])
    style.draw_grid(axes[0, 0], steps["out_backprop"], style.SIGNED_CMAP, norm)
    _labels(axes[0, 0], "1. output gradient dL/dy", "output")
    _tap_grid(axes[0, 1], steps["weights"], wnorm, flipped=False)
    _labels(axes[0, 1], "2. kernel W (taps a, b, c, ...)", "tap")
    _padded_canvas(axes[0, 2], g)
    style.draw_grid(axes[0, 2], scattered, style.SIGNED_CMAP, norm)
    _labels(axes[0, 2], "3. scatter: every dL/dy cell x W\n(convviz kernel)", "input")
    axes[0, 3].axis("off")
    axes[0, 3].text(0.0, 0.5, _gather_text(setup), fontsize=8, family="monospace", va="center",
                    transform=axes[0, 3].transAxes)
    style.draw_grid(axes[1, 0], steps["zero_inserted"], style.SIGNED_CMAP, norm)
    _labels(axes[1, 0], f"4. insert {setup.strides[0] - 1}x{setup.strides[1] - 1} zeros between cells", "")
    style.draw_grid(axes[1, 1], steps["padded"], style.SIGNED_CMAP, norm)
    _labels(axes[1, 1], "5. pad (or crop) to line up", "")
    _tap_grid(axes[1, 2], steps["flipped"], wnorm, flipped=True)
    _labels(axes[1, 2], "6. kernel flipped 180 degrees", "tap")
    style.draw_grid(axes[1, 3], steps["result"], style.SIGNED_CMAP, norm)
    _labels(axes[1, 3], "7. gather: correlate 5 with 6", "input")
    fig.suptitle(f"Scatter vs gather - {setup.describe()}\nmax |scatter - gather| = {difference:g}", fontsize=10)
    return fig


def _tap_grid(ax: Axes, weights: np.ndarray, norm: Any, flipped: bool) -> None:
    """The kernel with each tap lettered (a, b, c, ...), so a flip shows where every tap went."""
    kh, kw = weights.shape
    labels = np.empty(weights.shape, dtype=object)
    for i in range(kh):
        for j in range(kw):
            src = (kh - 1 - i) * kw + (kw - 1 - j) if flipped else i * kw + j
            labels[i, j] = f"{chr(ord('a') + src % 26)}\n{weights[i, j]:g}"
    style.draw_grid(ax, weights, style.SIGNED_CMAP, norm, annotate=True, labels=labels)


def _gather_text(setup: Setup) -> str:
    g = setup.geometry
    lines = ["gather recipe"]
    for name, axis in (("rows", g.rows), ("cols", g.cols)):
        before = axis.effective_kernel_size - 1 - axis.pad_before
        lines.append(f"{name}: zeros between = {axis.stride - 1}")
        lines.append(f"  pad before = eff-1-pad = {axis.effective_kernel_size - 1}-{axis.pad_before} = {before}")
    lines.append("kernel: flip, dilate, correlate")
    return "\n".join(lines)


# ------------------------------------------------------------------------ depthwise
def _depthwise_numbers(setup: Setup, tap: tuple[int, int], batch: int, channel: int,
                       multiplier: int) -> dict[str, Any]:
    g = setup.depthwise_geometry
    kh, kw = _check_cell(tap, g.kernel_hw, "tap")
    setup.check_depthwise_channel(channel, multiplier)
    x = setup.plane(setup.input(), batch, channel)
    dy = setup.plane(setup.out_backprop(depthwise=True), batch, channel * setup.multiplier + multiplier)
    rows = g.rows.index_table()[:, kh]
    cols = g.cols.index_table()[:, kw]
    h, w = g.input_hw
    valid = (rows[:, None] >= 0) & (rows[:, None] < h) & (cols[None, :] >= 0) & (cols[None, :] < w)
    sampled = np.where(valid, x[np.clip(rows, 0, h - 1)[:, None], np.clip(cols, 0, w - 1)[None, :]], 0.0)
    return dict(g=g, tap=(kh, kw), x=x, dy=dy, rows=rows, cols=cols, valid=valid, products=sampled * dy,
                dw=setup.filter_gradient_plane(channel, multiplier))


def depthwise_lattice_panel(ax: Axes, setup: Setup, tap: tuple[int, int] = (0, 0), *, batch: int = 0,
                            channel: int = 0, multiplier: int = 0) -> dict[str, Any]:
    """Draw the input with the cells one tap reads; returns the numbers behind it."""
    d = _depthwise_numbers(setup, tap, batch, channel, multiplier)
    g, (kh, kw) = d["g"], d["tap"]
    _padded_canvas(ax, g)
    style.draw_grid(ax, d["x"], style.BACKGROUND_CMAP, style.quiet_norm(d["x"]))
    rr, cc = np.meshgrid(d["rows"], d["cols"], indexing="ij")
    for mask, color in ((d["valid"], style.BLUE), (~d["valid"], style.VERMILLION)):
        if mask.any():  # one marker collection per colour, however many cells
            ax.scatter(cc[mask], rr[mask], s=90, marker="s", facecolors="none", edgecolors=color, linewidths=2,
                       zorder=4)
    _labels(ax, f"input x, channel {channel}: cells tap ({kh}, {kw}) reads", "input")
    handles = [Patch(fill=False, edgecolor=style.BLUE, label="read by the tap"),
               Patch(fill=False, edgecolor=style.VERMILLION, label="in padding (adds 0)")]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.12), fontsize=7, ncol=2, frameon=False)
    return d


def depthwise_dw_panel(ax: Axes, d: dict[str, Any], channel: int = 0, multiplier: int = 0) -> None:
    """Draw dW (the kernel's) with the tap outlined."""
    kh, kw = d["tap"]
    dw = d["dw"]
    style.draw_grid(ax, dw, style.SIGNED_CMAP, style.signed_norm(dw))
    style.outline(ax, kh, kw, 1, 1, color=style.ORANGE, linewidth=3)
    _labels(ax, f"dW[:, :, {channel}, {multiplier}] (convviz kernel)\ndW[{kh}, {kw}] = {dw[kh, kw]:g}", "tap")


def depthwise(setup: Setup, tap: tuple[int, int] = (0, 0), *, batch: int = 0, channel: int = 0,
              multiplier: int = 0) -> Figure:
    """The depthwise filter gradient of one tap: a strided, dilated sub-lattice of the input meets dL/dy.

    Tap (kh, kw) of channel c reads input cell ``(oh*sh - pad_top + kh*dh,
    ow*sw - pad_left + kw*dw)`` for every output cell: a lattice with the
    stride's spacing, shifted by the tap's dilated offset.  dW[kh, kw, c, m] is
    the sum over that lattice of input x dL/dy[..., c*M + m] (cells in the
    padding count zero); the last panel is the kernel's full dW.

    Examples
    --------
    >>> from convviz.viz import Setup, depthwise
    >>> fig = depthwise(Setup(input_hw=6, kernel_hw=3, strides=2, padding="SAME"), tap=(1, 1))
    >>> fig.axes[3].get_title().startswith("4. dW")
    True
    """
    fig, axes = _figure(4, width=3.4, height=3.6)
    ax_x, ax_dy, ax_p, ax_w = axes[0]
    d = depthwise_lattice_panel(ax_x, setup, tap, batch=batch, channel=channel, multiplier=multiplier)
    kh, kw = d["tap"]
    ax_x.set_title("1. " + ax_x.get_title(), fontsize=9)
    style.draw_grid(ax_dy, d["dy"], style.SIGNED_CMAP, style.signed_norm(d["dy"]))
    _labels(ax_dy, f"2. dL/dy, channel {channel}x{setup.multiplier}+{multiplier}", "output")
    products = d["products"]
    style.draw_grid(ax_p, products, style.SIGNED_CMAP, style.signed_norm(products))
    _labels(ax_p, f"3. x on the lattice x dL/dy\nsum = {products.sum():g}", "output")
    depthwise_dw_panel(ax_w, d, channel, multiplier)
    ax_w.set_title("4. " + ax_w.get_title(), fontsize=9)
    fig.suptitle(f"Depthwise filter gradient, tap ({kh}, {kw}) - {setup.describe()}, multiplier {setup.multiplier}",
                 fontsize=10)
    return fig


# ------------------------------------------------------------------------ card
def card_text(setup: Setup) -> str:
    """The geometry card as plain text: sizes and formulas with the numbers filled in.

    Examples
    --------
    >>> from convviz.viz import Setup
    >>> from convviz.viz.views import card_text
    >>> print(card_text(Setup(input_hw=8, kernel_hw=3, strides=2, padding="SAME")).splitlines()[3])
    rows: out = ceil(8 / 2) = 4
    """
    g = setup.geometry
    lines = [setup.describe(), "", f"effective kernel = (k - 1) * d + 1 = {g.effective_kernel_hw}"]
    for name, axis in (("rows", g.rows), ("cols", g.cols)):
        k, s, d, n = axis.kernel_size, axis.stride, axis.dilation, axis.input_size
        eff = axis.effective_kernel_size
        if setup.padding == "SAME":
            out = axis.output_size
            lines.append(f"{name}: out = ceil({n} / {s}) = {out}")
            need = axis.pad_before + axis.pad_after
            lines.append(f"  need = max(0, ({out} - 1) * {s} + {eff} - {n}) = {need}")
            lines.append(f"  before = need // 2 = {axis.pad_before}, after = need - before = {axis.pad_after}")
        else:
            lines.append(f"{name}: out = ({n} + {axis.pad_before} + {axis.pad_after} - {eff}) // {s} + 1"
                         f" = {axis.output_size}")
        if axis.unread_after:
            lines.append(f"  {axis.unread_after} cell(s) at the end never read")
        zero = axis.zero_gradient_indices()
        lines.append(f"  no gradient: {list(map(int, zero)) if len(zero) else 'none'}")
    lines.append(f"input index = out * s - pad_before + tap * d")
    return "\n".join(lines)


def card(setup: Setup, *, ax: Axes | None = None) -> Figure:
    """The geometry card: sizes, the formulas with the numbers filled in, the pad split.

    Examples
    --------
    >>> from convviz.viz import Setup, card
    >>> fig = card(Setup(input_hw=7, kernel_hw=3, dilations=2, padding="SAME"))
    >>> "effective kernel" in fig.axes[0].texts[0].get_text()
    True
    """
    if ax is None:
        fig, axes = _figure(1, width=5.6, height=3.4)
        ax = axes[0, 0]
    else:
        fig = ax.figure
    ax.axis("off")
    ax.text(0.0, 1.0, card_text(setup), family="monospace", fontsize=8, va="top", transform=ax.transAxes)
    ax.set_title("geometry card", fontsize=10)
    return fig
