"""The ``convviz`` command.

``convviz bench`` times convviz against TensorFlow and PyTorch (see
:mod:`convviz.bench`); ``convviz version`` prints what this build is.
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
    sub.add_parser("version", help="print the version, OpenMP and SIMD facts of this build")
    if not argv:
        parser.print_help()
        return 2
    args, rest = parser.parse_known_args(argv[:1])
    if args.command == "bench":
        from . import bench

        return bench.main(argv[1:])
    if args.command == "version":
        if argv[1:]:
            parser.error(f"'version' takes no arguments, got {' '.join(argv[1:])}")
        from . import show_versions

        show_versions()
        return 0
    parser.error(f"unknown command {argv[0]!r}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
