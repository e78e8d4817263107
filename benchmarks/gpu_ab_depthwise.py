"""A/B on a GPU: the depthwise row kernels (new) against the one-thread-per-element path (old).

Run from the repository root on a machine with CuPy, after building the kernels:
``python benchmarks/gpu_ab_depthwise.py``. Alternates old and new in ABBA rounds of 100 synchronised
calls, prints medians and whether both gave the same bits (benchmarks/HISTORY.md, "GPU, second pass").
"""
import time
import numpy as np
import cupy as cp
import convviz
from convviz._backends import cuda
from convviz.ops import depthwise_forward as df, depthwise_input_grad as di
from convviz.ops._op import clear_gpu_plans


def old_fwd(call):
    kh, kw, c, m = call.filter.shape
    return cuda.DensePlan("depthwise_conv2d_native", "conv2d_forward", call.geometry, call.dtype,
                          call.geometry.output_shape, call.input, call.filter, images=(True, False, True),
                          second_shape=(kh, kw, 1, c * m))


def old_bpi(call):
    kh, kw, c, m = call.filter.shape
    return cuda.Reordered(cuda.DensePlan("depthwise_conv2d_native_backprop_input", "input_grad", call.geometry,
                                         call.dtype, call.geometry.input_shape, call.out_backprop, call.filter,
                                         images=(True, False, True), second_shape=(kh, kw, 1, c * m)), (1, 0))


rng = np.random.default_rng(0)
print("case | old ms | new ms | new/old | same bits")
for name, n, h, w, c, m, k, s in [("dwc_mobilenet", 8, 112, 112, 32, 1, 3, 1), ("dwc_stride2", 8, 112, 112, 64, 1, 3, 2),
                                  ("dwc_k5", 8, 28, 28, 256, 1, 5, 1), ("dwi_mobilenet", 8, 112, 112, 32, 1, 3, 1),
                                  ("dwi_stride2", 8, 112, 112, 64, 1, 3, 2), ("dwi_k5", 8, 28, 28, 256, 1, 5, 1)]:
    x = cp.asarray(rng.standard_normal((n, h, w, c)).astype(np.float32))
    f = cp.asarray(rng.standard_normal((k, k, c, m)).astype(np.float32))
    st = [1, s, s, 1]
    if name.startswith("dwc"):
        op, old, new = df.OP, old_fwd, df.plan_on_gpu
        call = lambda: convviz.depthwise_conv2d_native(x, f, st, "SAME")
    else:
        dy = cp.asarray(rng.standard_normal(convviz.depthwise_conv2d_native(x, f, st, "SAME").shape).astype(np.float32))
        op, old, new = di.OP, old_bpi, di.plan_on_gpu
        call = lambda: convviz.depthwise_conv2d_native_backprop_input([n, h, w, c], f, dy, st, "SAME")
    times, outs = {"old": [], "new": []}, {}
    for rnd in range(4):
        for label in (("old", "new") if rnd % 2 == 0 else ("new", "old")):
            op.plan_gpu = old if label == "old" else new
            clear_gpu_plans()
            outs[label] = call()
            for _ in range(5):
                call()
            cp.cuda.runtime.deviceSynchronize()
            t0 = time.perf_counter()
            for _ in range(100):
                call()
                cp.cuda.runtime.deviceSynchronize()
            times[label].append((time.perf_counter() - t0) / 100)
    op.plan_gpu = new
    clear_gpu_plans()
    o, nw = np.median(times["old"]) * 1e3, np.median(times["new"]) * 1e3
    same = bool(cp.array_equal(outs["old"].view(cp.uint32), outs["new"].view(cp.uint32)))
    print(f"{name} | {o:.3f} | {nw:.3f} | {nw / o:.2f} | {same}", flush=True)
