"""The ``convviz`` command.

``convviz gallery --out DIR`` draws the gallery; ``convviz bench`` times
convviz against TensorFlow and PyTorch (see :mod:`convviz.bench`);
``convviz version`` prints what this build is.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``convviz`` command; returns the exit status.

    Examples
    --------
    >>> from convviz.cli import main
    >>> main(["version"])  # doctest: +ELLIPSIS
    convviz: ...
    0
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="convviz", description="Compute and show the gradients of 2-D convolution.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("bench", help="time convviz against TensorFlow and PyTorch", add_help=False)
    sub.add_parser("gallery", help="draw the gallery of figures and animations into a folder", add_help=False)
    sub.add_parser("version", help="print the version, OpenMP and SIMD facts of this build")
    if not argv:
        parser.print_help()
        return 2
    args, rest = parser.parse_known_args(argv[:1])
    if args.command == "bench":
        from . import bench

        return bench.main(argv[1:])
    if args.command == "gallery":
        return _gallery(argv[1:])
    if args.command == "version":
        if argv[1:]:
            parser.error(f"'version' takes no arguments, got {' '.join(argv[1:])}")
        from . import show_versions

        show_versions()
        return 0
    parser.error(f"unknown command {argv[0]!r}")
    return 2


def _gallery(argv: list[str]) -> int:
    from .viz import gallery

    parser = argparse.ArgumentParser(prog="convviz gallery", description="Draw the convviz gallery into a folder.")
    parser.add_argument("--out", required=True, help="folder to write into (created if missing)")
    parser.add_argument("--only", default="", help="comma-separated file names to draw (default: all)")
    parser.add_argument("--quiet", action="store_true", help="do not print progress")
    args = parser.parse_args(argv)
    only = [name.strip() for name in args.only.split(",") if name.strip()] or None
    names = {entry.name for entry in gallery.ENTRIES}
    if only and set(only) - names:
        parser.error(f"unknown entries {sorted(set(only) - names)}; choose from {sorted(names)}")
    paths = gallery.build(args.out, only=only, progress=not args.quiet)
    print(f"{len(paths) - 1} gallery files and README.md written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
