"""Loss functions with PyTorch's signatures (including the deprecated size_average / reduce arguments).

Class-index losses pick the target class with a one-hot comparison against arange(C) rather than a gather: the
comparison fuses into the log_softmax kernels and its gradient is an elementwise `where` (a gather's gradient
would be a separate scatter kernel). Logit losses use softplus in the form max(z, 0) + log1p(exp(-|z|)), which
never overflows; binary_cross_entropy clamps each log at -100 as PyTorch does.
"""
import warnings

import numpy as np

from .. import _core, where
from .activation import log_softmax
from .tensor import _as_var

__all__ = ["cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div",
           "binary_cross_entropy", "binary_cross_entropy_with_logits"]

_FLOAT_DTYPES = ("float16", "float32", "float64")
_INTEGER_DTYPES = ("int8", "uint8", "int32", "int64")


def _reduction(size_average, reduce, reduction):
    """The reduction mode, mapping the deprecated size_average / reduce pair the way PyTorch does."""
    if size_average is not None or reduce is not None:
        warnings.warn("size_average and reduce args will be deprecated, please use reduction= instead.",
                      stacklevel=3)
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        return "none" if not reduce else "mean" if size_average else "sum"
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction!r} is not a valid value for reduction (use 'none', 'mean' or 'sum')")
    return reduction


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _float_input(name, input):
    input = _as_var(input)
    if input.dtype not in _FLOAT_DTYPES:
        raise TypeError(f"{name}: expected a floating-point input, got {input.dtype}")
    return input


def _float_like(value, like, name, what):
    value = _as_var(value)
    if value.dtype not in _FLOAT_DTYPES:
        value = _core.cast(value, like.dtype)
    return value


# ----------------------------------------------------------------------------------------- class-index losses
def _class_layout(name, input, target):
    """Checks a class-index target against input (N, C, d1...) or (C,); returns the class dim's position."""
    if input.ndim == 0:
        raise ValueError(f"{name}: input must have at least 1 dimension (classes), got a 0-d Var")
    expected = list(input.shape[:1]) + list(input.shape[2:]) if input.ndim >= 2 else []
    if list(target.shape) != expected:
        raise ValueError(f"{name}: expected target of shape {expected} for input of shape {list(input.shape)}, got "
                         f"{list(target.shape)}")
    return 1 if input.ndim >= 2 else 0


def _class_weight(name, weight, input, class_dim):
    """weight (C,) as input's dtype, shaped to broadcast along the class dim."""
    classes = input.shape[class_dim]
    weight = _float_like(weight, input, name, "weight")
    if list(weight.shape) != [classes]:
        raise ValueError(f"{name}: weight must be a 1-D Var of {classes} entries (one per class), got shape "
                         f"{list(weight.shape)}")
    if weight.dtype != input.dtype:
        weight = _core.cast(weight, input.dtype)
    return weight.reshape([classes] + [1] * (input.ndim - class_dim - 1))


def _class_index_loss(name, log_probabilities, target, weight, ignore_index, label_smoothing):
    """Per-element class-index loss -sum_c q_c * weight_c * log p_c, where q is the one-hot target mixed with
    the uniform distribution ((1 - s) [c == t] + s / C, PyTorch's label smoothing) and is 0 on ignored targets,
    plus the mean's denominator: the number (or, with weights, the summed weight[t]) of counted targets. One
    masked reduction over the classes; its gradient is elementwise."""
    target = _as_var(target)
    if target.dtype not in _INTEGER_DTYPES:
        raise TypeError(f"{name}: expected an integer (class index) target, got {target.dtype}")
    class_dim = _class_layout(name, log_probabilities, target)
    classes = log_probabilities.shape[class_dim]
    if target.is_computed and target.numel():
        values = target.numpy()
        bad = values[(values != ignore_index) & ((values < 0) | (values >= classes))]
        if bad.size:
            raise IndexError(f"{name}: Target {int(bad.flat[0])} is out of bounds (there are {classes} classes)")
    trailing = [1] * (log_probabilities.ndim - class_dim - 1)
    expanded_target = target.reshape(list(target.shape[:class_dim]) + [1] + list(target.shape[class_dim:]))
    valid = expanded_target != ignore_index
    chosen = (expanded_target == _core.arange(0.0, float(classes), 1.0, "int64").reshape([classes] + trailing)) & valid
    class_weight = None if weight is None else _class_weight(name, weight, log_probabilities, class_dim)
    weighted = log_probabilities if class_weight is None else log_probabilities * class_weight
    if label_smoothing > 0:
        uniform = label_smoothing / classes
        # where, not a multiplication by 0: an ignored row's -inf log-probability must not turn into nan.
        mixed = _core.cast(chosen, weighted.dtype) * (1.0 - label_smoothing) + uniform
        terms = where(valid, weighted * mixed, 0.0)
    else:
        terms = where(chosen, weighted, 0.0)
    loss = -terms.sum(class_dim)
    if class_weight is None:
        denominator = _core.cast(valid, log_probabilities.dtype).sum()
    else:
        denominator = where(chosen, class_weight, 0.0).sum()
    return loss, denominator


def _reduce_counted(loss, denominator, reduction):
    """'mean' divides by the counted targets (an all-ignored batch gives 0 / 0 = nan, as in PyTorch)."""
    return loss.sum() / denominator if reduction == "mean" else _reduce(loss, reduction)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """-input[n, target[n], ...] (times weight[target[n]]) for log-probabilities input of shape (N, C, d1...) or
    (C,). Targets equal to ignore_index contribute 0 and are left out of the mean, which divides by the summed
    weights of the counted targets."""
    reduction = _reduction(size_average, reduce, reduction)
    input = _float_input("nll_loss", input)
    loss, denominator = _class_index_loss("nll_loss", input, target, weight, ignore_index, 0.0)
    return _reduce_counted(loss, denominator, reduction)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """Cross entropy between logits input (N, C, d1...) or (C,) and either class indices (an integer target of
    shape (N, d1...) or ()) or class probabilities (a float target of input's shape), as in PyTorch, with
    optional per-class weight, ignore_index (class indices only) and label_smoothing (the target mixed with the
    uniform distribution: (1 - s) * target + s / C)."""
    reduction = _reduction(size_average, reduce, reduction)
    input = _float_input("cross_entropy", input)
    target = _as_var(target)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    if input.ndim == 0:
        raise ValueError("cross_entropy: input must have at least 1 dimension (classes), got a 0-d Var")
    class_dim = 1 if input.ndim >= 2 else 0
    log_probabilities = log_softmax(input, class_dim)
    if target.dtype not in _FLOAT_DTYPES:
        loss, denominator = _class_index_loss("cross_entropy", log_probabilities, target, weight, ignore_index,
                                              label_smoothing)
        return _reduce_counted(loss, denominator, reduction)
    # Class probabilities; the mean is over the batch elements whatever the weights (PyTorch's definition).
    if target.shape != input.shape:
        raise ValueError(f"cross_entropy: a probability target must have the input's shape {list(input.shape)}, "
                         f"got {list(target.shape)}")
    if target.dtype != input.dtype:
        target = _core.cast(target, input.dtype)
    if label_smoothing > 0:
        target = target * (1.0 - label_smoothing) + label_smoothing / input.shape[class_dim]
    terms = log_probabilities * target
    if weight is not None:
        terms = terms * _class_weight("cross_entropy", weight, input, class_dim)
    return _reduce(-terms.sum(class_dim), reduction)


# ------------------------------------------------------------------------------------------- regression losses
def _pointwise_inputs(name, input, target):
    input = _as_var(input)
    target = _as_var(target)
    if target.shape != input.shape:
        warnings.warn(f"{name}: using a target size ({list(target.shape)}) that is different to the input size "
                      f"({list(input.shape)}). This will likely lead to incorrect results due to broadcasting. "
                      "Please ensure they have the same size.", stacklevel=3)
    return input, target


def _weighted(name, loss, input, weight, reduction):
    if weight is None:
        return _reduce(loss, reduction)
    weight = _as_var(weight)
    if weight.shape != input.shape:
        raise ValueError(f"{name}: weights and input must have the same size, got {list(weight.shape)} and "
                         f"{list(input.shape)}")
    loss = loss * weight
    if reduction == "mean":
        return loss.sum() / weight.sum()
    return _reduce(loss, reduction)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """(input - target)^2, optionally times weight (input's shape; the mean then divides by the weights' sum)."""
    reduction = _reduction(size_average, reduce, reduction)
    input, target = _pointwise_inputs("mse_loss", input, target)
    difference = input - target
    return _weighted("mse_loss", difference * difference, input, weight, reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """|input - target|, optionally times weight (input's shape; the mean then divides by the weights' sum)."""
    reduction = _reduction(size_average, reduce, reduction)
    input, target = _pointwise_inputs("l1_loss", input, target)
    return _weighted("l1_loss", (input - target).abs(), input, weight, reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere (d = input - target); beta = 0 is l1_loss."""
    reduction = _reduction(size_average, reduce, reduction)
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be non-negative, got {beta}")
    input, target = _pointwise_inputs("smooth_l1_loss", input, target)
    difference = input - target
    magnitude = difference.abs()
    if beta == 0:
        return _reduce(magnitude, reduction)
    loss = where(magnitude < beta, difference * difference * (0.5 / beta), magnitude - 0.5 * beta)
    return _reduce(loss, reduction)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 d^2 where |d| < delta, delta * (|d| - 0.5 delta) elsewhere (d = input - target): smooth_l1_loss times
    delta."""
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be positive, got {delta}")
    reduction = _reduction(None, None, reduction)
    input, target = _pointwise_inputs("huber_loss", input, target)
    difference = input - target
    magnitude = difference.abs()
    loss = where(magnitude < delta, 0.5 * difference * difference, delta * (magnitude - 0.5 * delta))
    return _weighted("huber_loss", loss, input, weight, reduction)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """target * (log target - input), input holding log-probabilities (and target too with log_target). Terms
    with target 0 are 0. reduction="batchmean" divides the sum by the batch size (the true KL divergence;
    PyTorch's "mean" divides by every element and warns about it there)."""
    reduction_name = reduction
    if reduction == "batchmean":
        reduction = "sum"
    reduction = _reduction(size_average, reduce, reduction)
    input, target = _pointwise_inputs("kl_div", input, target)
    if log_target:
        loss = target.exp() * (target - input)
    else:
        positive = target > 0
        loss = where(positive, target * (where(positive, target, 1.0).log() - input), 0.0)
    result = _reduce(loss, reduction)
    if reduction_name == "batchmean" and input.ndim:
        result = result / input.shape[0]
    return result


# ------------------------------------------------------------------------------------------------ binary losses
def _binary_inputs(name, input, target, weight):
    input = _float_input(name, input)
    target = _as_var(target)
    if target.shape != input.shape:
        raise ValueError(f"{name}: using a target size ({list(target.shape)}) that is different to the input size "
                         f"({list(input.shape)}) is not supported. Please ensure they have the same size.")
    if target.dtype != input.dtype:
        target = _core.cast(target, input.dtype)
    if weight is not None:
        weight = _float_like(weight, input, name, "weight")
        try:
            np.broadcast_shapes(tuple(weight.shape), tuple(input.shape))
        except ValueError:
            raise ValueError(f"{name}: weight of shape {list(weight.shape)} cannot be broadcast to the input's shape "
                             f"{list(input.shape)}") from None
    return input, target, weight


def _clamped_log(value, inside):
    """max(log(value), -100) where `inside` (value > 0), else -100; the log never sees 0, so the gradient there
    is 0 rather than 0 * inf = nan."""
    return where(inside, _core.binary("maximum", where(inside, value, 1.0).log(), -100.0), -100.0)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-(t log(x) + (1 - t) log(1 - x)) for probabilities x, each log clamped at -100 (as PyTorch). Inputs
    outside [0, 1] are not checked (that would need a sync) and give nan."""
    reduction = _reduction(size_average, reduce, reduction)
    input, target, weight = _binary_inputs("binary_cross_entropy", input, target, weight)
    complement = 1.0 - input
    loss = -(target * _clamped_log(input, input > 0) + (1.0 - target) * _clamped_log(complement, complement > 0))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """Binary cross entropy of sigmoid(input): p t softplus(-x) + (1 - t) softplus(x), with p = pos_weight
    (broadcast along the last dim, the classes) weighing the positive term. Both softplus terms are formed as
    max(+-x, 0) + log1p(exp(-|x|)), so a confident correct logit keeps its tiny loss (PyTorch's
    (1 - t) x + softplus(-x) cancels it to 0 in float32)."""
    reduction = _reduction(size_average, reduce, reduction)
    input, target, weight = _binary_inputs("binary_cross_entropy_with_logits", input, target, weight)
    non_negative = input >= 0  # one branch for max and |x|, so the gradient at 0 is exact
    tail = (-where(non_negative, input, -input)).exp().log1p()
    softplus_positive = where(non_negative, input, 0.0) + tail   # -log(1 - sigmoid(x))
    softplus_negative = where(non_negative, 0.0, -input) + tail  # -log(sigmoid(x))
    positive_term = target * softplus_negative
    if pos_weight is not None:
        pos_weight = _float_like(pos_weight, input, "binary_cross_entropy_with_logits", "pos_weight")
        try:
            np.broadcast_shapes(tuple(pos_weight.shape), tuple(input.shape))
        except ValueError:
            raise ValueError(f"binary_cross_entropy_with_logits: pos_weight of shape {list(pos_weight.shape)} cannot "
                             f"be broadcast to the input's shape {list(input.shape)}") from None
        positive_term = positive_term * pos_weight
    loss = positive_term + (1.0 - target) * softplus_positive
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)
