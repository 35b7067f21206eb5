"""VGG-11/13/16/19, with and without batch norm, as torchvision defines them: `features` (3x3 convolutions,
ReLUs and 2x2 max-pools, one Sequential), a 7x7 adaptive average pool and a three-layer `classifier` with
dropout, with torchvision's names, module order, constructor keywords and initialisation, so a torchvision state
dict loads with load_state_dict(strict=True).

Must not: change a name, the order of modules or the default initialisation without checking against
torchvision (tests/python/test_models_torchvision.py); download weights (see _weights.py).
"""
from .. import flatten, nn
from ._weights import check_no_pretrained_weights

__all__ = ["VGG", "make_layers", "cfgs", "vgg11", "vgg11_bn", "vgg13", "vgg13_bn", "vgg16", "vgg16_bn", "vgg19",
           "vgg19_bn"]

# torchvision's configuration names: "A" is VGG-11, "B" VGG-13, "D" VGG-16, "E" VGG-19 (the letters of the
# paper's table); a number is a 3x3 convolution's output channels, "M" a 2x2 max-pool.
cfgs = {
    "A": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "B": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "D": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    "E": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M"],
}


class VGG(nn.Module):
    """VGG(features, num_classes=1000, init_weights=True, dropout=0.5): `features` must end with 512 channels
    (make_layers builds it from a configuration list)."""

    def __init__(self, features, num_classes=1000, init_weights=True, dropout=0.5):
        super().__init__()
        self.features = features
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096),
            nn.ReLU(True),
            nn.Dropout(p=dropout),
            nn.Linear(4096, 4096),
            nn.ReLU(True),
            nn.Dropout(p=dropout),
            nn.Linear(4096, num_classes),
        )
        if init_weights:
            for module in self.modules():
                if isinstance(module, nn.Conv2d):
                    nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
                    if module.bias is not None:
                        nn.init.constant_(module.bias, 0)
                elif isinstance(module, nn.BatchNorm2d):
                    nn.init.constant_(module.weight, 1)
                    nn.init.constant_(module.bias, 0)
                elif isinstance(module, nn.Linear):
                    nn.init.normal_(module.weight, 0, 0.01)
                    nn.init.constant_(module.bias, 0)

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(flatten(x, 1))


def make_layers(cfg, batch_norm=False):
    """The `features` Sequential of a configuration list (see cfgs), for 3-channel input; with batch_norm each
    convolution is followed by a BatchNorm2d before its ReLU."""
    layers = []
    in_channels = 3
    for value in cfg:
        if value == "M":
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
            continue
        layers.append(nn.Conv2d(in_channels, value, kernel_size=3, padding=1))
        if batch_norm:
            layers.append(nn.BatchNorm2d(value))
        layers.append(nn.ReLU(inplace=True))
        in_channels = value
    return nn.Sequential(*layers)


def _vgg(name, cfg, batch_norm, weights, keywords):
    check_no_pretrained_weights(name, weights, keywords)
    return VGG(make_layers(cfgs[cfg], batch_norm=batch_norm), **keywords)


def vgg11(*, weights=None, progress=True, **kwargs):
    """VGG-11 (configuration "A"); kwargs go to VGG (num_classes, init_weights, dropout)."""
    return _vgg("vgg11", "A", False, weights, kwargs)


def vgg11_bn(*, weights=None, progress=True, **kwargs):
    """VGG-11 with batch norm; kwargs go to VGG."""
    return _vgg("vgg11_bn", "A", True, weights, kwargs)


def vgg13(*, weights=None, progress=True, **kwargs):
    """VGG-13 (configuration "B"); kwargs go to VGG."""
    return _vgg("vgg13", "B", False, weights, kwargs)


def vgg13_bn(*, weights=None, progress=True, **kwargs):
    """VGG-13 with batch norm; kwargs go to VGG."""
    return _vgg("vgg13_bn", "B", True, weights, kwargs)


def vgg16(*, weights=None, progress=True, **kwargs):
    """VGG-16 (configuration "D"); kwargs go to VGG."""
    return _vgg("vgg16", "D", False, weights, kwargs)


def vgg16_bn(*, weights=None, progress=True, **kwargs):
    """VGG-16 with batch norm; kwargs go to VGG."""
    return _vgg("vgg16_bn", "D", True, weights, kwargs)


def vgg19(*, weights=None, progress=True, **kwargs):
    """VGG-19 (configuration "E"); kwargs go to VGG."""
    return _vgg("vgg19", "E", False, weights, kwargs)


def vgg19_bn(*, weights=None, progress=True, **kwargs):
    """VGG-19 with batch norm; kwargs go to VGG."""
    return _vgg("vgg19_bn", "E", True, weights, kwargs)
