"""Dropout layers: Dropout zeroes elements with probability p in training mode and scales the rest by 1 / (1 - p);
Dropout1d/2d/3d zero whole channels with the input ranks (and the warnings) PyTorch's modules accept;
AlphaDropout / FeatureAlphaDropout keep a SELU network's mean and variance.

The modules decide the mask's shape here (PyTorch's module rules differ from the plain per-rank rule of
metajit.nn.functional.dropout2d for some ranks); the masking itself is metajit.ops.dropout's. Nothing here may
sync or draw random numbers outside training mode."""
import warnings

from ..._core import Var
from ...ops.dropout import _apply_mask, _check
from .. import functional as F
from ..module import Module

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"]

# SELU's alpha * scale: the value a SELU unit saturates to, which alpha dropout sets dropped units to.
_SELU_SATURATION = 1.0507009873554804934193349852946 * 1.6732632423543772848170429916717


class Dropout(Module):
    """Dropout(p=0.5, inplace=False); the identity in eval mode."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
            raise ValueError(f"{type(self).__name__}: dropout probability has to be between 0 and 1, but got {p!r}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


def _feature_mask_shape(input, function):
    """One draw per (first dim, second dim), as PyTorch's feature dropout: it needs at least 2 dims."""
    if input.ndim < 2:
        raise RuntimeError(f"{function}: Feature dropout requires at least 2 dimensions in the input, got shape "
                           f"{tuple(input.shape)}")
    return list(input.shape[:2]) + [1] * (input.ndim - 2)


def _channel_dropout(input, p, training, mask_shape, function):
    _check(input, p, function)
    if not training or p == 0:
        return input
    return _apply_mask(input, p, mask_shape(input, function))


class Dropout1d(Dropout):
    """Zeroes whole channels of (N, C, L) or unbatched (C, L) with probability p in training mode; other ranks
    raise, as in PyTorch."""

    def forward(self, input):
        _check(input, self.p, "dropout1d")
        if input.ndim not in (2, 3):
            raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input")
        # Unbatched (C, L): one draw per channel.
        shape = (lambda x, _: [x.shape[0], 1]) if input.ndim == 2 else _feature_mask_shape
        return _channel_dropout(input, self.p, self.training, shape, "dropout1d")


class Dropout2d(Dropout):
    """Zeroes whole channels of (N, C, H, W) with probability p in training mode.

    As PyTorch 2.x: the mask is drawn per (dim 0, dim 1) whatever the rank, so a 3-D input is taken as (N, C, L)
    (channel-wise 1-D dropout, with PyTorch's warning), not as unbatched (C, H, W); ranks other than 3 and 4
    warn that they are deprecated, fewer than 2 dims raise."""

    def forward(self, input):
        if isinstance(input, Var) and input.ndim not in (3, 4):
            warnings.warn(f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is deprecated and will "
                          "result in an error in a future release. To retain the behavior and silence this "
                          "warning, please use dropout instead.", stacklevel=3)
        if isinstance(input, Var) and input.ndim == 3:
            warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                          "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel "
                          "dim. To maintain the 1D channel-wise dropout behavior, please switch to using dropout1d "
                          "instead.", stacklevel=3)
        return _channel_dropout(input, self.p, self.training, _feature_mask_shape, "dropout2d")


class Dropout3d(Dropout):
    """Zeroes whole channels of (N, C, D, H, W) or unbatched (C, D, H, W) with probability p in training mode.

    As PyTorch: any rank but 5 is taken as unbatched (one draw per entry of dim 0; a 1-D input drops elements),
    with a deprecation warning for ranks other than 4 and 5."""

    def forward(self, input):
        if isinstance(input, Var) and input.ndim not in (4, 5):
            warnings.warn(f"dropout3d: Received a {input.ndim}-D input to dropout3d, which is deprecated and will "
                          "result in an error in a future release. To retain the behavior and silence this "
                          "warning, please use dropout instead.", stacklevel=3)

        def mask_shape(x, function):
            if x.ndim == 5:
                return _feature_mask_shape(x, function)
            if x.ndim == 0:
                raise RuntimeError(f"{function}: Feature dropout requires at least 2 dimensions in the input")
            return [x.shape[0]] + [1] * (x.ndim - 1)
        return _channel_dropout(input, self.p, self.training, mask_shape, "dropout3d")


def _alpha_dropout(input, p, training, mask_shape, function):
    """Dropped units become SELU's saturation value -alpha', then an affine map a * x + b restores zero mean and
    unit variance: a = ((1 - p) (1 + p alpha'^2))^-1/2, b = a alpha' p (PyTorch's formulas)."""
    from ... import rand
    _check(input, p, function)
    if not training or p == 0:
        return input
    if p == 1:
        return input * 0  # every unit dropped: zeros, as PyTorch (keeps the graph, so the gradient is zero)
    keep = (rand(*mask_shape) >= p).astype(input.dtype)
    scale = 1.0 / ((_SELU_SATURATION ** 2 * p + 1) * (1 - p)) ** 0.5
    shift = (keep - 1.0) * (_SELU_SATURATION * scale) + _SELU_SATURATION * scale * p
    return input * (keep * scale) + shift


class AlphaDropout(Dropout):
    """AlphaDropout(p=0.5, inplace=False): dropout for SELU networks, per element; the identity in eval mode."""

    def forward(self, input):
        return _alpha_dropout(input, self.p, self.training, list(input.shape), "alpha_dropout")


class FeatureAlphaDropout(Dropout):
    """FeatureAlphaDropout(p=0.5, inplace=False): AlphaDropout of whole channels (one draw per (dim 0, dim 1))."""

    def forward(self, input):
        _check(input, self.p, "feature_alpha_dropout")
        shape = _feature_mask_shape(input, "feature_alpha_dropout") if self.training and self.p else None
        return _alpha_dropout(input, self.p, self.training, shape, "feature_alpha_dropout")
