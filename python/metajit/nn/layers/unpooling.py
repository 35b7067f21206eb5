"""MaxUnpool1d/2d/3d: modules that hold kernel_size, stride and padding and call F.max_unpool*d (the partial
inverse of MaxPool*d with return_indices=True). No computation of their own."""
from .. import functional as F
from ..module import Module
from ._common import pair

__all__ = ["MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d"]


class _MaxUnpool(Module):
    _function = None
    _spatial = 0

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        spatial = type(self)._spatial
        self.kernel_size = pair(kernel_size, spatial)
        self.stride = pair(stride if stride is not None else kernel_size, spatial)
        self.padding = pair(padding, spatial)

    def forward(self, input, indices, output_size=None):
        return type(self)._function(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpool):
    """MaxUnpool1d(kernel_size, stride=None, padding=0); forward(input, indices, output_size=None)."""
    _function = staticmethod(F.max_unpool1d)
    _spatial = 1


class MaxUnpool2d(_MaxUnpool):
    """MaxUnpool2d(kernel_size, stride=None, padding=0); forward(input, indices, output_size=None)."""
    _function = staticmethod(F.max_unpool2d)
    _spatial = 2


class MaxUnpool3d(_MaxUnpool):
    """MaxUnpool3d(kernel_size, stride=None, padding=0); forward(input, indices, output_size=None)."""
    _function = staticmethod(F.max_unpool3d)
    _spatial = 3
