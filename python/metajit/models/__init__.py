"""Model definitions: torchvision's ResNets, MobileNetV2 and VGGs (its names, module order, keywords and
initialisation, so its state dicts load with strict=True), a nanoGPT-shaped GPT, and a small CNN for small
single-channel images. See docs/models.md. Nothing here downloads weights."""
from .gpt import GPT, Block, CausalSelfAttention, GPTConfig, MLP, gpt
from .mobilenetv2 import Conv2dNormActivation, InvertedResidual, MobileNetV2, mobilenet_v2
from .resnet import (BasicBlock, Bottleneck, ResNet, resnet18, resnet34, resnet50, resnet101, resnet152,
                     resnext50_32x4d, resnext101_32x8d, wide_resnet50_2, wide_resnet101_2)
from .small_cnn import SmallCNN, small_cnn
from .vgg import VGG, vgg11, vgg11_bn, vgg13, vgg13_bn, vgg16, vgg16_bn, vgg19, vgg19_bn

__all__ = ["SmallCNN", "small_cnn",
           "BasicBlock", "Bottleneck", "ResNet", "resnet18", "resnet34", "resnet50", "resnet101", "resnet152",
           "resnext50_32x4d", "resnext101_32x8d", "wide_resnet50_2", "wide_resnet101_2",
           "Conv2dNormActivation", "InvertedResidual", "MobileNetV2", "mobilenet_v2",
           "VGG", "vgg11", "vgg11_bn", "vgg13", "vgg13_bn", "vgg16", "vgg16_bn", "vgg19", "vgg19_bn",
           "GPTConfig", "CausalSelfAttention", "MLP", "Block", "GPT", "gpt"]
