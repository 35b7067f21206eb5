"""Power-average pooling (lp_pool1d / lp_pool2d / lp_pool3d, PyTorch's formula): the window sum of x^p, to the
power 1/p, computed as average pooling of x^p times the window size. Gradients come from avg_pool and the
elementwise ops."""
import math

from .pool import avg_pool1d, avg_pool2d, avg_pool3d
from .tensor import _as_var

__all__ = ["lp_pool1d", "lp_pool2d", "lp_pool3d"]


def _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, spatial, pool):
    input = _as_var(input)
    kernel = (kernel_size,) * spatial if isinstance(kernel_size, int) else tuple(kernel_size)
    powered = input ** norm_type if norm_type != 1 else input
    averaged = pool(powered, kernel, stride, 0, ceil_mode)
    # PyTorch's sign(out) * relu(|out|): a negative window sum (odd p) stays negative before the root.
    signed = averaged.sign() * averaged.abs().relu()
    return (signed * float(math.prod(kernel))) ** (1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 1, avg_pool1d)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 2, avg_pool2d)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 3, avg_pool3d)
