"""The functional forms added for ported models: hardsigmoid, hardswish, mish, prelu, selu, celu, glu,
logsigmoid, softsign, scaled_dot_product_attention, normalize, cosine_similarity, pairwise_distance,
huber_loss, kl_div, pixel_shuffle / pixel_unshuffle and instance_norm: values against PyTorch, gradients against
finite differences."""
import numpy as np
import pytest

import metajit as mj
import metajit.nn.functional as F
from gradient_check import check_gradients

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def tensor(array):
    return torch.from_numpy(np.ascontiguousarray(array))


ACTIVATIONS = ["hardsigmoid", "hardswish", "mish", "selu", "celu", "logsigmoid", "softsign"]


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activations_match_pytorch(name):
    data = np.concatenate([np.linspace(-6, 6, 49), [-100.0, 100.0, -3.0, 3.0]]).astype(np.float32)
    np.testing.assert_allclose(getattr(F, name)(mj.array(data)).numpy(), getattr(TF, name)(tensor(data)).numpy(),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_gradients(rng, name):
    values = rng.uniform(-4, 4, (3, 5))
    values[np.abs(np.abs(values) - 3) < 0.05] += 0.1  # keep finite differences off the kinks at +-3
    check_gradients(getattr(F, name), values)


def test_prelu_glu(rng):
    data = rng.standard_normal((3, 4, 5)).astype(np.float32)
    weight = np.array([0.1, 0.2, 0.3, 0.4], np.float32)
    np.testing.assert_allclose(F.prelu(mj.array(data), mj.array(weight)).numpy(),
                               TF.prelu(tensor(data), tensor(weight)).numpy(), rtol=1e-6)
    np.testing.assert_allclose(F.prelu(mj.array(data), mj.array(np.float32([0.25]))).numpy(),
                               TF.prelu(tensor(data), tensor(np.float32([0.25]))).numpy(), rtol=1e-6)
    check_gradients(lambda x, w: F.prelu(x, w), data.astype(np.float64), weight.astype(np.float64))
    np.testing.assert_allclose(F.glu(mj.array(data), 1).numpy(), TF.glu(tensor(data), 1).numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="even extent"):
        F.glu(mj.array(data), 2)


@pytest.mark.parametrize("kind", ["none", "causal", "bool mask", "float mask", "scale"])
def test_scaled_dot_product_attention(rng, kind):
    q = rng.standard_normal((2, 3, 6, 8)).astype(np.float32)
    k = rng.standard_normal((2, 3, 6, 8)).astype(np.float32)
    v = rng.standard_normal((2, 3, 6, 4)).astype(np.float32)
    arguments = {}
    if kind == "causal":
        arguments["is_causal"] = True
    elif kind == "bool mask":
        mask = rng.random((6, 6)) > 0.4
        mask[:, 0] = True
        arguments["attn_mask"] = mask
    elif kind == "float mask":
        arguments["attn_mask"] = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    elif kind == "scale":
        arguments["scale"] = 0.3
    ours = F.scaled_dot_product_attention(mj.array(q), mj.array(k), mj.array(v),
                                          **{key: mj.array(value) if isinstance(value, np.ndarray) else value
                                             for key, value in arguments.items()})
    theirs = TF.scaled_dot_product_attention(tensor(q), tensor(k), tensor(v),
                                             **{key: tensor(value) if isinstance(value, np.ndarray) else value
                                                for key, value in arguments.items()})
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-6)


def test_attention_gradients_and_errors(rng):
    q, k, v = (rng.standard_normal((2, 4, 3)) for _ in range(3))
    check_gradients(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True), q, k, v)
    with pytest.raises(ValueError, match="same last dim"):
        F.scaled_dot_product_attention(mj.array(q), mj.array(k[..., :2]), mj.array(v))


def test_normalize_cosine_similarity_pairwise_distance(rng):
    x = rng.standard_normal((5, 7)).astype(np.float32)
    y = rng.standard_normal((5, 7)).astype(np.float32)
    x[0] = 0  # a zero row: eps keeps it finite
    np.testing.assert_allclose(F.normalize(mj.array(x)).numpy(), TF.normalize(tensor(x)).numpy(), rtol=1e-6)
    np.testing.assert_allclose(F.normalize(mj.array(x), p=1, dim=0).numpy(),
                               TF.normalize(tensor(x), p=1, dim=0).numpy(), rtol=1e-6)
    np.testing.assert_allclose(F.cosine_similarity(mj.array(x), mj.array(y)).numpy(),
                               TF.cosine_similarity(tensor(x), tensor(y)).numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(F.cosine_similarity(mj.array(x), mj.array(y[:1]), dim=-1).numpy(),
                               TF.cosine_similarity(tensor(x), tensor(y[:1]), dim=-1).numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(F.pairwise_distance(mj.array(x), mj.array(y), p=3).numpy(),
                               TF.pairwise_distance(tensor(x), tensor(y), p=3).numpy(), rtol=1e-5)
    check_gradients(lambda a, b: F.cosine_similarity(a, b), x[1:].astype(np.float64), y[1:].astype(np.float64))


@pytest.mark.filterwarnings("ignore:reduction")  # PyTorch's own warning about kl_div's "mean"
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_huber_and_kl_div(rng, reduction):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    y = rng.standard_normal((4, 6)).astype(np.float32)
    np.testing.assert_allclose(F.huber_loss(mj.array(x), mj.array(y), reduction=reduction, delta=0.7).numpy(),
                               TF.huber_loss(tensor(x), tensor(y), reduction=reduction, delta=0.7).numpy(),
                               rtol=1e-6)
    log_p = np.log(np.abs(x) / np.abs(x).sum(1, keepdims=True)).astype(np.float32)
    target = (np.abs(y) / np.abs(y).sum(1, keepdims=True)).astype(np.float32)
    target[0, 0] = 0.0  # a zero target term contributes 0
    for log_target in (False, True):
        given = np.log(target + 1e-30).astype(np.float32) if log_target else target
        np.testing.assert_allclose(
            F.kl_div(mj.array(log_p), mj.array(given), reduction=reduction, log_target=log_target).numpy(),
            TF.kl_div(tensor(log_p), tensor(given), reduction=reduction, log_target=log_target).numpy(),
            rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(F.kl_div(mj.array(log_p), mj.array(target), reduction="batchmean").numpy(),
                               TF.kl_div(tensor(log_p), tensor(target), reduction="batchmean").numpy(), rtol=1e-5)


def test_pixel_shuffle_instance_norm(rng):
    image = rng.standard_normal((2, 12, 3, 5)).astype(np.float32)
    np.testing.assert_array_equal(F.pixel_shuffle(mj.array(image), 2).numpy(),
                                  TF.pixel_shuffle(tensor(image), 2).numpy())
    np.testing.assert_array_equal(F.pixel_unshuffle(mj.array(image[:, :, :2, :4]), 2).numpy(),
                                  TF.pixel_unshuffle(tensor(image[:, :, :2, :4]), 2).numpy())
    with pytest.raises(ValueError, match="divisible by upscale_factor"):
        F.pixel_shuffle(mj.array(image), 3)
    weight, bias = rng.standard_normal(12).astype(np.float32), rng.standard_normal(12).astype(np.float32)
    np.testing.assert_allclose(F.instance_norm(mj.array(image), weight=mj.array(weight), bias=mj.array(bias)).numpy(),
                               TF.instance_norm(tensor(image), weight=tensor(weight), bias=tensor(bias)).numpy(),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("arguments", [{"kernel_size": 3}, {"kernel_size": (2, 3), "dilation": 2, "padding": 1,
                                                            "stride": (2, 1)}, {"kernel_size": 1, "stride": 3}])
def test_unfold_and_fold_match_pytorch(rng, arguments):
    image = rng.standard_normal((2, 3, 7, 8)).astype(np.float32)
    columns = F.unfold(mj.array(image), **arguments)
    expected = TF.unfold(tensor(image), **arguments)
    np.testing.assert_array_equal(columns.numpy(), expected.numpy())
    np.testing.assert_allclose(F.fold(mj.array(expected.numpy()), (7, 8), **arguments).numpy(),
                               TF.fold(expected, (7, 8), **arguments).numpy(), rtol=1e-6, atol=1e-6)


def test_unfold_gradient_and_errors(rng):
    check_gradients(lambda x: F.unfold(x, 2, padding=1), rng.standard_normal((1, 2, 3, 4)))
    with pytest.raises(ValueError, match="4-D input"):
        F.unfold(mj.zeros(3, 4, 5), 2)
    with pytest.raises(ValueError, match=r"expected an input of shape \[N, C \* 4, 12\]"):
        F.fold(mj.zeros(1, 8, 11), (4, 5), 2)
