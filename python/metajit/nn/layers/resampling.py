"""Modules that resize, pad or cut up images: Upsample, PixelShuffle, PixelUnshuffle, Unfold, Fold and the
padding layers (ZeroPad1d/2d/3d, ConstantPad1d/2d/3d, ReflectionPad1d/2d, ReplicationPad1d/2d)."""
from .. import functional as F
from ..module import Module

__all__ = ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d", "PixelShuffle", "PixelUnshuffle", "Unfold",
           "Fold", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
           "ReflectionPad1d", "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d", "ChannelShuffle",
           "CircularPad1d", "CircularPad2d", "CircularPad3d", "ReflectionPad3d", "ReplicationPad3d"]


class Upsample(Module):
    """Upsample(size=None, scale_factor=None, mode='nearest', align_corners=None): F.interpolate."""

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, input):
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self):
        scale = f"scale_factor={self.scale_factor}" if self.scale_factor is not None else f"size={self.size}"
        return f"{scale}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Nearest-neighbour upsampling of (N, C, H, W): PyTorch's older name for Upsample(mode='nearest')."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear upsampling with align_corners=True: PyTorch's older name, whose corners stay aligned."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class PixelShuffle(Module):
    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"


class Unfold(Module):
    """Unfold(kernel_size, dilation=1, padding=0, stride=1): F.unfold (im2col)."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)


class Fold(Module):
    """Fold(output_size, kernel_size, dilation=1, padding=0, stride=1): F.fold (col2im)."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size = output_size
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)


class _Pad(Module):
    """Pads the last `dims` dims by `padding` (an int for every side, or PyTorch's (left, right, top, ...))."""
    dims, mode = 2, "constant"

    def __init__(self, padding, value=0.0):
        super().__init__()
        sides = 2 * self.dims
        padding = (padding,) * sides if isinstance(padding, int) else tuple(padding)
        if len(padding) != sides:
            raise ValueError(f"{type(self).__name__}: padding needs {sides} values, got {padding}")
        self.padding, self.value = padding, value

    def forward(self, input):
        if self.mode == "constant":
            return F.pad(input, list(self.padding), "constant", self.value)
        return F.pad(input, list(self.padding), self.mode)

    def extra_repr(self):
        return f"{self.padding}" + (f", value={self.value}" if self.mode == "constant" and self.value else "")


def _pad_class(name, dims, mode, zero=False):
    attributes = {"dims": dims, "mode": mode, "__doc__": f"Pads the last {dims} dim(s), mode {mode!r}."}
    if zero or mode != "constant":
        attributes["__init__"] = lambda self, padding: _Pad.__init__(self, padding, 0.0)
    cls = type(name, (_Pad,), attributes)
    cls.__module__ = __name__
    return cls


ZeroPad1d = _pad_class("ZeroPad1d", 1, "constant", zero=True)
ZeroPad2d = _pad_class("ZeroPad2d", 2, "constant", zero=True)
ZeroPad3d = _pad_class("ZeroPad3d", 3, "constant", zero=True)
ConstantPad1d = _pad_class("ConstantPad1d", 1, "constant")
ConstantPad2d = _pad_class("ConstantPad2d", 2, "constant")
ConstantPad3d = _pad_class("ConstantPad3d", 3, "constant")
ReflectionPad1d = _pad_class("ReflectionPad1d", 1, "reflect")
ReflectionPad2d = _pad_class("ReflectionPad2d", 2, "reflect")
ReplicationPad1d = _pad_class("ReplicationPad1d", 1, "replicate")
ReplicationPad2d = _pad_class("ReplicationPad2d", 2, "replicate")


ReflectionPad3d = _pad_class("ReflectionPad3d", 3, "reflect")
ReplicationPad3d = _pad_class("ReplicationPad3d", 3, "replicate")
CircularPad1d = _pad_class("CircularPad1d", 1, "circular")
CircularPad2d = _pad_class("CircularPad2d", 2, "circular")
CircularPad3d = _pad_class("CircularPad3d", 3, "circular")


class ChannelShuffle(Module):
    """ChannelShuffle(groups): F.channel_shuffle (ShuffleNet's channel mixing)."""

    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"
