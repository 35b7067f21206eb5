"""Connectionist temporal classification loss (F.ctc_loss), as PyTorch's: the negative log of the summed
probability of every alignment of a target sequence to the inputs.

The forward (alpha) recursion of Graves et al. runs over time as a scan written in lazy ops: the extended label
sequence (blank, l1, blank, l2, ..., blank) of each batch element is gathered from log_probs once, and each time
step is a log-sum-exp of the previous step's alphas shifted by 0, 1 and 2 positions, so the whole recursion is
one graph that autodiff differentiates. The lengths (small integer vectors) are read on the host, as PyTorch
reads them to check them and to size the extended sequence; the log-probabilities never are.

PyTorch's gradient w.r.t. log_probs is not the plain derivative of this loss: it adds exp(log_probs) at every
step inside the input length (it assumes log_probs come from log_softmax, where that term cancels). A zero-valued
term with that gradient reproduces it, so a direct gradient matches torch.autograd too. This file must not loop
over time or labels with numpy: the recursion stays in the graph."""
import numpy as np

from .. import _core, array
from .._core import Var
from .._function import Function
from .tensor import _as_var, gather

__all__ = ["ctc_loss"]

_NEGATIVE_INFINITY = float("-inf")
_CHECKING = "(while checking arguments for ctc_loss_allocate_outputs)"


def _lengths(value, name):
    """A lengths argument (Var, sequence or number) as a 1-D int64 numpy array."""
    if isinstance(value, Var):
        value = value.numpy()
    values = np.asarray(value)
    if values.dtype.kind not in "iu":
        raise RuntimeError(f"ctc_loss: {name} must be integers, got {values.dtype}")
    return values.astype(np.int64).reshape(-1)


def _log_sum_exp(*terms):
    """log(sum(exp(terms))) elementwise, -inf where every term is -inf; the shift is detached (it does not change
    the value), and -inf-only positions keep finite intermediates so their gradient is 0, never NaN."""
    from .. import maximum
    largest = terms[0]
    for term in terms[1:]:
        largest = maximum(largest, term)
    largest = largest.detach()
    empty = largest == _NEGATIVE_INFINITY
    zero = _core.constant([], largest.dtype, 0.0)
    shift = _core.where(empty, zero, largest)
    total = None
    for term in terms:
        part = (term - shift).exp()
        total = part if total is None else total + part
    total = _core.where(empty, _core.constant([], total.dtype, 1.0), total)
    return _core.where(empty, _core.constant([], total.dtype, _NEGATIVE_INFINITY), total.log() + shift)


class _SoftmaxTerm(Function):
    """Zero-valued per batch element, with gradient grad[n] * exp(log_probs[t, n, c]) for t < input_length[n]:
    the extra term PyTorch's ctc_loss gradient carries."""

    @staticmethod
    def forward(ctx, log_probs, active):
        ctx.save_for_backward(log_probs, active)
        return _core.constant([log_probs.shape[1]], log_probs.dtype, 0.0)

    @staticmethod
    def backward(ctx, grad):
        log_probs, active = ctx.saved_tensors
        weight = _core.where(active, grad.reshape([1, -1]), _core.constant([], grad.dtype, 0.0))
        return log_probs.exp() * weight.unsqueeze(-1), None


def _padded_targets(targets, target_lengths, batch):
    """(N, S_max) int64 targets from the padded (N, S) or concatenated (sum of lengths) form."""
    if targets.dtype != "int64":
        targets = _core.cast(targets, "int64")
    longest = int(target_lengths.max()) if batch else 0
    if targets.ndim == 2:
        if targets.shape[0] != batch:
            raise RuntimeError(f"Expected tensor to have size {batch} at dimension 0, but got size {targets.shape[0]} "
                               f"for argument #2 'targets' {_CHECKING}")
        if targets.shape[1] < longest:
            raise RuntimeError(f"Expected tensor to have size at least {longest} at dimension 1, but got size "
                               f"{targets.shape[1]} for argument #2 'targets' {_CHECKING}")
        return targets
    total = int(target_lengths.sum())
    if targets.ndim != 1 or targets.shape[0] != total:
        raise RuntimeError(f"Expected tensor to have size {total} at dimension 0, but got size "
                           f"{targets.shape[0] if targets.ndim else 0} for argument #2 'targets' {_CHECKING}")
    if longest == 0 or total == 0:
        return _core.constant([batch, max(longest, 1)], "int64", 0)
    offsets = np.cumsum(target_lengths) - target_lengths
    positions = np.minimum(offsets[:, None] + np.arange(longest)[None, :], total - 1)
    return gather(targets, 0, array(positions.reshape(-1))).reshape([batch, longest])


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """CTC loss of log_probs (T, N, C) (or unbatched (T, C)) against targets padded (N, S) or concatenated
    (sum(target_lengths)), with per-element input and target lengths; reduction 'mean' divides each loss by its
    target length (at least 1) and averages over the batch, as torch.nn.functional.ctc_loss. zero_infinity
    replaces infinite losses (targets that cannot be aligned in time) and their gradients by 0."""
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    log_probs, targets = _as_var(log_probs), _as_var(targets)
    unbatched = log_probs.ndim == 2
    if unbatched:
        log_probs = log_probs.unsqueeze(1)
        targets = targets.unsqueeze(0)
    if log_probs.ndim != 3:
        raise RuntimeError(f"ctc_loss: log_probs must be (T, N, C) or (T, C), got shape {list(log_probs.shape)}")
    if not log_probs.dtype.startswith("float"):
        raise RuntimeError(f"ctc_loss: log_probs must be floating point, got {log_probs.dtype}")
    steps, batch, classes = log_probs.shape
    if not 0 <= blank < classes:
        raise RuntimeError("blank must be in label range")
    input_lengths = _lengths(input_lengths, "input_lengths")
    target_lengths = _lengths(target_lengths, "target_lengths")
    if input_lengths.shape[0] != batch:
        raise RuntimeError("input_lengths must be of size batch_size")
    if target_lengths.shape[0] != batch:
        raise RuntimeError("target_lengths must be of size batch_size")
    for name, values, limit in (("input_lengths", input_lengths, steps), ("target_lengths", target_lengths, None)):
        if batch and values.min() < 0:
            raise RuntimeError(f"Expected {name} to have value at least 0, but got value {values.min()} {_CHECKING}")
        if limit is not None and batch and values.max() > limit:
            raise RuntimeError(f"Expected {name} to have value at most {limit}, but got value {values.max()} "
                               f"{_CHECKING}")
    padded = _padded_targets(targets, target_lengths, batch)
    longest = padded.shape[1]
    extended = 2 * longest + 1

    # The extended labels: odd positions hold the targets (blank past each target's length), even ones blank.
    label_positions = np.arange(extended) // 2                           # target index of each odd position
    inside = (np.arange(extended) % 2 == 1)[None, :] & (label_positions[None, :] < target_lengths[:, None])
    if longest:
        labels = gather(padded, 1, array(np.broadcast_to(np.minimum(label_positions, longest - 1),
                                                         (batch, extended)).copy()))
        labels = _core.where(array(inside), labels, _core.constant([], "int64", blank))
    else:
        labels = _core.constant([batch, extended], "int64", blank)
    # A skip from s - 2 to s is allowed onto a label that differs from the label two positions back.
    previous = _core.reindex(labels, [batch, extended], ["i0", "i1-2"], float(blank), [], [])
    can_skip = array(inside) & (labels != previous)

    emissions = gather(log_probs, 2, labels.unsqueeze(0).broadcast_to([steps, batch, extended]))  # (T, N, L)
    active = array(np.arange(steps)[:, None] < input_lengths[None, :])                            # (T, N)
    negative_infinity = _core.constant([], log_probs.dtype, _NEGATIVE_INFINITY)
    start = array(np.arange(extended) < 2)
    alpha = _core.where(start, emissions[0], negative_infinity)
    alpha = _core.where(active[0].unsqueeze(-1), alpha, negative_infinity)
    for step in range(1, int(input_lengths.max()) if batch else 0):
        stay = alpha
        advance = _core.reindex(alpha, [batch, extended], ["i0", "i1-1"], _NEGATIVE_INFINITY, [], [])
        skip = _core.where(can_skip, _core.reindex(alpha, [batch, extended], ["i0", "i1-2"], _NEGATIVE_INFINITY,
                                                   [], []), negative_infinity)
        updated = _log_sum_exp(stay, advance, skip) + emissions[step]
        alpha = _core.where(active[step].unsqueeze(-1), updated, alpha)

    # The alignment ends on the last label or on the blank after it.
    last = array((2 * target_lengths).reshape(batch, 1))
    before_last = array(np.maximum(2 * target_lengths - 1, 0).reshape(batch, 1))
    ending_blank = gather(alpha, 1, last).reshape([batch])
    ending_label = _core.where(array(target_lengths > 0), gather(alpha, 1, before_last).reshape([batch]),
                               negative_infinity)
    losses = -_log_sum_exp(ending_blank, ending_label)
    # An input of length 0 has no alignment at all (PyTorch: inf unless the target is empty too, then 0).
    empty_input = array(input_lengths == 0)
    losses = _core.where(empty_input & array(target_lengths == 0), _core.constant([], losses.dtype, 0.0), losses)
    losses = _core.where(empty_input & array(target_lengths > 0),
                         _core.constant([], losses.dtype, float("inf")), losses)
    losses = losses + _SoftmaxTerm.apply(log_probs, active)
    if zero_infinity:
        losses = _core.where(losses == float("inf"), _core.constant([], losses.dtype, 0.0), losses)
    if reduction == "none":
        return losses.reshape([]) if unbatched else losses
    if reduction == "sum":
        return losses.sum()
    divisor = array(np.maximum(target_lengths, 1).astype(losses.dtype))
    return (losses / divisor).mean()
