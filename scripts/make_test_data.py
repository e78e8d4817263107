"""Check, or make afresh, the expected-output files tests/data/*.npz.

Where the committed files come from
-----------------------------------
``tests/data/tf_semantics.npz`` holds 160 random cases, alternating
``Conv2DBackpropInput`` ("bpi") and ``DepthwiseConv2dNativeBackpropFilter``
("dwf"), over every padding (SAME, VALID, EXPLICIT), both layouts, strides and
dilations 1-3, groups 1-3 and the four dtypes, as float64 arrays with their exact
float64 gradient (``expected``) and, in ``meta``'s ``tf`` field, what TensorFlow
2.21 (CPU, float32) returned on the same case (``agrees``, ``differs rel X`` or
``error: ...``).  ``tests/data/mindspore.npz`` holds 40 cases of MindSpore 2.10's
``mindspore.ops.Conv2DBackpropInput`` (CPU, float32) with MindSpore's own outputs.
Both are byte copies of the project's shared oracle files, made by those
TensorFlow 2.21 / MindSpore 2.10 runs; the format is described in ``FORMAT`` below.

What this script does
---------------------
``python scripts/make_test_data.py [--check] [DIR]`` (the default; DIR defaults to
tests/data) loads every case and recomputes its gradient from the stored inputs
with the float64 loops in this file -- written from the definition, sharing no
code with convviz's kernels or with ``convviz.reference``: output cell ``o`` and
tap ``k`` read input cell ``i = o*stride - pad_before + k*dilation``; SAME pads
``max((ceil(in/stride) - 1)*stride + (k - 1)*dilation + 1 - in, 0)`` cells in
all, the odd one at the end.  TensorFlow cases must match ``expected`` to 1e-12;
MindSpore's float32 outputs must lie within the float32 rounding bound of the
exact sum.  It prints a summary and exits 1 on any mismatch.

``python scripts/make_test_data.py --write OUT_DIR [--seed N] [--cases N]
[--ms-cases N]`` makes fresh files in the same format and with the same
distribution of cases (read off the committed files' ``meta``): ``expected`` from
the float64 loops here, the ``tf`` verdict from TensorFlow when it is importable
(``pip install "tensorflow-cpu==2.21.*"``), else ``"not run"``; the MindSpore file
only when MindSpore is importable (``pip install "mindspore==2.10.*"``), else it
is skipped with a message.  The same seed gives the same bytes.  The committed
files are the original runs' and are not reproduced bit for bit by any seed; to
replace them, write into a scratch folder, run ``--check`` on it, and copy.

No convviz import anywhere: the script checks the data, not the kernels.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import math
import re
import sys
import zipfile
from pathlib import Path
from typing import Any, Iterator

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
TF_FILE, MS_FILE = "tf_semantics.npz", "mindspore.npz"

FORMAT = """\
tf_semantics.npz: key `meta` = UTF-8 JSON list (uint8 array), one object per case:
  id, op ("bpi" | "dwf"), strides, dilations, padding, explicit_paddings, data_format, dtype,
  input_sizes + groups (bpi) or filter_sizes (dwf), tf.
  float64 arrays in the case's data_format: {id}_filter (HWIO), {id}_out_backprop (bpi);
  {id}_input, {id}_out_backprop (dwf); {id}_expected.
mindspore.npz: `meta` objects: id, out_channel, kernel_size, pad_mode, pad, stride, dilation, group,
  input_size; float32 arrays {id}_dout (NCHW), {id}_weight (C_out, C_in/group, K1, K2), {id}_expected."""

TF_TOLERANCE = 1e-12
FLOAT32_UNIT = float(np.finfo(np.float32).eps) / 2  # unit roundoff of float32
DTYPES = ("float16", "bfloat16", "float32", "float64")
PADDINGS = ("SAME", "VALID", "EXPLICIT")
LAYOUTS = ("NHWC", "NCHW")


# ---------------------------------------------------------------------------------------------
# The definition, in float64

def same_pads(size: int, kernel: int, stride: int, dilation: int) -> tuple[int, int]:
    """TensorFlow's (and MindSpore's) SAME padding of one axis: (before, after), the odd cell after.

    >>> same_pads(8, 3, 2, 1), same_pads(7, 3, 2, 1), same_pads(5, 1, 2, 1)
    ((0, 1), (1, 1), (0, 0))
    """
    total = max((math.ceil(size / stride) - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


def output_size(size: int, kernel: int, stride: int, dilation: int, before: int, after: int) -> int:
    """Output cells along one axis: windows of the dilated kernel that fit the padded input (0 if none).

    >>> output_size(8, 3, 2, 1, 0, 1), output_size(2, 3, 1, 2, 0, 0)
    (4, 0)
    """
    span = size + before + after - ((kernel - 1) * dilation + 1)
    return 0 if span < 0 else span // stride + 1


def taps(size: int, out: int, kernel: int, stride: int, dilation: int,
         before: int) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """For each tap ``k`` of one axis: the output cells ``o`` whose tap ``k`` reads a real input cell,
    and those input cells ``i = o*stride - before + k*dilation`` (taps on padding read zeros)."""
    o = np.arange(out)
    for k in range(kernel):
        i = o * stride - before + k * dilation
        inside = (i >= 0) & (i < size)
        yield k, o[inside], i[inside]


def backprop_input(input_hw: tuple[int, int], w: np.ndarray, dy: np.ndarray, strides: tuple[int, int],
                   dilations: tuple[int, int], pads: tuple[int, int, int, int], groups: int = 1) -> np.ndarray:
    """dL/dx of a (grouped) 2-D convolution, NHWC, from an HWIO filter and NHWC dL/dy, in float64.

    dx[n, i_h, i_w, g*Cin_g + c] = sum over output cells (o_h, o_w), taps (k_h, k_w) reading
    (i_h, i_w) and output channels o of group g of dy[n, o_h, o_w, g*Cout_g + o] * w[k_h, k_w, c, g*Cout_g + o].

    >>> dx = backprop_input((3, 3), np.ones((2, 2, 1, 1)), np.ones((1, 2, 2, 1)), (1, 1), (1, 1), (0, 0, 0, 0))
    >>> dx[0, :, :, 0].tolist()
    [[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]
    """
    w, dy = np.asarray(w, np.float64), np.asarray(dy, np.float64)
    n, oh, ow, cout = dy.shape
    kh, kw, cin_g, _ = w.shape
    cout_g = cout // groups
    top, bottom, left, right = pads
    dx = np.zeros((n, input_hw[0], input_hw[1], groups * cin_g))
    dy_g = dy.reshape(n, oh, ow, groups, cout_g)
    w_g = w.reshape(kh, kw, cin_g, groups, cout_g)
    for th, o_rows, i_rows in taps(input_hw[0], oh, kh, strides[0], dilations[0], top):
        for tw, o_cols, i_cols in taps(input_hw[1], ow, kw, strides[1], dilations[1], left):
            part = np.einsum("nhwgo,igo->nhwgi", dy_g[:, o_rows][:, :, o_cols], w_g[th, tw])
            # within one tap distinct output cells read distinct input cells: no index repeats
            dx[:, i_rows[:, None], i_cols[None, :], :] += part.reshape(n, len(o_rows), len(o_cols), groups * cin_g)
    return dx


def depthwise_backprop_filter(x: np.ndarray, filter_sizes: tuple[int, int, int, int], dy: np.ndarray,
                              strides: tuple[int, int], dilations: tuple[int, int],
                              pads: tuple[int, int, int, int]) -> np.ndarray:
    """dL/dW ``[KH, KW, C, M]`` of a depthwise convolution, from NHWC x and dL/dy, in float64.

    dw[k_h, k_w, c, m] = sum over n and output cells whose tap (k_h, k_w) reads a real input cell
    (i_h, i_w) of x[n, i_h, i_w, c] * dy[n, o_h, o_w, c*M + m].

    >>> x = np.arange(9.0).reshape(1, 3, 3, 1)
    >>> depthwise_backprop_filter(x, (2, 2, 1, 1), np.ones((1, 2, 2, 1)), (1, 1), (1, 1), (0, 0, 0, 0))[:, :, 0, 0]
    array([[ 8., 12.],
           [20., 24.]])
    """
    x, dy = np.asarray(x, np.float64), np.asarray(dy, np.float64)
    kh, kw, c, m = filter_sizes
    n, h, w, _ = x.shape
    _, oh, ow, _ = dy.shape
    top, bottom, left, right = pads
    dw = np.zeros((kh, kw, c, m))
    dy_c = dy.reshape(n, oh, ow, c, m)
    for th, o_rows, i_rows in taps(h, oh, kh, strides[0], dilations[0], top):
        for tw, o_cols, i_cols in taps(w, ow, kw, strides[1], dilations[1], left):
            dw[th, tw] = np.einsum("nhwc,nhwcm->cm", x[:, i_rows][:, :, i_cols], dy_c[:, o_rows][:, :, o_cols])
    return dw


# ---------------------------------------------------------------------------------------------
# TensorFlow cases

def _spatial(values: list[int], data_format: str) -> tuple[int, int]:
    return (values[2], values[3]) if data_format == "NCHW" else (values[1], values[2])


def _to_nhwc(a: np.ndarray, data_format: str) -> np.ndarray:
    return a.transpose(0, 2, 3, 1) if data_format == "NCHW" else a


def _from_nhwc(a: np.ndarray, data_format: str) -> np.ndarray:
    return a.transpose(0, 3, 1, 2) if data_format == "NCHW" else a


def tf_pads(case: dict, input_hw: tuple[int, int], kernel_hw: tuple[int, int]) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) of a TensorFlow case."""
    strides, dilations = _spatial(case["strides"], case["data_format"]), _spatial(case["dilations"],
                                                                                 case["data_format"])
    if case["padding"] == "VALID":
        return 0, 0, 0, 0
    if case["padding"] == "SAME":
        return (*same_pads(input_hw[0], kernel_hw[0], strides[0], dilations[0]),
                *same_pads(input_hw[1], kernel_hw[1], strides[1], dilations[1]))
    e = case["explicit_paddings"]
    hw = e[4:8] if case["data_format"] == "NCHW" else e[2:6]
    return tuple(int(v) for v in hw)  # type: ignore[return-value]


def tf_expected(case: dict, arrays: dict[str, np.ndarray]) -> np.ndarray:
    """A TensorFlow case's gradient from its stored inputs, in its data_format, float64.

    Raises ``ValueError`` when the stored shapes do not fit the case."""
    fmt = case["data_format"]
    strides, dilations = _spatial(case["strides"], fmt), _spatial(case["dilations"], fmt)
    dy = _to_nhwc(arrays["out_backprop"], fmt)
    if case["op"] == "bpi":
        w = arrays["filter"]
        groups = int(case.get("groups", 1))
        sizes = case["input_sizes"]
        input_hw = tuple(sizes) if len(sizes) == 2 else _spatial(sizes, fmt)
        depth = w.shape[2] * groups
        if len(sizes) == 4 and (sizes[1] if fmt == "NCHW" else sizes[3]) != depth:
            raise ValueError(f"input depth {sizes} is not groups {groups} x filter in-depth {w.shape[2]}")
        if w.shape[3] != dy.shape[3] or w.shape[3] % groups:
            raise ValueError(f"filter {w.shape} and out_backprop channels {dy.shape[3]} (groups {groups}) differ")
        kernel_hw = w.shape[:2]
    else:
        x = _to_nhwc(arrays["input"], fmt)
        kh, kw, c, m = case["filter_sizes"]
        input_hw, kernel_hw = x.shape[1:3], (kh, kw)
        if x.shape[3] != c or dy.shape[3] != c * m or dy.shape[0] != x.shape[0]:
            raise ValueError(f"input {x.shape} and out_backprop {dy.shape} (NHWC) do not fit filter_sizes "
                             f"{case['filter_sizes']}")
    pads = tf_pads(case, input_hw, kernel_hw)
    out = tuple(output_size(input_hw[a], kernel_hw[a], strides[a], dilations[a], pads[2 * a], pads[2 * a + 1])
                for a in (0, 1))
    if out != dy.shape[1:3]:
        raise ValueError(f"out_backprop is {dy.shape[1:3]} (rows, cols), the window gives {out}")
    if case["op"] == "bpi":
        got = backprop_input(input_hw, w, dy, strides, dilations, pads, groups)
        return _from_nhwc(got, fmt)
    return depthwise_backprop_filter(x, (kh, kw, c, m), dy, strides, dilations, pads)


def _arrays(archive: Any, case_id: int, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    return {name: archive[f"{case_id}_{name}"] for name in names}


TF_INPUTS = {"bpi": ("filter", "out_backprop"), "dwf": ("input", "out_backprop")}


def _tf_verdict_ok(text: str) -> bool:
    return (text in ("agrees", "not run") or text.startswith("error: ")
            or (text.startswith("differs rel ") and _is_number(text[len("differs rel "):])))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def load(path: Path) -> tuple[Any, list[dict]]:
    archive = np.load(path)
    return archive, json.loads(archive["meta"].tobytes().decode("utf-8"))


def check_tf(path: Path) -> tuple[list[str], str]:
    """Problems with a tf_semantics file (empty when it is right) and a one-line summary."""
    archive, cases = load(path)
    problems, worst, seen = [], 0.0, {"meta"}
    for case in cases:
        i = case["id"]
        names = TF_INPUTS.get(case.get("op"))
        if names is None:
            problems.append(f"case {i}: unknown op {case.get('op')!r}")
            continue
        if case.get("dtype") not in DTYPES or not _tf_verdict_ok(str(case.get("tf"))):
            problems.append(f"case {i}: dtype {case.get('dtype')!r} or tf verdict {case.get('tf')!r} is not one "
                            f"of the known values")
        try:
            arrays = _arrays(archive, i, names + ("expected",))
            seen.update(f"{i}_{name}" for name in arrays)
            got = tf_expected(case, arrays)
        except (KeyError, ValueError) as err:
            problems.append(f"case {i} ({case['op']}): {err}")
            continue
        expected = arrays["expected"]
        if expected.dtype != np.float64 or got.shape != expected.shape:
            problems.append(f"case {i} ({case['op']}): expected is {expected.dtype} {expected.shape}, "
                            f"the gradient is float64 {got.shape}")
            continue
        scale = max(1.0, float(np.abs(got).max(initial=0.0)))
        error = float(np.abs(got - expected).max(initial=0.0)) / scale
        worst = max(worst, error)
        if not error <= TF_TOLERANCE:
            where = np.unravel_index(np.argmax(np.abs(got - expected)), got.shape)
            problems.append(f"case {i} ({case['op']}, {case['padding']}, {case['data_format']}): expected"
                            f"{list(where)} = {expected[where]!r}, the definition gives {got[where]!r} "
                            f"(error {error:.3g} of scale {scale:.3g})")
    extra = sorted(set(archive.files) - seen)
    if extra:
        problems.append(f"arrays that no case uses: {extra[:5]}{' ...' if len(extra) > 5 else ''}")
    ops = {op: sum(c.get("op") == op for c in cases) for op in TF_INPUTS}
    verdicts: dict[str, int] = {}
    for c in cases:
        text = str(c.get("tf"))
        word = "error" if text.startswith("error") else "differs" if text.startswith("differs") else text
        verdicts[word] = verdicts.get(word, 0) + 1
    summary = (f"{path.name}: {len(cases)} cases ({ops['bpi']} bpi, {ops['dwf']} dwf), largest error "
               f"{worst:.2g} of scale (tolerance {TF_TOLERANCE:g}); TensorFlow 2.21 said "
               + ", ".join(f"{n} {w}" for w, n in sorted(verdicts.items())))
    return problems, summary


# ---------------------------------------------------------------------------------------------
# MindSpore cases (NCHW; weight (C_out, C_in/group, K1, K2))

def _two(value: Any) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else (int(value[0]), int(value[1]))


def ms_pads(case: dict) -> tuple[int, int, int, int]:
    """MindSpore's (top, bottom, left, right): ``valid`` none, ``same`` TensorFlow's rule, ``pad`` the
    given ``pad`` (one int for all four sides, or four ints)."""
    _, _, h, w = case["input_size"]
    (kh, kw), (sh, sw), (dh, dw) = _two(case["kernel_size"]), _two(case["stride"]), _two(case["dilation"])
    if case["pad_mode"] == "valid":
        return 0, 0, 0, 0
    if case["pad_mode"] == "same":
        return (*same_pads(h, kh, sh, dh), *same_pads(w, kw, sw, dw))
    if case["pad_mode"] == "pad":
        pad = case["pad"]
        return (pad,) * 4 if isinstance(pad, int) else tuple(int(p) for p in pad)  # type: ignore[return-value]
    raise ValueError(f"pad_mode must be valid, same or pad, got {case['pad_mode']!r}")


def ms_expected(case: dict, dout: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A MindSpore case's exact gradient (float64, NCHW) and its float32 rounding bound per cell.

    The bound is gamma_(n+1) * sum |dout * weight| over the n terms of the cell: what any order of
    float32 multiply-adds of the float32 inputs can be off by (Higham, Accuracy and Stability, 3.1)."""
    n, cin, h, w = case["input_size"]
    group = case["group"]
    kh, kw = _two(case["kernel_size"])
    strides, dilations = _two(case["stride"]), _two(case["dilation"])
    if weight.shape != (case["out_channel"], cin // group, kh, kw) or dout.shape[:2] != (n, case["out_channel"]):
        raise ValueError(f"weight {weight.shape} / dout {dout.shape} do not fit out_channel "
                         f"{case['out_channel']}, input_size {case['input_size']}, group {group}, kernel {kh}x{kw}")
    pads = ms_pads(case)
    out = tuple(output_size((h, w)[a], (kh, kw)[a], strides[a], dilations[a], pads[2 * a], pads[2 * a + 1])
                for a in (0, 1))
    if out != dout.shape[2:]:
        raise ValueError(f"dout is {dout.shape[2:]} (rows, cols), the window gives {out}")
    hwio = np.asarray(weight, np.float64).transpose(2, 3, 1, 0)
    dy = np.asarray(dout, np.float64).transpose(0, 2, 3, 1)
    exact = backprop_input((h, w), hwio, dy, strides, dilations, pads, group)
    magnitude = backprop_input((h, w), np.abs(hwio), np.abs(dy), strides, dilations, pads, group)
    terms = (case["out_channel"] // group) * kh * kw + 1
    gamma = terms * FLOAT32_UNIT / (1 - terms * FLOAT32_UNIT)
    return exact.transpose(0, 3, 1, 2), gamma * magnitude.transpose(0, 3, 1, 2)


def check_ms(path: Path) -> tuple[list[str], str]:
    """Problems with a mindspore file (empty when it is right) and a one-line summary."""
    archive, cases = load(path)
    problems, worst, seen = [], 0.0, {"meta"}
    for case in cases:
        i = case["id"]
        try:
            arrays = _arrays(archive, i, ("dout", "weight", "expected"))
            seen.update(f"{i}_{name}" for name in arrays)
            exact, bound = ms_expected(case, arrays["dout"], arrays["weight"])
        except (KeyError, ValueError) as err:
            problems.append(f"case {i}: {err}")
            continue
        got = arrays["expected"]
        if got.shape != tuple(case["input_size"]) or got.dtype != np.float32:
            problems.append(f"case {i}: expected is {got.dtype} {got.shape}, MindSpore returns float32 "
                            f"{tuple(case['input_size'])}")
            continue
        # the float32 output's own rounding (half an ulp of the exact value) comes on top of the sum's
        allowed = bound + FLOAT32_UNIT * np.abs(exact) + np.finfo(np.float32).tiny
        ratio = np.abs(got.astype(np.float64) - exact) / allowed
        worst = max(worst, float(ratio.max(initial=0.0)))
        if not np.all(ratio <= 1):
            where = np.unravel_index(np.argmax(ratio), ratio.shape)
            problems.append(f"case {i} ({case['pad_mode']}, group {case['group']}): MindSpore's "
                            f"expected{list(where)} = {got[where]!r}, the exact sum is {exact[where]!r} "
                            f"(allowed {allowed[where]:.3g})")
    extra = sorted(set(archive.files) - seen)
    if extra:
        problems.append(f"arrays that no case uses: {extra[:5]}{' ...' if len(extra) > 5 else ''}")
    modes = {m: sum(c.get("pad_mode") == m for c in cases) for m in ("valid", "same", "pad")}
    summary = (f"{path.name}: {len(cases)} MindSpore 2.10 cases ({modes['valid']} valid, {modes['same']} same, "
               f"{modes['pad']} pad) within float32 rounding of the exact sum (worst {worst:.2f} of the bound)")
    return problems, summary


def check(folder: Path, out=print) -> int:
    """Check the files in ``folder`` (either may be missing, not both); 0 if all is right, else 1."""
    found, failed = 0, False
    for name, checker in ((TF_FILE, check_tf), (MS_FILE, check_ms)):
        path = Path(folder) / name
        if not path.exists():
            out(f"{name}: not in {folder}, not checked")
            continue
        found += 1
        problems, summary = checker(path)
        if problems:
            failed = True
            out(f"{name}: {len(problems)} problem(s)")
            for problem in problems:
                out(f"  {problem}")
        else:
            out(f"ok  {summary}")
    if not found:
        out(f"no {TF_FILE} or {MS_FILE} in {folder}")
        return 1
    return 1 if failed else 0


# ---------------------------------------------------------------------------------------------
# Writing fresh files

def write_npz(path: Path, meta: list[dict], arrays: dict[str, np.ndarray]) -> Path:
    """An .npz as ``numpy.savez_compressed`` writes it, but with fixed entry dates: same input, same bytes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    entries = {"meta": np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8), **arrays}
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, array in entries.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, np.asarray(array), allow_pickle=False)
            archive.writestr(info, buffer.getvalue())
    return path


def _window(rng: np.random.Generator, fmt: str, padding: str) -> dict:
    strides, dilations = [int(v) for v in rng.integers(1, 4, 2)], [int(v) for v in rng.integers(1, 4, 2)]
    explicit: list[int] = []
    if padding == "EXPLICIT":
        hw = [int(v) for v in rng.integers(0, 4, 4)]
        explicit = [0, 0, 0, 0, *hw] if fmt == "NCHW" else [0, 0, *hw, 0, 0]
    four = (lambda pair: [1, 1, *pair]) if fmt == "NCHW" else (lambda pair: [1, *pair, 1])
    return dict(strides=four(strides), dilations=four(dilations), padding=padding, explicit_paddings=explicit,
                data_format=fmt)


def _shape(fmt: str, n: int, h: int, w: int, c: int) -> tuple[int, int, int, int]:
    return (n, c, h, w) if fmt == "NCHW" else (n, h, w, c)


def random_tf_case(rng: np.random.Generator, case_id: int) -> tuple[dict, dict[str, np.ndarray]]:
    """One case like the committed ones: bpi for even ids, dwf for odd; batch 1-3, input 1-12 rows and columns,
    kernel 1-4, strides and dilations 1-3, explicit pads 0-3, any layout, dtype and padding; drawn again
    until some window fits."""
    op = "bpi" if case_id % 2 == 0 else "dwf"
    while True:
        fmt, padding = str(rng.choice(LAYOUTS)), str(rng.choice(PADDINGS))
        dtype = str(rng.choice(DTYPES))
        window = _window(rng, fmt, padding)
        n, h, w = int(rng.integers(1, 4)), int(rng.integers(1, 13)), int(rng.integers(1, 13))
        kh, kw = int(rng.integers(1, 5)), int(rng.integers(1, 5))
        case = dict(id=case_id, op=op, **window, dtype=dtype)
        strides, dilations = _spatial(window["strides"], fmt), _spatial(window["dilations"], fmt)
        pads = tf_pads(case, (h, w), (kh, kw))
        oh = output_size(h, kh, strides[0], dilations[0], pads[0], pads[1])
        ow = output_size(w, kw, strides[1], dilations[1], pads[2], pads[3])
        if oh and ow:
            break
    if op == "bpi":
        groups, cin_g, cout_g = int(rng.integers(1, 4)), int(rng.integers(1, 5)), int(rng.integers(1, 5))
        two = groups == 1 and rng.random() < 0.05  # input_sizes as [height, width]
        case.update(input_sizes=[h, w] if two else list(_shape(fmt, n, h, w, groups * cin_g)), groups=groups)
        arrays = {"filter": rng.standard_normal((kh, kw, cin_g, groups * cout_g)),
                  "out_backprop": rng.standard_normal(_shape(fmt, n, oh, ow, groups * cout_g))}
    else:
        c, m = int(rng.integers(1, 5)), int(rng.integers(1, 4))
        case.update(filter_sizes=[kh, kw, c, m])
        arrays = {"input": rng.standard_normal(_shape(fmt, n, h, w, c)),
                  "out_backprop": rng.standard_normal(_shape(fmt, n, oh, ow, c * m))}
    arrays["expected"] = tf_expected(case, arrays)
    return case, arrays


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def tf_verdict(tf: Any, case: dict, arrays: dict[str, np.ndarray]) -> str:
    """What TensorFlow (CPU, float32) does with a case: agrees, differs rel X, or error: its message's tail."""
    window = {k: case[k] for k in ("strides", "padding", "explicit_paddings", "data_format", "dilations")}
    f32 = {name: tf.constant(a.astype(np.float32)) for name, a in arrays.items() if name != "expected"}
    try:
        with tf.device("/CPU:0"):
            if case["op"] == "bpi":
                got = tf.raw_ops.Conv2DBackpropInput(
                    input_sizes=tf.constant(case["input_sizes"], tf.int32), filter=f32["filter"],
                    out_backprop=f32["out_backprop"], **window)
            else:
                got = tf.raw_ops.DepthwiseConv2dNativeBackpropFilter(
                    input=f32["input"], filter_sizes=tf.constant(case["filter_sizes"], tf.int32),
                    out_backprop=f32["out_backprop"], **window)
        got = np.asarray(got, dtype=np.float64)
    except Exception as err:  # TensorFlow refuses many settings on CPU: that is the verdict
        message = re.sub(r"\s*name:\s*$", "", " ".join(str(err).split()))  # eager ops end with "name: "
        return "error: " + message[-160:]
    expected = arrays["expected"]
    if got.shape != expected.shape:
        return f"error: returned shape {got.shape}, expected {expected.shape}"
    rel = float(np.abs(got - expected).max(initial=0.0)) / max(float(np.abs(expected).max(initial=0.0)), 1e-30)
    return "agrees" if rel <= 1e-4 else f"differs rel {rel:.3g}"


def random_ms_case(rng: np.random.Generator, case_id: int) -> tuple[dict, dict[str, np.ndarray]]:
    """One MindSpore case like the committed ones: group 1, 2 or 4 with 1-3 channels in and out per group,
    batch 1-2, input 2-11, kernel 1-3, stride and dilation 1-3 (ints or pairs), valid / same / pad."""
    def one_or_two(high: int) -> Any:
        if rng.random() < 0.5:
            return int(rng.integers(1, high + 1))
        return [int(v) for v in rng.integers(1, high + 1, 2)]

    while True:
        group = int(rng.choice([1, 2, 4]))
        cin_g, cout_g = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        n, h, w = int(rng.integers(1, 3)), int(rng.integers(2, 12)), int(rng.integers(2, 12))
        kernel, stride, dilation = one_or_two(3), one_or_two(3), one_or_two(3)
        pad_mode = str(rng.choice(["valid", "same", "pad"]))
        pad: Any = 0
        if pad_mode == "pad":
            pad = (0 if rng.random() < 0.3 else int(rng.integers(1, 3)) if rng.random() < 0.3
                   else [int(v) for v in rng.integers(0, 3, 4)])
        case = dict(id=case_id, out_channel=group * cout_g, kernel_size=kernel, pad_mode=pad_mode, pad=pad,
                    stride=stride, dilation=dilation, group=group, input_size=[n, group * cin_g, h, w])
        (kh, kw), (sh, sw), (dh, dw) = _two(kernel), _two(stride), _two(dilation)
        top, bottom, left, right = ms_pads(case)
        oh, ow = output_size(h, kh, sh, dh, top, bottom), output_size(w, kw, sw, dw, left, right)
        if oh and ow:
            break
    arrays = {"dout": rng.standard_normal((n, group * cout_g, oh, ow)).astype(np.float32),
              "weight": rng.standard_normal((group * cout_g, cin_g, kh, kw)).astype(np.float32)}
    return case, arrays


def _ms_run(ms: Any, case: dict, arrays: dict[str, np.ndarray]) -> np.ndarray:
    tuple_or_int = (lambda v: tuple(v) if isinstance(v, list) else v)
    op = ms.ops.Conv2DBackpropInput(case["out_channel"], tuple_or_int(case["kernel_size"]),
                                    pad_mode=case["pad_mode"], pad=tuple_or_int(case["pad"]),
                                    stride=tuple_or_int(case["stride"]), dilation=tuple_or_int(case["dilation"]),
                                    group=case["group"])
    out = op(ms.Tensor(arrays["dout"]), ms.Tensor(arrays["weight"]), tuple(case["input_size"]))
    return np.asarray(out.asnumpy(), dtype=np.float32)


def write(out_dir: Path, seed: int = 0, cases: int = 160, ms_cases: int = 40, out=print) -> list[Path]:
    """Write fresh tf_semantics.npz (and mindspore.npz when MindSpore is importable) into ``out_dir``."""
    out_dir = Path(out_dir)
    rng = np.random.default_rng([seed, 0])
    tf = None
    if _importable("tensorflow"):
        import tensorflow as tf  # noqa: F811 -- optional peer
        out(f"TensorFlow {tf.__version__}: filling the tf verdicts")
    else:
        out("TensorFlow not importable: every tf verdict is 'not run'")
    meta, arrays = [], {}
    for i in range(cases):
        case, case_arrays = random_tf_case(rng, i)
        case["tf"] = tf_verdict(tf, case, case_arrays) if tf is not None else "not run"
        meta.append(case)
        arrays.update({f"{i}_{name}": a for name, a in case_arrays.items()})
    written = [write_npz(out_dir / TF_FILE, meta, arrays)]
    out(f"wrote {written[-1]} ({cases} cases)")
    if not _importable("mindspore"):
        out(f"MindSpore not importable: {MS_FILE} not written (pip install 'mindspore==2.10.*')")
        return written
    import mindspore as ms

    rng = np.random.default_rng([seed, 1])
    meta, arrays = [], {}
    for i in range(ms_cases):
        case, case_arrays = random_ms_case(rng, i)
        case_arrays["expected"] = _ms_run(ms, case, case_arrays)
        meta.append(case)
        arrays.update({f"{i}_{name}": a for name, a in case_arrays.items()})
    written.append(write_npz(out_dir / MS_FILE, meta, arrays))
    out(f"wrote {written[-1]} ({ms_cases} cases, MindSpore {ms.__version__})")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Check tests/data/*.npz against a float64 implementation of the definition, or write "
                    "fresh files in their format.", epilog=FORMAT,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", nargs="?", const=str(DATA), metavar="DIR",
                      help=f"check the files in DIR (default, with DIR {DATA.relative_to(ROOT)})")
    mode.add_argument("--write", metavar="OUT_DIR", help="write fresh files into OUT_DIR")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random cases (--write)")
    parser.add_argument("--cases", type=int, default=160, help="TensorFlow cases to write (default 160)")
    parser.add_argument("--ms-cases", type=int, default=40, help="MindSpore cases to write (default 40)")
    args = parser.parse_args(argv)
    if args.write is not None:
        if args.cases < 1 or args.ms_cases < 1:
            parser.error("--cases and --ms-cases must be at least 1")
        write(Path(args.write), seed=args.seed, cases=args.cases, ms_cases=args.ms_cases)
        return check(Path(args.write))
    return check(Path(args.check or DATA))


if __name__ == "__main__":
    sys.exit(main())
