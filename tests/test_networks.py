"""The networks of ``convviz bench --sweep`` (convviz.networks): each has the convolution
layers its paper and torchvision's implementation have."""

from __future__ import annotations

import pytest

from convviz import networks

# Convolutions (stem, blocks' convolutions, shortcut projections or up-convolutions, head):
# the counts of the published architectures, squeeze-and-excite and classifiers left out.
COUNTS = {"resnet18": 20, "resnet50": 53, "mobilenet_v2": 52, "mobilenet_v3_large": 46, "efficientnet_b0": 49,
          "vgg16": 13, "unet": 23}


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_each_network_has_its_layers(name):
    layers = networks.layers(name)
    assert len(layers) == COUNTS[name]
    for layer in layers:
        assert layer.k in (1, 2, 3, 5, 7) and layer.stride in (1, 2) and layer.size >= 7
        assert not layer.depthwise or layer.c_in == layer.c_out


def test_the_layers_people_have():
    """Channel counts that are not multiples of 64, 5x5 and 7x7 kernels, both strides."""
    found = networks.distinct_layers()
    channels = {layer.c_in for layer in found} | {layer.c_out for layer in found}
    assert {24, 40, 72, 96, 112, 144, 160, 192, 320} <= channels
    assert {layer.k for layer in found} >= {1, 3, 5, 7} and {layer.stride for layer in found} == {1, 2}
    assert networks.layers("mobilenet_v3_large")[1] == networks.Layer(112, 16, 16, 3, 1, depthwise=True)
    assert networks.Layer(7, 512, 2048, 1, 1) in networks.layers("resnet50")
    with pytest.raises(ValueError, match="unknown network 'alexnet'"):
        networks.layers("alexnet")
