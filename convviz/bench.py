"""Speed benchmark: convviz against TensorFlow and PyTorch, in one process, on the same data.

Run it as ``convviz bench`` (or ``python benchmarks/bench.py``).  For each case
every implementation is warmed up, then called in interleaved rounds (convviz,
TensorFlow, PyTorch, convviz, ...) so that a noisy machine slows all of them
alike; the table reports the median time per call, GFLOP/s, the speedup over the
fastest peer, convviz's 1-thread time and 2-thread scaling, and convviz's peak
memory beyond its inputs and output.  Peers that are not installed, or that
refuse a case, are reported as such.

FLOP counts: ``2*N*OH*OW*C_out*KH*KW*C_in/groups`` for the input gradient and
``2*N*OH*OW*C*M*KH*KW`` for the depthwise filter gradient.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import tracemalloc
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import ml_dtypes
import numpy as np

from .errors import DeviceError

INPUT_GRAD = "conv2d_backprop_input"
DEPTHWISE_FILTER_GRAD = "depthwise_conv2d_native_backprop_filter"
DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


@dataclass(frozen=True)
class Case:
    """One benchmark case (float32, NHWC, SAME unless stated)."""

    name: str
    op: str  # the op's public name (a key of convviz.ops.BY_NAME)
    n: int
    h: int
    w: int
    c_in: int
    c_out_or_mult: int  # C_out for the input gradient, channel multiplier for the depthwise filter gradient
    k: int
    stride: int
    dilation: int
    dtype: str = "float32"
    data_format: str = "NHWC"

    @property
    def out_hw(self) -> tuple[int, int]:
        return -(-self.h // self.stride), -(-self.w // self.stride)

    @property
    def flops(self) -> float:
        oh, ow = self.out_hw
        if self.op == INPUT_GRAD:
            return 2.0 * self.n * oh * ow * self.c_out_or_mult * self.k * self.k * self.c_in
        return 2.0 * self.n * oh * ow * self.c_in * self.c_out_or_mult * self.k * self.k

    @property
    def label(self) -> str:
        extra = "" if (self.dtype, self.data_format) == ("float32", "NHWC") else f" [{self.dtype}, {self.data_format}]"
        return f"{self.name} {self.n},{self.h},{self.w},{self.c_in},{self.c_out_or_mult},{self.k},{self.stride},{self.dilation}{extra}"


def _bpi(name, *dims, **kw):
    return Case(name, INPUT_GRAD, *dims, **kw)


def _dwf(name, *dims, **kw):
    return Case(name, DEPTHWISE_FILTER_GRAD, *dims, **kw)


CASES = [
    _bpi("bpi_tiny", 1, 8, 8, 3, 8, 3, 1, 1),
    _bpi("bpi_cifar", 8, 32, 32, 16, 32, 3, 1, 1),
    _bpi("bpi_resnet", 8, 56, 56, 64, 64, 3, 1, 1),
    _bpi("bpi_stride2", 8, 56, 56, 64, 128, 3, 2, 1),
    _bpi("bpi_dilated", 4, 64, 64, 32, 32, 3, 1, 2),
    _bpi("bpi_k7", 4, 64, 64, 16, 16, 7, 1, 1),
    _bpi("bpi_dilated", 4, 64, 64, 32, 32, 3, 1, 2, dtype="float64"),
    _bpi("bpi_dilated", 4, 64, 64, 32, 32, 3, 1, 2, dtype="float16"),
    _bpi("bpi_dilated", 4, 64, 64, 32, 32, 3, 1, 2, dtype="bfloat16"),
    _bpi("bpi_dilated", 4, 64, 64, 32, 32, 3, 1, 2, data_format="NCHW"),
    _dwf("dwf_tiny", 1, 8, 8, 4, 1, 3, 1, 1),
    _dwf("dwf_mobilenet", 8, 56, 56, 64, 1, 3, 1, 1),
    _dwf("dwf_stride2", 8, 112, 112, 32, 1, 3, 2, 1),
    _dwf("dwf_k5", 8, 28, 28, 256, 1, 5, 1, 1),
    _dwf("dwf_mult2", 4, 32, 32, 32, 2, 3, 1, 1),
    _dwf("dwf_dilated", 4, 64, 64, 64, 1, 3, 1, 2),
    _dwf("dwf_mobilenet", 8, 56, 56, 64, 1, 3, 1, 1, dtype="float64"),
    _dwf("dwf_mobilenet", 8, 56, 56, 64, 1, 3, 1, 1, dtype="float16"),
    _dwf("dwf_mobilenet", 8, 56, 56, 64, 1, 3, 1, 1, dtype="bfloat16"),
    _dwf("dwf_mobilenet", 8, 56, 56, 64, 1, 3, 1, 1, data_format="NCHW"),
]


@dataclass
class Result:
    case: Case
    times: dict[str, float | None] = field(default_factory=dict)  # seconds per call, by implementation
    notes: dict[str, str] = field(default_factory=dict)
    convviz_1thread: float | None = None
    extra_bytes: int | None = None
    output_bytes: int | None = None


# -- data and callables ----------------------------------------------------------
def _data(case: Case, rng: np.random.Generator) -> dict[str, np.ndarray]:
    dtype = DTYPES[case.dtype]
    oh, ow = case.out_hw
    if case.op == INPUT_GRAD:
        filt = rng.standard_normal((case.k, case.k, case.c_in, case.c_out_or_mult)).astype(dtype)
        dy = rng.standard_normal((case.n, oh, ow, case.c_out_or_mult)).astype(dtype)
        return {"filter": filt, "dy": dy}
    x = rng.standard_normal((case.n, case.h, case.w, case.c_in)).astype(dtype)
    dy = rng.standard_normal((case.n, oh, ow, case.c_in * case.c_out_or_mult)).astype(dtype)
    return {"x": x, "dy": dy}


def _four(case: Case, value: int) -> list[int]:
    return [1, value, value, 1] if case.data_format == "NHWC" else [1, 1, value, value]


def _to_layout(case: Case, array: Any) -> Any:
    if case.data_format == "NHWC":
        return array
    moved = array.transpose(0, 3, 1, 2)
    return moved.copy() if hasattr(moved, "device") else np.ascontiguousarray(moved)


def convviz_call(case: Case, data: dict[str, np.ndarray], n_threads: int | None,
                 device: str = "cpu") -> Callable[[], Any]:
    import convviz

    strides, dilations = _four(case, case.stride), _four(case, case.dilation)
    if device == "gpu":  # the same op on CuPy arrays, timed to completion on the device
        import cupy as cp

        gpu = {k: cp.asarray(v) for k, v in data.items()}
        call = convviz_call(case, gpu, None)

        def timed() -> Any:
            out = call()
            cp.cuda.runtime.deviceSynchronize()
            return out
        return timed
    dy = _to_layout(case, data["dy"])
    if case.op == INPUT_GRAD:
        sizes = [case.n, case.h, case.w, case.c_in] if case.data_format == "NHWC" else [case.n, case.c_in, case.h, case.w]
        filt = data["filter"]
        return lambda: convviz.conv2d_backprop_input(sizes, filt, dy, strides, "SAME", (), case.data_format,
                                                     dilations, n_threads=n_threads)
    x = _to_layout(case, data["x"])
    sizes = [case.k, case.k, case.c_in, case.c_out_or_mult]
    return lambda: convviz.depthwise_conv2d_native_backprop_filter(x, sizes, dy, strides, "SAME", (), case.data_format,
                                                                   dilations, n_threads=n_threads)


def tensorflow_call(case: Case, data: dict[str, np.ndarray]) -> Callable[[], Any]:
    import tensorflow as tf

    strides, dilations = _four(case, case.stride), _four(case, case.dilation)
    dy = tf.constant(_to_layout(case, data["dy"]))
    if case.op == INPUT_GRAD:
        sizes = [case.n, case.h, case.w, case.c_in] if case.data_format == "NHWC" else [case.n, case.c_in, case.h, case.w]
        filt = tf.constant(data["filter"])
        return lambda: tf.raw_ops.Conv2DBackpropInput(
            input_sizes=sizes, filter=filt, out_backprop=dy, strides=strides, padding="SAME",
            data_format=case.data_format, dilations=dilations).numpy()
    x = tf.constant(_to_layout(case, data["x"]))
    sizes = [case.k, case.k, case.c_in, case.c_out_or_mult]
    return lambda: tf.raw_ops.DepthwiseConv2dNativeBackpropFilter(
        input=x, filter_sizes=sizes, out_backprop=dy, strides=strides, padding="SAME",
        data_format=case.data_format, dilations=dilations).numpy()


def torch_call(case: Case, data: dict[str, np.ndarray], device: str = "cpu") -> Callable[[], Any]:
    """PyTorch's native NCHW convolution backward on the same values.

    PyTorch pads symmetrically; with SAME's odd extra row it computes on a
    window shifted by one pixel -- the same amount of work, slightly different
    numbers, which is all a timing needs.
    """
    import torch

    dtype = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
             "bfloat16": torch.bfloat16}[case.dtype]

    where = "cuda" if device == "gpu" else "cpu"

    def tensor(array: np.ndarray) -> Any:
        t = torch.from_numpy(np.ascontiguousarray(array.transpose(0, 3, 1, 2)).astype(np.float32)).to(where, dtype)
        return t.contiguous(memory_format=torch.channels_last) if case.data_format == "NHWC" else t

    pad = ((case.k - 1) * case.dilation) // 2
    stride, dilation = [case.stride] * 2, [case.dilation] * 2
    dy = tensor(data["dy"])
    if case.op == INPUT_GRAD:
        weight = torch.from_numpy(data["filter"].astype(np.float32).transpose(3, 2, 0, 1).copy()).to(where, dtype)
        shape = (case.n, case.c_in, case.h, case.w)
        x_meta = torch.empty(shape, dtype=dtype, device=where)
        if case.data_format == "NHWC":
            weight = weight.contiguous(memory_format=torch.channels_last)
            x_meta = x_meta.contiguous(memory_format=torch.channels_last)
        run = lambda: torch.ops.aten.convolution_backward(  # noqa: E731
            dy, x_meta, weight, None, stride, [pad, pad], dilation, False, [0, 0], 1, [True, False, False])[0]
    else:
        x = tensor(data["x"])
        channels = case.c_in
        weight = torch.empty((channels * case.c_out_or_mult, 1, case.k, case.k), dtype=dtype, device=where)
        run = lambda: torch.ops.aten.convolution_backward(  # noqa: E731
            dy, x, weight, None, stride, [pad, pad], dilation, False, [0, 0], channels, [False, True, False])[1]
    if device != "gpu":
        return run

    def synchronised() -> Any:
        out = run()
        torch.cuda.synchronize()
        return out
    return synchronised


# -- timing ------------------------------------------------------------------------
def _interleaved_medians(calls: dict[str, Callable[[], Any]], min_seconds: float, min_rounds: int,
                         max_rounds: int) -> dict[str, float]:
    """Median seconds per call of each implementation, measured in rotating blocks.

    Each round gives every implementation one untimed call and then a few timed
    ones.  Rotating keeps slow drift of a shared machine fair to all; the untimed
    call absorbs the other framework's worker threads, which keep spinning for a
    while after their own parallel region and would otherwise slow the first
    call that follows them.
    """
    times: dict[str, list[float]] = {name: [] for name in calls}
    per_block: dict[str, int] = {}
    for name, call in calls.items():  # warm-up, and calls per block (~20 ms of work)
        call()
        start = time.perf_counter()
        call()
        per_block[name] = max(1, min(20, int(0.02 / max(time.perf_counter() - start, 1e-6))))
    spent = 0.0
    rounds = 0
    while rounds < max_rounds and (rounds < min_rounds or spent < min_seconds):
        for name, call in calls.items():
            call()  # untimed: lets the previous implementation's threads go quiet
            for _ in range(per_block[name]):
                start = time.perf_counter()
                call()
                elapsed = time.perf_counter() - start
                times[name].append(elapsed)
                spent += elapsed
        rounds += 1
    return {name: statistics.median(values) for name, values in times.items()}


def _extra_memory(case: Case, data: dict[str, np.ndarray], threads: int) -> tuple[int, int]:
    """(convviz's peak bytes beyond inputs and output, output bytes) for one call."""
    from convviz.ops import BY_NAME

    call = convviz_call(case, data, threads)
    call()
    tracemalloc.start()
    tracemalloc.reset_peak()
    out = call()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    kernel_scratch = BY_NAME[case.op].kernel.last_scratch_bytes()
    return max(0, peak - out.nbytes) + kernel_scratch, out.nbytes


def _load_peers(wanted: list[str], threads: int) -> dict[str, str]:
    """Import the peers; returns {name: version or 'absent: reason'}."""
    status: dict[str, str] = {}
    if "tensorflow" in wanted:
        try:
            os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
            import tensorflow as tf

            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(1)
            status["tensorflow"] = tf.__version__
        except Exception as err:  # not installed, or broken: report, do not fail
            status["tensorflow"] = f"absent: {type(err).__name__}: {err}"[:120]
    if "torch" in wanted:
        try:
            import torch

            torch.set_num_threads(threads)
            status["torch"] = torch.__version__
        except Exception as err:
            status["torch"] = f"absent: {type(err).__name__}: {err}"[:120]
    return status


def machine_description() -> dict[str, Any]:
    import convviz
    from convviz import _openmp_info
    from convviz._backends import cpu

    model = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "convviz": convviz.__version__,
        "kernels": cpu.current_isa(),
        "openmp": _openmp_info.openmp_enabled(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "platform": platform.platform(),
    }


def run(cases: list[Case], threads: int = 2, peers: tuple[str, ...] = ("tensorflow", "torch"),
        min_seconds: float = 0.5, min_rounds: int = 6, max_rounds: int = 200, scaling: bool = True,
        seed: int = 0, progress: Callable[[str], None] | None = None,
        device: str = "cpu") -> tuple[list[Result], dict[str, Any]]:
    """Time every case; returns the results and a description of the run.

    ``device="gpu"`` times convviz on CuPy against PyTorch on CUDA (cuDNN);
    TensorFlow (the CPU build) and the 1-thread and memory columns are left out.
    """
    if device == "gpu":
        peers = tuple(p for p in peers if p == "torch")
        scaling = False
    peer_status = _load_peers(list(peers), threads)
    rng = np.random.default_rng(seed)
    results = []
    for case in cases:
        if progress:
            progress(case.label)
        data = _data(case, rng)
        result = Result(case)
        calls: dict[str, Callable[[], Any]] = {"convviz": convviz_call(case, data, threads, device)}
        makers = {"tensorflow": tensorflow_call, "torch": lambda c, d: torch_call(c, d, device)}
        for name in peers:
            if peer_status.get(name, "absent").startswith("absent"):
                result.notes[name] = "not installed"
                continue
            try:
                call = makers[name](case, data)
                call()
                calls[name] = call
            except Exception as err:  # the peer refuses this case
                result.notes[name] = f"error: {str(err).splitlines()[0][:80]}"
        if scaling:
            calls["convviz_1thread"] = convviz_call(case, data, 1)
        medians = _interleaved_medians(calls, min_seconds, min_rounds, max_rounds)
        result.convviz_1thread = medians.pop("convviz_1thread", None)
        result.times = {name: medians.get(name) for name in ["convviz", *peers]}
        if device == "cpu":
            result.extra_bytes, result.output_bytes = _extra_memory(case, data, threads)
        results.append(result)
    info = {"machine": machine_description(), "threads": threads, "peers": peer_status, "device": device}
    if device == "gpu":
        from ._backends import cuda

        info["gpu"] = cuda.info()
    return results, info


# -- reporting ---------------------------------------------------------------------
def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3f}"


def _bytes(n: int | None) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(size)


def table(results: list[Result], peers: tuple[str, ...] = ("tensorflow", "torch")) -> str:
    """A Markdown table of the results."""
    head = ["case (N,H,W,Cin,Cout|M,K,s,d)", "convviz ms", "GFLOP/s"]
    head += [f"{p} ms" for p in peers] + ["speedup vs best peer", "1-thread ms", "2T/1T", "extra memory (output)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        t = r.times.get("convviz")
        peer_times = [r.times.get(p) for p in peers]
        known = [x for x in peer_times if x]
        speedup = f"{min(known) / t:.2f}x" if known and t else "-"
        cells = [r.case.label, _ms(t), f"{r.case.flops / t / 1e9:.1f}" if t else "-"]
        for p, x in zip(peers, peer_times):
            cells.append(_ms(x) if x else (r.notes.get(p, "-")[:40]))
        scaling = f"{r.convviz_1thread / t:.2f}" if r.convviz_1thread and t else "-"
        cells += [speedup, _ms(r.convviz_1thread), scaling,
                  f"{_bytes(r.extra_bytes)} ({_bytes(r.output_bytes)})"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="convviz bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="threads for every implementation (default 2)")
    parser.add_argument("--only", default="", help="comma-separated case names to run (e.g. bpi_resnet,dwf_k5)")
    parser.add_argument("--no-peers", action="store_true", help="time convviz alone")
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a rough table in seconds)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu",
                        help="gpu: convviz on CuPy against PyTorch on CUDA (needs CuPy and a GPU)")
    args = parser.parse_args(argv)
    if args.threads < 1:
        parser.error("--threads must be at least 1")
    wanted = {name.strip() for name in args.only.split(",") if name.strip()}
    unknown = wanted - {c.name for c in CASES}
    if unknown:
        parser.error(f"unknown case(s) {sorted(unknown)}; choose from {sorted({c.name for c in CASES})}")
    cases = [c for c in CASES if not wanted or c.name in wanted]
    peers = () if args.no_peers else ("tensorflow", "torch")
    rounds: dict[str, Any] = dict(min_seconds=0.02, min_rounds=2, max_rounds=10) if args.quick else {}
    if args.device == "gpu":
        from ._backends import cuda

        try:
            cuda.require_device("convviz bench")
        except DeviceError as err:
            parser.error(str(err))
    results, info = run(cases, threads=args.threads, peers=peers, device=args.device,
                        progress=lambda label: print(f"  timing {label} ...", file=sys.stderr), **rounds)
    machine = info["machine"]
    if args.device == "gpu":
        print(f"\nconvviz {machine['convviz']} on {', '.join(info['gpu'].get('gpu', ['?']))} "
              f"(CuPy {info['gpu'].get('cupy')}, CUDA runtime {info['gpu'].get('cuda_runtime')})")
    else:
        print(f"\nconvviz {machine['convviz']} ({machine['kernels']} kernels, OpenMP "
              f"{'on' if machine['openmp'] else 'off'}), {args.threads} threads on {machine['cpu']} "
              f"({machine['cores']} cores)")
    for name, version in info["peers"].items():
        print(f"  {name}: {version}")
    print()
    print(table(results, peers or ("tensorflow", "torch")))
    if args.json:
        payload = {"info": info, "results": [
            {**asdict(r.case), "label": r.case.label, "flops": r.case.flops, "times": r.times, "notes": r.notes,
             "convviz_1thread": r.convviz_1thread, "extra_bytes": r.extra_bytes, "output_bytes": r.output_bytes}
            for r in results]}
        with open(args.json, "w") as handle:
            json.dump(payload, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
