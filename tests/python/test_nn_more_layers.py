"""Layers added for ported models, against PyTorch's with the same weights: the activation modules (PReLU
learning its slopes), SmoothL1Loss / HuberLoss / KLDivLoss / BCELoss, InstanceNorm, Dropout2d, Upsample,
PixelShuffle, the padding layers, TransformerEncoderLayer / TransformerEncoder (state_dicts load from PyTorch),
and copy.deepcopy of a model."""
import copy

import numpy as np
import pytest

import metajit as mj
from metajit import nn

torch = pytest.importorskip("torch")


def tensor(array):
    return torch.from_numpy(np.ascontiguousarray(array))


def load_from(ours, theirs):
    ours.load_state_dict({name: mj.array(value.detach().numpy()) for name, value in theirs.state_dict().items()})


@pytest.mark.parametrize("name, arguments", [("Hardtanh", (-0.5, 2.0)), ("Hardsigmoid", ()), ("Hardswish", ()),
                                             ("Mish", ()), ("SELU", ()), ("CELU", (0.7,)), ("GLU", (1,)),
                                             ("LogSigmoid", ()), ("Softsign", ()), ("PReLU", (4, 0.1))])
def test_activation_modules_match_pytorch(rng, name, arguments):
    data = rng.uniform(-4, 4, (3, 4, 6)).astype(np.float32)
    ours, theirs = getattr(nn, name)(*arguments), getattr(torch.nn, name)(*arguments)
    np.testing.assert_allclose(ours(mj.array(data)).numpy(), theirs(tensor(data)).detach().numpy(), rtol=1e-6,
                               atol=1e-6)


def test_prelu_learns_its_slopes(rng):
    layer = nn.PReLU(3)
    assert [name for name, _ in layer.named_parameters()] == ["weight"]
    data = rng.standard_normal((2, 3, 5))
    gradient = mj.grad(layer(mj.array(data)).sum(), layer.weight).numpy()
    np.testing.assert_allclose(gradient, np.where(data > 0, 0, data).sum(axis=(0, 2)), rtol=1e-5)


@pytest.mark.parametrize("name, arguments", [("SmoothL1Loss", {"beta": 0.5}), ("HuberLoss", {"delta": 0.5}),
                                             ("KLDivLoss", {"reduction": "batchmean"}), ("BCELoss", {})])
def test_loss_modules_match_pytorch(rng, name, arguments):
    x = rng.uniform(0.05, 0.95, (4, 5)).astype(np.float32)
    y = rng.uniform(0.05, 0.95, (4, 5)).astype(np.float32)
    if name == "KLDivLoss":
        x = np.log(x / x.sum(1, keepdims=True)).astype(np.float32)
        y = (y / y.sum(1, keepdims=True)).astype(np.float32)
    ours = getattr(nn, name)(**arguments)(mj.array(x), mj.array(y)).item()
    theirs = getattr(torch.nn, name)(**arguments)(tensor(x), tensor(y)).item()
    assert ours == pytest.approx(theirs, rel=1e-5)


def test_instance_norm(rng):
    data = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    for affine in (False, True):
        ours, theirs = nn.InstanceNorm2d(3, affine=affine), torch.nn.InstanceNorm2d(3, affine=affine)
        if affine:
            with torch.no_grad():
                theirs.weight.uniform_(0.5, 1.5)
                theirs.bias.uniform_(-1, 1)
            load_from(ours, theirs)
        np.testing.assert_allclose(ours(mj.array(data)).numpy(), theirs(tensor(data)).detach().numpy(), rtol=1e-4,
                                   atol=1e-5)
    np.testing.assert_allclose(nn.InstanceNorm1d(3)(mj.array(data[0, :, :, 0])).numpy(),
                               torch.nn.InstanceNorm1d(3)(tensor(data[0, :, :, 0])).numpy(), rtol=1e-4, atol=1e-5)
    with pytest.raises(NotImplementedError, match="track_running_stats"):
        nn.InstanceNorm2d(3, track_running_stats=True)


def test_dropout2d_zeroes_whole_channels():
    layer = nn.Dropout2d(0.5)
    output = layer(mj.ones(4, 16, 3, 3)).numpy()
    per_channel = output.reshape(4, 16, 9)
    assert np.all((per_channel == 0).all(axis=2) | (per_channel == 2).all(axis=2))
    assert 0 < (per_channel[:, :, 0] == 0).mean() < 1
    layer.eval()
    np.testing.assert_array_equal(layer(mj.ones(2, 3, 2, 2)).numpy(), np.ones((2, 3, 2, 2)))


@pytest.mark.parametrize("name, arguments", [("Upsample", {"scale_factor": 2, "mode": "nearest"}),
                                             ("Upsample", {"size": (5, 7), "mode": "bilinear",
                                                           "align_corners": False}),
                                             ("PixelShuffle", {"upscale_factor": 2}),
                                             ("Unfold", {"kernel_size": 2, "stride": 2}),
                                             ("ZeroPad2d", {"padding": (1, 2, 0, 3)}),
                                             ("ConstantPad1d", {"padding": 2, "value": 3.5}),
                                             ("ReflectionPad2d", {"padding": 1}),
                                             ("ReplicationPad2d", {"padding": (2, 0, 1, 1)})])
def test_resampling_and_padding_layers(rng, name, arguments):
    data = rng.standard_normal((2, 4, 3, 4)).astype(np.float32)
    ours = getattr(nn, name)(**arguments)(mj.array(data)).numpy()
    theirs = getattr(torch.nn, name)(**arguments)(tensor(data)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_transformer_encoder_matches_pytorch(rng, norm_first, activation):
    torch.manual_seed(0)
    theirs = torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True, norm_first=norm_first,
                                         activation=activation), 2, norm=torch.nn.LayerNorm(16),
        enable_nested_tensor=False)
    ours = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True,
                                                            norm_first=norm_first, activation=activation), 2,
                                 norm=nn.LayerNorm(16))
    assert sorted(dict(ours.named_parameters())) == sorted(dict(theirs.named_parameters()))
    load_from(ours, theirs)
    data = rng.standard_normal((3, 5, 16)).astype(np.float32)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(5)
    expected = theirs(tensor(data), mask=mask).detach().numpy()
    np.testing.assert_allclose(ours(mj.array(data), mask=mj.array(mask.numpy())).numpy(), expected, rtol=1e-4,
                               atol=1e-5)


def test_transformer_encoder_trains(rng):
    model = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1), 2)
    optimizer = mj.optim.Adam(model.parameters(), lr=1e-2)
    data, target = mj.array(rng.standard_normal((6, 3, 8))), mj.array(rng.standard_normal((6, 3, 8)))
    losses = []
    for _ in range(30):
        loss = ((model(data) - target) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]


def test_deepcopy_of_a_model_copies_values_not_identity(rng):
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    clone = copy.deepcopy(model)
    assert clone[0].weight is not model[0].weight
    assert isinstance(clone[0].weight, nn.Parameter) and clone[0].weight.requires_grad
    np.testing.assert_array_equal(clone[0].weight.numpy(), model[0].weight.numpy())
    clone[0].weight.assign(mj.zeros(4, 3))
    assert np.abs(model[0].weight.numpy()).sum() > 0
