"""Dropout: zeroes elements with probability p and scales the kept ones by 1/(1-p), so the expected value is
unchanged. The mask is drawn with mj.rand (seeded by mj.seed) and applied by elementwise ops, so the gradient is
the same mask times the same scale. The feature variants (dropout1d/2d/3d) drop whole channels."""
import warnings

from .. import _core
from .._core import Var

__all__ = ["dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"]

_FLOAT_DTYPES = ("float16", "float32", "float64")


def _check(input, p, function):
    if not isinstance(input, Var):
        raise TypeError(f"{function}: input must be a metajit Var, got {type(input).__name__}")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{function}: dropout probability has to be between 0 and 1, but got {p!r}")
    if input.dtype not in _FLOAT_DTYPES:
        raise TypeError(f"{function}: input must be a floating-point Var, got {input.dtype}")


def _apply_mask(input, p, mask_shape):
    """input * (rand(mask_shape) >= p) / (1 - p); the mask broadcasts over input."""
    from .. import rand
    if p == 1:
        return input * 0  # every element dropped (keeps the graph, so the gradient is zero, not missing)
    keep = rand(*mask_shape) >= p
    return input * _core.cast(keep, input.dtype) * (1.0 / (1.0 - p))


def dropout(input, p=0.5, training=True, inplace=False):
    """Zeroes each element with probability p and scales the rest by 1/(1-p); the identity when not training or
    p == 0, as torch.nn.functional.dropout. `inplace` is accepted for compatibility: a lazy Var is never
    modified, the result is always a new Var."""
    _check(input, p, "dropout")
    if not training or p == 0:
        return input
    return _apply_mask(input, p, list(input.shape))


def _feature_dropout(input, p, training, spatial, function):
    _check(input, p, function)
    if input.ndim not in (spatial + 1, spatial + 2):
        raise ValueError(f"{function}: expected a {spatial + 1}-D (unbatched) or {spatial + 2}-D (batched) input, got "
                         f"shape {tuple(input.shape)}")
    if not training or p == 0:
        return input
    # One draw per (batch, channel): the leading dims before the spatial ones.
    mask_shape = list(input.shape[:input.ndim - spatial]) + [1] * spatial
    return _apply_mask(input, p, mask_shape)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of [N, C, L] (or [C, L]) with probability p, as torch.nn.functional.dropout1d."""
    return _feature_dropout(input, p, training, 1, "dropout1d")


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of [N, C, H, W] with probability p, as torch.nn.functional.dropout2d. A 3-D input
    is taken as [N, C, L] (channel-wise 1-D dropout) with PyTorch's warning, as PyTorch 2.x does, not as an
    unbatched [C, H, W]."""
    if isinstance(input, Var) and input.ndim == 3:
        _check(input, p, "dropout2d")
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim. "
                      "To maintain the 1D channel-wise dropout behavior, please switch to using dropout1d "
                      "instead.", stacklevel=2)
        if not training or p == 0:
            return input
        return _apply_mask(input, p, list(input.shape[:2]) + [1])
    return _feature_dropout(input, p, training, 2, "dropout2d")


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of [N, C, D, H, W] (or [C, D, H, W]) with probability p."""
    return _feature_dropout(input, p, training, 3, "dropout3d")


_SELU_SATURATION = 1.7580993408473766  # -SELU(-inf) = scale * alpha


def _alpha_dropout(input, p, training, mask_shape, function):
    """Dropped units become SELU's saturation value, then a * x + b restores zero mean and unit variance:
    a = ((1 - p) (1 + p s^2))^-1/2, b = a s p (PyTorch's formulas)."""
    from .. import rand
    _check(input, p, function)
    if not training or p == 0:
        return input
    if p == 1:
        return input * 0
    keep = _core.cast(rand(*mask_shape) >= p, input.dtype)
    scale = 1.0 / ((_SELU_SATURATION ** 2 * p + 1) * (1 - p)) ** 0.5
    shift = (keep - 1.0) * (_SELU_SATURATION * scale) + _SELU_SATURATION * scale * p
    return input * (keep * scale) + shift


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout for SELU networks: keeps the mean and variance of its input (drawn with mj.rand)."""
    result = _alpha_dropout(input, p, training, list(input.shape), "alpha_dropout")
    return input.copy_(result) if inplace and result is not input else result


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """alpha_dropout of whole channels (dim 1) of an [N, C, *] input."""
    shape = [input.shape[0], input.shape[1]] + [1] * (input.ndim - 2) if input.ndim >= 2 else list(input.shape)
    result = _alpha_dropout(input, p, training, shape, "feature_alpha_dropout")
    return input.copy_(result) if inplace and result is not input else result
