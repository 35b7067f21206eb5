"""Normalization (metajit.ops.normalization): batch_norm (training with batch statistics and the running-statistics
update, evaluation with running statistics), the lazy batch_norm_with_statistics, layer_norm and group_norm, each
against PyTorch in float64 (value and gradients of input, weight and bias) and finite differences; errors."""
import numpy as np
import pytest

import metajit as mj
import metajit.nn.functional as F
from conftest import assert_close
from gradient_check import assert_matches_torch, check_gradients

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def running_statistics(rng, channels):
    return rng.standard_normal(channels), rng.uniform(0.5, 2.0, channels)


@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (3, 2, 4, 5)], ids=str)
def test_batch_norm_training_matches_torch(rng, shape):
    channels = shape[1]
    mean, variance = running_statistics(rng, channels)
    arrays = [rng.standard_normal(shape) * 2 + 1, rng.standard_normal(channels), rng.standard_normal(channels)]
    assert_matches_torch(
        lambda x, w, b: F.batch_norm(x, mj.array(mean), mj.array(variance), w, b, training=True, momentum=0.2),
        lambda x, w, b: TF.batch_norm(x, torch.tensor(mean), torch.tensor(variance), w, b, training=True,
                                      momentum=0.2), arrays)


def test_batch_norm_training_updates_running_statistics(rng):
    image = rng.standard_normal((4, 3, 5, 5))
    mean, variance = running_statistics(rng, 3)
    running_mean, running_var = mj.array(mean), mj.array(variance)
    output = F.batch_norm(mj.array(image), running_mean, running_var, training=True, momentum=0.3, eps=1e-3)
    torch_mean, torch_var = torch.tensor(mean), torch.tensor(variance)
    expected = TF.batch_norm(torch.tensor(image), torch_mean, torch_var, training=True, momentum=0.3, eps=1e-3)
    assert running_mean.is_computed and running_var.is_computed  # assigned at once, like PyTorch's in-place update
    assert_close(running_mean, torch_mean.numpy(), rtol=1e-12)
    assert_close(running_var, torch_var.numpy(), rtol=1e-12)  # unbiased batch variance in the estimate
    assert_close(output, expected.numpy(), rtol=1e-10, atol=1e-12)


def test_batch_norm_with_statistics_is_lazy(rng):
    image = rng.standard_normal((5, 2, 3))
    mean, variance = running_statistics(rng, 2)
    running_mean, running_var = mj.array(mean), mj.array(variance)
    output, new_mean, new_var = F.batch_norm_with_statistics(mj.array(image), running_mean, running_var,
                                                             training=True, momentum=0.1)
    assert not new_mean.is_computed and not new_var.is_computed and not output.is_computed
    torch_mean, torch_var = torch.tensor(mean), torch.tensor(variance)
    expected = TF.batch_norm(torch.tensor(image), torch_mean, torch_var, training=True, momentum=0.1)
    assert_close(new_mean, torch_mean.numpy(), rtol=1e-12)
    assert_close(new_var, torch_var.numpy(), rtol=1e-12)
    assert_close(output, expected.numpy(), rtol=1e-10, atol=1e-12)
    assert_close(running_mean, mean, rtol=0)  # the given statistics are untouched
    assert_close(running_var, variance, rtol=0)
    # Out of training the running statistics come back as they are.
    _, same_mean, same_var = F.batch_norm_with_statistics(mj.array(image), running_mean, running_var)
    assert same_mean is running_mean and same_var is running_var


def test_batch_norm_running_statistics_get_no_gradient(rng):
    image = mj.array(rng.standard_normal((4, 2)), requires_grad=True)
    _, new_mean, new_var = F.batch_norm_with_statistics(image, mj.zeros(2, dtype="float64"),
                                                        mj.ones(2, dtype="float64"), training=True)
    assert not new_mean.requires_grad and not new_var.requires_grad


def test_batch_norm_training_without_running_statistics(rng):
    arrays = [rng.standard_normal((4, 3, 2)), rng.standard_normal(3), rng.standard_normal(3)]
    assert_matches_torch(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                         lambda x, w, b: TF.batch_norm(x, None, None, w, b, training=True), arrays)


def test_batch_norm_evaluation_matches_torch(rng):
    mean, variance = running_statistics(rng, 3)
    arrays = [rng.standard_normal((2, 3, 4, 4)), rng.standard_normal(3), rng.standard_normal(3)]
    assert_matches_torch(
        lambda x, w, b: F.batch_norm(x, mj.array(mean), mj.array(variance), w, b, eps=1e-3),
        lambda x, w, b: TF.batch_norm(x, torch.tensor(mean), torch.tensor(variance), w, b, eps=1e-3), arrays)


def test_batch_norm_float32(rng):
    image = rng.standard_normal((4, 3, 5, 5)).astype(np.float32)
    result = F.batch_norm(mj.array(image), None, None, training=True)
    expected = TF.batch_norm(torch.tensor(image), None, None, training=True).numpy()
    assert_close(result, expected, rtol=1e-4, atol=1e-5, dtype=np.float32)


@pytest.mark.parametrize("shape,normalized_shape", [((4, 6), 6), ((2, 3, 5), (5,)), ((2, 3, 4, 5), (4, 5))],
                         ids=str)
def test_layer_norm_matches_torch(rng, shape, normalized_shape):
    affine = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
    arrays = [rng.standard_normal(shape) * 3, rng.standard_normal(affine), rng.standard_normal(affine)]
    # metajit also takes a bare int, as nn.LayerNorm does; torch's functional wants a tuple.
    assert_matches_torch(lambda x, w, b: F.layer_norm(x, normalized_shape, w, b, eps=1e-4),
                         lambda x, w, b: TF.layer_norm(x, affine, w, b, eps=1e-4), arrays)


def test_layer_norm_without_affine(rng):
    arrays = [rng.standard_normal((3, 7))]
    assert_matches_torch(lambda x: F.layer_norm(x, [7]), lambda x: TF.layer_norm(x, [7]), arrays)


@pytest.mark.parametrize("shape,groups", [((2, 6, 3, 4), 3), ((2, 4, 5), 1), ((3, 4, 2, 2), 4), ((2, 6), 2)],
                         ids=str)
def test_group_norm_matches_torch(rng, shape, groups):
    channels = shape[1]
    arrays = [rng.standard_normal(shape) * 2, rng.standard_normal(channels), rng.standard_normal(channels)]
    assert_matches_torch(lambda x, w, b: F.group_norm(x, groups, w, b),
                         lambda x, w, b: TF.group_norm(x, groups, w, b), arrays)


def test_normalization_finite_differences(rng):
    check_gradients(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                    rng.standard_normal((3, 2, 2)), rng.standard_normal(2), rng.standard_normal(2), rtol=1e-4)
    check_gradients(lambda x, w, b: F.layer_norm(x, (3,), w, b),
                    rng.standard_normal((2, 3)), rng.standard_normal(3), rng.standard_normal(3), rtol=1e-4)
    check_gradients(lambda x, w, b: F.group_norm(x, 2, w, b),
                    rng.standard_normal((1, 4, 3)), rng.standard_normal(4), rng.standard_normal(4), rtol=1e-4)


def test_normalization_errors():
    image = mj.zeros(2, 3, 4)
    with pytest.raises(ValueError, match="running_mean must have shape .3,."):
        F.batch_norm(image, mj.zeros(4), mj.ones(3))
    with pytest.raises(ValueError, match="required when training=False"):
        F.batch_norm(image, None, None)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        F.batch_norm(mj.zeros(1, 3), None, None, training=True)
    with pytest.raises(ValueError, match="weight must have shape .3,."):
        F.batch_norm(image, None, None, mj.ones(2), training=True)
    with pytest.raises(TypeError, match="floating-point"):
        F.batch_norm(mj.zeros(2, 3, dtype="int64"), None, None, training=True)
    with pytest.raises(ValueError, match="must match the trailing dims"):
        F.layer_norm(image, (3,))
    with pytest.raises(ValueError, match="weight must have shape .4,."):
        F.layer_norm(image, 4, mj.ones(3))
    with pytest.raises(ValueError, match="divisible by num_groups"):
        F.group_norm(image, 2)
    with pytest.raises(ValueError, match="num_groups must be a positive int"):
        F.group_norm(image, 0)
    with pytest.raises(ValueError, match="bias must have shape .3,."):
        F.group_norm(image, 3, None, mj.zeros(4))
