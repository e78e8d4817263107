"""The convolution layers of real networks, for ``convviz bench --sweep``.

Each network is written down as its published configuration (the tables of the
papers and of torchvision's implementations), and :func:`layers` unrolls it into
its convolution layers at a 224 x 224 input (256 x 256 for the U-Net): input size,
channels, kernel, stride, and whether the layer is depthwise.  Squeeze-and-excite
and classifier layers, which act on a 1 x 1 image, are left out; so are pooling
and activations, which are not convolutions.  :func:`distinct_layers` keeps each
(size, channels, kernel, stride, depthwise) once, in order of first use.

Examples
--------
>>> from convviz import networks
>>> [layer.describe() for layer in networks.layers("resnet18")[:2]]
['224x224 3->64 k7 s2', '56x56 64->64 k3 s1']
>>> len(networks.distinct_layers())
132
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NETWORKS", "Layer", "distinct_layers", "layers"]


@dataclass(frozen=True)
class Layer:
    """One convolution of a network: a ``size`` x ``size`` input of ``c_in``
    channels to ``c_out`` channels (for a depthwise layer ``c_out == c_in``:
    multiplier 1), a square ``k`` x ``k`` kernel, ``stride``, SAME padding."""

    size: int
    c_in: int
    c_out: int
    k: int
    stride: int
    depthwise: bool = False

    def describe(self) -> str:
        kind = " depthwise" if self.depthwise else ""
        return f"{self.size}x{self.size} {self.c_in}->{self.c_out} k{self.k} s{self.stride}{kind}"


def _out(size: int, stride: int) -> int:
    return -(-size // stride)  # SAME padding: ceil(size / stride)


def _resnet_basic(blocks: tuple[int, ...]) -> list[Layer]:
    """ResNet-18/34: a 7x7 stem, then stages of two 3x3 convolutions per block."""
    out = [Layer(224, 3, 64, 7, 2)]
    size, c = 56, 64  # after the stem and a 3x3 max pool of stride 2
    for stage, repeat in enumerate(blocks):
        width = 64 * 2 ** stage
        for block in range(repeat):
            stride = 2 if stage and not block else 1
            out.append(Layer(size, c, width, 3, stride))
            if stride != 1 or c != width:
                out.append(Layer(size, c, width, 1, stride))  # the shortcut's projection
            size = _out(size, stride)
            out.append(Layer(size, width, width, 3, 1))
            c = width
    return out


def _resnet_bottleneck(blocks: tuple[int, ...]) -> list[Layer]:
    """ResNet-50/101 (torchvision, "v1.5": the stride on the 3x3): 1x1, 3x3, 1x1 per block."""
    out = [Layer(224, 3, 64, 7, 2)]
    size, c = 56, 64
    for stage, repeat in enumerate(blocks):
        width = 64 * 2 ** stage
        for block in range(repeat):
            stride = 2 if stage and not block else 1
            out.append(Layer(size, c, width, 1, 1))
            out.append(Layer(size, width, width, 3, stride))
            if block == 0:
                out.append(Layer(size, c, 4 * width, 1, stride))  # the shortcut's projection
            size = _out(size, stride)
            out.append(Layer(size, width, 4 * width, 1, 1))
            c = 4 * width
    return out


def _inverted_residuals(stem: int, blocks: list[tuple[int, int, int, int, int]], head: int,
                        ratio: bool = True) -> list[Layer]:
    """MobileNetV2-style networks: a 3x3 stem of stride 2, then blocks of (expansion,
    kernel, output channels, stride, repeats) -- the expansion a ratio of the input
    channels, or (``ratio=False``) the expanded channels themselves: a 1x1 expansion
    (none when it would keep the channels), a depthwise k x k, a 1x1 projection; a 1x1
    head."""
    out = [Layer(224, 3, stem, 3, 2)]
    size, c = 112, stem
    for expand, k, c_out, stride, repeat in blocks:
        for block in range(repeat):
            s = stride if block == 0 else 1
            wide = c * expand if ratio else expand
            if wide != c:
                out.append(Layer(size, c, wide, 1, 1))
            out.append(Layer(size, wide, wide, k, s, depthwise=True))
            size = _out(size, s)
            out.append(Layer(size, wide, c_out, 1, 1))
            c = c_out
    out.append(Layer(size, c, head, 1, 1))
    return out


def _vgg16() -> list[Layer]:
    out, size, c = [], 224, 3
    for width, repeat in ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3)):
        for _ in range(repeat):
            out.append(Layer(size, c, width, 3, 1))
            c = width
        size //= 2
    return out


def _unet() -> list[Layer]:
    """The U-Net of Ronneberger et al. with SAME padding at 256 x 256, 3 channels in and
    2 classes out; each 2x2 up-convolution written as the convolution whose input
    gradient it is (the up-sampled size, k2 s2, the channels swapped)."""
    out, size, c = [], 256, 3
    for width in (64, 128, 256, 512, 1024):
        out += [Layer(size, c, width, 3, 1), Layer(size, width, width, 3, 1)]
        c = width
        size //= 2 if width != 1024 else 1
    for width in (512, 256, 128, 64):
        size *= 2
        out.append(Layer(size, width, c, 2, 2))  # up-convolution c -> width
        out += [Layer(size, 2 * width, width, 3, 1), Layer(size, width, width, 3, 1)]
        c = width
    out.append(Layer(size, c, 2, 1, 1))
    return out


#: MobileNetV2 (Sandler et al., table 2): (expansion ratio, kernel, channels, stride, repeats).
MOBILENET_V2 = [(1, 3, 16, 1, 1), (6, 3, 24, 2, 2), (6, 3, 32, 2, 3), (6, 3, 64, 2, 4), (6, 3, 96, 1, 3),
                (6, 3, 160, 2, 3), (6, 3, 320, 1, 1)]
#: MobileNetV3-Large (Howard et al., table 1): (expansion channels, kernel, channels, stride, 1).
MOBILENET_V3_LARGE = [(16, 3, 16, 1, 1), (64, 3, 24, 2, 1), (72, 3, 24, 1, 1), (72, 5, 40, 2, 1),
                      (120, 5, 40, 1, 1), (120, 5, 40, 1, 1), (240, 3, 80, 2, 1), (200, 3, 80, 1, 1),
                      (184, 3, 80, 1, 1), (184, 3, 80, 1, 1), (480, 3, 112, 1, 1), (672, 3, 112, 1, 1),
                      (672, 5, 160, 2, 1), (960, 5, 160, 1, 1), (960, 5, 160, 1, 1)]
#: EfficientNet-B0 (Tan and Le, table 1): (expansion ratio, kernel, channels, stride, repeats).
EFFICIENTNET_B0 = [(1, 3, 16, 1, 1), (6, 3, 24, 2, 2), (6, 5, 40, 2, 2), (6, 3, 80, 2, 3), (6, 5, 112, 1, 3),
                   (6, 5, 192, 2, 4), (6, 3, 320, 1, 1)]

NETWORKS = {
    "resnet18": lambda: _resnet_basic((2, 2, 2, 2)),
    "resnet50": lambda: _resnet_bottleneck((3, 4, 6, 3)),
    "mobilenet_v2": lambda: _inverted_residuals(32, MOBILENET_V2, 1280),
    "mobilenet_v3_large": lambda: _inverted_residuals(16, MOBILENET_V3_LARGE, 960, ratio=False),
    "efficientnet_b0": lambda: _inverted_residuals(32, EFFICIENTNET_B0, 1280),
    "vgg16": _vgg16,
    "unet": _unet,
}


def layers(network: str) -> list[Layer]:
    """Every convolution layer of ``network`` (a key of :data:`NETWORKS`), in order.

    Examples
    --------
    >>> from convviz.networks import layers
    >>> sum(layer.depthwise for layer in layers("mobilenet_v2"))
    17
    """
    if network not in NETWORKS:
        raise ValueError(f"networks: unknown network {network!r}; choose from {sorted(NETWORKS)}")
    return NETWORKS[network]()


def distinct_layers(networks: list[str] | None = None) -> list[Layer]:
    """The distinct layers of ``networks`` (all of :data:`NETWORKS` by default), each
    once, in order of first use."""
    seen: dict[Layer, None] = {}
    for name in networks or list(NETWORKS):
        for layer in layers(name):
            seen.setdefault(layer)
    return list(seen)
