"""Gradient clipping as PyTorch's nn.utils: clip_grad_norm_ (get_total_norm + clip_grads_with_norm_) and
clip_grad_value_.

Everything stays lazy: the total norm is a 0-d Var, and each clipped gradient is rebound with ``param.grad =
...`` (reading .grad and writing the result back, which is what the optimizer reads at step()), so clipping
fuses into the training step's plan. The only sync is error_if_nonfinite's check, which needs the value.
This module must not step or zero gradients."""
import math
import warnings

import numpy as np

from ..._core import Var

__all__ = ["get_total_norm", "clip_grads_with_norm_", "clip_grad_norm_", "clip_grad_norm", "clip_grad_value_"]

_FLOAT_ORDER = ("float16", "float32", "float64")


def _as_list(values):
    return [values] if isinstance(values, Var) else list(values)


def _norm_order(norm_type):
    """PyTorch takes float(norm_type), so 'inf' and 2 work as well as 2.0."""
    return float(norm_type)


def _vector_norm(values, order):
    """The vector norm written out rather than mj.norm: that one guards the root at 0 for its gradient
    (where(total > 0, ...)), which turns a nan total into 0, and a nan gradient must give a nan norm here.
    No gradient is taken through clipping, so no guard is needed."""
    magnitude = values.reshape([-1]).abs()
    if order == math.inf:
        return magnitude.max()
    if order == -math.inf:
        return magnitude.min()
    if order == 0:
        return (magnitude != 0).astype(values.dtype).sum()
    if order == 2:
        return (magnitude * magnitude).sum().sqrt()
    if order == 1:
        return magnitude.sum()
    return (magnitude ** order).sum() ** (1.0 / order)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm of all `tensors` seen as one vector (the norm of their norms), as a 0-d Var; 0 for none.
    `foreach` is accepted and ignored (metajit fuses the per-tensor norms anyway)."""
    from ... import array, no_grad, stack
    tensors = _as_list(tensors)
    order = _norm_order(norm_type)
    if not tensors:
        return array(np.float32(0.0))
    with no_grad():
        norms = [_vector_norm(tensor, order) for tensor in tensors]
        # Stacked in the widest floating dtype among them, as PyTorch's type promotion does.
        widest = max((value.dtype for value in norms), key=lambda name: _FLOAT_ORDER.index(name)
                     if name in _FLOAT_ORDER else -1)
        total = _vector_norm(stack([value.astype(widest) for value in norms], 0), order)
    if error_if_nonfinite and not bool(np.isfinite(total.numpy())):
        raise RuntimeError(f"The total norm of order {order} for gradients from `parameters` is non-finite, so it "
                           "cannot be clipped. To disable this error and scale the gradients by the non-finite norm "
                           "anyway, set `error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scales every .grad by min(1, max_norm / (total_norm + 1e-6)) (always multiplied, as PyTorch does, so a
    non-finite total norm gives non-finite gradients)."""
    from ... import array, no_grad
    parameters = _as_list(parameters)
    with_grads = [parameter for parameter in parameters if parameter.grad is not None]
    if not with_grads:
        return
    if not isinstance(total_norm, Var):
        total_norm = array(np.asarray(total_norm, dtype=np.float32))
    with no_grad():
        # max_norm as a 0-d input rather than a constant: a changed max_norm compiles no new kernel.
        limit = array(np.asarray(max_norm, dtype=total_norm.dtype))
        factor = (limit / (total_norm + 1e-6)).clamp(max=1.0)
        for parameter in with_grads:
            grad = parameter.grad
            parameter.grad = grad * factor.astype(grad.dtype)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Clips the gradients of `parameters` (a Var or an iterable of them) so their total norm of order
    `norm_type` (inf for the largest magnitude) is at most max_norm; returns the total norm before clipping as a
    0-d Var. error_if_nonfinite=True raises RuntimeError when that norm is nan or inf (this reads its value)."""
    parameters = _as_list(parameters)
    grads = [parameter.grad for parameter in parameters if parameter.grad is not None]
    total_norm = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total_norm, foreach)
    return total_norm


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Deprecated alias of clip_grad_norm_ (warns, as PyTorch's does)."""
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of `torch.nn.utils.clip_grad_norm_`.",
                  FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamps every .grad to [-clip_value, clip_value]."""
    from ... import no_grad
    clip_value = float(clip_value)
    if math.isnan(clip_value):
        raise ValueError("clip_grad_value_: clip_value is nan")
    with no_grad():
        for parameter in _as_list(parameters):
            grad = parameter.grad
            if grad is not None:
                parameter.grad = grad.clamp(-clip_value, clip_value)
