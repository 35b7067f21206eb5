"""Model definitions: a small CNN for small single-channel images and ResNet-18/34 (torchvision names)."""
from .resnet import BasicBlock, ResNet, resnet18, resnet34
from .small_cnn import SmallCNN, small_cnn

__all__ = ["SmallCNN", "small_cnn", "BasicBlock", "ResNet", "resnet18", "resnet34"]
