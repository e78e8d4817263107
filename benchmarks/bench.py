"""Run the convviz speed benchmark: ``python benchmarks/bench.py [--help]``.

The same as ``convviz bench``; the implementation lives in ``convviz/bench/``
so that an installed convviz can run it too.  Results for this repository's
reference machine are in ``BENCHMARKS.md``.
"""

import sys

from convviz.bench import main

if __name__ == "__main__":
    sys.exit(main())
