"""The SIMD variants across ops: every instruction set gives the same bits for any
thread count (the input and the depthwise filter gradient), and a missing one is
refused.

Each op's kernel tests, per instruction set on shapes that reach every code path,
are in its own file: tests/test_conv2d.py (the forward pass's channel blocks),
tests/test_conv2d_backprop_input.py (input-gradient tiles of every width, dy rows
read in place or staged), tests/test_conv2d_backprop_filter.py (the dense filter
gradient's tiles) and tests/test_depthwise_conv2d_native_backprop_filter.py (the
register-blocked depthwise filter-gradient rows).
"""

from __future__ import annotations

import numpy as np
import pytest

import convviz
from convviz import _openmp_info
from convviz._backends import cpu

ISAS = _openmp_info.available_isas()


@pytest.mark.parametrize("isa", ISAS)
def test_every_isa_is_deterministic_across_threads(isa, rng, monkeypatch):
    monkeypatch.setattr(cpu, "MIN_PARALLEL_WORK", 0.0)  # parallel even for small work
    x = rng.standard_normal((3, 40, 37, 32)).astype(np.float32)
    dy = rng.standard_normal((3, 40, 37, 32)).astype(np.float32)
    filt = rng.standard_normal((3, 3, 32, 32)).astype(np.float32)
    with cpu.use_isa(isa):
        dws = [convviz.depthwise_conv2d_native_backprop_filter(x, [3, 3, 32, 1], dy, [1] * 4, "SAME", n_threads=n)
               for n in (1, 2, 3, 5)]
        dxs = [convviz.conv2d_backprop_input(list(x.shape), filt, dy, [1] * 4, "SAME", n_threads=n)
               for n in (1, 2, 3, 5)]
    for results in (dws, dxs):
        for other in results[1:]:
            np.testing.assert_array_equal(results[0].view(np.uint32), other.view(np.uint32))


def test_isa_selection():
    assert cpu.current_isa() in ISAS
    assert ISAS[-1] == "generic"
    with pytest.raises(ValueError, match="not available"):
        with cpu.use_isa("sse9"):
            pass
