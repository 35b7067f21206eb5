"""F.ctc_loss and nn.CTCLoss against PyTorch: the three reductions, padded and concatenated targets, unbatched
input, blank other than 0, lengths as lists and as Vars, empty targets, targets too long for their input (an
infinite loss, zeroed with zero_infinity), and the gradient w.r.t. log_probs (torch.autograd is the reference,
directly and through log_softmax). float64 at rtol 1e-9 / atol 1e-9, float32 at rtol 1e-4 / atol 1e-5."""
import numpy as np
import pytest

import metajit as mj
from metajit import nn
from metajit.nn import functional as F

torch = pytest.importorskip("torch")

TOLERANCES = {"float32": (1e-4, 1e-5), "float64": (1e-9, 1e-9)}


def log_probabilities(rng, shape, dtype):
    logits = rng.standard_normal(shape)
    return (logits - np.log(np.exp(logits).sum(-1, keepdims=True))).astype(dtype)


def compare(arrays, dtype, our_call, their_call, through_log_softmax=False):
    """Loss values and the gradient w.r.t. the first array (log_probs, or logits under log_softmax) of a
    weighted sum of the loss."""
    rtol, atol = TOLERANCES[dtype]
    ours_input = mj.array(arrays[0], requires_grad=True)
    theirs_input = torch.tensor(arrays[0], requires_grad=True)
    ours = our_call(F.log_softmax(ours_input, -1) if through_log_softmax else ours_input)
    theirs = their_call(theirs_input.log_softmax(-1) if through_log_softmax else theirs_input)
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert ours.dtype == dtype
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=rtol, atol=atol)
    weight = np.random.default_rng(5).standard_normal(tuple(theirs.shape)).astype(dtype)
    (theirs * torch.tensor(weight)).sum().backward()
    gradient, = mj.grad((ours * mj.array(weight)).sum(), [ours_input])
    np.testing.assert_allclose(gradient.numpy(), theirs_input.grad.numpy(), rtol=rtol, atol=atol)


# Each configuration compiles its own kernels (a few seconds on a cold kernel cache), so float32 is checked once
# here and in the log_softmax test, and every other combination in float64.
@pytest.mark.parametrize("dtype, reduction, form", [
    ("float32", "mean", "padded"),
    *[("float64", reduction, form) for reduction in ("none", "mean", "sum") for form in ("padded", "concatenated")]])
def test_batched(dtype, reduction, form):
    rng = np.random.default_rng(1)
    steps, batch, classes = 14, 4, 6
    log_probs = log_probabilities(rng, (steps, batch, classes), dtype)
    input_lengths, target_lengths = [14, 11, 9, 14], [5, 3, 0, 2]
    padded = rng.integers(1, classes, (batch, 5))
    padded[1, 3:] = 0  # padding past a target's length is never read
    targets = padded if form == "padded" else \
        np.concatenate([padded[index, :length] for index, length in enumerate(target_lengths)])
    compare([log_probs], dtype,
            lambda x: F.ctc_loss(x, mj.array(targets), input_lengths, target_lengths, reduction=reduction),
            lambda x: torch.nn.functional.ctc_loss(x, torch.tensor(targets), input_lengths, target_lengths,
                                                   reduction=reduction))


@pytest.mark.parametrize("dtype", ["float32"])
def test_through_log_softmax_with_repeated_labels_and_other_blank(dtype):
    rng = np.random.default_rng(2)
    logits = rng.standard_normal((10, 3, 5)).astype(dtype)
    targets = np.array([[1, 1, 2], [3, 3, 3], [0, 2, 0]])  # blank 4; repeats need a blank between them
    lengths = mj.array(np.array([10, 9, 10])), mj.array(np.array([3, 3, 3]))
    compare([logits], dtype,
            lambda x: nn.CTCLoss(blank=4)(x, mj.array(targets), *lengths),
            lambda x: torch.nn.CTCLoss(blank=4)(x, torch.tensor(targets), torch.tensor([10, 9, 10]),
                                                torch.tensor([3, 3, 3])),
            through_log_softmax=True)


@pytest.mark.parametrize("reduction", ["none"])
def test_unbatched(reduction):
    rng = np.random.default_rng(3)
    log_probs = log_probabilities(rng, (8, 4), "float64")
    targets = np.array([1, 2, 2])
    compare([log_probs], "float64",
            lambda x: F.ctc_loss(x, mj.array(targets), mj.array(np.array(8)), mj.array(np.array(3)),
                                 reduction=reduction),
            lambda x: torch.nn.functional.ctc_loss(x, torch.tensor(targets), torch.tensor(8), torch.tensor(3),
                                                   reduction=reduction))


@pytest.mark.parametrize("zero_infinity", [False, True])
def test_targets_too_long_for_their_input(zero_infinity):
    rng = np.random.default_rng(4)
    log_probs = log_probabilities(rng, (4, 2, 5), "float64")
    targets = np.array([[1, 1, 1, 2], [1, 2, 3, 4]])  # three repeats need 6 steps; the second fits
    call = dict(reduction="none", zero_infinity=zero_infinity)
    ours = F.ctc_loss(mj.array(log_probs), mj.array(targets), [4, 4], [4, 4], **call).numpy()
    theirs = torch.nn.functional.ctc_loss(torch.tensor(log_probs), torch.tensor(targets), [4, 4], [4, 4], **call)
    np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-9)
    assert np.isinf(ours[0]) != zero_infinity
    if zero_infinity:
        compare([log_probs], "float64",
                lambda x: F.ctc_loss(x, mj.array(targets), [4, 4], [4, 4], reduction="sum", zero_infinity=True),
                lambda x: torch.nn.functional.ctc_loss(x, torch.tensor(targets), [4, 4], [4, 4], reduction="sum",
                                                       zero_infinity=True))


def test_empty_targets_and_empty_inputs():
    rng = np.random.default_rng(6)
    log_probs = log_probabilities(rng, (5, 3, 4), "float64")
    targets = np.zeros((3, 0), np.int64)
    compare([log_probs], "float64",
            lambda x: F.ctc_loss(x, mj.array(targets), [5, 2, 0], [0, 0, 0], reduction="none"),
            lambda x: torch.nn.functional.ctc_loss(x, torch.tensor(targets), [5, 2, 0], [0, 0, 0],
                                                   reduction="none"))


def test_errors_match_pytorch():
    log_probs = log_probabilities(np.random.default_rng(7), (5, 2, 4), "float32")
    targets = np.ones((2, 3), np.int64)
    for arguments in [([6, 5], [3, 3], {}), ([5, 5], [4, 3], {}), ([5, 5], [3, 3], {"blank": 7}),
                      ([5], [3, 3], {}), ([-1, 5], [3, 3], {})]:
        input_lengths, target_lengths, options = arguments
        with pytest.raises(RuntimeError) as theirs:
            torch.nn.functional.ctc_loss(torch.tensor(log_probs), torch.tensor(targets), input_lengths,
                                         target_lengths, **options)
        with pytest.raises(RuntimeError) as ours:
            F.ctc_loss(mj.array(log_probs), mj.array(targets), input_lengths, target_lengths, **options)
        assert str(ours.value) == str(theirs.value)
    with pytest.raises(ValueError, match="bad is not a valid value for reduction"):
        F.ctc_loss(mj.array(log_probs), mj.array(targets), [5, 5], [3, 3], reduction="bad")


def test_module_defaults():
    loss = nn.CTCLoss()
    assert (loss.blank, loss.reduction, loss.zero_infinity) == (0, "mean", False)
