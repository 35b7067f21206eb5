"""Convolution layers: Conv1d, Conv2d, Conv3d and ConvTranspose1d/2d/3d (PyTorch parameter names, shapes and
default initialisation)."""
from .. import functional as F
from ..module import Module
from ._common import check_positive_int, default_uniform_, empty_parameter, pair

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]


class _ConvolutionBase(Module):
    """Holds what forward and transposed convolutions share; `spatial` is the number of spatial dims."""

    spatial = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, transposed,
                 output_padding, groups, bias, padding_mode, dtype):
        super().__init__()
        name = type(self).__name__
        check_positive_int(in_channels, "in_channels", name)
        check_positive_int(out_channels, "out_channels", name)
        check_positive_int(groups, "groups", name)
        if in_channels % groups != 0:
            raise ValueError(f"{name}: in_channels ({in_channels}) must be divisible by groups ({groups})")
        if out_channels % groups != 0:
            raise ValueError(f"{name}: out_channels ({out_channels}) must be divisible by groups ({groups})")
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(f"{name}: padding_mode must be 'zeros', 'reflect', 'replicate' or 'circular', got "
                             f"{padding_mode!r}")
        if transposed and padding_mode != "zeros":
            raise ValueError(f"{name}: only padding_mode 'zeros' is supported for transposed convolutions")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"{name}: padding must be 'same', 'valid', an int or a tuple, got {padding!r}")
            if padding == "same" and any(step != 1 for step in pair(stride, self.spatial)):
                raise ValueError(f"{name}: padding='same' is not supported for strided convolutions")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = pair(kernel_size, self.spatial)
        self.stride = pair(stride, self.spatial)
        self.padding = padding if isinstance(padding, str) else pair(padding, self.spatial)
        self.dilation = pair(dilation, self.spatial)
        self.transposed = transposed
        self.output_padding = pair(output_padding, self.spatial)
        self.groups = groups
        self.padding_mode = padding_mode
        for size in self.kernel_size:
            check_positive_int(size, "kernel_size", name)
        if transposed:
            shape = (in_channels, out_channels // groups) + self.kernel_size
        else:
            shape = (out_channels, in_channels // groups) + self.kernel_size
        self.weight = empty_parameter(shape, dtype)
        if bias:
            self.bias = empty_parameter((out_channels,), dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        receptive_field = 1
        for size in self.kernel_size:
            receptive_field *= size
        # fan_in as PyTorch computes it from the weight: dim 1 times the kernel area.
        default_uniform_(self.weight, self.bias, self.weight.shape[1] * receptive_field)

    def extra_repr(self):
        text = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        zeros = (0,) * self.spatial
        ones = (1,) * self.spatial
        if self.padding != zeros:
            text += f", padding={self.padding}"
        if self.dilation != ones:
            text += f", dilation={self.dilation}"
        if self.output_padding != zeros:
            text += f", output_padding={self.output_padding}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        if self.padding_mode != "zeros":
            text += f", padding_mode={self.padding_mode}"
        return text


class _Convolution(_ConvolutionBase):
    _function = None

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, False, 0, groups,
                         bias, padding_mode, dtype)

    def forward(self, input):
        if self.padding_mode == "zeros":
            return type(self)._function(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                                        self.groups)
        # PyTorch's order: the input padded in the mode first (F.pad lists the last dim first), then a
        # convolution without padding of its own.
        return type(self)._function(F.pad(input, self._mode_padding(), mode=self.padding_mode), self.weight,
                                    self.bias, self.stride, 0, self.dilation, self.groups)

    def _mode_padding(self):
        amounts = []
        for d in reversed(range(self.spatial)):
            if self.padding == "valid":
                before = after = 0
            elif self.padding == "same":  # the extra element of an even total goes after, as in PyTorch
                total = self.dilation[d] * (self.kernel_size[d] - 1)
                before, after = total // 2, total - total // 2
            else:
                before = after = self.padding[d]
            amounts += [before, after]
        return amounts


class Conv1d(_Convolution):
    """Conv1d(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True)."""
    spatial = 1
    _function = staticmethod(F.conv1d)


class Conv2d(_Convolution):
    """Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
    padding_mode='zeros'): weight (out_channels, in_channels/groups, kH, kW), NCHW input. padding_mode 'reflect',
    'replicate' or 'circular' pads the input that way first (as Conv1d and Conv3d do too)."""
    spatial = 2
    _function = staticmethod(F.conv2d)


class Conv3d(_Convolution):
    """Conv3d(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True)."""
    spatial = 3
    _function = staticmethod(F.conv3d)


class _TransposedConvolution(_ConvolutionBase):
    _function = None

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        if isinstance(padding, str):
            raise ValueError(f"{type(self).__name__}: padding must be an int or a tuple, got {padding!r}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, True, output_padding,
                         groups, bias, padding_mode, dtype)

    def _output_padding(self, input, output_size):
        """output_padding that makes the output `output_size` (the spatial sizes, or the full shape)."""
        if output_size is None:
            return self.output_padding
        output_size = list(output_size)[-self.spatial:]
        if len(output_size) != self.spatial:
            raise ValueError(f"{type(self).__name__}: output_size must have {self.spatial} or "
                             f"{self.spatial + 2} elements, got {len(output_size)}")
        padding = []
        for d in range(self.spatial):
            extent = input.shape[input.ndim - self.spatial + d]
            smallest = (extent - 1) * self.stride[d] - 2 * self.padding[d] + \
                self.dilation[d] * (self.kernel_size[d] - 1) + 1
            if not smallest <= output_size[d] < smallest + self.stride[d]:
                raise ValueError(f"{type(self).__name__}: requested output size {tuple(output_size)} is not "
                                 f"reachable: dim {d} must be in [{smallest}, {smallest + self.stride[d] - 1}]")
            padding.append(output_size[d] - smallest)
        return tuple(padding)

    def forward(self, input, output_size=None):
        return type(self)._function(input, self.weight, self.bias, self.stride, self.padding,
                                    self._output_padding(input, output_size), self.groups, self.dilation)


class ConvTranspose1d(_TransposedConvolution):
    """ConvTranspose1d(in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
    bias=True, dilation=1)."""
    spatial = 1
    _function = staticmethod(F.conv_transpose1d)


class ConvTranspose2d(_TransposedConvolution):
    """ConvTranspose2d(in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
    bias=True, dilation=1): weight (in_channels, out_channels/groups, kH, kW)."""
    spatial = 2
    _function = staticmethod(F.conv_transpose2d)


class ConvTranspose3d(_TransposedConvolution):
    """ConvTranspose3d(in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
    bias=True, dilation=1)."""
    spatial = 3
    _function = staticmethod(F.conv_transpose3d)
