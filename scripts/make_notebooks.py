"""Write the tutorial notebooks in notebooks/ (outputs stripped).

The notebooks are generated from this file so that they stay consistent and
never carry stale outputs: edit here, then run ``python scripts/make_notebooks.py``.
The test suite executes every notebook and checks that the committed files match
this script's output.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

OUT = Path(__file__).resolve().parent.parent / "notebooks"


def md(text: str):
    return new_markdown_cell(text.strip("\n"))


def code(text: str):
    return new_code_cell(text.strip("\n"))


def exercise(question: str, starter: str, solution: str) -> list:
    """A question, a cell to work in, and a solution whose code is hidden until clicked."""
    cell = new_code_cell(solution.strip("\n"))
    cell.metadata["jupyter"] = {"source_hidden": True}
    cell.metadata["tags"] = ["solution"]
    return [md("**Exercise.** " + question.strip()), code(starter),
            md("*Solution (click the collapsed cell below to show it):*"), cell]


SETUP_CELL = """
%matplotlib inline
import numpy as np
import matplotlib.pyplot as plt
import convviz
from convviz import viz
"""

NOTEBOOKS: dict[str, list] = {}

NOTEBOOKS["01_tour.ipynb"] = [
    md("""
# A tour of convviz

convviz computes two gradients of 2-D convolution with TensorFlow's exact semantics and
draws them from the same numbers:

* `convviz.conv2d_backprop_input` -- dL/dx, the gradient with respect to the input
  (TensorFlow `Conv2DBackpropInput`);
* `convviz.depthwise_conv2d_native_backprop_filter` -- dL/dW of a depthwise convolution
  (TensorFlow `DepthwiseConv2dNativeBackpropFilter`).

This notebook is a quick look at each part: the two ops, the geometry, the figures.
"""),
    code(SETUP_CELL),
    code("convviz.show_versions()"),
    md("""
## The input gradient

A forward convolution `y = conv2d(x, W)` turns each window of `x` into one cell of `y`.
Going backwards, each cell of `dL/dy` (`out_backprop`) is sent back through every filter
tap to the input cell that tap read. Arguments follow TensorFlow: `input_sizes` in NHWC
order, the filter as `[KH, KW, C_in, C_out]`, strides and dilations as 4 values.
"""),
    code("""
filt = np.ones((3, 3, 1, 1))
dy = np.ones((1, 2, 2, 1))
dx = convviz.conv2d_backprop_input([1, 5, 5, 1], filt, dy, strides=[1, 2, 2, 1], padding="VALID")
dx[0, :, :, 0]
"""),
    md("""
The 2s and the 4 are cells that two or four windows share. Every padding (`SAME`, `VALID`,
`EXPLICIT`), layout (`NHWC`, `NCHW`), dilation, group count and dtype (float16, bfloat16,
float32, float64, int32) works the same way.

## The depthwise filter gradient

In a depthwise convolution each input channel has its own filter. Its gradient sums, for
every tap, the input values that tap read times the output gradient:
"""),
    code("""
x = np.arange(25.0).reshape(1, 5, 5, 1)
dy = np.ones((1, 3, 3, 1))
dw = convviz.depthwise_conv2d_native_backprop_filter(x, [3, 3, 1, 1], dy, [1, 1, 1, 1], "VALID")
dw[:, :, 0, 0]
"""),
    md("""
## The geometry behind the shapes

`convviz.ConvGeometry` holds the whole arithmetic: output sizes, the per-side padding, which
input cell every (output cell, tap) pair reads, and which input rows no window reads at all.
The kernels, the checks and the figures all use it.
"""),
    code("""
g = convviz.ConvGeometry.build(batch=1, input_hw=(8, 8), in_channels=1, out_channels=1,
                               kernel_hw=(3, 3), strides=(3, 3), dilations=(1, 1), padding="VALID")
print("output:", g.output_hw, " pads (top, bottom, left, right):", g.pads)
print("rows with no gradient:", g.zero_gradient_rows())
print("output (1, 1) through tap (2, 0) reads input", g.input_cell((1, 1), (2, 0)))
"""),
    md("""
## Clear errors

Arguments are checked before anything is computed; the message names the argument and
says what was expected.
"""),
    code("""
try:
    convviz.conv2d_backprop_input([1, 5, 5, 1], filt, np.ones((1, 3, 3, 1)), [1, 2, 2, 1], "VALID")
except ValueError as err:
    print(type(err).__name__, ":", err)
"""),
    md("""
## Pictures

`convviz.viz` draws the same numbers. A `Setup` describes a small convolution with readable
example values; the views take it.
"""),
    code("""
s = viz.Setup(input_hw=7, kernel_hw=3, strides=2, padding="SAME")
viz.scatter(s, out_cell=(1, 1));
"""),
    code("viz.coverage(s);"),
    md("""
The next notebooks go through these pictures one at a time. In JupyterLab,
`convviz.explore()` (notebook 08) lets you point at any number and see the cells and the worked sum that make it.
"""),
    *exercise(
        "Compute the input gradient of a 7x7 input for a 3x3 all-ones kernel with stride 3 and VALID "
        "padding, all-ones `dL/dy`. Which rows and columns get no gradient? Check with `ConvGeometry`.",
        "# your code here\n",
        """
dy = np.ones((1, 2, 2, 1))
dx = convviz.conv2d_backprop_input([1, 7, 7, 1], np.ones((3, 3, 1, 1)), dy, [1, 3, 3, 1], "VALID")
print(dx[0, :, :, 0])
g = convviz.ConvGeometry.build(batch=1, input_hw=(7, 7), in_channels=1, out_channels=1, kernel_hw=(3, 3),
                               strides=(3, 3), dilations=(1, 1), padding="VALID")
print("no gradient in rows", g.zero_gradient_rows(), "and columns", g.zero_gradient_cols())
"""),
]

NOTEBOOKS["02_input_gradient_as_scatter.ipynb"] = [
    md("""
# The input gradient as a scatter

For `y = conv2d(x, W)` with stride `s`, output cell `o` and tap `k` read input cell
`i = o * s - pad_before + k * dilation`. The gradient runs that arrow backwards: every
`dL/dy[o]` is multiplied by `W[k]` and added to `dL/dx[i]`. This is why the input gradient
is often called a *transposed convolution*.
"""),
    code(SETUP_CELL),
    code("""
s = viz.Setup(input_hw=7, kernel_hw=3, strides=2, padding="SAME")
viz.scatter(s, out_cell=(0, 0));
"""),
    md("""
At the corner, taps that land in the (hatched) padding carry their contribution nowhere:
they are crossed out. In the middle every tap lands on a real input cell:
"""),
    code("viz.scatter(s, out_cell=(2, 2));"),
    md("""
## All cells together

Adding the scatters of every output cell gives the whole input gradient. Run the animation
(the last frame is exactly what `conv2d_backprop_input` returns):
"""),
    code("""
from IPython.display import HTML
anim = viz.animate_input_gradient(s, interval=300)
plt.close(anim._fig)
HTML(viz.to_html(anim, progress=False))  # offline player: nothing loaded from the network
"""),
    code("""
final = anim.final_frame
kernel = s.plane(s.input_gradient())
print("last frame == kernel result:", np.array_equal(final, kernel))
"""),
    md("""
## The checkerboard

With kernel 3 and stride 2, neighbouring windows overlap by one cell, but only every other
cell. Counting how many (output cell, tap) pairs reach each input cell gives 1s, 2s and 4s:
a checkerboard. This is the *coverage*; it equals the input gradient of all-ones `dL/dy`
through an all-ones kernel.
"""),
    code("viz.coverage(viz.Setup(input_hw=10, kernel_hw=3, strides=2, padding='SAME'));"),
    md("With kernel 4 and stride 2 every interior cell is reached the same number of times:"),
    code("viz.coverage(viz.Setup(input_hw=10, kernel_hw=4, strides=2, padding='SAME'));"),
    md("""
## Scatter or gather: the same numbers

The same gradient can be computed as a *gather*: put `stride - 1` zeros between the cells of
`dL/dy`, pad, flip the kernel by 180 degrees and run an ordinary stride-1 correlation.
"""),
    code("viz.scatter_vs_gather(s);"),
    *exercise(
        "For stride 3, which kernel sizes from 1 to 9 give an even coverage (no checkerboard) in the "
        "interior? Use `viz.Setup(...).geometry.coverage()` on a 20x20 input with SAME padding and look at "
        "the middle rows.",
        "# your code here\n",
        """
for k in range(1, 10):
    cov = viz.Setup(input_hw=20, kernel_hw=k, strides=3, padding="SAME").geometry.coverage()
    middle = cov[8:12, 8:12]
    print(k, "even" if middle.min() == middle.max() else "checkerboard", np.unique(middle))
# Even exactly when k is a multiple of the stride: 3, 6, 9.
"""),
]

NOTEBOOKS["03_padding_and_lost_rows.ipynb"] = [
    md("""
# Padding, and the rows that get no gradient

TensorFlow's paddings:

* `VALID` -- no padding; `out = (in - eff) // stride + 1`;
* `SAME` -- `out = ceil(in / stride)`; the padding needed is split with the odd extra row
  at the bottom (and column at the right);
* `EXPLICIT` -- you give (before, after) per side.

where `eff = (kernel - 1) * dilation + 1` is the span of the (dilated) kernel.
"""),
    code(SETUP_CELL),
    code("viz.card(viz.Setup(input_hw=8, kernel_hw=3, strides=2, padding='SAME'));"),
    md("""
## Rows that no window reads

With VALID padding, when `(in - eff)` is not a multiple of the stride, the last rows of the
input are never read by the forward convolution. Their gradient is exactly zero:
"""),
    code("""
s = viz.Setup(input_hw=8, kernel_hw=3, strides=3)
print(s.geometry.zero_gradient_rows())
viz.coverage(s);
"""),
    code("""
dx = s.plane(s.input_gradient())
print("rows 6 and 7 of dL/dx:", dx[6:], sep="\\n")
"""),
    md("""
## Explicit, asymmetric padding

Padding is drawn as a hatched frame with its amount on each side. A window near the top
right reads mostly padding here:
"""),
    code("viz.scatter(viz.Setup(input_hw=6, kernel_hw=3, padding='EXPLICIT', pads=(2, 0, 1, 3)), (0, 5));"),
    md("The same numbers from the op itself, with TensorFlow's `explicit_paddings` (a pair per dimension):"),
    code("""
dx = convviz.conv2d_backprop_input([1, 6, 6, 1], np.ones((3, 3, 1, 1)), np.ones((1, 6, 8, 1)),
                                   [1, 1, 1, 1], "EXPLICIT", [0, 0, 2, 0, 1, 3, 0, 0])
dx[0, :, :, 0]
"""),
    *exercise(
        "For a 3x3 kernel and stride 2 with SAME padding, for which input sizes from 4 to 12 is the "
        "padding asymmetric (bottom greater than top)? Use `convviz.geometry.same_padding`.",
        "from convviz.geometry import same_padding\n# your code here\n",
        """
from convviz.geometry import same_padding
for n in range(4, 13):
    before, after = same_padding(n, 3, 2, 1)
    print(n, (before, after), "asymmetric" if after > before else "")
# Even sizes need an odd total padding (1), which goes to the bottom.
"""),
    *exercise(
        "For a VALID convolution of a 10x10 input with a 3x3 kernel, list the rows that get no gradient for "
        "strides 1 to 5. Why does stride 5 lose rows in the middle too?",
        "# your code here\n",
        """
for stride in range(1, 6):
    g = viz.Setup(input_hw=10, kernel_hw=3, strides=stride).geometry
    print(stride, g.zero_gradient_rows())
# Stride 5: the windows cover rows 0-2 and 5-7; rows 3-4 lie between them and 8-9 after the last one.
"""),
]

NOTEBOOKS["04_dilation_and_gridding.ipynb"] = [
    md("""
# Dilation and gridding

Dilation `d` spreads the taps of a kernel `d` cells apart: a 3-tap kernel with dilation 2
spans 5 cells. Each output gradient cell then reaches input cells 2 apart.
"""),
    code(SETUP_CELL),
    code("viz.scatter(viz.Setup(input_hw=9, kernel_hw=3, dilations=2, padding='SAME'), (4, 4));"),
    md("""
## Gridding

Tap `k` of output `o` reads input `o * s + k * d - pad`. If `s` and `d` share a factor
`g = gcd(s, d) > 1`, every index read is `-pad` plus a multiple of `g`: whole residue classes
of rows are never read, and get no gradient at all. This is the *gridding* artefact of
dilated convolutions.
"""),
    code("viz.coverage(viz.Setup(input_hw=11, kernel_hw=3, strides=2, dilations=2));"),
    code("""
from math import gcd
for s_ in (1, 2, 3):
    for d_ in (1, 2, 3):
        g = viz.Setup(input_hw=24, kernel_hw=3, strides=s_, dilations=d_, padding="SAME").geometry
        print(f"stride {s_}, dilation {d_}: gcd {gcd(s_, d_)}, rows with no gradient: {len(g.zero_gradient_rows())}")
"""),
    md("Stride 2 with dilation 3 (gcd 1) reaches every row again:"),
    code("viz.coverage(viz.Setup(input_hw=11, kernel_hw=3, strides=2, dilations=3, padding='SAME'));"),
    *exercise(
        "Check numerically, with `convviz.conv2d_backprop_input` on random data, that with stride 2 and "
        "dilation 2 the odd rows of the input gradient are exactly zero.",
        "rng = np.random.default_rng(0)\n# your code here\n",
        """
rng = np.random.default_rng(0)
filt = rng.standard_normal((3, 3, 2, 4))
dy = rng.standard_normal((1, 4, 4, 4))
dx = convviz.conv2d_backprop_input([1, 11, 11, 2], filt, dy, [1, 2, 2, 1], "VALID", dilations=[1, 2, 2, 1])
print("odd rows all zero:", not dx[0, 1::2].any(), "| even rows non-zero:", bool(dx[0, ::2].any()))
"""),
]

NOTEBOOKS["05_depthwise_filter_gradient.ipynb"] = [
    md("""
# The depthwise filter gradient

A depthwise convolution filters each input channel with its own `KH x KW` kernel (times a
channel multiplier `M`: output channel `c * M + m`). The gradient of tap `(kh, kw)` of
channel `c` sums, over every output cell, the input value that tap read times `dL/dy`:

`dW[kh, kw, c, m] = sum over n, oh, ow of x[n, oh*s - pad + kh*d, ow*s - pad + kw*d, c] * dy[n, oh, ow, c*M + m]`

The input cells one tap reads form a lattice: the stride's spacing, shifted by the tap's
(dilated) offset.
"""),
    code(SETUP_CELL),
    code("""
s = viz.Setup(input_hw=8, kernel_hw=3, strides=2, padding="SAME")
viz.depthwise(s, tap=(0, 1));
"""),
    code("viz.depthwise(s, tap=(2, 2));"),
    md("Tap by tap, the whole depthwise filter gradient:"),
    code("""
from IPython.display import HTML
anim = viz.animate_depthwise_filter_gradient(s, interval=400)
plt.close(anim._fig)
HTML(viz.to_html(anim, progress=False))  # offline player: nothing loaded from the network
"""),
    md("""
## Channel multiplier

With multiplier 2 each input channel feeds two output channels and gets two filters;
their gradients read the same input lattice against different `dL/dy` channels.
"""),
    code("viz.depthwise(viz.Setup(input_hw=7, kernel_hw=3, padding='SAME', in_channels=2, multiplier=2), (1, 1), channel=1, multiplier=1);"),
    md("""
## Dilation: where TensorFlow's CPU kernel goes wrong

TensorFlow 2.21's CPU kernel for this op ignores `dilations` (with SAME padding it silently
returns the undilated gradient). convviz follows the mathematics; the float64 reference in
`convviz.reference` agrees:
"""),
    code("""
rng = np.random.default_rng(1)
x = rng.standard_normal((2, 9, 9, 3))
dy = rng.standard_normal((2, 9, 9, 3))
args = ([3, 3, 3, 1], dy, [1, 1, 1, 1], "SAME")
dilated = convviz.depthwise_conv2d_native_backprop_filter(x, *args[:1], *args[1:], dilations=[1, 2, 2, 1])
reference = convviz.reference.depthwise_conv2d_native_backprop_filter(x, *args[:1], *args[1:], dilations=[1, 2, 2, 1])
undilated = convviz.depthwise_conv2d_native_backprop_filter(x, *args[:1], *args[1:])
print("matches the reference:", np.allclose(dilated, reference))
print("differs from the undilated answer by", float(np.abs(dilated - undilated).max()))
"""),
    *exercise(
        "With stride 2 and VALID padding on a 7x7 input and a 3x3 kernel, how many input cells does each "
        "tap read? Count them with `viz.Setup(...).depthwise_geometry.rows.index_table()`.",
        "# your code here\n",
        """
g = viz.Setup(input_hw=7, kernel_hw=3, strides=2).depthwise_geometry
print("output", g.output_hw, "-> every tap reads", g.output_hw[0] * g.output_hw[1], "cells")
print("tap (1, 1) reads rows", g.rows.index_table()[:, 1], "and columns", g.cols.index_table()[:, 1])
"""),
]

NOTEBOOKS["06_from_tensorflow_and_mindspore.ipynb"] = [
    md("""
# From TensorFlow and MindSpore to convviz

`convviz.compat` offers the TensorFlow and MindSpore entry points with their argument
names, so existing code changes only its import. Results are NumPy arrays.
"""),
    code(SETUP_CELL),
    code("""
from convviz.compat import tf as cvtf
from convviz.compat.mindspore import ops as msops

rng = np.random.default_rng(0)
filt = rng.standard_normal((3, 3, 4, 8)).astype(np.float32)
dy = rng.standard_normal((2, 5, 5, 8)).astype(np.float32)
dx = cvtf.raw_ops.Conv2DBackpropInput(input_sizes=[2, 10, 10, 4], filter=filt, out_backprop=dy,
                                      strides=[1, 2, 2, 1], padding="SAME")
dx.shape, dx.dtype
"""),
    md("The `tf.compat.v1` spelling, with padding given as (before, after) pairs:"),
    code("""
dx2 = cvtf.nn.conv2d_backprop_input([2, 10, 10, 4], filt, dy, [1, 2, 2, 1], [[0, 0], [0, 1], [0, 1], [0, 0]])
print("same as SAME:", np.array_equal(dx, dx2))
"""),
    md("""
MindSpore's primitive: weight `(C_out, C_in / group, K1, K2)`, NCHW by default, errors raised
where MindSpore documents them:
"""),
    code("""
op = msops.Conv2DBackpropInput(out_channel=8, kernel_size=3, pad_mode="same", stride=2)
dx_ms = op(dy.transpose(0, 3, 1, 2), filt.transpose(3, 2, 0, 1), (2, 4, 10, 10))
print("MindSpore layout, same numbers:", np.allclose(dx_ms.transpose(0, 2, 3, 1), dx, atol=1e-5))
try:
    msops.Conv2DBackpropInput(out_channel=8, kernel_size=3, pad_mode="full")
except ValueError as err:
    print("ValueError:", err)
"""),
    md("If TensorFlow is installed, compare directly (skipped otherwise):"),
    code("""
import os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # keep TensorFlow's start-up chatter out of the notebook
try:
    import tensorflow as tf
except ImportError:
    print("TensorFlow is not installed: nothing to compare")
else:
    ref = tf.raw_ops.Conv2DBackpropInput(input_sizes=[2, 10, 10, 4], filter=filt, out_backprop=dy,
                                         strides=[1, 2, 2, 1], padding="SAME").numpy()
    print("max difference to TensorFlow:", float(np.abs(ref - dx).max()))
"""),
    md("""
## Checking a gradient with finite differences

The input gradient is the derivative of `<conv2d(x, W), dy>` with respect to `x`. With the
forward op of convviz (in float64) we can check it numerically:
"""),
    code("""
x = rng.standard_normal((1, 6, 6, 2))
w = rng.standard_normal((3, 3, 2, 3))
kw = dict(strides=[1, 2, 2, 1], padding="SAME")
dy64 = rng.standard_normal(convviz.conv2d(x, w, **kw).shape)
analytic = convviz.conv2d_backprop_input(list(x.shape), w, dy64, **kw)
numeric = np.zeros_like(x)
eps = 1e-6
for idx in np.ndindex(x.shape):
    e = np.zeros_like(x); e[idx] = eps
    numeric[idx] = (np.vdot(convviz.conv2d(x + e, w, **kw), dy64) - np.vdot(convviz.conv2d(x - e, w, **kw), dy64)) / (2 * eps)
print("max |analytic - numeric| =", float(np.abs(analytic - numeric).max()))
"""),
    *exercise(
        "Do the same finite-difference check for the depthwise filter gradient with stride 2 and "
        "dilation 2 (use `convviz.depthwise_conv2d_native`).",
        "# your code here\n",
        """
x = rng.standard_normal((1, 7, 7, 2))
w = rng.standard_normal((3, 3, 2, 1))
kw = dict(strides=[1, 2, 2, 1], padding="SAME", dilations=[1, 2, 2, 1])
dy64 = rng.standard_normal(convviz.depthwise_conv2d_native(x, w, **kw).shape)
analytic = convviz.depthwise_conv2d_native_backprop_filter(x, list(w.shape), dy64, **kw)
numeric = np.zeros_like(w)
for idx in np.ndindex(w.shape):
    e = np.zeros_like(w); e[idx] = 1e-6
    numeric[idx] = (np.vdot(convviz.depthwise_conv2d_native(x, w + e, **kw), dy64)
                    - np.vdot(convviz.depthwise_conv2d_native(x, w - e, **kw), dy64)) / 2e-6
print("max |analytic - numeric| =", float(np.abs(analytic - numeric).max()))
"""),
]

NOTEBOOKS["07_speed.ipynb"] = [
    md("""
# Speed

convviz's kernels are C++ with SIMD variants (AVX-512, AVX2, plain C++) chosen at run time,
parallel over rows with OpenMP. `convviz.bench` times them -- and TensorFlow and PyTorch when
they are installed -- on the same data. This runs a quick version of the table; the full one is
`convviz bench` in a terminal, and the repository's `BENCHMARKS.md` has a complete run.
"""),
    code(SETUP_CELL),
    code("""
from convviz import bench
cases = [c for c in bench.CASES if c.name in ("bpi_tiny", "bpi_cifar", "dwf_tiny", "dwf_mult2")
         and c.dtype == "float32" and c.data_format == "NHWC"]
results, info = bench.run(cases, threads=2, min_seconds=0.05, min_rounds=2, max_rounds=5)
print(info["machine"]["cpu"], "-", info["machine"]["kernels"], "kernels; peers:", info["peers"])
print(bench.table(results))
"""),
    md("""
Results are bitwise the same for any number of threads: the depthwise filter gradient's partial
sums are merged in a fixed order.
"""),
    code("""
rng = np.random.default_rng(0)
x = rng.standard_normal((4, 32, 32, 16)).astype(np.float32)
dy = rng.standard_normal((4, 32, 32, 16)).astype(np.float32)
one = convviz.depthwise_conv2d_native_backprop_filter(x, [3, 3, 16, 1], dy, [1] * 4, "SAME", n_threads=1)
two = convviz.depthwise_conv2d_native_backprop_filter(x, [3, 3, 16, 1], dy, [1] * 4, "SAME", n_threads=2)
print("bitwise identical:", np.array_equal(one.view(np.uint32), two.view(np.uint32)))
"""),
    *exercise(
        "Time `conv2d_backprop_input` for a 1x56x56x64 input, 3x3 kernel, 64 output channels, with 1 and "
        "2 threads (`n_threads=`). How much faster is 2?",
        "import time\n# your code here\n",
        """
import time
f = rng.standard_normal((3, 3, 64, 64)).astype(np.float32)
g = rng.standard_normal((1, 56, 56, 64)).astype(np.float32)
for n in (1, 2):
    convviz.conv2d_backprop_input([1, 56, 56, 64], f, g, [1] * 4, "SAME", n_threads=n)
    start = time.perf_counter()
    for _ in range(10):
        convviz.conv2d_backprop_input([1, 56, 56, 64], f, g, [1] * 4, "SAME", n_threads=n)
    print(n, "thread(s):", (time.perf_counter() - start) / 10 * 1e3, "ms")
"""),
]

NOTEBOOKS["08_explorer.ipynb"] = [
    md("""
# The explorer

Point at any number and see where it comes from. Each panel is a grid of numbered cells:
the kernel `W`, the output gradient `dL/dy` and the input gradient `dL/dx` (or `x`, `dL/dy`
and the depthwise filter gradient `dL/dW`, or `x`, `W` and the forward output `y`).

- **Hover** (or tab to) a `dL/dx` cell: the `dL/dy` cells and kernel taps that reach it light
  up, and the worked sum is written out with its numbers. The numbers come from convviz's kernels.
- Hover a `dL/dy` cell: the cells it scatters to light up, each with its product written on it.
- Hover a padding cell (dashed) to read why it is there; rows marked *no gradient* are real
  input rows that no window reads.
- **Click** or **Enter** pins a cell, **arrow keys** move, **Escape** clears; **play** walks the
  output cell by cell.

Every control changes one parameter: rows and columns separately.
"""),
    code("""
import numpy as np
import convviz

convviz.explore(input=8, kernel=3, stride=2, padding="SAME")
"""),
    md("""
## Presets to try

Stride 3 on an input of 8 with VALID padding: the last two rows get no gradient at all.
Hover the band's label to read why.
"""),
    code("""
convviz.explore(input=8, kernel=3, stride=3, padding="VALID")
"""),
    md("""
The depthwise filter gradient with a channel multiplier of 2 and dilation 2: hover a tap of
`dL/dW` to see the lattice of input cells it reads (gridding).
"""),
    code("""
convviz.explore(op="depthwise_filter_grad", input=9, kernel=3, stride=2, dilation=2, multiplier=2)
"""),
    md("""
## Your own numbers

Pass `x=`, `W=` or `dy=` (2-D, or one channel of a 4-D array: `data_format=` and
`channel=` say which). Arrays fix the sizes they imply; a wrong shape is an error that says
what was expected.
"""),
    code("""
x = np.arange(36.0).reshape(6, 6) % 7 - 3
W = np.array([[1.0, 0.0, -1.0], [2.0, 0.0, -2.0], [1.0, 0.0, -1.0]])   # a Sobel kernel
convviz.explore(x=x, W=W, stride=1, padding="SAME")
"""),
    md("""
## Without Python: one HTML file

`convviz page --out explorer.html` (or `convviz.explorer.write_page`) writes the same explorer
as a single file that works offline. Settings in its URL query make a link to a preset, for
example `explorer.html?input=8&stride=3&padding=VALID` or
`explorer.html?op=depthwise_filter_grad&input=9&stride=2&dilation=2&multiplier=2`; every control
you change rewrites the query, so the address bar always holds a link to what you see.

The earlier matplotlib explorer, `convviz.widgets.explore()`, stays as a static fallback for
front ends without JavaScript widgets (it redraws a picture from a running kernel).
"""),
    code("""
from convviz.explorer import write_page

path = write_page("explorer.html", input=8, stride=3, padding="VALID")
print("open", path.resolve().as_uri() + "?op=depthwise_filter_grad&multiplier=2")
"""),
]


def build(out: Path = OUT) -> list[Path]:
    out.mkdir(exist_ok=True)
    written = []
    for name, cells in NOTEBOOKS.items():
        nb = new_notebook(cells=cells)
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nb.metadata["language_info"] = {"name": "python"}
        path = out / name
        nbformat.write(nb, str(path))
        written.append(path)
    return written


if __name__ == "__main__":
    for path in build(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT):
        print("wrote", path)
