"""Margin, embedding and likelihood losses with PyTorch's signatures: margin_ranking_loss, hinge_embedding_loss,
soft_margin_loss, cosine_embedding_loss, triplet_margin_loss, poisson_nll_loss, gaussian_nll_loss and
multilabel_soft_margin_loss. Each is a composition of elementwise ops and reductions, so it fuses with its
neighbours and its gradient comes from theirs; none may compute on the host.
"""
import math

from .. import _core, where
from .activation import logsigmoid
from .distance import pairwise_distance
from .loss import _float_input, _float_like, _reduce, _reduction
from .tensor import _as_var

__all__ = ["margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss", "cosine_embedding_loss",
           "triplet_margin_loss", "poisson_nll_loss", "gaussian_nll_loss", "multilabel_soft_margin_loss",
           "triplet_margin_with_distance_loss"]


def _signs(target, like):
    """A target of 1 / -1 labels as a Var of the input's dtype."""
    target = _as_var(target)
    return target if target.dtype == like.dtype else _core.cast(target, like.dtype)


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """max(0, -target * (input1 - input2) + margin): target 1 ranks input1 higher, -1 input2."""
    reduction = _reduction(size_average, reduce, reduction)
    input1 = _float_input("margin_ranking_loss", input1)
    input2 = _float_like(input2, input1, "margin_ranking_loss", "input2")
    loss = (-_signs(target, input1) * (input1 - input2) + margin).clamp_min(0.0)
    return _reduce(loss, reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """input where target is 1, max(0, margin - input) where it is -1 (other labels add both parts, as in
    PyTorch)."""
    reduction = _reduction(size_average, reduce, reduction)
    input = _float_input("hinge_embedding_loss", input)
    target = _signs(target, input)
    below_margin = where(target != 1, (margin - input).clamp_min(0.0), 0.0)
    return _reduce(below_margin + where(target != -1, input, 0.0), reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-target * input)), the two-class logistic loss for 1 / -1 labels."""
    reduction = _reduction(size_average, reduce, reduction)
    input = _float_input("soft_margin_loss", input)
    return _reduce(-logsigmoid(_signs(target, input) * input), reduction)


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """1 - cos(input1, input2) where target is 1, max(0, cos - margin) where it is -1; rows along the last dim
    ((N, D) with target (N,), or (D,) with a 0-d target)."""
    reduction = _reduction(size_average, reduce, reduction)
    input1 = _float_input("cosine_embedding_loss", input1)
    input2 = _float_like(input2, input1, "cosine_embedding_loss", "input2")
    if input1.ndim not in (1, 2) or tuple(input1.shape) != tuple(input2.shape):
        raise ValueError(f"cosine_embedding_loss: expected two 1-D or 2-D inputs of one shape, got "
                         f"{list(input1.shape)} and {list(input2.shape)}")
    epsilon = 1e-12  # PyTorch's: keeps a zero vector's cosine finite
    products = (input1 * input2).sum(-1)
    magnitudes = (((input1 * input1).sum(-1) + epsilon) * ((input2 * input2).sum(-1) + epsilon)).sqrt()
    cosine = products / magnitudes
    target = _signs(target, input1)
    loss = where(target == 1, 1.0 - cosine, 0.0) + where(target == -1, (cosine - margin).clamp_min(0.0), 0.0)
    return _reduce(loss, reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    """max(0, d(anchor, positive) - d(anchor, negative) + margin) with d the p-norm distance (pairwise_distance);
    swap uses the smaller of d(anchor, negative) and d(positive, negative)."""
    reduction = _reduction(size_average, reduce, reduction)
    anchor = _float_input("triplet_margin_loss", anchor)
    positive_distance = pairwise_distance(anchor, positive, p, eps)
    negative_distance = pairwise_distance(anchor, negative, p, eps)
    if swap:
        negative_distance = negative_distance.minimum(pairwise_distance(positive, negative, p, eps))
    return _reduce((margin + positive_distance - negative_distance).clamp_min(0.0), reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    """Negative log-likelihood of target under Poisson(rate): exp(input) - target * input with log_input, else
    input - target * log(input + eps); full adds Stirling's term for target > 1."""
    reduction = _reduction(size_average, reduce, reduction)
    input = _float_input("poisson_nll_loss", input)
    target = _float_like(target, input, "poisson_nll_loss", "target")
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:
        safe = where(target > 1, target, 1.0)  # the term is 0 elsewhere; keep its log finite there
        stirling = safe * safe.log() - safe + 0.5 * (2 * math.pi * safe).log()
        loss = loss + where(target > 1, stirling, 0.0)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 * (log(var) + (input - target)^2 / var) (+ 0.5 * log(2 pi) with full). var has input's shape, or
    one dim fewer, or a last dim of 1; it is clamped at eps for the value while its gradient passes as if it
    were not (PyTorch clamps a copy under no_grad)."""
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction!r} is not a valid value for reduction (use 'none', 'mean' or 'sum')")
    input = _float_input("gaussian_nll_loss", input)
    target = _float_like(target, input, "gaussian_nll_loss", "target")
    var = _float_like(var, input, "gaussian_nll_loss", "var")
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif not (tuple(input.shape[:-1]) == tuple(var.shape[:-1]) and var.shape[-1] == 1):
            raise ValueError(f"gaussian_nll_loss: var of shape {list(var.shape)} fits neither input "
                             f"{list(input.shape)} nor its shape without the last dim")
    if bool((var < 0).any().item()):
        raise ValueError("gaussian_nll_loss: var has negative entry/entries")
    var = var + (var.clamp_min(eps) - var).detach()
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """Per sample, the mean over classes of -(y log sigmoid(x) + (1 - y) log sigmoid(-x)), weighted per class;
    input and target (N, C) or (C,)."""
    reduction = _reduction(size_average, reduce, reduction)
    input = _float_input("multilabel_soft_margin_loss", input)
    target = _float_like(target, input, "multilabel_soft_margin_loss", "target")
    loss = -(target * logsigmoid(input) + (1.0 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * _float_like(weight, input, "multilabel_soft_margin_loss", "weight")
    loss = loss.mean(-1)
    return _reduce(loss, reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False,
                                      reduction="mean"):
    """max(0, margin + d(anchor, positive) - d(anchor, negative)) with any distance function (pairwise_distance by
    default); swap=True uses d(positive, negative) when it is the smaller negative distance."""
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    distance = distance_function if distance_function is not None else pairwise_distance
    positive_distance = distance(anchor, positive)
    negative_distance = distance(anchor, negative)
    if swap:
        negative_distance = negative_distance.minimum(distance(positive, negative))
    losses = (margin + positive_distance - negative_distance).clamp(min=0.0)
    return _reduce(losses, reduction)
