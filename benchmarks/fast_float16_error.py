"""How far precision="fast" float16 input gradients are from the exact ones.

Prints, for four of the benchmark's shapes (batch cut to 1-2) at two gradient
scales, the error of the accurate and the fast path against the float64
reference: relative to the sum of the terms' magnitudes (sum |dy * w|), and in
float16 units in the last place of the exact result where that is at least 5%
of the sum.  Where the CPU has no AVX512_FP16, "fast" is the accurate path and
both columns agree.  Figures of a run are in BENCHMARKS.md.

    python benchmarks/fast_float16_error.py
"""

from __future__ import annotations

import numpy as np

import convviz
from convviz import reference

ROWS = [("2x28x28x64 -> 64, 3x3", 2, 28, 28, 64, 64, 3, 1, 1),
        ("stride 2, 64 -> 128", 2, 28, 28, 64, 128, 3, 2, 1),
        ("dilation 2, 32 -> 32", 2, 32, 32, 32, 32, 3, 1, 2),
        ("1x14x14x256 -> 256", 1, 14, 14, 256, 256, 3, 1, 1)]


def errors(args: list, precision: str) -> str:
    exact = reference.conv2d_backprop_input(*args)
    terms = reference.conv2d_backprop_input(args[0], np.abs(args[1].astype(np.float64)),
                                            np.abs(args[2].astype(np.float64)), *args[3:])
    err = np.abs(convviz.conv2d_backprop_input(*args, precision=precision).astype(np.float64) - exact)
    ulp = np.spacing(np.abs(exact).astype(np.float16)).astype(np.float64)
    big = np.abs(exact) > 0.05 * terms
    in_ulps = err[big] / ulp[big]
    return (f"{precision}: err/sum max {np.max(err / terms):.1e} rms {np.sqrt(np.mean((err / terms) ** 2)):.1e}, "
            f"ulps rms {np.sqrt(np.mean(in_ulps ** 2)):.2f} max {np.max(in_ulps):.1f}")


def main() -> None:
    print("fast float16 here:", convviz.show_versions(as_dict=True)["fast_f16"])
    rng = np.random.default_rng(1)
    for scale in (1.0, 1e-4):
        for name, n, h, w, cin, cout, k, s, d in ROWS:
            filt = rng.standard_normal((k, k, cin, cout)).astype(np.float16)
            dy = (scale * rng.standard_normal((n, -(-h // s), -(-w // s), cout))).astype(np.float16)
            args = [[n, h, w, cin], filt, dy, [1, s, s, 1], "SAME", (), "NHWC", [1, d, d, 1]]
            print(f"{name}, dy x{scale:g}: {errors(args, 'accurate')} | {errors(args, 'fast')}")


if __name__ == "__main__":
    main()
