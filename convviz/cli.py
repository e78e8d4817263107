"""The ``convviz`` command.

``convviz demo --out DIR`` shows the main job: an animation of the input
gradient, a coverage figure and an interactive HTML page, written to DIR.
``convviz explain`` prints the geometry of a convolution (output size, pad
split, rows with no gradient, an ASCII coverage map).  ``convviz gallery --out
DIR`` draws the gallery; ``convviz bench`` times convviz against TensorFlow and
PyTorch (see :mod:`convviz.bench`); ``convviz version`` prints what this build is
(``convviz --version`` just its version number).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


#: The subcommands: name -> (the line ``convviz -h`` gives it, its own ``-h`` description).
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("write an animation, a coverage figure and an interactive page",
             "Show convviz's main job: the gradient of a strided convolution with respect to its input. "
             "Writes a coverage figure and a scatter figure (PNG), the input gradient built cell by cell "
             "(a GIF, and the same frames as an interactive HTML page), and the offline explorer page, "
             "printing each file as it is written."),
    "explain": ("print the geometry of a convolution",
                "Print the geometry of a 2-D convolution: output size, pad split, rows and columns "
                "that get no gradient, and an ASCII map of how many taps reach each input cell."),
    "gallery": ("draw the gallery of figures and animations into a folder", "Draw the convviz gallery into a folder."),
    "page": ("write the interactive explorer as one offline HTML file",
             "Write the convviz explorer as a single HTML file that works offline (open it from disk or "
             "host it anywhere). The settings below are its starting point; the page's URL query "
             "(?input=7x9&stride=2&padding=VALID&op=depthwise_filter_grad ...) overrides them."),
    "bench": ("time convviz against TensorFlow and PyTorch", ""),  # (convviz.bench parses its own arguments)
    "version": ("print the version, OpenMP and SIMD facts of this build",
                "Print the convviz version with the facts of this build: Python, platform, NumPy, "
                "ml_dtypes, OpenMP (compiled in or not), the SIMD kernel variant in use, threads, and "
                "CuPy with its GPUs when present.  (`convviz --version` prints the version alone.)"),
}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``convviz`` command; returns the exit status.

    Examples
    --------
    >>> from convviz.cli import main
    >>> main(["version"])  # doctest: +ELLIPSIS
    convviz: ...
    0
    >>> main(["--version"])  # doctest: +ELLIPSIS
    convviz ...
    0
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="convviz", description="Compute and show the gradients of 2-D convolution.")
    # Not argparse's action="version": that exits through SystemExit, and main() returns its status.
    parser.add_argument("-V", "--version", action="store_true", help="print 'convviz VERSION' and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (line, _) in COMMANDS.items():
        sub.add_parser(name, help=line, add_help=False)
    if not argv:
        parser.print_help()
        return 2
    args, rest = parser.parse_known_args(argv[:1])
    if args.version:
        from ._version import __version__

        print(f"convviz {__version__}")
        return 0
    if args.command == "bench":
        from . import bench

        return bench.main(argv[1:])
    run = {"demo": _demo, "explain": _explain, "gallery": _gallery, "page": _page, "version": _version}
    if args.command in run:
        return run[args.command](argv[1:])
    parser.error(f"unknown command {argv[0]!r}")
    return 2


def _parser(command: str, out: str | None = None) -> argparse.ArgumentParser:
    """``convviz COMMAND``'s own parser, with a required ``--out`` (``out``: its help) where it writes."""
    parser = argparse.ArgumentParser(prog=f"convviz {command}", description=COMMANDS[command][1])
    if out is not None:
        parser.add_argument("--out", required=True, help=out)
    return parser


def _version(argv: list[str]) -> int:
    """``convviz version``: what this build is (``show_versions``)."""
    _parser("version").parse_args(argv)
    from . import show_versions

    show_versions()
    return 0


def _pair(text: str) -> tuple[int, int]:
    """argparse type: ``8`` or ``8,10`` (rows, columns)."""
    parts = text.replace("x", ",").split(",")
    try:
        values = [int(p) for p in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an int or two ints like 8,10, got {text!r}") from None
    if len(values) == 1:
        values *= 2
    if len(values) != 2:
        raise argparse.ArgumentTypeError(f"expected one or two values, got {text!r}")
    return values[0], values[1]


def _pads(text: str) -> tuple[int, int, int, int]:
    try:
        values = tuple(int(p) for p in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 4 ints top,bottom,left,right, got {text!r}") from None
    if len(values) != 4:
        raise argparse.ArgumentTypeError(f"expected 4 ints top,bottom,left,right, got {text!r}")
    return values


def _geometry_arguments(parser: argparse.ArgumentParser, *, input_default: str | None, kernel_default: str | None,
                        stride_default: str | None, padding_default: str | None,
                        dilation_default: str | None = "1") -> None:
    """The options --input, --kernel, --stride, --dilation, --padding, --pads; a default of
    None leaves the option None when not given (``convviz page``: the explorer's own)."""
    def option(flag: str, default: str | None, metavar: str, what: str) -> None:
        shown = "the explorer's" if default is None else default
        parser.add_argument(flag, type=_pair, default=None if default is None else _pair(default), metavar=metavar,
                            help=f"{what} (default {shown})")

    option("--input", input_default, "H[,W]", "input size")
    option("--kernel", kernel_default, "KH[,KW]", "kernel size")
    option("--stride", stride_default, "S[,S]", "stride")
    option("--dilation", dilation_default, "D[,D]", "dilation")
    parser.add_argument("--padding", default=padding_default, type=str.upper, choices=["SAME", "VALID", "EXPLICIT"],
                        help=f"padding mode (default {padding_default or 'SAME'})")
    parser.add_argument("--pads", type=_pads, default=None, metavar="T,B,L,R",
                        help="explicit padding (top,bottom,left,right); implies --padding EXPLICIT")


def _setup_from(parser: argparse.ArgumentParser, args: argparse.Namespace):
    from .viz import Setup

    padding = "EXPLICIT" if args.pads is not None else args.padding
    if padding == "EXPLICIT" and args.pads is None:
        parser.error("--padding EXPLICIT needs --pads T,B,L,R")
    try:
        return Setup(input_hw=args.input, kernel_hw=args.kernel, strides=args.stride, dilations=args.dilation,
                     padding=padding, pads=args.pads or (0, 0, 0, 0))
    except (ValueError, TypeError) as err:
        parser.error(str(err))


def ascii_coverage(geometry) -> str:
    """The coverage map as text: counts (``+`` for 10 or more), rows and columns with no gradient marked.

    Examples
    --------
    >>> from convviz import ConvGeometry
    >>> from convviz.cli import ascii_coverage
    >>> g = ConvGeometry.build(batch=1, input_hw=(5, 5), in_channels=1, out_channels=1, kernel_hw=(3, 3),
    ...                        strides=(3, 3), dilations=(1, 1), padding="VALID")
    >>> print(ascii_coverage(g))
    1 1 1 . .
    1 1 1 . .
    1 1 1 . .
    . . . . .  <- no gradient
    . . . . .  <- no gradient
    ^ ^ = columns with no gradient: [3, 4]
    """
    counts = geometry.coverage()
    zero_rows = set(int(r) for r in geometry.zero_gradient_rows())
    zero_cols = [int(c) for c in geometry.zero_gradient_cols()]
    lines = []
    for i, row in enumerate(counts):
        cells = " ".join("." if v == 0 else ("+" if v >= 10 else str(int(v))) for v in row)
        lines.append(cells + ("  <- no gradient" if i in zero_rows else ""))
    if zero_cols:
        lines.append(f"^ ^ = columns with no gradient: {zero_cols}")
    return "\n".join(lines)


def _explain(argv: list[str]) -> int:
    from .viz.views import card_text

    parser = _parser("explain")
    _geometry_arguments(parser, input_default="8", kernel_default="3", stride_default="1", padding_default="VALID")
    args = parser.parse_args(argv)
    setup = _setup_from(parser, args)
    g = setup.geometry
    print(card_text(setup))
    print(f"\noutput size: {g.output_hw[0]} x {g.output_hw[1]}")
    top, bottom, left, right = g.pads
    print(f"padding: top {top}, bottom {bottom}, left {left}, right {right}")
    print("\ncoverage (taps reaching each input cell; '.' = no gradient):")
    print(ascii_coverage(g))
    return 0


def _demo(argv: list[str]) -> int:
    import matplotlib.pyplot as plt  # no matplotlib.use(): never switch a caller's backend

    from .viz import animate_input_gradient, coverage, save, scatter

    parser = _parser("demo", out="folder to write into (created if missing)")
    parser.add_argument("--quiet", action="store_true", help="print nothing but errors")
    _geometry_arguments(parser, input_default="7", kernel_default="3", stride_default="2", padding_default="SAME")
    args = parser.parse_args(argv)
    setup = _setup_from(parser, args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    say = (lambda *_, **__: None) if args.quiet else print

    def wrote(paths: list[Path], what: str) -> None:
        for path in paths:
            say(f"  wrote {path} ({max(1, path.stat().st_size // 1024)} KiB): {what}", flush=True)

    say(f"convviz demo - {setup.describe()}", flush=True)
    fig = coverage(setup)
    wrote([save(fig, out / "coverage.png")], "how many taps reach each input cell; rows with no gradient marked")
    plt.close(fig)
    g = setup.geometry
    fig = scatter(setup, (g.output_hw[0] // 2, g.output_hw[1] // 2))
    wrote([save(fig, out / "scatter.png")], "one output-gradient cell scattered through every tap")
    plt.close(fig)
    # One render, two files: the GIF and the interactive page share their frames.
    paths = save(animate_input_gradient(setup), out / "input_gradient.gif", out / "input_gradient.html",
                 progress=False if args.quiet else None)
    wrote(paths[:1], "the input gradient built cell by cell")
    wrote(paths[1:], "the same animation, with play and step buttons (open in a browser)")
    from .explorer import write_page

    try:
        page = write_page(out / "explorer.html", input=args.input, kernel=args.kernel, stride=args.stride,
                          dilation=args.dilation, padding=setup.padding,
                          pads=setup.pads if setup.padding == "EXPLICIT" else None)
        wrote([page], "the explorer: point at any number to see the sum that makes it (offline)")
    except ValueError as err:  # the explorer's sizes are capped for legibility
        say(f"  (no explorer page: {err})")
    return 0


def _page(argv: list[str]) -> int:
    """``convviz page --out FILE [settings]``: the explorer as one offline HTML file."""
    from .explorer import write_page
    from .explorer._setting import OP_ALIASES, PARAMS

    parser = _parser("page", out="HTML file to write (folders created)")
    _geometry_arguments(parser, input_default=None, kernel_default=None, stride_default=None,
                        padding_default=None, dilation_default=None)
    # An old op name (filter_grad) still works: mapped to its name now before the choice is checked.
    parser.add_argument("--op", type=lambda text: OP_ALIASES.get(text, text), choices=PARAMS["op"][1],
                        default=None)
    parser.add_argument("--values", choices=PARAMS["values"][1], default=None)
    parser.add_argument("--theme", choices=PARAMS["theme"][1], default=None)
    for name in ("in_channels", "out_channels", "groups", "multiplier", "batch", "seed"):
        parser.add_argument(f"--{name.replace('_', '-')}", dest=name, type=int, default=None)
    parser.add_argument("--output-padding", dest="output_padding", default=None,
                        help="conv_transpose2d's output_padding, N or HxW")
    args = vars(parser.parse_args(argv))
    out = args.pop("out")
    try:
        path = write_page(out, **{k: v for k, v in args.items() if v is not None})
    except (TypeError, ValueError) as err:
        parser.error(str(err))
    print(f"wrote {path} ({path.stat().st_size // 1024} KiB): open it in a browser, no network needed")
    return 0


def _gallery(argv: list[str]) -> int:
    from .viz import gallery

    parser = _parser("gallery", out="folder to write into (created if missing)")
    parser.add_argument("--only", default="", help="comma-separated entry or file names to draw (default: all)")
    parser.add_argument("--quiet", action="store_true", help="do not print progress")
    args = parser.parse_args(argv)
    only = [name.strip() for name in args.only.split(",") if name.strip()] or None
    try:
        gallery.select(only)
    except ValueError as err:
        parser.error(str(err))
    paths = gallery.build(args.out, only=only, progress=not args.quiet)
    print(f"{len(paths) - 1} gallery files and README.md written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
