"""Colours, colour maps and grid drawing shared by every convviz figure.

Colour-blind safe throughout: cividis for counts and magnitudes, PuOr (purple to
orange, no red/green) centred on zero for signed values, and the Okabe-Ito
palette for highlights.  Padding is drawn hatched grey, never by colour alone.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib import colors
from matplotlib.axes import Axes
from matplotlib.collections import PatchCollection
from matplotlib.patches import Rectangle

# Okabe & Ito (2008), "Color Universal Design".
ORANGE = "#E69F00"
SKY_BLUE = "#56B4E9"
GREEN = "#009E73"
YELLOW = "#F0E442"
BLUE = "#0072B2"
VERMILLION = "#D55E00"
PURPLE = "#CC79A7"
PADDING_GREY = "#d9d9d9"

COUNT_CMAP = "cividis"
SIGNED_CMAP = "PuOr"
BACKGROUND_CMAP = "Greys"  # quiet values under highlights

# Above this many cells a grid is drawn without numbers in its cells.
MAX_ANNOTATED_CELLS = 144


def quiet_norm(values: np.ndarray) -> colors.Normalize:
    """A norm that keeps values in the light half of a grey map, so highlights stand out."""
    low, high = float(np.min(values)), float(np.max(values))
    span = max(high - low, 1e-12)
    return colors.Normalize(vmin=low - 0.6 * span, vmax=high + 1.4 * span)


def signed_norm(*arrays: np.ndarray) -> colors.Normalize:
    """A norm centred on zero covering all the arrays' values."""
    bound = max([float(np.max(np.abs(a))) for a in arrays if np.size(a)] + [1e-12])
    return colors.TwoSlopeNorm(vmin=-bound, vcenter=0.0, vmax=bound)


def _fmt(value: float) -> str:
    if value == int(value) and abs(value) < 1e5:
        return str(int(value))
    return f"{value:.2g}"


def draw_grid(ax: Axes, values: np.ndarray, cmap: str, norm: colors.Normalize | None = None,
              annotate: bool | None = None, origin: tuple[int, int] = (0, 0),
              fontsize: float = 8.0, labels: np.ndarray | None = None) -> Any:
    """Draw a 2-D array as a grid of cells; cell (i, j) is centred at (origin_col + j, origin_row + i).

    Returns the image artist.  Numbers (or the given ``labels``) are written in
    the cells when the grid is small (or when ``annotate`` says so), in black or
    white, whichever contrasts with the cell's colour.
    """
    rows, cols = values.shape
    r0, c0 = origin
    image = ax.imshow(values, cmap=cmap, norm=norm, interpolation="nearest",
                      extent=(c0 - 0.5, c0 + cols - 0.5, r0 + rows - 0.5, r0 - 0.5))
    if annotate is None:
        annotate = values.size <= MAX_ANNOTATED_CELLS
    if annotate:
        mapped = image.cmap(image.norm(values))
        luminance = 0.299 * mapped[..., 0] + 0.587 * mapped[..., 1] + 0.114 * mapped[..., 2]
        for i in range(rows):
            for j in range(cols):
                text = _fmt(float(values[i, j])) if labels is None else str(labels[i, j])
                ax.text(c0 + j, r0 + i, text, ha="center", va="center", fontsize=fontsize,
                        color="black" if luminance[i, j] > 0.5 else "white")
    grid_lines(ax, rows, cols, origin)
    return image


def grid_lines(ax: Axes, rows: int, cols: int, origin: tuple[int, int] = (0, 0), color: str = "#808080") -> None:
    """Cell borders as two line collections (cheap to draw), and a few labelled ticks."""
    r0, c0 = origin
    xs = np.arange(c0 - 0.5, c0 + cols, 1.0)
    ys = np.arange(r0 - 0.5, r0 + rows, 1.0)
    ax.vlines(xs, r0 - 0.5, r0 + rows - 0.5, colors=color, linewidth=0.5, zorder=2)
    ax.hlines(ys, c0 - 0.5, c0 + cols - 0.5, colors=color, linewidth=0.5, zorder=2)
    step = max(1, (max(rows, cols) + 5) // 6)  # at most ~6 labels: text is what drawing costs
    ax.set_xticks(np.arange(c0, c0 + cols, step))
    ax.set_yticks(np.arange(r0, r0 + rows, step))


def mark_cells(ax: Axes, cells: list[tuple[int, int]], color: str = VERMILLION, label: str | None = None) -> None:
    """Cross out cells (row, col) with one marker collection (cheap however many cells)."""
    if cells:
        rows, cols = zip(*cells)
        ax.scatter(cols, rows, marker="x", s=30, color=color, linewidths=1.5, zorder=4, label=label)


def hatch_cells(ax: Axes, cells: list[tuple[int, int]], hatch: str = "///", color: str = "#7f7f7f",
                face: str = PADDING_GREY) -> None:
    """Hatch individual cells (row, col), as one collection (one draw call however many cells)."""
    if not cells:
        return
    patches = [Rectangle((j - 0.5, i - 0.5), 1, 1) for i, j in cells]
    ax.add_collection(PatchCollection(patches, facecolor=face, edgecolor=color, hatch=hatch, linewidth=0.0,
                                      zorder=2.5))


def outline(ax: Axes, row0: float, col0: float, rows: float, cols: float, color: str = "black",
            linewidth: float = 2.0, label: str | None = None, linestyle: str = "-") -> Rectangle:
    """A rectangle outline around cells [row0, row0+rows) x [col0, col0+cols)."""
    patch = Rectangle((col0 - 0.5, row0 - 0.5), cols, rows, fill=False, edgecolor=color, linewidth=linewidth,
                      label=label, linestyle=linestyle, zorder=3)
    ax.add_patch(patch)
    return patch
