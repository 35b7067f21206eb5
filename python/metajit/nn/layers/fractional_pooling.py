"""FractionalMaxPool2d/3d: modules that hold kernel_size, output_size or output_ratio, return_indices and an
optional fixed _random_samples buffer, and call F.fractional_max_pool*d; PyTorch's argument checks, no
computation of their own."""
from .. import functional as F
from ..module import Module
from ._common import pair

__all__ = ["FractionalMaxPool2d", "FractionalMaxPool3d"]


class _FractionalMaxPool(Module):
    _function = None
    _spatial = 0

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                 _random_samples=None):
        super().__init__()
        spatial, name = type(self)._spatial, type(self).__name__
        if spatial == 3 and ((isinstance(kernel_size, int) and kernel_size <= 0) or
                             (isinstance(kernel_size, (tuple, list)) and not all(k > 0 for k in kernel_size))):
            raise ValueError(f"kernel_size must be greater than 0, but got {kernel_size}")
        self.kernel_size = pair(kernel_size, spatial)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = pair(output_size, spatial) if output_size is not None else None
        self.output_ratio = pair(output_ratio, spatial) if output_ratio is not None else None
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < ratio < 1 for ratio in self.output_ratio):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input):
        return type(self)._function(input, self.kernel_size, self.output_size, self.output_ratio,
                                    self.return_indices, _random_samples=self._random_samples)


class FractionalMaxPool2d(_FractionalMaxPool):
    """FractionalMaxPool2d(kernel_size, output_size=None, output_ratio=None, return_indices=False,
    _random_samples=None)."""
    _function = staticmethod(F.fractional_max_pool2d)
    _spatial = 2


class FractionalMaxPool3d(_FractionalMaxPool):
    """FractionalMaxPool3d(kernel_size, output_size=None, output_ratio=None, return_indices=False,
    _random_samples=None)."""
    _function = staticmethod(F.fractional_max_pool3d)
    _spatial = 3
