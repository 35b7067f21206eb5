"""torchvision's ResNet layout re-created in PyTorch (torchvision is not a dependency): the reference for
tests/python/test_models.py and bench/training_benchmark.py. Import only where torch is available."""
import torch


class TorchBasicBlock(torch.nn.Module):
    """torchvision.models.resnet.BasicBlock, with the same attribute names."""

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(planes)
        self.relu = torch.nn.ReLU(inplace=True)
        self.conv2 = torch.nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + identity)


class TorchResNet(torch.nn.Module):
    """torchvision.models.ResNet's layout (the ImageNet stem) or the CIFAR stem (3x3 conv, no pooling)."""

    def __init__(self, layers, num_classes, stem, width=64):
        super().__init__()
        # torchvision's assignment order (conv1, bn1, relu, maxpool), which is the order of children().
        if stem == "imagenet":
            self.conv1 = torch.nn.Conv2d(3, width, 7, 2, 3, bias=False)
        else:
            self.conv1 = torch.nn.Conv2d(3, width, 3, 1, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(width)
        self.relu = torch.nn.ReLU(inplace=True)
        self.maxpool = torch.nn.MaxPool2d(3, 2, 1) if stem == "imagenet" else torch.nn.Identity()
        self.inplanes = width
        self.layer1 = self._make_layer(width, layers[0], 1)
        self.layer2 = self._make_layer(width * 2, layers[1], 2)
        self.layer3 = self._make_layer(width * 4, layers[2], 2)
        self.layer4 = self._make_layer(width * 8, layers[3], 2)
        self.avgpool = torch.nn.AdaptiveAvgPool2d((1, 1))
        self.fc = torch.nn.Linear(width * 8, num_classes)

    def _make_layer(self, planes, blocks, stride):
        downsample = None
        if stride != 1 or self.inplanes != planes:
            downsample = torch.nn.Sequential(torch.nn.Conv2d(self.inplanes, planes, 1, stride, bias=False),
                                             torch.nn.BatchNorm2d(planes))
        layers = [TorchBasicBlock(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes
        layers += [TorchBasicBlock(planes, planes) for _ in range(1, blocks)]
        return torch.nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.avgpool(self.layer4(self.layer3(self.layer2(self.layer1(x)))))
        return self.fc(torch.flatten(x, 1))


def torch_resnet18_cifar(num_classes=10):
    return TorchResNet([2, 2, 2, 2], num_classes, "cifar")
