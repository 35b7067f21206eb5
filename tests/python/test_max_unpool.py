"""F.max_unpool1d/2d/3d and nn.MaxUnpool*d against PyTorch: unpooling max_pool's own values and indices (batched
and unbatched, default and explicit output_size), the gradient of a weighted sum w.r.t. the pooled values, and
PyTorch's output_size errors. Values are exact copies, so the tolerance is 0 for values and 1e-6 for gradients."""
import numpy as np
import pytest

import metajit as mj
from metajit import nn
from metajit.nn import functional as F

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("spatial, shape, kernel, stride, padding, output_size", [
    (1, (2, 3, 9), 2, None, 0, None),
    (1, (3, 9), 3, 2, 1, [9]),
    (2, (2, 3, 6, 7), 2, None, 0, [6, 7]),
    (2, (3, 5, 5), 3, 2, 1, None),
    (3, (1, 2, 4, 5, 6), 2, None, 0, [1, 2, 4, 5, 6]),
])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_unpool_inverts_max_pool(spatial, shape, kernel, stride, padding, output_size, dtype):
    values = np.random.default_rng(spatial).standard_normal(shape).astype(dtype)
    pool = getattr(torch.nn.functional, f"max_pool{spatial}d")
    pooled, indices = pool(torch.tensor(values), kernel, stride, padding, return_indices=True)
    their_input = pooled.detach().clone().requires_grad_()
    expected = getattr(torch.nn, f"MaxUnpool{spatial}d")(kernel, stride, padding)(their_input, indices, output_size)
    our_input = mj.array(pooled.numpy(), requires_grad=True)
    ours = getattr(nn, f"MaxUnpool{spatial}d")(kernel, stride, padding)(our_input, mj.array(indices.numpy()),
                                                                          output_size)
    assert tuple(ours.shape) == tuple(expected.shape)
    np.testing.assert_array_equal(ours.numpy(), expected.detach().numpy())
    weights = np.random.default_rng(1).standard_normal(tuple(expected.shape)).astype(dtype)
    (expected * torch.tensor(weights)).sum().backward()
    gradient, = mj.grad((ours * mj.array(weights)).sum(), [our_input])
    np.testing.assert_allclose(gradient.numpy(), their_input.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_functional_unpool_with_our_own_indices():
    values = np.random.default_rng(3).standard_normal((2, 2, 6, 6)).astype(np.float32)
    pooled, indices = F.max_pool2d(mj.array(values), 2, return_indices=True)
    expected = torch.nn.functional.max_unpool2d(*torch.nn.functional.max_pool2d(torch.tensor(values), 2,
                                                                                return_indices=True), 2)
    np.testing.assert_array_equal(F.max_unpool2d(pooled, indices, 2).numpy(), expected.numpy())


def test_output_size_errors_match_pytorch():
    pooled, indices = F.max_pool2d(mj.zeros(1, 1, 4, 4), 2, return_indices=True)
    with pytest.raises(ValueError, match=r"invalid output_size \"\[9, 4\]\" \(dim 0 must be between 2 and 6\)"):
        F.max_unpool2d(pooled, indices, 2, output_size=[9, 4])
    with pytest.raises(ValueError, match="should be a sequence containing 2 or 4 elements"):
        F.max_unpool2d(pooled, indices, 2, output_size=[4])
    their_pooled, their_indices = torch.nn.functional.max_pool2d(torch.zeros(1, 1, 4, 4), 2, return_indices=True)
    with pytest.raises(ValueError, match="dim 0 must be between 2 and 6"):
        torch.nn.functional.max_unpool2d(their_pooled, their_indices, 2, output_size=[9, 4])
