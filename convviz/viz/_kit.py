"""The private drawing kit of the static views and the animations: figure sizes at the
theme's cell size, titles and legends that never leave the canvas, the padded input
canvas and its legend patch."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import matplotlib.pyplot as plt
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure, SubFigure
from matplotlib.patches import Patch

from ..geometry import ConvGeometry
from . import _style as style
from ._render import settle


def size(widths: list[float], rows: float, colorbars: int = 0, legend: bool = False,
          min_width: float = 0.0) -> tuple[float, float]:
    """Figure size (inches) for panels ``widths`` cells wide and ``rows`` cells high, at the theme's cell size."""
    theme = style.current()
    cell = theme.cell_inch
    tick_room = 4.2 * theme.label_pt / 72  # tick labels and the axis label beside each panel
    width = sum(w * cell + tick_room for w in widths) + colorbars * 8.5 * theme.label_pt / 72 + 0.3
    height = rows * cell + 4.6 * theme.label_pt / 72 + 2.6 * theme.suptitle_pt / 72
    if legend:
        height += 2.8 * theme.label_pt / 72
    return max(width, min_width), height


def figure(widths: list[float], rows: float, colorbars: int = 0, legend: bool = False,
            min_width: float = 0.0) -> tuple[Figure, list[Axes]]:
    """A row of panels whose widths follow their grids' widths."""
    fig, axes = plt.subplots(1, len(widths), figsize=size(widths, rows, colorbars, legend, min_width),
                             layout="constrained", squeeze=False, width_ratios=widths)
    return fig, list(axes[0])


def titles(fig: Figure, title: str, subtitle: str = "") -> None:
    """One short title, the parameters on a second line (wrapped to the figure's width)."""
    theme = style.current()
    text = title
    if subtitle:
        text += "\n" + wrap(subtitle, fig.get_figwidth(), theme.suptitle_pt)
    fig.suptitle(text, fontsize=theme.suptitle_pt)
    # Constrained layout converges over several draws: make the first draw the user
    # sees (inline backends draw once) the settled one, which later saves keep.
    settle(fig)


def wrap(text: str, width_inch: float, points: float) -> str:
    """Wrap each line of ``text`` to about the number of characters that fit ``width_inch`` at ``points``."""
    chars = max(20, int(width_inch * 72 / (0.6 * points)))
    return "\n".join("\n".join(textwrap.wrap(line, chars)) for line in text.splitlines())


def width_inch(fig: Figure | SubFigure) -> float:
    """The width of a figure, or of a subfigure (which has no ``get_figwidth``), in inches."""
    return fig.get_figwidth() if isinstance(fig, Figure) else fig.bbox.width / fig.dpi


def legend(fig: Figure | SubFigure, ax: Axes, handles: Sequence[Artist], own_figure: bool,
            title: str | None = None) -> None:
    """A legend below the plot (never over it): the figure's when it is ours, else the Axes'."""
    if not handles and not title:
        return
    theme = style.current()
    ncols = max(1, min(len(handles), 3))
    if title:  # wrapped to the figure's width: a legend never leaves the canvas
        title = wrap(title, width_inch(fig), theme.label_pt)
    if own_figure:
        fig.legend(handles=handles, loc="outside lower center", ncols=ncols, frameon=False, title=title,
                   fontsize=theme.label_pt, title_fontsize=theme.label_pt)
    else:
        ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncols=ncols, frameon=False,
                  title=title, fontsize=theme.label_pt, title_fontsize=theme.label_pt)


def padded_canvas(ax: Axes, g: ConvGeometry, label_pads: bool = True) -> None:
    """Hatched padding around (never over) the real input, with each side's amount written on it."""
    theme = style.current()
    top, bottom, left, right = g.pads
    h, w = g.input_hw
    style.padding_frame(ax, g.input_hw, g.pads)
    style.outline(ax, 0, 0, h, w, color="black", linewidth=theme.grid_width * 2.5)
    ax.set_xlim(-left - 0.5, w + right - 0.5)
    ax.set_ylim(h + bottom - 0.5, -top - 0.5)
    if not label_pads or not any(g.pads):
        return
    cell_pt = theme.cell_inch * 72
    across = (w + left + right) * cell_pt, h * cell_pt  # room for a horizontal / a rotated word
    for amount, where, position, rotation in ((top, "top", ((w - 1) / 2, -top / 2 - 0.5), 0),
                                              (bottom, "bottom", ((w - 1) / 2, h - 0.5 + bottom / 2), 0),
                                              (left, "left", (-left / 2 - 0.5, (h - 1) / 2), 90),
                                              (right, "right", (w - 0.5 + right / 2, (h - 1) / 2), 90)):
        word = f"pad {where} {amount}"
        if amount and across[bool(rotation)] > 0.62 * theme.label_pt * len(word):
            ax.text(*position, word, rotation=rotation, fontsize=theme.label_pt, color=theme.padding_ink,
                    ha="center", va="center", zorder=4)


def labels(ax: Axes, title: str, what: str) -> None:
    ax.set_title(title)
    ax.set_xlabel(f"{what} column".strip())
    ax.set_ylabel(f"{what} row".strip())


def padded_width(g: ConvGeometry) -> tuple[int, int]:
    top, bottom, left, right = g.pads
    return g.input_hw[0] + top + bottom, g.input_hw[1] + left + right


def padding_patch(label: str = "zero padding") -> Patch:
    theme = style.current()
    return Patch(facecolor=theme.padding_face, hatch="//", edgecolor=theme.padding_hatch, label=label)
