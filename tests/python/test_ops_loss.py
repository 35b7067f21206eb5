"""Loss functions (metajit.ops.loss) against PyTorch: every reduction, class weights, ignore_index, label
smoothing, probability targets, the deprecated size_average/reduce pair, numerically hard inputs, gradients
against finite differences (float64) and PyTorch, and errors."""
import warnings

import numpy as np
import pytest

import metajit as mj
from conftest import assert_close
from gradient_check import check_gradients, torch_gradients

torch = pytest.importorskip("torch")
functional = torch.nn.functional

REDUCTIONS = ["mean", "sum", "none"]


def optional(array, convert):
    return None if array is None else convert(array)


@pytest.fixture
def classification():
    generator = np.random.default_rng(11)
    logits = generator.uniform(-3, 3, size=(5, 4))
    target = np.array([0, 3, -100, 1, 3])
    weight = generator.uniform(0.5, 2.0, size=4)
    return logits, target, weight


# -------------------------------------------------------------------------------------------------- cross entropy
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("use_weight", [False, True])
@pytest.mark.parametrize("smoothing", [0.0, 0.25])
def test_cross_entropy_with_class_indices_matches_torch(reduction, use_weight, smoothing, classification):
    logits, target, weight = classification
    weight = weight if use_weight else None
    got = mj.cross_entropy(mj.array(logits), mj.array(target), optional(weight, mj.array), reduction=reduction,
                           label_smoothing=smoothing)
    expected = functional.cross_entropy(torch.tensor(logits), torch.tensor(target), optional(weight, torch.tensor),
                                        reduction=reduction, label_smoothing=smoothing)
    assert_close(got, expected.numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_spatial_and_unbatched_inputs(reduction, rng):
    logits = rng.uniform(-2, 2, size=(2, 3, 2, 2)).astype(np.float32)
    target = rng.integers(0, 3, size=(2, 2, 2))
    target[0, 1, 0] = 1
    weight = np.array([0.5, 1.0, 2.0], np.float32)
    for smoothing in (0.0, 0.1):
        got = mj.cross_entropy(mj.array(logits), mj.array(target), mj.array(weight), ignore_index=1,
                               reduction=reduction, label_smoothing=smoothing)
        expected = functional.cross_entropy(torch.tensor(logits), torch.tensor(target), torch.tensor(weight),
                                            ignore_index=1, reduction=reduction, label_smoothing=smoothing)
        assert_close(got, expected.numpy(), rtol=1e-5, atol=1e-6)
    single = logits[0, :, 0, 0]
    got = mj.cross_entropy(mj.array(single), mj.array(np.int64(2)), reduction=reduction)
    expected = functional.cross_entropy(torch.tensor(single), torch.tensor(2), reduction=reduction)
    assert_close(got, expected.numpy(), rtol=1e-6)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_cross_entropy_with_probability_targets_matches_torch(reduction, smoothing, classification):
    logits, _, weight = classification
    probabilities = np.random.default_rng(5).uniform(0, 1, size=logits.shape)
    probabilities /= probabilities.sum(1, keepdims=True)
    for class_weight in (None, weight):
        got = mj.cross_entropy(mj.array(logits), mj.array(probabilities), optional(class_weight, mj.array),
                               reduction=reduction, label_smoothing=smoothing)
        expected = functional.cross_entropy(torch.tensor(logits), torch.tensor(probabilities),
                                            optional(class_weight, torch.tensor), reduction=reduction,
                                            label_smoothing=smoothing)
        assert_close(got, expected.numpy(), rtol=1e-12, atol=1e-14)


def test_cross_entropy_is_stable_for_huge_logits():
    logits = np.array([[1000.0, -1000.0, 0.0], [-500.0, 500.0, 499.0]], np.float32)
    target = np.array([0, 2])
    got = mj.cross_entropy(mj.array(logits), mj.array(target), reduction="none")
    expected = functional.cross_entropy(torch.tensor(logits), torch.tensor(target), reduction="none")
    assert_close(got, expected.numpy(), rtol=1e-6)


def test_cross_entropy_gradients_match_finite_differences_and_torch(classification):
    logits, target, weight = classification
    cases = [
        (lambda x: mj.cross_entropy(x, mj.array(target)),
         lambda t: functional.cross_entropy(t, torch.tensor(target))),
        (lambda x: mj.cross_entropy(x, mj.array(target), mj.array(weight), label_smoothing=0.2),
         lambda t: functional.cross_entropy(t, torch.tensor(target), torch.tensor(weight), label_smoothing=0.2)),
        (lambda x: mj.cross_entropy(x, mj.array(target), reduction="none", label_smoothing=0.1),
         lambda t: functional.cross_entropy(t, torch.tensor(target), reduction="none", label_smoothing=0.1)),
    ]
    for ours, reference in cases:
        got = check_gradients(ours, logits)
        np.testing.assert_allclose(got[0], torch_gradients(reference, logits)[0], rtol=1e-9, atol=1e-12)
    assert np.all(got[0][2] == 0)  # the ignored row gets no gradient


def test_cross_entropy_gradient_with_respect_to_probability_target_and_weight(classification):
    logits, _, weight = classification
    probabilities = np.random.default_rng(6).uniform(0.1, 1, size=logits.shape)

    def ours(x, p, w):
        return mj.cross_entropy(x, p, w, label_smoothing=0.1)

    def reference(x, p, w):
        return functional.cross_entropy(x, p, w, label_smoothing=0.1)

    got = check_gradients(ours, logits, probabilities, weight)
    for mine, theirs in zip(got, torch_gradients(reference, logits, probabilities, weight)):
        np.testing.assert_allclose(mine, theirs, rtol=1e-9, atol=1e-12)


# ------------------------------------------------------------------------------------------------------ nll loss
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss_matches_torch_including_in_range_ignore_index(reduction, classification):
    logits, _, weight = classification
    log_probabilities = torch.log_softmax(torch.tensor(logits), 1).numpy()
    target = np.array([0, 3, 2, 1, 2])
    for ignore_index in (-100, 2):
        for class_weight in (None, weight):
            got = mj.nll_loss(mj.array(log_probabilities), mj.array(target), optional(class_weight, mj.array),
                              ignore_index=ignore_index, reduction=reduction)
            expected = functional.nll_loss(torch.tensor(log_probabilities), torch.tensor(target),
                                           optional(class_weight, torch.tensor), ignore_index=ignore_index,
                                           reduction=reduction)
            assert_close(got, expected.numpy(), rtol=1e-12, atol=1e-14)


def test_nll_loss_gradients_and_all_ignored_batch(classification):
    logits, target, weight = classification
    got = check_gradients(lambda x: mj.nll_loss(x, mj.array(target), mj.array(weight)), logits)
    expected = torch_gradients(lambda t: functional.nll_loss(t, torch.tensor(target), torch.tensor(weight)), logits)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-12)
    ignored = np.full(5, -100)
    assert np.isnan(mj.nll_loss(mj.array(logits), mj.array(ignored)).item())
    assert np.isnan(functional.nll_loss(torch.tensor(logits), torch.tensor(ignored)).item())
    assert mj.nll_loss(mj.array(logits), mj.array(ignored), reduction="sum").item() == 0.0


def test_int32_targets_are_accepted(classification):
    logits, target, _ = classification
    got = mj.cross_entropy(mj.array(logits), mj.array(target.astype(np.int32)))
    assert_close(got, functional.cross_entropy(torch.tensor(logits), torch.tensor(target)).numpy(), rtol=1e-12)


# ------------------------------------------------------------------------------------------- regression losses
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_regression_losses_match_torch(reduction, rng):
    prediction = rng.uniform(-2, 2, size=(3, 4))
    target = rng.uniform(-2, 2, size=(3, 4))
    weight = rng.uniform(0.1, 1.0, size=(3, 4))
    cases = [
        (mj.mse_loss, functional.mse_loss, {}),
        (mj.mse_loss, functional.mse_loss, {"weight": weight}),
        (mj.l1_loss, functional.l1_loss, {}),
        (mj.l1_loss, functional.l1_loss, {"weight": weight}),
        (mj.smooth_l1_loss, functional.smooth_l1_loss, {}),
        (mj.smooth_l1_loss, functional.smooth_l1_loss, {"beta": 0.5}),
        (mj.smooth_l1_loss, functional.smooth_l1_loss, {"beta": 0.0}),
    ]
    for ours, reference, options in cases:
        mine = {key: mj.array(value) if isinstance(value, np.ndarray) else value for key, value in options.items()}
        theirs = {key: torch.tensor(value) if isinstance(value, np.ndarray) else value
                  for key, value in options.items()}
        got = ours(mj.array(prediction), mj.array(target), reduction=reduction, **mine)
        expected = reference(torch.tensor(prediction), torch.tensor(target), reduction=reduction, **theirs)
        assert_close(got, expected.numpy(), rtol=1e-12, atol=1e-14)


def test_regression_loss_gradients_match_finite_differences_and_torch(rng):
    prediction = rng.uniform(-2, 2, size=(3, 4))
    target = rng.uniform(-2, 2, size=(3, 4))
    weight = rng.uniform(0.1, 1.0, size=(3, 4))
    cases = [
        (lambda x, y: mj.mse_loss(x, y), lambda x, y: functional.mse_loss(x, y)),
        (lambda x, y: mj.mse_loss(x, y, weight=mj.array(weight)),
         lambda x, y: functional.mse_loss(x, y, weight=torch.tensor(weight))),
        (lambda x, y: mj.l1_loss(x, y, reduction="sum"), lambda x, y: functional.l1_loss(x, y, reduction="sum")),
        (lambda x, y: mj.smooth_l1_loss(x, y, beta=0.7, reduction="none"),
         lambda x, y: functional.smooth_l1_loss(x, y, beta=0.7, reduction="none")),
    ]
    for ours, reference in cases:
        got = check_gradients(ours, prediction, target)
        for mine, theirs in zip(got, torch_gradients(reference, prediction, target)):
            np.testing.assert_allclose(mine, theirs, rtol=1e-9, atol=1e-12)


def test_broadcasting_regression_target_warns_like_torch(rng):
    prediction = rng.uniform(-1, 1, size=(3, 4))
    target = rng.uniform(-1, 1, size=(4,))
    with pytest.warns(UserWarning, match="different to the input size"):
        got = mj.mse_loss(mj.array(prediction), mj.array(target))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = functional.mse_loss(torch.tensor(prediction), torch.tensor(target))
    assert_close(got, expected.numpy(), rtol=1e-12)


def test_deprecated_size_average_and_reduce_arguments(rng):
    prediction = rng.uniform(-1, 1, size=(3, 4))
    target = rng.uniform(-1, 1, size=(3, 4))
    for size_average, reduce in ((None, False), (False, None), (True, True), (False, True)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = mj.l1_loss(mj.array(prediction), mj.array(target), size_average, reduce)
            expected = functional.l1_loss(torch.tensor(prediction), torch.tensor(target), size_average, reduce)
        assert_close(got, expected.numpy(), rtol=1e-12)


# ----------------------------------------------------------------------------------------------- binary losses
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy_matches_torch(reduction, rng):
    probabilities = rng.uniform(0.01, 0.99, size=(3, 4))
    probabilities[0, :2] = [0.0, 1.0]  # the logs clamp at -100
    target = rng.uniform(0, 1, size=(3, 4))
    weight = rng.uniform(0.5, 1.5, size=(4,))
    for class_weight in (None, weight):
        got = mj.binary_cross_entropy(mj.array(probabilities), mj.array(target), optional(class_weight, mj.array),
                                      reduction=reduction)
        expected = functional.binary_cross_entropy(torch.tensor(probabilities), torch.tensor(target),
                                                   optional(class_weight, torch.tensor), reduction=reduction)
        assert_close(got, expected.numpy(), rtol=1e-12, atol=1e-12)


def test_binary_cross_entropy_gradients(rng):
    probabilities = rng.uniform(0.05, 0.95, size=(3, 4))
    target = rng.uniform(0, 1, size=(3, 4))
    got = check_gradients(lambda p, t: mj.binary_cross_entropy(p, t), probabilities, target)
    expected = torch_gradients(lambda p, t: functional.binary_cross_entropy(p, t), probabilities, target)
    for mine, theirs in zip(got, expected):
        np.testing.assert_allclose(mine, theirs, rtol=1e-9, atol=1e-12)
    # At exactly 0 and 1 the clamped log has a finite (zero) slope instead of nan.
    edges = mj.array(np.array([0.0, 1.0, 0.5]), requires_grad=True)
    gradient = mj.grad(mj.binary_cross_entropy(edges, mj.array(np.array([1.0, 0.0, 1.0]))), edges).numpy()
    assert np.all(np.isfinite(gradient))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy_with_logits_matches_torch(reduction, rng):
    logits = rng.uniform(-4, 4, size=(3, 4))
    logits[0] = [-300.0, 300.0, 0.0, 40.0]  # exp overflows in a naive form
    target = rng.uniform(0, 1, size=(3, 4))
    weight = rng.uniform(0.5, 1.5, size=(3, 1))
    pos_weight = rng.uniform(0.5, 3.0, size=(4,))
    for class_weight in (None, weight):
        for positive in (None, pos_weight):
            got = mj.binary_cross_entropy_with_logits(mj.array(logits), mj.array(target),
                                                      optional(class_weight, mj.array), reduction=reduction,
                                                      pos_weight=optional(positive, mj.array))
            expected = functional.binary_cross_entropy_with_logits(
                torch.tensor(logits), torch.tensor(target), optional(class_weight, torch.tensor), reduction=reduction,
                pos_weight=optional(positive, torch.tensor))
            assert_close(got, expected.numpy(), rtol=1e-12, atol=1e-12)


def test_binary_cross_entropy_with_logits_is_accurate_for_tiny_losses():
    """log1p matters: with a confident correct logit the loss is ~exp(-x), which log(1 + exp(-x)) rounds to 0."""
    logits = np.array([20.0, 30.0, -25.0], np.float32)
    target = np.array([1.0, 1.0, 0.0], np.float32)
    got = mj.binary_cross_entropy_with_logits(mj.array(logits), mj.array(target), reduction="none")
    assert_close(got, np.log1p(np.exp(-np.abs(logits.astype(np.float64)))), rtol=1e-5)


def test_binary_cross_entropy_with_logits_gradients(rng):
    logits = rng.uniform(-4, 4, size=(3, 4))
    logits[0, 0] = 0.0  # the kink of |x| inside the stable form
    target = rng.uniform(0, 1, size=(3, 4))
    pos_weight = rng.uniform(0.5, 3.0, size=(4,))

    def ours(x, t):
        return mj.binary_cross_entropy_with_logits(x, t, pos_weight=mj.array(pos_weight))

    def reference(x, t):
        return functional.binary_cross_entropy_with_logits(x, t, pos_weight=torch.tensor(pos_weight))

    got = check_gradients(ours, logits, target)
    for mine, theirs in zip(got, torch_gradients(reference, logits, target)):
        np.testing.assert_allclose(mine, theirs, rtol=1e-9, atol=1e-12)
    # PyTorch does not differentiate pos_weight; metajit does (checked against finite differences only).
    check_gradients(lambda p: mj.binary_cross_entropy_with_logits(mj.array(logits), mj.array(target), pos_weight=p),
                    pos_weight)
    large = mj.array(np.array([-300.0, 300.0]), requires_grad=True)
    gradient = mj.grad(mj.binary_cross_entropy_with_logits(large, mj.array(np.array([1.0, 0.0]))), large).numpy()
    np.testing.assert_allclose(gradient, [-0.5, 0.5])


def test_losses_are_exposed_in_nn_functional():
    import metajit.nn.functional as F
    for name in ("cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "binary_cross_entropy",
                 "binary_cross_entropy_with_logits"):
        assert callable(getattr(F, name)), name


# ---------------------------------------------------------------------------------------------------------- errors
def test_loss_errors(classification):
    logits, target, weight = classification
    x = mj.array(logits)
    with pytest.raises(ValueError, match="reduction"):
        mj.cross_entropy(x, mj.array(target), reduction="average")
    with pytest.raises(IndexError, match="Target 4 is out of bounds"):
        mj.cross_entropy(x, mj.array(np.array([0, 4, 1, 1, 1])))
    with pytest.raises(IndexError, match="out of bounds"):
        mj.nll_loss(x, mj.array(np.array([0, -1, 1, 1, 1])))
    with pytest.raises(ValueError, match="target of shape"):
        mj.cross_entropy(x, mj.array(np.array([0, 1])))
    with pytest.raises(ValueError, match="probability target"):
        mj.cross_entropy(x, mj.array(np.zeros((5, 3))))
    with pytest.raises(ValueError, match="label_smoothing"):
        mj.cross_entropy(x, mj.array(target), label_smoothing=1.5)
    with pytest.raises(ValueError, match="weight"):
        mj.cross_entropy(x, mj.array(target), mj.array(np.ones(3)))
    with pytest.raises(TypeError, match="integer"):
        mj.nll_loss(x, mj.array(np.zeros(5)))
    with pytest.raises(TypeError, match="floating-point"):
        mj.cross_entropy(mj.array(np.zeros((5, 4), np.int64)), mj.array(target))
    with pytest.raises(ValueError, match="target size"):
        mj.binary_cross_entropy(mj.array(np.full((2, 3), 0.5)), mj.array(np.ones((3,))))
    with pytest.raises(ValueError, match="target size"):
        mj.binary_cross_entropy_with_logits(mj.array(np.zeros((2, 3))), mj.array(np.ones((2, 1))))
    with pytest.raises(ValueError, match="same size"):
        mj.mse_loss(mj.array(np.zeros((2, 3))), mj.array(np.ones((2, 3))), weight=mj.array(np.ones(3)))
    with pytest.raises(ValueError, match="beta"):
        mj.smooth_l1_loss(mj.array(np.zeros(3)), mj.array(np.ones(3)), beta=-1.0)
