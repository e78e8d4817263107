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
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure, SubFigure
from matplotlib.lines import Line2D
from matplotlib.collections import PatchCollection
from matplotlib.patches import Patch, Rectangle

from .. import ops
from ..geometry import AxisGeometry, ConvGeometry
from . import _kit as kit
from . import _style as style
from .scene import Setup

__all__ = ["card", "coverage", "depthwise", "gather_steps", "scatter", "scatter_vs_gather"]


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
@style.themed
def scatter(setup: Setup, out_cell: tuple[int, int] | None = None, *, batch: int = 0, in_channel: int = 0,
            out_channel: int = 0, ax: Axes | None = None, colorbar: bool = True) -> Figure | SubFigure:
    """One output-gradient cell scattered back through every tap of the kernel.

    The selected cell of dL/dy reaches, through tap (kh, kw), the input cell
    ``(oh*sh - pad_top + kh*dh, ow*sw - pad_left + kw*dw)`` and adds
    ``W[kh, kw] * dL/dy[oh, ow]`` there.  Taps that land in the (hatched)
    padding carry their product nowhere: it is written, in italics, on the
    padding it is dropped in.  The numbers are the kernel's own: the input
    gradient of a one-hot dL/dy.

    Parameters
    ----------
    setup : Setup
        The convolution (its own arrays, or example numbers).
    out_cell : (int, int), optional
        Output-gradient cell (row, column); the centre by default.
    batch, in_channel, out_channel : int, optional
        Which image and which input/output channel pair to show.
    ax : matplotlib Axes, optional
        Draw only the input panel here; by default a figure with the output
        gradient, the kernel and the input panel.
    colorbar : bool, optional
        Add a colour bar for the contributions.
    theme : str or Theme, optional
        Draw this figure with another theme ("screen", "projector", "print").

    Returns
    -------
    matplotlib.figure.Figure
        The new figure, or with ``ax`` the figure (or subfigure) it is on.

    Examples
    --------
    >>> from convviz.viz import Setup, scatter
    >>> fig = scatter(Setup(input_hw=5, kernel_hw=3, strides=2, padding="SAME"), (0, 0))
    >>> [a.get_title() for a in fig.axes[:3]]
    ['dL/dy, cell (0, 0) = 3', 'kernel W', 'W × 3 added to dL/dx']
    """
    theme = style.current()
    g = setup.geometry
    if out_cell is None:
        out_cell = (g.output_hw[0] // 2, g.output_hw[1] // 2)
    oh, ow = _check_cell(out_cell, g.output_hw, "out_cell")
    one, value = _one_hot(setup, batch, (oh, ow), out_channel)
    contribution = setup.plane(setup.input_gradient(one), batch, in_channel, "in_channel")
    weights = setup.kernel_plane(in_channel, out_channel)
    own_figure = ax is None
    shown_value = style.fmt(value) if value >= 0 else f"({style.fmt(value)})"
    fig: Figure | SubFigure
    if ax is None:
        padded = kit.padded_width(g)
        fig, (ax_dy, ax_w, ax) = kit.figure([g.output_hw[1], g.kernel_hw[1], padded[1]],
                                         max(padded[0], g.output_hw[0]), colorbars=int(colorbar), legend=True)
        dy = setup.plane(setup.out_backprop(), batch, out_channel, "out_channel")
        style.draw_grid(ax_dy, dy, theme.signed_cmap, style.signed_norm(dy))
        style.outline(ax_dy, oh, ow, 1, 1, color=theme.selected)
        kit.labels(ax_dy, f"dL/dy, cell ({oh}, {ow}) = {style.fmt(value)}", "output")
        style.draw_grid(ax_w, weights, theme.signed_cmap, style.signed_norm(weights))
        kit.labels(ax_w, "kernel W", "tap")
    else:
        fig = ax.figure
    h, w = g.input_hw
    reached = np.zeros((h, w), dtype=bool)
    dropped = []
    for kh in range(g.kernel_hw[0]):
        for kw in range(g.kernel_hw[1]):
            i, j = g.input_cell((oh, ow), (kh, kw))
            if g.is_padding((i, j)):
                dropped.append((i, j, weights[kh, kw] * value))
            else:
                reached[i, j] = True
    kit.padded_canvas(ax, g, label_pads=not dropped)
    norm = style.signed_norm(contribution, weights * value)
    image = style.draw_grid(ax, contribution, theme.signed_cmap, norm, mask=~reached,
                            annotate=h * w <= style.MAX_ANNOTATED_CELLS * 2)
    for i, j, product in dropped:  # what a tap in the padding would have added, and loses
        ax.text(j, i, style.fmt(product), ha="center", va="center", fontsize=theme.number_pt, style="italic",
                color=theme.padding_ink, zorder=4)
    window = g.input_cell((oh, ow), (0, 0))
    eff = g.effective_kernel_hw
    style.outline(ax, window[0], window[1], eff[0], eff[1], color=theme.window, linestyle=theme.window_style)
    kit.labels(ax, f"W × {shown_value} added to dL/dx", "input")
    handles: list[Artist] = [Line2D([], [], color=theme.window, linestyle=theme.window_style,
                                    linewidth=theme.outline_width, label=f"window, {eff[0]}x{eff[1]}")]
    if dropped:
        handles.append(kit.padding_patch(f"padding: {len(dropped)} products dropped (italic)"))
    elif any(g.pads):
        handles.append(kit.padding_patch())
    kit.legend(fig, ax, handles, own_figure)
    if colorbar:
        style.colorbar(fig, image, ax, "W × dL/dy")
    if own_figure and isinstance(fig, Figure):  # own_figure: the Figure made above
        kit.titles(fig, "One output-gradient cell, scattered into dL/dx", setup.describe())
    return fig


# ------------------------------------------------------------------------ coverage
def _axis_pattern(axis: AxisGeometry) -> str:
    """What the coverage along one axis shows, in a few words ("" when nothing stands out)."""
    s, d, k = axis.stride, axis.dilation, axis.kernel_size
    if gcd(s, d) > 1 and k > 1:
        return f"gridding: gcd(stride {s}, dilation {d}) = {gcd(s, d)}, so only 1 in {gcd(s, d)} is read"
    if s > (k - 1) * d + 1:
        return f"stride {s} > kernel span {(k - 1) * d + 1}: some are never read"
    if s > 1 and k % s:
        return f"kernel {k} not a multiple of stride {s}: uneven overlap (checkerboard)"
    if s > 1:
        return f"kernel {k} a multiple of stride {s}: even overlap"
    return ""


def _patterns(g: ConvGeometry) -> list[str]:
    """The coverage patterns of both axes, said once when they agree."""
    rows, cols = _axis_pattern(g.rows), _axis_pattern(g.cols)
    if rows == cols:
        return [f"rows and columns: {rows}"] if rows else []
    return [f"{name}: {words}" for name, words in (("rows", rows), ("columns", cols)) if words]


def _runs(indices: np.ndarray) -> list[tuple[int, int]]:
    """Consecutive indices grouped as (first, count): one band per run of lost rows."""
    runs: list[tuple[int, int]] = []
    for i in map(int, indices):
        if runs and runs[-1][0] + runs[-1][1] == i:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((i, 1))
    return runs


def _lost_words(rows: np.ndarray, cols: np.ndarray) -> str:
    parts = []
    if len(rows):
        parts.append(f"rows {', '.join(map(str, map(int, rows)))}")
    if len(cols):
        parts.append(f"columns {', '.join(map(str, map(int, cols)))}")
    return " and ".join(parts)


@style.themed
def coverage(setup: Setup, *, ax: Axes | None = None, colorbar: bool = True) -> Figure | SubFigure:
    """How many (output cell, tap) pairs reach each input cell.

    This is the input gradient of an all-ones dL/dy through an all-ones
    single-channel kernel, computed by the convviz kernel (and equal, cell for
    cell, to :meth:`convviz.ConvGeometry.coverage`).  Strides that do not divide
    the kernel make a checkerboard; gcd(stride, dilation) > 1 leaves whole rows
    and columns unread (gridding).  Rows and columns no window reads get exactly
    zero gradient: they are drawn as a band, named in the legend.

    Parameters
    ----------
    setup : Setup
        The convolution.
    ax : matplotlib Axes, optional
        Draw here instead of in a new figure.
    colorbar : bool, optional
        Add a colour bar (one colour, and one integer tick, per count).
    theme : str or Theme, optional
        Draw this figure with another theme ("screen", "projector", "print").

    Examples
    --------
    >>> from convviz.viz import Setup, coverage
    >>> fig = coverage(Setup(input_hw=8, kernel_hw=3, strides=3))
    >>> fig.legends[0].get_texts()[0].get_text()
    'no gradient: rows 6, 7 and columns 6, 7'
    """
    theme = style.current()
    g = setup.geometry
    h, w = g.input_hw
    counts = ops.conv2d_backprop_input(
        [1, h, w, 1], np.ones((*g.kernel_hw, 1, 1)), np.ones((1, *g.output_hw, 1)),
        [1, *setup.strides, 1], setup.padding,
        [0, 0, *g.pads[:2], *g.pads[2:], 0, 0] if setup.padding == "EXPLICIT" else [],
        dilations=[1, *setup.dilations, 1])[0, :, :, 0]
    own_figure = ax is None
    fig: Figure | SubFigure
    if ax is None:
        padded = kit.padded_width(g)
        fig, (ax,) = kit.figure([padded[1]], padded[0], colorbars=int(colorbar), legend=True, min_width=6.4)
    else:
        fig = ax.figure
    kit.padded_canvas(ax, g)
    norm, ticks = style.count_norm(counts)
    lost = counts == 0
    image = style.draw_grid(ax, counts, theme.count_cmap, norm, mask=lost)
    lost_cells = [(int(i), int(j)) for i, j in zip(*np.nonzero(lost))]
    style.fill_cells(ax, lost_cells, theme.lost_fill)
    if counts.size <= style.MAX_ANNOTATED_CELLS:
        for i, j in lost_cells:
            ax.text(j, i, "0", ha="center", va="center", fontsize=theme.number_pt, color="black", zorder=4)
    zero_rows, zero_cols = g.zero_gradient_rows(), g.zero_gradient_cols()
    band_width = theme.outline_width * 0.8
    for first, count in _runs(zero_rows):
        style.outline(ax, first, 0, count, w, color=theme.lost, linewidth=band_width)
    for first, count in _runs(zero_cols):
        style.outline(ax, 0, first, h, count, color=theme.lost, linewidth=band_width)
    kit.labels(ax, "" if own_figure else "taps reaching each input cell", "input")  # the figure's title says it
    handles = []
    if lost_cells:
        handles.append(Patch(facecolor=theme.lost_fill, edgecolor=theme.lost, linewidth=2,
                             label="no gradient: " + _lost_words(zero_rows, zero_cols)))
    if any(g.pads):
        handles.append(kit.padding_patch())
    kit.legend(fig, ax, handles, own_figure, title="\n".join(_patterns(g)) or None)
    if colorbar:
        style.colorbar(fig, image, ax, "(output cell, tap) pairs", ticks=ticks)
    if own_figure and isinstance(fig, Figure):  # own_figure: the Figure made above
        kit.titles(fig, "Coverage: how many taps reach each input cell", setup.describe())
    return fig


# ------------------------------------------------------------------------ gather
def gather_steps(setup: Setup, batch: int = 0, in_channel: int = 0, out_channel: int = 0) -> dict[str, Any]:
    """The gather form of the input gradient, step by step, for one channel pair.

    ``zero_inserted``: dL/dy with ``stride - 1`` zeros between neighbours
    (``zero_inserted_origin``: where each cell comes from); ``padded``: that, padded (or cropped) so that a plain correlation lines up;
    ``padded_origin``: where each cell of ``padded`` comes from (:data:`FROM_DY`,
    :data:`INSERTED_ZERO` or :data:`PADDING_ZERO`); ``flipped``: the kernel
    rotated 180 degrees; ``result``: the correlation of ``padded`` with the
    flipped, dilated kernel -- the input gradient.

    Examples
    --------
    >>> from convviz.viz import Setup
    >>> from convviz.viz.views import gather_steps
    >>> steps = gather_steps(Setup(input_hw=5, kernel_hw=3, strides=2, padding="VALID"))
    >>> steps["zero_inserted"].shape, steps["padded"].shape, steps["result"].shape
    ((3, 3), (7, 7), (5, 5))
    >>> steps["padded_origin"][2]  # padding, dL/dy, inserted zero, dL/dy, padding
    array([2, 2, 0, 1, 0, 2, 2])
    """
    g = setup.geometry
    dy = setup.plane(setup.out_backprop(), batch, out_channel, "out_channel")
    weights = setup.kernel_plane(in_channel, out_channel)
    (sh, sw), (dh, dw) = setup.strides, setup.dilations
    z = np.zeros(((dy.shape[0] - 1) * sh + 1, (dy.shape[1] - 1) * sw + 1))
    z[::sh, ::sw] = dy
    inserted = np.full(z.shape, INSERTED_ZERO)
    inserted[::sh, ::sw] = FROM_DY
    padded, origin = z, inserted
    for axis, geo in ((0, g.rows), (1, g.cols)):
        before = geo.effective_kernel_size - 1 - geo.pad_before  # may be negative: crop instead
        after = geo.input_size + geo.effective_kernel_size - 1 - before - padded.shape[axis]
        widths = [(0, 0), (0, 0)]
        widths[axis] = (max(before, 0), max(after, 0))
        padded = np.pad(padded, widths)
        origin = np.pad(origin, widths, constant_values=PADDING_ZERO)
        start = max(-before, 0)
        stop = padded.shape[axis] - max(-after, 0)
        keep = (slice(start, stop), slice(None)) if axis == 0 else (slice(None), slice(start, stop))
        padded, origin = padded[keep], origin[keep]
    flipped = weights[::-1, ::-1]
    kh, kw = weights.shape
    result = np.zeros(g.input_hw)
    for a in range(kh):
        for b in range(kw):
            result += flipped[a, b] * padded[a * dh:a * dh + g.input_hw[0], b * dw:b * dw + g.input_hw[1]]
    return {"out_backprop": dy, "weights": weights, "zero_inserted": z, "zero_inserted_origin": inserted,
            "padded": padded, "padded_origin": origin, "flipped": flipped, "result": result}


FROM_DY, INSERTED_ZERO, PADDING_ZERO = 0, 1, 2


def _origin_grid(ax: Axes, values: np.ndarray, origin: np.ndarray, norm: Any) -> Any:
    """dL/dy's numbers in colour, inserted zeros on white, padding zeros on the padding grey."""
    theme = style.current()
    image = style.draw_grid(ax, values, theme.signed_cmap, norm, annotate=False, mask=origin != FROM_DY)
    cells = {kind: [(int(i), int(j)) for i, j in zip(*np.nonzero(origin == kind))]
             for kind in (INSERTED_ZERO, PADDING_ZERO)}
    style.fill_cells(ax, cells[PADDING_ZERO], theme.padding_face)
    if values.size <= style.MAX_ANNOTATED_CELLS:
        style.write_numbers(ax, image, values, mask=origin != FROM_DY)
        for kind, color, slant in ((INSERTED_ZERO, "#595959", "normal"), (PADDING_ZERO, theme.padding_ink, "italic")):
            for i, j in cells[kind]:
                ax.text(j, i, "0", ha="center", va="center", fontsize=theme.number_pt, color=color, style=slant,
                        zorder=4)
    return image


@style.themed
def scatter_vs_gather(setup: Setup, *, batch: int = 0, in_channel: int = 0, out_channel: int = 0) -> Figure:
    """The same input gradient two ways: scatter (top) and gather (bottom).

    Top: every dL/dy cell scattered through W (the convviz kernel's result for
    this channel pair).  Bottom: insert ``stride - 1`` zeros between the dL/dy
    cells, pad by ``effective kernel - 1 - pad_before`` (cropping when that is
    negative), flip the kernel 180 degrees and correlate -- a plain stride-1
    convolution, the "transposed convolution" view.  Both give the same numbers.
    Inserted zeros (plain) and padding zeros (italic, grey cell) are told apart.

    Examples
    --------
    >>> from convviz.viz import Setup, scatter_vs_gather
    >>> fig = scatter_vs_gather(Setup(input_hw=6, kernel_hw=3, strides=2, padding="SAME"))
    >>> "max |scatter - gather| = 0" in fig.get_suptitle()
    True
    """
    theme = style.current()
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

    top = [steps["out_backprop"].shape[1], g.kernel_hw[1], g.input_hw[1]]
    bottom = [steps["zero_inserted"].shape[1], steps["padded"].shape[1], g.kernel_hw[1], g.input_hw[1]]
    rows = max(steps["padded"].shape[0], g.input_hw[0])
    width = max(kit.size(top, rows)[0], kit.size(bottom, rows)[0])
    fig = plt.figure(figsize=(width, 2 * kit.size(bottom, rows, legend=True)[1] - 1.0), layout="constrained")
    upper, lower = fig.subfigures(2, 1, squeeze=False, height_ratios=[1, 1.08])[:, 0]
    ax_dy, ax_w, ax_s = upper.subplots(1, 3, width_ratios=top)
    ax_z, ax_p, ax_f, ax_r = lower.subplots(1, 4, width_ratios=bottom)
    norm = style.signed_norm(scattered, steps["result"], steps["out_backprop"])
    wnorm = style.signed_norm(steps["weights"])
    style.draw_grid(ax_dy, steps["out_backprop"], theme.signed_cmap, norm)
    kit.labels(ax_dy, "1. dL/dy", "output")
    _tap_grid(ax_w, steps["weights"], wnorm, flipped=False)
    kit.labels(ax_w, "2. kernel W, taps a, b, ...", "tap")
    style.draw_grid(ax_s, scattered, theme.signed_cmap, norm)
    kit.labels(ax_s, "3. scatter: each dL/dy cell × W", "input")
    upper.suptitle("Scatter", fontsize=theme.title_pt, fontweight="bold")
    _origin_grid(ax_z, steps["zero_inserted"], steps["zero_inserted_origin"], norm)
    kit.labels(ax_z, f"4. {_zeros_between(setup.strides)} between cells", "")
    _origin_grid(ax_p, steps["padded"], steps["padded_origin"], norm)
    kit.labels(ax_p, "5. pad (or crop) to line up", "")
    _tap_grid(ax_f, steps["flipped"], wnorm, flipped=True)
    kit.labels(ax_f, "6. W flipped", "tap")
    style.draw_grid(ax_r, steps["result"], theme.signed_cmap, norm)
    kit.labels(ax_r, "7. correlate 5 with 6", "input")
    recipe = "; ".join(_gather_recipe(setup))
    lower.suptitle(f"Gather: {recipe}", fontsize=theme.label_pt)
    handles = [Patch(facecolor="white", edgecolor="#595959", label="0 inserted between dL/dy cells"),
               Patch(facecolor=theme.padding_face, edgecolor="#595959", label="0 of the padding (italic)")]
    lower.legend(handles=handles, loc="outside lower center", ncols=2, frameon=False, fontsize=theme.label_pt)
    kit.titles(fig, f"Scatter vs gather: the same dL/dx, max |scatter - gather| = {difference:g}", setup.describe())
    return fig


def _zeros_between(strides: tuple[int, int]) -> str:
    sh, sw = strides
    if sh == sw:
        return f"{sh - 1} zero{'s' if sh != 2 else ''}"
    return f"{sh - 1} (rows) and {sw - 1} (columns) zeros"


def _tap_grid(ax: Axes, weights: np.ndarray, norm: Any, flipped: bool) -> None:
    """The kernel with each tap lettered (a, b, c, ...), so a flip shows where every tap went."""
    kh, kw = weights.shape
    labels = np.empty(weights.shape, dtype=object)
    for i in range(kh):
        for j in range(kw):
            src = (kh - 1 - i) * kw + (kw - 1 - j) if flipped else i * kw + j
            labels[i, j] = f"{chr(ord('a') + src % 26)}\n{style.fmt(weights[i, j])}"
    style.draw_grid(ax, weights, style.current().signed_cmap, norm, annotate=True, labels=labels)


def _gather_recipe(setup: Setup) -> list[str]:
    g = setup.geometry
    if g.rows.stride == g.cols.stride and g.rows.effective_kernel_size == g.cols.effective_kernel_size \
            and g.rows.pad_before == g.cols.pad_before:
        axes: tuple[tuple[str, AxisGeometry], ...] = (("", g.rows),)
    else:
        axes = (("rows ", g.rows), ("columns ", g.cols))
    lines = []
    for name, axis in axes:
        eff, pad = axis.effective_kernel_size, axis.pad_before
        lines.append(f"{name}pad before = (effective kernel - 1) - pad = {eff - 1} - {pad} = {eff - 1 - pad}")
    return lines


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
                dw=setup.depthwise_filter_gradient_plane(channel, multiplier))


def _lattice_marks(ax: Axes, rows: np.ndarray, cols: np.ndarray, valid: np.ndarray) -> Any:
    """Square rings around the cells one tap reads (real input) and would read (padding)."""
    theme = style.current()
    side = (theme.cell_inch * 72 * 0.82) ** 2  # marker area in points^2: a ring just inside the cell
    rr, cc = np.meshgrid(rows, cols, indexing="ij")
    marks = None
    for mask, color, style_ in ((valid, theme.window, "solid"), (~valid, theme.lost, "dashed")):
        if mask.any():  # one marker collection per colour, however many cells
            marks = ax.scatter(cc[mask], rr[mask], s=side, marker="s", facecolors="none", edgecolors=color,
                               linewidths=theme.outline_width * 0.8, linestyles=style_, zorder=5)
    return marks


@style.themed
def depthwise_lattice_panel(ax: Axes, setup: Setup, tap: tuple[int, int] = (0, 0), *, batch: int = 0,
                            channel: int = 0, multiplier: int = 0, legend: bool = True) -> dict[str, Any]:
    """Draw the input with the cells one tap reads; returns the numbers behind it."""
    theme = style.current()
    d = _depthwise_numbers(setup, tap, batch, channel, multiplier)
    g, (kh, kw) = d["g"], d["tap"]
    kit.padded_canvas(ax, g, label_pads=False)
    style.draw_grid(ax, d["x"], theme.quiet_cmap, style.quiet_norm(d["x"]))
    _lattice_marks(ax, d["rows"], d["cols"], d["valid"])
    kit.labels(ax, f"x, channel {channel}: read by tap ({kh}, {kw})", "input")
    if legend:
        kit.legend(ax.figure, ax, _lattice_handles(in_padding=not d["valid"].all()), own_figure=False)
    return d


def _lattice_handles(in_padding: bool) -> list[Artist]:
    """The legend of the lattice marks; the dashed padding mark only when some tap reads the padding."""
    theme = style.current()
    handles: list[Artist] = [Patch(fill=False, edgecolor=theme.window, linewidth=2, label="read by the tap")]
    if in_padding:
        handles.append(Patch(fill=False, edgecolor=theme.lost, linewidth=2, linestyle="--",
                             label="in the padding: adds 0"))
    handles.append(kit.padding_patch())
    return handles


@style.themed
def depthwise_dw_panel(ax: Axes, d: dict[str, Any], channel: int = 0, multiplier: int = 0) -> None:
    """Draw dW (the kernel's) with the tap outlined."""
    theme = style.current()
    kh, kw = d["tap"]
    dw = d["dw"]
    style.draw_grid(ax, dw, theme.signed_cmap, style.signed_norm(dw))
    style.outline(ax, kh, kw, 1, 1, color=theme.selected)
    kit.labels(ax, f"dW[{kh}, {kw}] = {style.fmt(dw[kh, kw])} (channel {channel}, multiplier {multiplier})", "tap")


def _depthwise_subtitle(setup: Setup, channel: int, multiplier: int) -> str:
    """The parameters, and which channels are shown when there is more than one."""
    if setup.multiplier == 1 and setup.in_channels == 1:
        return setup.describe()
    out = channel * setup.multiplier + multiplier
    return (f"{setup.describe()}; input channel {channel} -> output channel {out} "
            f"(= {channel} × {setup.multiplier} + {multiplier})")


@style.themed
def depthwise(setup: Setup, tap: tuple[int, int] = (0, 0), *, batch: int = 0, channel: int = 0,
              multiplier: int = 0) -> Figure:
    """The depthwise filter gradient of one tap: a strided, dilated sub-lattice of the input meets dL/dy.

    Tap (kh, kw) of channel c reads input cell ``(oh*sh - pad_top + kh*dh,
    ow*sw - pad_left + kw*dw)`` for every output cell: a lattice with the
    stride's spacing, shifted by the tap's dilated offset.  dW[kh, kw, c, m] is
    the sum over that lattice of input x dL/dy[..., c*M + m] (cells in the
    padding count zero); the last panel is the kernel's full dW.

    Parameters
    ----------
    setup : Setup
        The convolution (its own arrays, or example numbers).
    tap : (int, int)
        The kernel tap (row, column) to explain.
    batch, channel, multiplier : int
        Which image, input channel and channel multiplier.
    theme : str or Theme, optional
        Draw this figure with another theme ("screen", "projector", "print").

    Examples
    --------
    >>> from convviz.viz import Setup, depthwise
    >>> fig = depthwise(Setup(input_hw=6, kernel_hw=3, strides=2, padding="SAME"), tap=(1, 1))
    >>> fig.axes[3].get_title().startswith("4. dW")
    True
    """
    theme = style.current()
    g = setup.depthwise_geometry
    padded = kit.padded_width(g)
    fig, (ax_x, ax_dy, ax_p, ax_w) = kit.figure([padded[1], g.output_hw[1], g.output_hw[1], g.kernel_hw[1]],
                                             max(padded[0], g.output_hw[0]), legend=True)
    d = depthwise_lattice_panel(ax_x, setup, tap, batch=batch, channel=channel, multiplier=multiplier,
                                legend=False)
    kh, kw = d["tap"]
    ax_x.set_title(f"1. x, read by tap ({kh}, {kw})")
    style.draw_grid(ax_dy, d["dy"], theme.signed_cmap, style.signed_norm(d["dy"]))
    kit.labels(ax_dy, "2. dL/dy", "output")
    products = d["products"]
    style.draw_grid(ax_p, products, theme.signed_cmap, style.signed_norm(products))
    kit.labels(ax_p, f"3. x · dL/dy: sum {style.fmt(products.sum())}", "output")
    depthwise_dw_panel(ax_w, d, channel, multiplier)
    ax_w.set_title(f"4. dW[{kh}, {kw}] = {style.fmt(d['dw'][kh, kw])}")
    kit.legend(fig, ax_x, _lattice_handles(in_padding=not d["valid"].all()), own_figure=True)
    kit.titles(fig, f"Depthwise filter gradient of tap ({kh}, {kw})", _depthwise_subtitle(setup, channel, multiplier))
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
        s, n = axis.stride, axis.input_size
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
    lines.append("input index = out * s - pad_before + tap * d")
    return "\n".join(lines)


def _axis_diagram(ax: Axes, axis: AxisGeometry, name: str) -> None:
    """One axis of the convolution as a strip: padding, the cells, and every output's window below."""
    theme = style.current()
    n, before, after = axis.input_size, axis.pad_before, axis.pad_after
    outputs = axis.output_size
    zero = set(map(int, axis.zero_gradient_indices()))
    real = [(0, i) for i in range(n) if i not in zero]
    lost = [(0, i) for i in sorted(zero)]
    style.fill_cells(ax, real, "white", edge=theme.grid_color)
    style.fill_cells(ax, lost, theme.lost_fill, edge=theme.lost)
    pads = [(0, i) for i in range(-before, 0)] + [(0, i) for i in range(n, n + after)]
    if pads:
        ax.add_collection(PatchCollection([Rectangle((j - 0.5, -0.5), 1, 1) for _, j in pads],
                                          facecolor=theme.padding_face, edgecolor=theme.padding_hatch, hatch="//",
                                          linewidth=0.5, zorder=1))
    style.outline(ax, 0, 0, 1, n, color="black", linewidth=theme.grid_width * 2.5)
    for i in range(n):
        ax.text(i, 0, str(i), ha="center", va="center", fontsize=theme.number_pt, zorder=4)
    for o in range(outputs):
        taps = [axis.input_index(o, t) for t in range(axis.kernel_size)]
        y = 1.2 + 0.8 * o
        ax.plot([taps[0], taps[-1]], [y, y], color=theme.window, linewidth=theme.outline_width * 0.6, zorder=3)
        ax.plot(taps, [y] * len(taps), "o", color=theme.window, markersize=theme.number_pt * 0.55, zorder=3)
        ax.text(-before - 0.8, y, f"out {o}", ha="right", va="center", fontsize=theme.label_pt)
    ax.set_xlim(-before - 3.4, n + after - 0.3)
    ax.set_ylim(1.2 + 0.8 * outputs, -0.7)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(f"{name}: each output's window (dots: taps)", loc="left")


@style.themed
def card(setup: Setup, *, ax: Axes | None = None) -> Figure | SubFigure:
    """The geometry card: the formulas with the numbers filled in, and each axis drawn as a strip.

    Left, the sizes and formulas (output size, SAME's pad split, the effective
    kernel, the cells that get no gradient).  Right, for each axis, the input
    cells with the padding around them and, below, the window of every output
    index with a dot on each tap -- stride, dilation and the unread cells at a
    glance.  With ``ax``, only the text is drawn there.

    Examples
    --------
    >>> from convviz.viz import Setup, card
    >>> fig = card(Setup(input_hw=7, kernel_hw=3, dilations=2, padding="SAME"))
    >>> "effective kernel" in fig.axes[0].texts[0].get_text()
    True
    """
    theme = style.current()
    text = "\n".join(card_text(setup).splitlines()[2:])  # the first line is the figure's subtitle
    if ax is not None:
        ax.axis("off")
        ax.text(0.0, 1.0, text, family="monospace", fontsize=theme.label_pt, va="top", transform=ax.transAxes)
        ax.set_title("geometry card")
        return ax.figure
    g = setup.geometry
    same_axes = (g.rows.input_size, g.rows.kernel_size, g.rows.stride, g.rows.dilation, g.rows.pad_before,
                 g.rows.pad_after) == (g.cols.input_size, g.cols.kernel_size, g.cols.stride, g.cols.dilation,
                                       g.cols.pad_before, g.cols.pad_after)
    axes_drawn = [("rows and columns", g.rows)] if same_axes else [("rows", g.rows), ("columns", g.cols)]
    strip_width = max(a.padded_size for _, a in axes_drawn) + 3.4
    strip_heights = [1.9 + 0.8 * a.output_size for _, a in axes_drawn]
    lines = text.count("\n") + 1
    text_width = max(len(line) for line in text.splitlines()) * 0.6 * theme.label_pt / 72 + 0.3
    cell = theme.cell_inch
    height = max(lines * 1.25 * theme.label_pt / 72, sum(strip_heights) * cell + 0.5 * len(axes_drawn)) + 1.2
    fig = plt.figure(figsize=(text_width + strip_width * cell + 0.6, height), layout="constrained")
    grid = fig.add_gridspec(len(axes_drawn), 2, width_ratios=[text_width, strip_width * cell],
                            height_ratios=strip_heights)
    text_ax = fig.add_subplot(grid[:, 0])
    text_ax.axis("off")
    text_ax.text(0.0, 0.5, text, family="monospace", fontsize=theme.label_pt, va="center", transform=text_ax.transAxes)
    for k, (name, axis) in enumerate(axes_drawn):
        _axis_diagram(fig.add_subplot(grid[k, 1]), axis, name)
    handles = [kit.padding_patch()] if any(g.pads) else []
    if len(g.zero_gradient_rows()) or len(g.zero_gradient_cols()):
        handles.append(Patch(facecolor=theme.lost_fill, edgecolor=theme.lost, label="never read: no gradient"))
    kit.legend(fig, text_ax, handles, own_figure=True)
    kit.titles(fig, "Geometry card", setup.describe())
    return fig
