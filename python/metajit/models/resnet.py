"""ResNets as torchvision defines them: BasicBlock (ResNet-18/34) and Bottleneck (ResNet-50/101/152, ResNeXt,
Wide ResNet), with torchvision's attribute names, module order, constructor keywords and initialisation, so a
torchvision state dict loads with load_state_dict(strict=True) and children() / named_modules() list the same
modules in the same order (nn.Sequential(*list(model.children())[:-1]) is the same feature extractor).

metajit's additions are keyword-only and default to torchvision's network: stem='cifar' (a 3x3 stride-1 first
convolution and an Identity in place of the max-pool, which has no parameters, so the names stay the same),
in_channels (input image channels) and width (channels of the first stage, 64 in torchvision).

Must not: change a name, the order of attribute assignment in __init__ (it is the order of children() and of
the state dict) or the default initialisation without checking against torchvision (tests/python/
test_models_torchvision.py); download weights (see _weights.py).
"""
from .. import flatten, nn
from ._weights import check_no_pretrained_weights

__all__ = ["BasicBlock", "Bottleneck", "ResNet", "resnet18", "resnet34", "resnet50", "resnet101", "resnet152",
           "resnext50_32x4d", "resnext101_32x8d", "wide_resnet50_2", "wide_resnet101_2"]


def conv3x3(in_planes, out_planes, stride=1, groups=1, dilation=1):
    """3x3 convolution whose padding keeps the size (at stride 1) for any dilation; no bias (a norm follows)."""
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=dilation, groups=groups,
                     bias=False, dilation=dilation)


def conv1x1(in_planes, out_planes, stride=1):
    """1x1 convolution without bias (a norm follows)."""
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with norms and a residual connection (projected by `downsample` when the shape
    changes). BasicBlock(inplanes, planes, stride=1, downsample=None, groups=1, base_width=64, dilation=1,
    norm_layer=None)."""

    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, base_width=64, dilation=1,
                 norm_layer=None):
        super().__init__()
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        if groups != 1 or base_width != 64:
            raise ValueError("BasicBlock only supports groups=1 and base_width=64")
        if dilation > 1:
            raise NotImplementedError("Dilation > 1 not supported in BasicBlock")
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = norm_layer(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = norm_layer(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (strided, grouped, dilated), 1x1 expand by `expansion` (4), each with a norm, and a
    residual connection; the stride sits on the 3x3 convolution (torchvision's "ResNet V1.5"). Bottleneck(inplanes,
    planes, stride=1, downsample=None, groups=1, base_width=64, dilation=1, norm_layer=None)."""

    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, base_width=64, dilation=1,
                 norm_layer=None):
        super().__init__()
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        width = int(planes * (base_width / 64.0)) * groups
        self.conv1 = conv1x1(inplanes, width)
        self.bn1 = norm_layer(width)
        self.conv2 = conv3x3(width, width, stride, groups, dilation)
        self.bn2 = norm_layer(width)
        self.conv3 = conv1x1(width, planes * self.expansion)
        self.bn3 = norm_layer(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    """ResNet(block, layers, num_classes=1000, zero_init_residual=False, groups=1, width_per_group=64,
    replace_stride_with_dilation=None, norm_layer=None, *, stem='imagenet', in_channels=3, width=64).

    The positional arguments and the first keywords are torchvision's; stem, in_channels and width are
    metajit's (see the module docstring)."""

    def __init__(self, block, layers, num_classes=1000, zero_init_residual=False, groups=1, width_per_group=64,
                 replace_stride_with_dilation=None, norm_layer=None, *, stem="imagenet", in_channels=3, width=64):
        super().__init__()
        if stem not in ("imagenet", "cifar"):
            raise ValueError(f"ResNet: stem must be 'imagenet' or 'cifar', got {stem!r}")
        if len(layers) != 4:
            raise ValueError(f"ResNet: layers must list the block count of 4 stages, got {layers!r}")
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        self._norm_layer = norm_layer
        self.inplanes = width
        self.dilation = 1
        if replace_stride_with_dilation is None:
            replace_stride_with_dilation = [False, False, False]
        if len(replace_stride_with_dilation) != 3:
            raise ValueError("replace_stride_with_dilation should be None or a 3-element tuple, got "
                             f"{replace_stride_with_dilation}")
        self.groups = groups
        self.base_width = width_per_group
        # The assignment order below is torchvision's: it is the order of children() and of the state dict.
        if stem == "imagenet":
            self.conv1 = nn.Conv2d(in_channels, self.inplanes, kernel_size=7, stride=2, padding=3, bias=False)
        else:
            self.conv1 = nn.Conv2d(in_channels, self.inplanes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = norm_layer(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1) if stem == "imagenet" else nn.Identity()
        self.layer1 = self._make_layer(block, width, layers[0])
        self.layer2 = self._make_layer(block, width * 2, layers[1], stride=2, dilate=replace_stride_with_dilation[0])
        self.layer3 = self._make_layer(block, width * 4, layers[2], stride=2, dilate=replace_stride_with_dilation[1])
        self.layer4 = self._make_layer(block, width * 8, layers[3], stride=2, dilate=replace_stride_with_dilation[2])
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 8 * block.expansion, num_classes)

        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, (nn.BatchNorm2d, nn.GroupNorm)) and module.weight is not None:
                nn.init.constant_(module.weight, 1)
                nn.init.constant_(module.bias, 0)
        if zero_init_residual:
            # Each residual branch starts as zero, so every block starts as the identity.
            for module in self.modules():
                if isinstance(module, Bottleneck) and module.bn3.weight is not None:
                    nn.init.constant_(module.bn3.weight, 0)
                elif isinstance(module, BasicBlock) and module.bn2.weight is not None:
                    nn.init.constant_(module.bn2.weight, 0)

    def _make_layer(self, block, planes, blocks, stride=1, dilate=False):
        norm_layer = self._norm_layer
        downsample = None
        previous_dilation = self.dilation
        if dilate:
            # Keep the resolution: the stride this stage would have becomes dilation of its later convolutions.
            self.dilation *= stride
            stride = 1
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes * block.expansion, stride),
                                       norm_layer(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample, self.groups, self.base_width, previous_dilation,
                        norm_layer)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes, groups=self.groups, base_width=self.base_width,
                                dilation=self.dilation, norm_layer=norm_layer))
        return nn.Sequential(*layers)

    def _forward_impl(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = flatten(self.avgpool(x), 1)
        return self.fc(x)

    def forward(self, x):
        return self._forward_impl(x)


def _resnet(name, block, layers, weights, keywords):
    check_no_pretrained_weights(name, weights, keywords)
    return ResNet(block, layers, **keywords)


def resnet18(*, weights=None, progress=True, **kwargs):
    """ResNet-18 (BasicBlock stages of 2, 2, 2, 2 blocks); kwargs go to ResNet (num_classes, stem, ...)."""
    return _resnet("resnet18", BasicBlock, [2, 2, 2, 2], weights, kwargs)


def resnet34(*, weights=None, progress=True, **kwargs):
    """ResNet-34 (BasicBlock stages of 3, 4, 6, 3 blocks); kwargs go to ResNet."""
    return _resnet("resnet34", BasicBlock, [3, 4, 6, 3], weights, kwargs)


def resnet50(*, weights=None, progress=True, **kwargs):
    """ResNet-50 (Bottleneck stages of 3, 4, 6, 3 blocks); kwargs go to ResNet."""
    return _resnet("resnet50", Bottleneck, [3, 4, 6, 3], weights, kwargs)


def resnet101(*, weights=None, progress=True, **kwargs):
    """ResNet-101 (Bottleneck stages of 3, 4, 23, 3 blocks); kwargs go to ResNet."""
    return _resnet("resnet101", Bottleneck, [3, 4, 23, 3], weights, kwargs)


def resnet152(*, weights=None, progress=True, **kwargs):
    """ResNet-152 (Bottleneck stages of 3, 8, 36, 3 blocks); kwargs go to ResNet."""
    return _resnet("resnet152", Bottleneck, [3, 8, 36, 3], weights, kwargs)


def _with_group_width(keywords, groups, width_per_group):
    # These variants are defined by their grouping, so (as torchvision) a different explicit value is an error.
    for name, value in (("groups", groups), ("width_per_group", width_per_group)):
        if keywords.setdefault(name, value) != value:
            raise ValueError(f"The parameter '{name}' expected value {value} but got {keywords[name]} instead.")
    return keywords


def resnext50_32x4d(*, weights=None, progress=True, **kwargs):
    """ResNeXt-50 32x4d: ResNet-50's stages with 32 groups of width 4 in the 3x3 convolutions."""
    return _resnet("resnext50_32x4d", Bottleneck, [3, 4, 6, 3], weights, _with_group_width(kwargs, 32, 4))


def resnext101_32x8d(*, weights=None, progress=True, **kwargs):
    """ResNeXt-101 32x8d: ResNet-101's stages with 32 groups of width 8 in the 3x3 convolutions."""
    return _resnet("resnext101_32x8d", Bottleneck, [3, 4, 23, 3], weights, _with_group_width(kwargs, 32, 8))


def wide_resnet50_2(*, weights=None, progress=True, **kwargs):
    """Wide ResNet-50-2: ResNet-50 with twice as many channels inside each bottleneck."""
    return _resnet("wide_resnet50_2", Bottleneck, [3, 4, 6, 3], weights, _with_group_width(kwargs, 1, 128))


def wide_resnet101_2(*, weights=None, progress=True, **kwargs):
    """Wide ResNet-101-2: ResNet-101 with twice as many channels inside each bottleneck."""
    return _resnet("wide_resnet101_2", Bottleneck, [3, 4, 23, 3], weights, _with_group_width(kwargs, 1, 128))
