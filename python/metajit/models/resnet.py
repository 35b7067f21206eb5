"""ResNet-18 and ResNet-34 (BasicBlock) with torchvision's parameter names, so a torchvision state dict
(tensors converted to numpy) loads with load_state_dict.

stem='imagenet' is torchvision's 7x7 stride-2 convolution followed by a 3x3 stride-2 max-pool; stem='cifar'
is a 3x3 stride-1 convolution and no pooling (the max-pool becomes an Identity, which has no parameters, so
the names are the same), the usual choice for 32x32 images.
"""
from .. import nn

__all__ = ["BasicBlock", "ResNet", "resnet18", "resnet34"]


def _conv3x3(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


def _conv1x1(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm and a residual connection (projected by `downsample` when the shape
    changes)."""

    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = _conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = _conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    """ResNet(block, layers, num_classes=1000, stem='imagenet', in_channels=3, zero_init_residual=False,
    width=64)."""

    def __init__(self, block, layers, num_classes=1000, stem="imagenet", in_channels=3, zero_init_residual=False,
                 width=64):
        super().__init__()
        if stem not in ("imagenet", "cifar"):
            raise ValueError(f"ResNet: stem must be 'imagenet' or 'cifar', got {stem!r}")
        if len(layers) != 4:
            raise ValueError(f"ResNet: layers must list the block count of 4 stages, got {layers!r}")
        self.inplanes = width
        if stem == "imagenet":
            self.conv1 = nn.Conv2d(in_channels, width, kernel_size=7, stride=2, padding=3, bias=False)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        else:
            self.conv1 = nn.Conv2d(in_channels, width, kernel_size=3, stride=1, padding=1, bias=False)
            self.maxpool = nn.Identity()
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = self._make_layer(block, width, layers[0])
        self.layer2 = self._make_layer(block, width * 2, layers[1], stride=2)
        self.layer3 = self._make_layer(block, width * 4, layers[2], stride=2)
        self.layer4 = self._make_layer(block, width * 8, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 8 * block.expansion, num_classes)
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
        if zero_init_residual:
            # Each residual branch starts as zero, so every block starts as the identity.
            for module in self.modules():
                if isinstance(module, BasicBlock):
                    nn.init.zeros_(module.bn2.weight)

    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(_conv1x1(self.inplanes, planes * block.expansion, stride),
                                       nn.BatchNorm2d(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        layers.extend(block(self.inplanes, planes) for _ in range(1, blocks))
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = self.avgpool(x)
        return self.fc(x.reshape([x.shape[0], x.numel() // x.shape[0]]))


def resnet18(num_classes=1000, stem="imagenet", **kwargs):
    """ResNet-18: BasicBlock stages of 2, 2, 2, 2 blocks."""
    return ResNet(BasicBlock, [2, 2, 2, 2], num_classes=num_classes, stem=stem, **kwargs)


def resnet34(num_classes=1000, stem="imagenet", **kwargs):
    """ResNet-34: BasicBlock stages of 3, 4, 6, 3 blocks."""
    return ResNet(BasicBlock, [3, 4, 6, 3], num_classes=num_classes, stem=stem, **kwargs)
