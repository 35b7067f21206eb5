"""F.fractional_max_pool2d/3d and nn.FractionalMaxPool2d/3d against PyTorch with the same _random_samples: the
windows PyTorch's sampling rule places, so values and int64 indices are equal exactly, batched and unbatched,
output_size and output_ratio, float32 and float64; the gradient (to each window's maximum) at rtol 1e-6; PyTorch's
argument errors; and drawn samples give windows of the requested output size."""
import numpy as np
import pytest

import metajit as mj
from metajit import nn
from metajit.nn import functional as F

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("spatial, shape, kernel, output_size, output_ratio", [
    (2, (2, 3, 11, 13), (2, 3), (5, 4), None),
    (2, (3, 10, 9), 2, None, (0.5, 0.7)),
    (2, (1, 2, 8, 8), 3, 6, None),
    (3, (2, 2, 7, 9, 8), 2, (4, 5, 3), None),
    (3, (2, 6, 7, 5), (1, 2, 2), None, 0.6),
])
def test_same_samples_give_pytorchs_result(dtype, spatial, shape, kernel, output_size, output_ratio):
    rng = np.random.default_rng(spatial + len(shape))
    values = rng.standard_normal(shape).astype(dtype)
    batch = shape[0] if len(shape) == spatial + 2 else 1
    samples = rng.random((batch, shape[-spatial - 1], spatial)).astype(dtype)
    their_input = torch.tensor(values, requires_grad=True)
    their_pool = getattr(torch.nn, f"FractionalMaxPool{spatial}d")(kernel, output_size, output_ratio, True,
                                                                   torch.tensor(samples))
    their_output, their_indices = their_pool(their_input)
    our_input = mj.array(values, requires_grad=True)
    our_pool = getattr(nn, f"FractionalMaxPool{spatial}d")(kernel, output_size, output_ratio, True,
                                                           mj.array(samples))
    our_output, our_indices = our_pool(our_input)
    assert tuple(our_output.shape) == tuple(their_output.shape) and our_indices.dtype == "int64"
    np.testing.assert_array_equal(our_indices.numpy(), their_indices.numpy())
    np.testing.assert_array_equal(our_output.numpy(), their_output.detach().numpy())
    weight = rng.standard_normal(tuple(their_output.shape)).astype(dtype)
    (their_output * torch.tensor(weight)).sum().backward()
    gradient, = mj.grad((our_output * mj.array(weight)).sum(), [our_input])
    np.testing.assert_allclose(gradient.numpy(), their_input.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_functional_form_and_ties_pick_the_first_maximum():
    values = np.zeros((1, 1, 6, 6), np.float32)  # every window is a tie
    samples = np.array([[[0.3, 0.8]]], np.float32)
    expected = torch.nn.functional.fractional_max_pool2d(torch.tensor(values), 2, output_size=3,
                                                         return_indices=True, _random_samples=torch.tensor(samples))
    ours = F.fractional_max_pool2d(mj.array(values), 2, output_size=3, return_indices=True,
                                   _random_samples=mj.array(samples))
    np.testing.assert_array_equal(ours[1].numpy(), expected[1].numpy())


def test_drawn_samples_give_the_requested_size():
    output = F.fractional_max_pool2d(mj.randn(2, 3, 10, 10), 2, output_ratio=0.5)
    assert tuple(output.shape) == (2, 3, 5, 5)
    output = nn.FractionalMaxPool3d(2, output_size=(3, 3, 3))(mj.randn(2, 4, 7, 7))
    assert tuple(output.shape) == (2, 3, 3, 3)


def test_errors_match_pytorch():
    for call in [lambda m, f, x: f.fractional_max_pool2d(x(np.zeros((1, 1, 5, 6), np.float32)), 3, output_size=(4, 3)),
                 lambda m, f, x: f.fractional_max_pool2d(x(np.zeros((1, 1, 5, 6), np.float32)), 2, output_size=(2, 7)),
                 lambda m, f, x: f.fractional_max_pool3d(x(np.zeros((1, 1, 5, 6, 4), np.float32)), 2,
                                                         output_size=(5, 3, 2)),
                 lambda m, f, x: f.fractional_max_pool2d(x(np.zeros((1, 1, 5, 6), np.float32)), 2, output_size=2,
                                                         _random_samples=x(np.zeros((1, 2, 2), np.float32)))]:
        with pytest.raises(RuntimeError) as theirs:
            call(torch, torch.nn.functional, torch.tensor)
        with pytest.raises(RuntimeError) as ours:
            call(mj, F, mj.array)
        assert str(ours.value) == str(theirs.value)
    for arguments, message in [((2,), "FractionalMaxPool2d requires specifying either an output size"),
                               ((2, 3, 0.5), "only one of output_size and output_ratio may be specified"),
                               ((2, None, 1.5), r"output_ratio must be between 0 and 1 \(got 1.5\)")]:
        with pytest.raises(ValueError, match=message):
            torch.nn.FractionalMaxPool2d(*arguments)
        with pytest.raises(ValueError, match=message):
            nn.FractionalMaxPool2d(*arguments)
    with pytest.raises(ValueError, match="requires specifying either an output_size or an output_ratio"):
        F.fractional_max_pool2d(mj.zeros(1, 1, 4, 4), 2)
