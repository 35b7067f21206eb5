"""The multi-class margin losses of PyTorch: multi_margin_loss (one target class per sample, hinge against every
other class) and multilabel_margin_loss (a -1-terminated list of target classes, hinge between every target and
every non-target). Built from gathers, comparisons and elementwise ops, so gradients come from the meta-ops."""
from .. import _core, where
from .loss import _reduce, _reduction
from .tensor import _as_var, _index_var, gather, one_hot

__all__ = ["multi_margin_loss", "multilabel_margin_loss"]


def _batched(input, target, name):
    input, target = _as_var(input), _index_var(target, name)
    if input.ndim == 1:
        return input.unsqueeze(0), target.reshape([1, -1]) if target.ndim <= 1 else target, True
    if input.ndim != 2:
        raise ValueError(f"{name}: expected a 1-D or 2-D input, got shape {list(input.shape)}")
    return input, target, False


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """Per sample: sum over classes i != y of max(0, margin - x[y] + x[i])^p (times weight[y]), divided by the
    number of classes. p is 1 or 2."""
    reduction = _reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    input, target, single = _batched(input, target, "multi_margin_loss")
    target = target.reshape([-1])
    classes = input.shape[1]
    chosen = gather(input, 1, target.unsqueeze(1))
    hinge = (margin - chosen + input).maximum(_core.constant([], input.dtype, 0.0))
    if p == 2:
        hinge = hinge * hinge
    if weight is not None:
        hinge = hinge * gather(_as_var(weight), 0, target).unsqueeze(1)
    others = one_hot(target, classes) == 0
    losses = where(others, hinge, _core.constant([], input.dtype, 0.0)).sum(1) / float(classes)
    if single and reduction == "none":
        return losses.reshape([])
    return _reduce(losses, reduction)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Per sample: sum over target classes j (target's entries up to the first -1) and non-target classes i of
    max(0, 1 - (x[j] - x[i])), divided by the number of classes."""
    reduction = _reduction(size_average, reduce, reduction)
    input, target, single = _batched(input, target, "multilabel_margin_loss")
    classes = input.shape[1]
    valid = _core.cast(target != -1, "int64").cumprod(1) > 0  # the entries before the first -1
    class_numbers = _core.arange(0.0, float(classes), 1.0, "int64")
    # is_target[n, c]: some valid entry of target[n] names class c.
    matches = (target.unsqueeze(2) == class_numbers) & valid.unsqueeze(2)
    is_target = _core.cast(matches, "int64").sum(1) > 0
    hinge = (1.0 - input.unsqueeze(2) + input.unsqueeze(1)).maximum(_core.constant([], input.dtype, 0.0))
    pairs = is_target.unsqueeze(2) & is_target.logical_not().unsqueeze(1)
    losses = where(pairs, hinge, _core.constant([], input.dtype, 0.0)).sum([1, 2]) / float(classes)
    if single and reduction == "none":
        return losses.reshape([])
    return _reduce(losses, reduction)
