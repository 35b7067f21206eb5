"""Gradient checking for the test suite: metajit's gradients against central finite differences in float64
(and, where a test has one, against PyTorch). The checked function may return any shape: it is reduced with a
fixed random weighting, so every output element's gradient is exercised."""
import numpy as np

import metajit as mj


def numeric_gradients(function, arrays, weights, epsilon=1e-6):
    """Central differences of sum(function(*arrays) * weights) with respect to each array (float64 numpy)."""
    def scalar(values):
        result = function(*[mj.array(value) for value in values])
        return float((np.asarray(result.numpy(), dtype=np.float64) * weights).sum())

    gradients = []
    for index, array in enumerate(arrays):
        gradient = np.zeros_like(array, dtype=np.float64)
        flat = gradient.reshape(-1)
        for position in range(array.size):
            shifted_up = [a.copy() for a in arrays]
            shifted_down = [a.copy() for a in arrays]
            shifted_up[index].reshape(-1)[position] += epsilon
            shifted_down[index].reshape(-1)[position] -= epsilon
            flat[position] = (scalar(shifted_up) - scalar(shifted_down)) / (2 * epsilon)
        gradients.append(gradient)
    return gradients


def check_gradients(function, *arrays, rtol=1e-5, atol=1e-6, seed=0, epsilon=1e-6):
    """Asserts that mj.grad of `function` (Vars -> Var) matches finite differences at float64 `arrays`.

    Returns metajit's gradients (numpy) so a test can also compare them with PyTorch."""
    arrays = [np.asarray(array, dtype=np.float64) for array in arrays]
    inputs = [mj.array(array, requires_grad=True) for array in arrays]
    output = function(*inputs)
    weights = np.random.default_rng(seed).uniform(0.5, 1.5, size=output.shape)
    analytic = mj.grad((output * mj.array(weights)).sum(), inputs)
    analytic = [gradient.numpy() for gradient in analytic]
    numeric = numeric_gradients(function, arrays, weights, epsilon)
    for index, (got, expected) in enumerate(zip(analytic, numeric)):
        assert got.shape == arrays[index].shape, \
            f"input {index}: gradient shape {got.shape}, expected {arrays[index].shape}"
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, err_msg=f"gradient of input {index}")
    return analytic


def torch_gradients(function, *arrays):
    """PyTorch's gradients of sum(function(*arrays) * w) with check_gradients' weighting (seed 0), float64."""
    import torch
    tensors = [torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True) for a in arrays]
    output = function(*tensors)
    weights = torch.tensor(np.random.default_rng(0).uniform(0.5, 1.5, size=tuple(output.shape)))
    (output * weights).sum().backward()
    return [t.grad.numpy() for t in tensors]


def assert_matches_torch(function, torch_function, arrays, rtol=1e-10, atol=1e-11, seed=0):
    """function (metajit) and torch_function agree on the value and on every input's gradient (float64)."""
    import torch
    from conftest import assert_close
    inputs = [mj.array(array, requires_grad=True) for array in arrays]
    output = function(*inputs)
    tensors = [torch.tensor(array, requires_grad=True) for array in arrays]
    expected = torch_function(*tensors)
    assert_close(output, expected.detach().numpy(), rtol=rtol, atol=atol)
    weights = np.random.default_rng(seed).standard_normal(tuple(expected.shape))
    (expected * torch.tensor(weights)).sum().backward()
    gradients = mj.grad((output * mj.array(weights)).sum(), inputs)
    for gradient, tensor in zip(gradients, tensors):
        assert_close(gradient, tensor.grad.numpy(), rtol=rtol, atol=atol)
