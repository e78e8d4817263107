"""Time per sample against batch on the GPU: convviz (CuPy) and PyTorch/cuDNN on the layers of
real networks, and what a repeated call allocates.

    python benchmarks/gpu_scale.py --json scale.json            # ResNet-50 and MobileNetV2
    python benchmarks/gpu_scale.py --networks resnet18 --batches 1,8 --ops conv2d

For each distinct layer of the networks (:mod:`convviz.networks`), each op that applies to it
(the dense ops for a dense layer, the depthwise ops for a depthwise one) and each batch size, it
times convviz and PyTorch on the same device arrays (PyTorch reads them through DLPack,
channels-last, TF32 off so cuDNN sums exact float32 products as convviz does) and prints the
time per sample of both and their ratio.  ``--max-gb`` adds, per layer, the largest batch whose
tensors (the op's arguments and its result) fit in that many GB.

A call is timed back to back (``--calls`` calls, then one synchronisation; the median of
``--repeats`` such runs), so the host's launch cost overlaps the device's work as in a training
loop.  The data are made on the device (normal values), so large batches cost no host time.

Memory: after two warm-up calls, the script counts what CuPy's memory pool hands out during
``--calls`` more calls of convviz (a hook on the pool): requests per call, bytes requested per
call against the result's bytes, and the bytes the pool took from the device meanwhile, which
is 0 when a repeated call reuses what the pool holds.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from convviz import bench, networks  # noqa: E402

DENSE_OPS = ("conv2d", "conv2d_backprop_input", "conv2d_backprop_filter")
DEPTHWISE_OPS = ("depthwise_conv2d_native", "depthwise_conv2d_native_backprop_input",
                 "depthwise_conv2d_native_backprop_filter")


class DeviceTorchCase(bench.TorchCase):
    """A bench.TorchCase whose arrays are CuPy arrays, shared with PyTorch through DLPack."""

    def _tensor(self, array: Any) -> Any:
        t = self.torch.from_dlpack(array)
        return t if t.dtype == self.dtype else t.to(self.dtype)


def device_data(case: bench.Case, cp: Any) -> dict[str, Any]:
    """The op's arguments, tensors made on the device (normal values, scaled like bench's)."""
    data: dict[str, Any] = {}
    for name in case.record.args:
        kind, shape_of = bench.ARGUMENTS[name]
        shape = shape_of(case.geometry)
        if kind is np.ndarray:
            values = cp.random.standard_normal(shape, dtype=cp.float32)
            data[name] = values if case.dtype == "float32" else values.astype(bench.DTYPES[case.dtype])
        else:
            data[name] = list(shape)
    return data


def largest_batch(layer: networks.Layer, op: str, dtype: str, limit_bytes: float) -> int:
    """The largest batch whose tensors fit in ``limit_bytes``."""
    one = make_case(layer, op, 1, dtype)
    filter_bytes = math.prod(one.geometry.filter_shape) * np.dtype(bench.DTYPES[dtype]).itemsize
    per_sample = one.bytes - filter_bytes  # the op's tensors and its result, once each, less the filter
    return max(1, int((limit_bytes - filter_bytes) // per_sample))


def make_case(layer: networks.Layer, op: str, batch: int, dtype: str) -> bench.Case:
    short = bench.SHORT_NAMES[op]
    c_out = 1 if layer.depthwise else layer.c_out
    return bench.Case(short, op, batch, layer.size, layer.size, layer.c_in, c_out, layer.k, layer.stride, 1,
                      dtype=dtype)


def back_to_back(call: Callable[[], Any], sync: Callable[[], None], calls: int) -> float:
    """The mean seconds per call of ``calls`` calls made back to back, then one synchronisation."""
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        call()
    sync()
    return (time.perf_counter() - start) / calls


def pool_use(cp: Any, call: Callable[[], Any], calls: int) -> dict[str, float]:
    """What CuPy's memory pool hands out while ``call`` repeats ``calls`` times (after warm-up)."""
    pool = cp.get_default_memory_pool()

    class Counter(cp.cuda.MemoryHook):
        name = "convviz-gpu-scale"

        def __init__(self) -> None:
            self.requests = self.requested = self.device_bytes = 0

        def malloc_postprocess(self, **kwargs: Any) -> None:
            self.requests += 1
            self.requested += kwargs["size"]

        def alloc_postprocess(self, **kwargs: Any) -> None:
            self.device_bytes += kwargs["mem_size"]

    call(), call()
    cp.cuda.runtime.deviceSynchronize()
    held = pool.total_bytes()
    counter = Counter()
    with counter:
        for _ in range(calls):
            out = call()
            del out
    cp.cuda.runtime.deviceSynchronize()
    return {"requests_per_call": counter.requests / calls, "bytes_per_call": counter.requested / calls,
            "new_device_bytes": counter.device_bytes, "pool_growth_bytes": pool.total_bytes() - held}


def time_case(case: bench.Case, cp: Any, torch: Any, calls: int, repeats: int) -> dict[str, Any]:
    data = device_data(case, cp)
    ours = bench.convviz_call(case, data, None)  # on the CuPy arrays, unsynchronised
    theirs = bench.TORCH_CALLS[case.op](DeviceTorchCase(case, data, torch, "cuda"))
    sync = cp.cuda.runtime.deviceSynchronize
    result_bytes = int(ours().nbytes)
    theirs()
    sync()
    # Enough calls per run that it takes ~5 ms, at most `calls`.
    start = time.perf_counter()
    ours()
    sync()
    n = max(1, min(calls, int(0.005 / max(time.perf_counter() - start, 1e-6))))
    t_ours, t_theirs = [], []
    for r in range(repeats):  # alternate, so drift of clocks or host is shared
        t_ours.append(back_to_back(ours, sync, n))
        t_theirs.append(back_to_back(theirs, sync, n))
    row = {"label": case.label, "op": case.op, "batch": case.n, "dtype": case.dtype,
           "convviz_s": statistics.median(t_ours), "torch_s": statistics.median(t_theirs),
           "flops": case.flops, "bytes": case.bytes, "result_bytes": result_bytes}
    row["memory"] = pool_use(cp, ours, min(n, 10))
    del data
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--networks", default="resnet50,mobilenet_v2")
    parser.add_argument("--batches", default="1,8,64,256")
    parser.add_argument("--ops", default=",".join(DENSE_OPS + DEPTHWISE_OPS))
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--max-gb", type=float, default=10.0, help="also the largest batch that fits (0: not)")
    parser.add_argument("--max-gb-layers", type=int, default=3,
                        help="time the largest batch on this many layers per network and op (the first ones)")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budget", type=float, default=240.0, help="stop starting cases after this many seconds")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)

    import cupy as cp
    import torch

    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    wanted_ops = args.ops.split(",")
    batches = [int(b) for b in args.batches.split(",")]
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, CuPy {cp.__version__}, "
          f"PyTorch {torch.__version__}, {args.dtype}, TF32 off; ms per sample (convviz / PyTorch)")
    print("| layer | op | batch | convviz ms/sample | PyTorch ms/sample | vs PyTorch | pool requests/call | "
          "requested / result bytes | new device bytes |")
    print("|---|---|---|---|---|---|---|---|---|")
    stopped = False
    for network in args.networks.split(","):
        for op in wanted_ops:
            depthwise = op in DEPTHWISE_OPS
            layers = [layer for layer in networks.distinct_layers([network]) if layer.depthwise == depthwise]
            for index, layer in enumerate(layers):
                sizes = list(batches)
                if args.max_gb and index < args.max_gb_layers:
                    sizes.append(largest_batch(layer, op, args.dtype, args.max_gb * 1e9))
                for batch in sizes:
                    if time.perf_counter() - started > args.budget:
                        stopped = True
                        break
                    case = make_case(layer, op, batch, args.dtype)
                    try:
                        row = time_case(case, cp, torch, args.calls, args.repeats)
                    except Exception as err:  # report and go on: one case must not lose the run
                        row = {"label": case.label, "op": op, "batch": batch, "error": f"{type(err).__name__}: {err}"}
                        print(f"| {layer.describe()} | {op} | {batch} | error: {row['error'][:120]} |||||")
                        rows.append(row)
                        cp.get_default_memory_pool().free_all_blocks()
                        torch.cuda.empty_cache()
                        continue
                    row["network"], row["layer"] = network, layer.describe()
                    rows.append(row)
                    mem = row["memory"]
                    print(f"| {layer.describe()} | {op} | {batch} | {row['convviz_s'] * 1e3 / batch:.4f} | "
                          f"{row['torch_s'] * 1e3 / batch:.4f} | {row['torch_s'] / row['convviz_s']:.2f}x | "
                          f"{mem['requests_per_call']:.0f} | {mem['bytes_per_call'] / row['result_bytes']:.2f} | "
                          f"{mem['new_device_bytes']} |", flush=True)
                    cp.get_default_memory_pool().free_all_blocks()
                    torch.cuda.empty_cache()
    if stopped:
        print(f"(stopped at the {args.budget:.0f} s budget)")
    summary: dict[str, Any] = {}
    for op in dict.fromkeys(r["op"] for r in rows):
        for batch in sorted({r["batch"] for r in rows if r["op"] == op and "error" not in r}):
            ratios = [r["torch_s"] / r["convviz_s"] for r in rows
                      if r["op"] == op and r["batch"] == batch and "error" not in r]
            summary[f"{op} batch {batch}"] = (min(ratios), statistics.median(ratios), max(ratios), len(ratios))
    print("\n| op, batch | min | median | max vs PyTorch | cases |\n|---|---|---|---|---|")
    for key, (low, mid, high, count) in summary.items():
        print(f"| {key} | {low:.2f}x | {mid:.2f}x | {high:.2f}x | {count} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "summary": summary,
                                               "device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
                                               "cupy": cp.__version__, "torch": torch.__version__}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
