"""The explorer as an anywidget: JupyterLab 4, Notebook 7, VS Code notebooks.

The browser draws and links the panels from its own geometry at once; this side
answers every setting with the convviz kernels' numbers (trait ``kernel_result``),
which the view swaps in when they are for the setting on screen.
"""

from __future__ import annotations

from typing import Any

import anywidget
import numpy as np
import traitlets as t

from ._arguments import resolve
from ._assets import inline_module, stylesheet
from ._setting import PARAMS, VIEW_ONLY, Computed, check_param, compute, setting_key, to_wire

__all__ = ["Explorer", "explore"]


def _trait(name: str) -> t.TraitType:
    default = PARAMS[name][0]
    trait = t.Unicode(default) if isinstance(default, str) else t.Int(default)
    return trait.tag(sync=True)


class Explorer(anywidget.AnyWidget):
    """The direct-manipulation explorer (see :func:`convviz.explore`).

    Every parameter is a trait with the same name as the control that sets it
    (``input_h``, ``stride_w``, ``padding``, ``op`` ...); setting one from Python
    redraws the view, and moving a control updates the trait.

    Attributes
    ----------
    kernel_result : dict
        The kernels' output for the current setting: ``key``, ``panel``, ``rows``,
        ``cols``, ``channels``, ``data`` (row-major, channel by channel), ``source``.
    arrays : dict
        The user's arrays on screen (panel name -> tensor with a caption).
    error : str
        Why the kernels could not compute the current setting, or empty.

    Examples
    --------
    >>> from convviz.explorer import Explorer
    >>> ex = Explorer(input_h=5, input_w=5, stride_h=1, stride_w=1, padding="VALID")
    >>> ex.kernel_result["panel"], ex.kernel_result["rows"], ex.kernel_result["cols"]
    ('dx', 5, 5)
    >>> ex.op = "forward"; ex.kernel_result["panel"], ex.kernel_result["rows"]
    ('y', 3)
    """

    _esm = inline_module()
    _css = stylesheet()

    input_h = _trait("input_h")
    input_w = _trait("input_w")
    kernel_h = _trait("kernel_h")
    kernel_w = _trait("kernel_w")
    stride_h = _trait("stride_h")
    stride_w = _trait("stride_w")
    dilation_h = _trait("dilation_h")
    dilation_w = _trait("dilation_w")
    padding = _trait("padding")
    pad_top = _trait("pad_top")
    pad_bottom = _trait("pad_bottom")
    pad_left = _trait("pad_left")
    pad_right = _trait("pad_right")
    output_padding_h = _trait("output_padding_h")
    output_padding_w = _trait("output_padding_w")
    op = _trait("op")
    in_channels = _trait("in_channels")
    out_channels = _trait("out_channels")
    groups = _trait("groups")
    multiplier = _trait("multiplier")
    batch = _trait("batch")
    seed = _trait("seed")
    values = _trait("values")
    symbols = _trait("symbols")
    practice = _trait("practice")
    theme = _trait("theme")

    arrays = t.Dict().tag(sync=True)
    locked = t.List(t.Unicode()).tag(sync=True)
    kernel_result = t.Dict().tag(sync=True)
    error = t.Unicode("").tag(sync=True)

    def __init__(self, *, given: dict[str, np.ndarray] | None = None, captions: dict[str, str] | None = None,
                 **kwargs: Any) -> None:
        self._given = dict(given or {})
        self._computing = True  # one computation after all traits are set, not one per trait
        super().__init__(**kwargs)
        self.arrays = {name: to_wire(plane, (captions or {}).get(name, "")) for name, plane in self._given.items()}
        self._computing = False
        self._recompute()

    @t.validate(*PARAMS)
    def _check(self, proposal: dict) -> Any:
        try:
            return check_param(proposal["trait"].name, proposal["value"])
        except (TypeError, ValueError) as err:
            raise t.TraitError(str(err)) from None

    @property
    def params(self) -> dict[str, Any]:
        """The current setting, every parameter by name."""
        return {name: getattr(self, name) for name in PARAMS}

    def computed(self) -> Computed | None:
        """The current setting's numbers from the kernels (``None`` when no window fits)."""
        return compute(self.params, self._given)

    @t.observe(*(name for name in PARAMS if name not in VIEW_ONLY))
    def _on_setting(self, change: dict) -> None:
        if not self._computing:
            self._recompute()

    def _recompute(self) -> None:
        params = self.params
        try:
            result = compute(params, self._given)
        except (TypeError, ValueError) as err:  # the view shows it; a notebook never gets a traceback
            self.error = str(err)
            self.kernel_result = {"key": setting_key(params)}
            return
        self.error = ""
        if result is None:
            self.kernel_result = {"key": setting_key(params)}
            return
        reply = to_wire(result.output)
        reply.update(key=setting_key(params), panel=result.output_panel, source=result.source)
        self.kernel_result = reply


def explore(x: Any = None, W: Any = None, dy: Any = None, **settings: Any) -> Explorer:
    """Open the explorer: point at a number and see the cells and the worked sum that make it.

    Every op of convviz, each a row of numbered panels (its two given tensors, then
    its result), named by its public function: ``"conv2d"`` (x and W give y),
    ``"conv2d_backprop_input"`` (W and dL/dy give dL/dx), ``"conv2d_backprop_filter"``
    (x and dL/dy give dL/dW), their depthwise forms, and ``"conv_transpose2d"``
    (PyTorch's arguments: the input gradient of the convolution going the other way).
    Channels, groups and a batch of 2 are drawn plane by plane.  Hover or focus a cell to light up
    the cells that make it or that it reaches, with the worked sum written out; click
    or Enter pins it, arrow keys move, Escape clears; play walks the output cell by
    cell.  Every control changes one parameter (rows and columns separately).  In
    Jupyter the output numbers come from the convviz kernels.

    Parameters
    ----------
    x, W, dy : array_like, optional
        Your own numbers instead of the example ones: 2-D ``(rows, cols)``, or whole
        4-D tensors in the op's layout (``x`` and ``dy`` in ``data_format``; ``W`` as
        HWIO, ``[kh, kw, c, m]`` for the depthwise ops; for ``conv_transpose2d``
        PyTorch's NCHW input ``x`` and ``(C_in, C_out / groups, kH, kW)`` weight ``W``),
        every plane drawn while they have at most 4 channels and 2 images.  They fix
        the sizes, channels, groups, multiplier and batch they imply (those controls
        are locked); a shape that does not fit the rest is an error naming it.  A
        larger 4-D array, or any with ``channel`` given, shows one plane (batch 0).
    op : str, optional
        The public name of an op (``convviz.explorer.OPS``).  Default: what the arrays
        given make, else ``"conv2d_backprop_input"``.  The first explorer's names
        ``"input_grad"``, ``"forward"`` and ``"depthwise_filter_grad"`` still work;
        ``"filter_grad"`` (the depthwise filter gradient) with a DeprecationWarning.
    input, kernel, stride, dilation : int, (int, int) or "HxW", optional
        Sizes and steps, rows and columns (defaults 6, 3, 2, 1).
    padding : {"SAME", "VALID", "EXPLICIT"}, int or (int, int), optional
        TensorFlow padding (default ``"SAME"``; ``"EXPLICIT"`` when ``pads`` is given),
        or PyTorch's (``conv_transpose2d``): rows and columns cut from each side.
    pads : (int, int, int, int), optional
        Explicit pads (top, bottom, left, right).
    output_padding : int, (int, int) or "HxW", optional
        ``conv_transpose2d``: rows (columns) added after the scatter, below
        ``max(stride, dilation)``.
    in_channels, out_channels, groups : int, optional
        Channels (1 to 4 each) and groups dividing both (dense ops and ``conv_transpose2d``).
    multiplier : int, optional
        Depthwise channel multiplier (the depthwise ops), 1 to 4.
    batch : int, optional
        Images, 1 or 2 (a filter gradient sums over them).
    seed : int, optional
        Seed of the example numbers.
    values : {"integers", "decimals"}, optional
        Small integers (exact sums) or one-decimal numbers.
    symbols : {"off", "on"}, optional
        ``"on"`` labels the cells with their names (``x₁₂``; the full index on
        hover) and writes the op's sum as a formula beside the numbers.
    practice : {"off", "on"}, optional
        ``"on"`` hides the result's numbers: pick a cell, type its value, and the
        explorer says right or wrong (on a miss, with the worked sum), keeping a score.
    theme : {"auto", "light", "dark"}, optional
        ``"auto"`` follows JupyterLab's, VS Code's or the system's theme.
    data_format : {"NHWC", "NCHW"}
        Layout of 4-D ``x`` and ``dy``.
    channel : int or (int, int), optional
        One plane of 4-D arrays instead of the whole: ``(in_channel, out_channel)``;
        x uses the first, dy the second, W both (default: whole tensors where they
        fit, else channel 0).

    Returns
    -------
    Explorer
        An anywidget; the last expression of a cell displays it.

    Raises
    ------
    TypeError, ValueError
        An argument that is not what it must be, named with the expected and actual value.

    Examples
    --------
    >>> import numpy as np, convviz
    >>> ex = convviz.explore(input=7, kernel=3, stride=3, padding="VALID")
    >>> ex.kernel_result["rows"], ex.kernel_result["panel"]
    (7, 'dx')
    >>> mine = convviz.explore(W=np.arange(9.0).reshape(3, 3), dy=np.ones((2, 2)), input=5, padding="VALID")
    >>> mine.locked
    ['kernel_h', 'kernel_w', 'multiplier']
    >>> convviz.explore(dy=np.ones((2, 2)), input=6, stride=2)
    Traceback (most recent call last):
    ...
    ValueError: dy must have shape (3, 3) (the output of input 6x6, kernel 3x3, stride 2x2, dilation 1x1, SAME), got (2, 2)
    """
    r = resolve(x, W, dy, **settings)
    widget = Explorer(given=r.given, captions=r.captions, **r.params)
    widget.locked = r.locked
    return widget
