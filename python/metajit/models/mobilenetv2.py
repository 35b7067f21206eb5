"""MobileNetV2 as torchvision defines it (inverted residual blocks with depthwise 3x3 convolutions and ReLU6),
with torchvision's attribute names, module order, constructor keywords and initialisation, so a torchvision
state dict loads with load_state_dict(strict=True) and `features` / `classifier` are the same Sequentials.

Conv2dNormActivation is torchvision.ops.Conv2dNormActivation: a Sequential of convolution, norm and activation
(named '0', '1', '2', which is where torchvision's state-dict names such as features.0.0.weight come from).

Must not: change a name, the order of modules or the default initialisation without checking against
torchvision (tests/python/test_models_torchvision.py); download weights (see _weights.py).
"""
from .. import flatten, nn
from ._weights import check_no_pretrained_weights

__all__ = ["Conv2dNormActivation", "InvertedResidual", "MobileNetV2", "mobilenet_v2"]


def _make_divisible(value, divisor, min_value=None):
    """`value` rounded to the nearest multiple of `divisor` (at least min_value, default divisor), moved up one
    multiple if rounding lost more than 10%: the channel rule of the original TensorFlow MobileNets."""
    if min_value is None:
        min_value = divisor
    rounded = max(min_value, int(value + divisor / 2) // divisor * divisor)
    if rounded < 0.9 * value:
        rounded += divisor
    return rounded


class Conv2dNormActivation(nn.Sequential):
    """Conv2dNormActivation(in_channels, out_channels, kernel_size=3, stride=1, padding=None, groups=1,
    norm_layer=nn.BatchNorm2d, activation_layer=nn.ReLU, dilation=1, inplace=True, bias=None).

    padding=None keeps the size at stride 1; bias=None means a bias only when there is no norm layer; a
    norm_layer or activation_layer of None leaves that module out."""

    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1, padding=None, groups=1,
                 norm_layer=nn.BatchNorm2d, activation_layer=nn.ReLU, dilation=1, inplace=True, bias=None):
        if padding is None:
            if isinstance(kernel_size, int) and isinstance(dilation, int):
                padding = (kernel_size - 1) // 2 * dilation
            else:
                sizes = (kernel_size,) * len(dilation) if isinstance(kernel_size, int) else tuple(kernel_size)
                dilations = (dilation,) * len(sizes) if isinstance(dilation, int) else tuple(dilation)
                padding = tuple((size - 1) // 2 * step for size, step in zip(sizes, dilations))
        if bias is None:
            bias = norm_layer is None
        layers = [nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding, dilation=dilation,
                            groups=groups, bias=bias)]
        if norm_layer is not None:
            layers.append(norm_layer(out_channels))
        if activation_layer is not None:
            layers.append(activation_layer() if inplace is None else activation_layer(inplace=inplace))
        super().__init__(*layers)
        self.out_channels = out_channels


class InvertedResidual(nn.Module):
    """A 1x1 expansion by expand_ratio (left out when it is 1), a depthwise 3x3 convolution (strided), both with
    ReLU6, and a linear 1x1 projection; a residual connection when the stride is 1 and the channels match.
    InvertedResidual(inp, oup, stride, expand_ratio, norm_layer=None)."""

    def __init__(self, inp, oup, stride, expand_ratio, norm_layer=None):
        super().__init__()
        self.stride = stride
        if stride not in (1, 2):
            raise ValueError(f"stride should be 1 or 2 instead of {stride}")
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        hidden_dim = int(round(inp * expand_ratio))
        self.use_res_connect = self.stride == 1 and inp == oup
        layers = []
        if expand_ratio != 1:
            layers.append(Conv2dNormActivation(inp, hidden_dim, kernel_size=1, norm_layer=norm_layer,
                                               activation_layer=nn.ReLU6))
        layers.extend([
            Conv2dNormActivation(hidden_dim, hidden_dim, stride=stride, groups=hidden_dim, norm_layer=norm_layer,
                                 activation_layer=nn.ReLU6),
            nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False),
            norm_layer(oup),
        ])
        self.conv = nn.Sequential(*layers)
        self.out_channels = oup
        self._is_cn = stride > 1

    def forward(self, x):
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(nn.Module):
    """MobileNetV2(num_classes=1000, width_mult=1.0, inverted_residual_setting=None, round_nearest=8, block=None,
    norm_layer=None, dropout=0.2): torchvision's constructor.

    inverted_residual_setting lists [expand ratio t, channels c, repeats n, first stride s] per stage; channel
    counts are multiplied by width_mult and rounded to multiples of round_nearest."""

    def __init__(self, num_classes=1000, width_mult=1.0, inverted_residual_setting=None, round_nearest=8,
                 block=None, norm_layer=None, dropout=0.2):
        super().__init__()
        if block is None:
            block = InvertedResidual
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        input_channel = 32
        last_channel = 1280
        if inverted_residual_setting is None:
            inverted_residual_setting = [
                [1, 16, 1, 1],
                [6, 24, 2, 2],
                [6, 32, 3, 2],
                [6, 64, 4, 2],
                [6, 96, 3, 1],
                [6, 160, 3, 2],
                [6, 320, 1, 1],
            ]
        if len(inverted_residual_setting) == 0 or len(inverted_residual_setting[0]) != 4:
            raise ValueError("inverted_residual_setting should be non-empty and a 4-element list, got "
                             f"{inverted_residual_setting}")
        input_channel = _make_divisible(input_channel * width_mult, round_nearest)
        # The last layer never shrinks below 1280 channels, only grows with width_mult > 1.
        self.last_channel = _make_divisible(last_channel * max(1.0, width_mult), round_nearest)
        features = [Conv2dNormActivation(3, input_channel, stride=2, norm_layer=norm_layer,
                                         activation_layer=nn.ReLU6)]
        for expand_ratio, channels, repeats, stride in inverted_residual_setting:
            output_channel = _make_divisible(channels * width_mult, round_nearest)
            for index in range(repeats):
                features.append(block(input_channel, output_channel, stride if index == 0 else 1,
                                      expand_ratio=expand_ratio, norm_layer=norm_layer))
                input_channel = output_channel
        features.append(Conv2dNormActivation(input_channel, self.last_channel, kernel_size=1, norm_layer=norm_layer,
                                             activation_layer=nn.ReLU6))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout), nn.Linear(self.last_channel, num_classes))

        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out")
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, 0, 0.01)
                nn.init.zeros_(module.bias)

    def _forward_impl(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(flatten(x, 1))

    def forward(self, x):
        return self._forward_impl(x)


def mobilenet_v2(*, weights=None, progress=True, **kwargs):
    """MobileNetV2 (torchvision's ImageNet configuration); kwargs go to MobileNetV2 (num_classes, width_mult,
    dropout, ...)."""
    check_no_pretrained_weights("mobilenet_v2", weights, kwargs)
    return MobileNetV2(**kwargs)
