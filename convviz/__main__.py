"""``python -m convviz``: the same as the ``convviz`` command (see :mod:`convviz.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
