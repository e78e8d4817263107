"""One style for every convviz figure: themes, palettes, and grid drawing.

A :class:`Theme` holds everything a figure's legibility depends on: font sizes
(10 pt or more at the saved size), the size of a cell, line widths, and the
palettes.  Three presets (:data:`THEMES`):

* ``"screen"`` (the default): notebooks and web pages;
* ``"projector"``: large fonts, thick lines, black grid lines, for the back of a
  lecture hall;
* ``"print"``: greyscale-safe -- every distinction is also a lightness, hatch or
  line-style distinction, so a black-and-white copy loses nothing.

Screen and projector use the explorer's palettes: PuOr (purple to orange, no
red/green) centred on zero for signed values, cividis for counts, and the
Okabe-Ito colours for highlights.  Text on a cell is black or white, whichever
contrasts more with the cell (WCAG relative luminance).  Padding is drawn
*outside* the real input, never over it.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator

import matplotlib
import numpy as np
from matplotlib import colors, ticker
from matplotlib.axes import Axes
from matplotlib.collections import PatchCollection
from matplotlib.patches import Rectangle

if TYPE_CHECKING:
    from matplotlib.typing import LineStyleType, RcKeyType

# Okabe & Ito (2008), "Color Universal Design".
ORANGE = "#E69F00"
SKY_BLUE = "#56B4E9"
GREEN = "#009E73"
YELLOW = "#F0E442"
BLUE = "#0072B2"
VERMILLION = "#D55E00"
PURPLE = "#CC79A7"
PADDING_GREY = "#e3e3e3"

# Kept for callers of the first release (the matplotlib widget); figures use the theme.
COUNT_CMAP = "cividis"
SIGNED_CMAP = "PuOr"
BACKGROUND_CMAP = "Greys"

# Above this many cells a grid is drawn without numbers in its cells.
MAX_ANNOTATED_CELLS = 144


@dataclass(frozen=True)
class Theme:
    """Sizes, line widths and palettes of a figure style (see :data:`THEMES`).

    Examples
    --------
    >>> from convviz.viz import THEMES
    >>> THEMES["projector"].number_pt > THEMES["screen"].number_pt >= 10
    True
    """

    name: str
    number_pt: float = 10.0  # numbers in cells
    label_pt: float = 10.0  # axis labels, ticks, legends, notes
    title_pt: float = 11.0  # panel titles
    suptitle_pt: float = 13.0
    cell_inch: float = 0.40  # side of one cell at the saved size
    grid_width: float = 0.6
    grid_color: str = "#8c8c8c"
    outline_width: float = 2.5
    signed_cmap: str = "PuOr"
    count_cmap: str = "cividis"
    quiet_cmap: str = "Greys"
    selected: str = ORANGE  # the cell being explained
    window: str = BLUE  # the window or lattice it reaches
    lost: str = VERMILLION  # padding taps, rows with no gradient
    lost_fill: str = "#fbe0cf"  # cells with no gradient
    padding_face: str = PADDING_GREY
    padding_hatch: str = "#b0b0b0"
    padding_ink: str = "#3d3d3d"  # words and numbers on the padding
    window_style: LineStyleType = "--"
    selected_style: LineStyleType = "-"

    def rc(self) -> dict[RcKeyType, Any]:
        """The matplotlib rcParams this theme draws with."""
        return {"font.size": self.label_pt, "axes.titlesize": self.title_pt, "axes.labelsize": self.label_pt,
                "xtick.labelsize": self.label_pt, "ytick.labelsize": self.label_pt,
                "legend.fontsize": self.label_pt, "legend.title_fontsize": self.label_pt,
                "figure.titlesize": self.suptitle_pt, "hatch.color": self.padding_hatch,
                "hatch.linewidth": 0.8 * self.grid_width / 0.6, "axes.linewidth": self.grid_width * 1.5,
                "figure.facecolor": "white", "savefig.facecolor": "white", "svg.hashsalt": "convviz"}


THEMES: dict[str, Theme] = {
    "screen": Theme("screen"),
    "projector": Theme("projector", number_pt=15, label_pt=15, title_pt=16, suptitle_pt=19, cell_inch=0.62,
                       grid_width=1.2, grid_color="#1a1a1a", outline_width=4.0),
    # Greyscale-safe: lightness carries the values (cividis rises monotonically in lightness),
    # line style tells the window (dashed) from the selected cell (solid).
    "print": Theme("print", signed_cmap="cividis", count_cmap="Greys", selected="#000000", window="#404040",
                   lost="#000000", lost_fill="#f2f2f2", grid_color="#606060"),
}

_current: list[Theme] = [THEMES["screen"]]


def current() -> Theme:
    """The theme figures are drawn with now."""
    return _current[-1]


def _resolve(theme: str | Theme) -> Theme:
    if isinstance(theme, Theme):
        return theme
    if theme not in THEMES:
        raise ValueError(f"theme must be one of {sorted(THEMES)} or a Theme, got {theme!r}")
    return THEMES[theme]


def use_theme(theme: str | Theme) -> Theme:
    """Draw every later figure with ``theme`` ("screen", "projector", "print" or a :class:`Theme`).

    Returns the theme that was in use, so it can be restored.

    Examples
    --------
    >>> from convviz import viz
    >>> before = viz.use_theme("projector")
    >>> viz.current_theme().name
    'projector'
    >>> _ = viz.use_theme(before)
    """
    previous = _current[-1]
    _current[-1] = _resolve(theme)
    return previous


@contextlib.contextmanager
def theme_context(theme: str | Theme) -> Iterator[Theme]:
    """Draw the figures made inside the ``with`` block with ``theme``.

    Examples
    --------
    >>> from convviz import viz
    >>> with viz.theme_context("print") as t:
    ...     fig = viz.coverage(viz.Setup(input_hw=5, kernel_hw=3, strides=2))
    >>> t.name, fig.axes[0].images[0].get_cmap().name
    ('print', 'Greys')
    """
    _current.append(_resolve(theme))
    try:
        yield _current[-1]
    finally:
        _current.pop()


def themed(draw: Callable) -> Callable:
    """Run a figure function under its theme's rcParams (``theme=`` picks another for one call)."""

    @functools.wraps(draw)
    def wrapper(*args: Any, theme: str | Theme | None = None, **kwargs: Any) -> Any:
        with contextlib.ExitStack() as stack:
            if theme is not None:
                stack.enter_context(theme_context(theme))
            stack.enter_context(matplotlib.rc_context(current().rc()))
            return draw(*args, **kwargs)

    return wrapper


# -- contrast ------------------------------------------------------------------------------
def relative_luminance(color: Any) -> np.ndarray:
    """WCAG 2 relative luminance of a colour or of an ``[..., 3+]`` array of RGB(A) in [0, 1]."""
    rgb = np.asarray(colors.to_rgba_array(color) if not isinstance(color, np.ndarray) else color, dtype=float)
    rgb = rgb[..., :3]
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    return linear @ np.array([0.2126, 0.7152, 0.0722])


def contrast_ratio(a: Any, b: Any) -> float:
    """WCAG 2.x contrast ratio of two colours, from 1 (same) to 21 (black on white).

    ``(L1 + 0.05) / (L2 + 0.05)`` with ``L1`` the lighter relative luminance,
    each channel linearised from sRGB (0.04045 threshold).  Alpha is ignored:
    composite a translucent colour over its background first.

    Parameters
    ----------
    a, b : color
        Any matplotlib colour: a name, ``"#rrggbb"``, an RGB(A) tuple in [0, 1]...

    Returns
    -------
    float
        The ratio; WCAG AA asks at least 4.5 for body text.

    Examples
    --------
    >>> from convviz.viz.checks import contrast_ratio
    >>> contrast_ratio("black", "white")
    21.0
    >>> round(contrast_ratio("#777777", "white"), 2)
    4.48
    >>> contrast_ratio("white", "black") == contrast_ratio("black", "white")
    True
    """
    la, lb = (float(relative_luminance(np.array(colors.to_rgb(c)))) for c in (a, b))
    return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)


def ink(rgba: np.ndarray) -> np.ndarray:
    """Black or white text for each background colour, whichever contrasts more."""
    luminance = relative_luminance(np.asarray(rgba, dtype=float))
    # Black's ratio (L + 0.05) / 0.05 beats white's 1.05 / (L + 0.05) above L = 0.179.
    return np.where(luminance > 0.179, "black", "white")


# -- norms ------------------------------------------------------------------------------
def quiet_norm(values: np.ndarray) -> colors.Normalize:
    """A norm that keeps values in the light half of a grey map, so highlights stand out."""
    low, high = float(np.min(values)), float(np.max(values))
    span = max(high - low, 1e-12)
    return colors.Normalize(vmin=low - 0.6 * span, vmax=high + 1.4 * span)


def signed_norm(*arrays: np.ndarray) -> colors.Normalize:
    """A norm centred on zero covering all the arrays' values."""
    bound = max([float(np.max(np.abs(a))) for a in arrays if np.size(a)] + [1e-12])
    return colors.TwoSlopeNorm(vmin=-bound, vcenter=0.0, vmax=bound)


def count_norm(counts: np.ndarray) -> tuple[colors.Normalize, Any]:
    """A norm for non-negative integer counts with one colour per count, and its colorbar ticks."""
    top = max(int(np.max(counts)), 1)
    if top <= 12:
        bounds = np.arange(-0.5, top + 1.0)
        return colors.BoundaryNorm(bounds, matplotlib.colormaps[current().count_cmap].N), np.arange(0, top + 1)
    return colors.Normalize(0, top), ticker.MaxNLocator(integer=True)


def colorbar(fig: Any, image: Any, ax: Any, label: str, ticks: Any = None) -> Any:
    """A colour bar beside ``ax``, labelled, with integer ticks when ``ticks`` says so."""
    bar = fig.colorbar(image, ax=ax, shrink=0.85, aspect=18, pad=0.03)
    bar.set_label(label, fontsize=current().label_pt)
    bar.ax.tick_params(labelsize=current().label_pt)
    if ticks is not None:
        if isinstance(ticks, ticker.Locator):
            bar.locator = ticks
        else:
            bar.set_ticks(ticks)
        bar.minorticks_off()
    return bar


def fmt(value: float) -> str:
    """A number as a cell shows it: integers without a decimal point, others to 2 significant digits."""
    if value == int(value) and abs(value) < 1e5:
        return str(int(value))
    return f"{value:.2g}"



# -- grids ------------------------------------------------------------------------------
def draw_grid(ax: Axes, values: np.ndarray, cmap: str | None = None, norm: colors.Normalize | None = None,
              annotate: bool | None = None, origin: tuple[int, int] = (0, 0),
              fontsize: float | None = None, labels: np.ndarray | None = None,
              mask: np.ndarray | None = None) -> Any:
    """Draw a 2-D array as a grid of cells; cell (i, j) is centred at (origin_col + j, origin_row + i).

    Returns the image artist.  Numbers (or the given ``labels``) are written in
    the cells when the grid is small (or when ``annotate`` says so), in black or
    white, whichever contrasts more with the cell's colour.  Cells where
    ``mask`` is True are left empty (white, no number).
    """
    theme = current()
    rows, cols = values.shape
    r0, c0 = origin
    shown = np.ma.masked_array(values, mask=mask) if mask is not None else values
    image = ax.imshow(shown, cmap=cmap or theme.signed_cmap, norm=norm, interpolation="nearest",
                      extent=(c0 - 0.5, c0 + cols - 0.5, r0 + rows - 0.5, r0 - 0.5), zorder=1)
    if annotate is None:
        annotate = values.size <= MAX_ANNOTATED_CELLS
    if annotate:
        write_numbers(ax, image, values, origin, fontsize=fontsize, labels=labels, mask=mask)
    grid_lines(ax, rows, cols, origin)
    return image


def write_numbers(ax: Axes, image: Any, values: np.ndarray, origin: tuple[int, int] = (0, 0),
                  fontsize: float | None = None, labels: np.ndarray | None = None,
                  mask: np.ndarray | None = None) -> list:
    """Write each cell's number (or label) in the ink that contrasts with the image's colour there."""
    r0, c0 = origin
    inks = ink(image.cmap(image.norm(values)))
    texts = []
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            if mask is not None and mask[i, j]:
                continue
            text = fmt(float(values[i, j])) if labels is None else str(labels[i, j])
            texts.append(ax.text(c0 + j, r0 + i, text, ha="center", va="center", zorder=4,
                                 fontsize=fontsize or current().number_pt, color=inks[i, j]))
    return texts


def grid_lines(ax: Axes, rows: int, cols: int, origin: tuple[int, int] = (0, 0), color: str | None = None) -> None:
    """Cell borders as two line collections (cheap to draw), and integer ticks."""
    theme = current()
    r0, c0 = origin
    xs = np.arange(c0 - 0.5, c0 + cols, 1.0)
    ys = np.arange(r0 - 0.5, r0 + rows, 1.0)
    line_color = color or theme.grid_color
    ax.vlines(xs, r0 - 0.5, r0 + rows - 0.5, colors=line_color, linewidth=theme.grid_width, zorder=2)
    ax.hlines(ys, c0 - 0.5, c0 + cols - 0.5, colors=line_color, linewidth=theme.grid_width, zorder=2)
    step = max(1, (max(rows, cols) + 5) // 6)  # at most ~6 labels: text is what drawing costs
    ax.set_xticks(np.arange(c0, c0 + cols, step))
    ax.set_yticks(np.arange(r0, r0 + rows, step))
    ax.tick_params(length=3)


def padding_frame(ax: Axes, input_hw: tuple[int, int], pads: tuple[int, int, int, int]) -> list[Rectangle]:
    """Hatched padding as four strips *around* the real input (never over it); returns the strips."""
    theme = current()
    top, bottom, left, right = pads
    h, w = input_hw
    strips = [(-top, -left, top, w + left + right), (h, -left, bottom, w + left + right),
              (0, -left, h, left), (0, w, h, right)]
    patches = [Rectangle((c - 0.5, r - 0.5), cols, rows) for r, c, rows, cols in strips if rows and cols]
    if patches:
        ax.add_collection(PatchCollection(patches, facecolor=theme.padding_face, edgecolor=theme.padding_hatch,
                                          hatch="//", linewidth=0.0, zorder=0.5))
    return patches


def outline(ax: Axes, row0: float, col0: float, rows: float, cols: float, color: str = "black",
            linewidth: float | None = None, label: str | None = None, linestyle: LineStyleType = "-") -> Rectangle:
    """A rectangle outline around cells [row0, row0+rows) x [col0, col0+cols)."""
    patch = Rectangle((col0 - 0.5, row0 - 0.5), cols, rows, fill=False, edgecolor=color,
                      linewidth=linewidth or current().outline_width, label=label, linestyle=linestyle, zorder=5)
    ax.add_patch(patch)
    return patch


def fill_cells(ax: Axes, cells: list[tuple[int, int]], face: str, edge: str = "none", zorder: float = 1.5) -> None:
    """Fill individual cells (row, col) with one colour, as one collection."""
    if cells:
        patches = [Rectangle((j - 0.5, i - 0.5), 1, 1) for i, j in cells]
        ax.add_collection(PatchCollection(patches, facecolor=face, edgecolor=edge, zorder=zorder,
                                          linewidth=0.0 if edge == "none" else current().grid_width))

