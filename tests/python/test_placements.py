"""Placements (jit/ir/placement.h): an add-reindex-reduce that sends each source element to a target of its own
(the gradient of cat, of zero padding) is read as a gather. Its readers inline it instead of a kernel that
zero-fills the target and scatters the whole source into it; stored alone, it is one pointwise kernel.

Values are checked against numpy loops (reindex_reduce's definition) or PyTorch; the plans through mj.inspect."""
import numpy as np
import pytest

import metajit as mj
import metajit.nn as nn
import metajit.nn.functional as F
from conftest import cpu_backend

pytestmark = cpu_backend

torch = pytest.importorskip("torch")


def scatter_reference(source, shape, place):
    """reindex_reduce 'add' by its definition: every source element added at place(index), if in range."""
    result = np.zeros(shape, source.dtype)
    for index in np.ndindex(*source.shape):
        target = place(*index)
        if all(0 <= position < extent for position, extent in zip(target, shape)):
            result[target] += source[index]
    return result


def scatter_kernels(kernels):
    return [kernel for kernel in kernels if kernel.ir and "kernel scatter" in kernel.ir]


CASES = {  # target shape and indexes for a [3, 4, 5] source, and the same placement in Python
    "shift into a larger target": ([3, 7, 5], ["i0", "i1+2", "i2"], lambda a, b, c: (a, b + 2, c)),
    "slice of a smaller target": ([3, 2, 5], ["i0", "i1-1", "i2"], lambda a, b, c: (a, b - 1, c)),
    "flip": ([3, 4, 5], ["i0", "xshape1-1-i1", "i2"], lambda a, b, c: (a, 3 - b, c)),
    "stride": ([3, 9, 5], ["i0", "2*i1+1", "i2"], lambda a, b, c: (a, 2 * b + 1, c)),
    "flipped stride": ([3, 8, 5], ["i0", "7-2*i1", "i2"], lambda a, b, c: (a, 7 - 2 * b, c)),
    "permutation": ([5, 3, 4], ["i2", "i0", "i1"], lambda a, b, c: (c, a, b)),
    "a new dim at a constant": ([3, 2, 4, 5], ["i0", "1", "i1", "i2"], lambda a, b, c: (a, 1, b, c)),
    "two dims as digits": ([20, 3], ["5*i1+i2", "i0"], lambda a, b, c: (5 * b + c, a)),
    "strided digits": ([41, 3], ["2*i2+10*i1+1", "i0"], lambda a, b, c: (10 * b + 2 * c + 1, a)),
    "flipped innermost": ([3, 4, 7], ["i0", "i1", "6-i2"], lambda a, b, c: (a, b, 6 - c)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_placement_is_one_pointwise_kernel_and_matches_its_definition(rng, case):
    shape, indexes, place = CASES[case]
    source = rng.standard_normal((3, 4, 5)).astype(np.float32)
    x = mj.array(source)
    placed = mj.reindex_reduce(x * 2.0, "add", shape, indexes)
    kernels = mj.inspect(placed)
    assert len(kernels) == 1 and not scatter_kernels(kernels), [kernel.ir for kernel in kernels]
    np.testing.assert_array_equal(placed.numpy(), scatter_reference(source * 2.0, shape, place))


def test_a_placement_read_by_an_elementwise_op_is_fused_into_it(rng):
    source = rng.standard_normal((3, 4, 5)).astype(np.float32)
    other = rng.standard_normal((3, 7, 5)).astype(np.float32)
    x, y = mj.array(source), mj.array(other)
    x.sync(), y.sync()
    result = (mj.reindex_reduce(x, "add", [3, 7, 5], ["i0", "i1+2", "i2"]) * y).exp()
    kernels = mj.inspect(result)
    assert len(kernels) == 1 and not scatter_kernels(kernels)
    expected = np.exp(scatter_reference(source, (3, 7, 5), lambda a, b, c: (a, b + 2, c)) * other)
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-6)


NOT_PLACEMENTS = {  # indexes into a [3, 8, 4] target for a [3, 4, 4] source, and the same in Python
    "two source dims in one target dim": (["i0", "i1+i2", "0"], lambda a, b, c: (a, b + c, 0)),
    "a diagonal": (["i0", "i1", "i1"], lambda a, b, c: (a, b, b)),
    "a division": (["i0", "i1/2", "i2"], lambda a, b, c: (a, b // 2, c)),
    # one element per target, but read back along the innermost loop it needs vector gathers: left a scatter
    "digits in the innermost dim": (["i0", "0", "2*i1+i2"], lambda a, b, c: (a, 0, 2 * b + c)),
    "a stride in the innermost dim": (["i0", "i1", "2*i2"], lambda a, b, c: (a, b, 2 * c)),
}


@pytest.mark.parametrize("case", list(NOT_PLACEMENTS))
def test_scatters_that_are_not_placements_stay_scatters(rng, case):
    indexes, place = NOT_PLACEMENTS[case]
    source = rng.standard_normal((3, 4, 4)).astype(np.float32)
    result = mj.reindex_reduce(mj.array(source) * 1.0, "add", [3, 8, 4], indexes)
    assert scatter_kernels(mj.inspect(result))
    np.testing.assert_allclose(result.numpy(), scatter_reference(source, (3, 8, 4), place), rtol=1e-6)


def test_an_identity_reindex_reduce_still_stores_its_source(rng):
    """cat's join of many pieces asks for a buffer with an identity reindex_reduce (ops/tensor.py, _stored); its
    readers load that buffer rather than recomputing the join."""
    source = rng.standard_normal((8, 16)).astype(np.float32)
    x = mj.array(source)
    stored = mj.reindex_reduce(x.exp(), "add", [8, 16], ["i0", "i1"])
    first, second = stored * 2.0 + stored.sum(1, keepdim=True), stored.log()
    kernels = mj.inspect(first, second)
    assert len(kernels) == 3
    assert sum(any(op.startswith("exp") for op in kernel.ops) for kernel in kernels) == 1  # computed once
    np.testing.assert_allclose(first.numpy(), np.exp(source) * 2 + np.exp(source).sum(1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(second.numpy(), source, rtol=1e-5, atol=1e-6)


def test_cat_gradients_are_slices_of_the_incoming_gradient(rng):
    """The gradient of cat along channels: each piece's gradient is read as a slice by what consumes it, with no
    scatter kernel (there were two, each zero-filling a piece and scattering the whole gradient into it)."""
    first = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    second = rng.standard_normal((2, 5, 6, 6)).astype(np.float32)
    weights = rng.standard_normal((2, 8, 6, 6)).astype(np.float32)
    a, b, w = mj.array(first), mj.array(second), mj.array(weights)
    a.requires_grad = b.requires_grad = True
    joined = mj.cat([a * 2.0, b.exp()], dim=1)
    loss = (joined * w).square().sum()
    gradients = mj.grad(loss, [a, b])
    assert not scatter_kernels(mj.inspect(*gradients))
    ta, tb = torch.tensor(first, requires_grad=True), torch.tensor(second, requires_grad=True)
    (torch.cat([ta * 2.0, tb.exp()], dim=1) * torch.tensor(weights)).square().sum().backward()
    np.testing.assert_allclose(gradients[0].numpy(), ta.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gradients[1].numpy(), tb.grad.numpy(), rtol=1e-5, atol=1e-5)


class SkipJoin(nn.Module):
    """A U-Net's decoder step: the skip and the transposed convolution's output joined along channels, then a
    convolution."""

    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.convolution = nn.Conv2d(16, 8, 3, padding=1)

    def forward(self, skip, x):
        return self.convolution(F.relu(mj.cat([skip, self.up(x)], dim=1)))


def test_a_skip_join_trains_with_every_contraction_in_the_library_and_no_scatter(rng):
    skip = rng.standard_normal((2, 8, 16, 16)).astype(np.float32)
    low = rng.standard_normal((2, 16, 8, 8)).astype(np.float32)
    upstream = rng.standard_normal((2, 8, 16, 16)).astype(np.float32)
    model = SkipJoin()
    skip_var, low_var = mj.array(skip), mj.array(low)
    skip_var.requires_grad = low_var.requires_grad = True
    loss = (model(skip_var, low_var) * mj.array(upstream)).sum()
    parameters = list(model.parameters())
    gradients = mj.grad(loss, [skip_var, low_var] + parameters)
    kernels = mj.inspect(*gradients)
    assert not scatter_kernels(kernels)
    # the transposed convolution's two gradients read the incoming gradient's slice straight from the library
    assert sum(kernel.kind.startswith("library") for kernel in kernels) >= 5

    reference = torch.nn.Module()
    reference.up = torch.nn.ConvTranspose2d(16, 8, 2, stride=2)
    reference.convolution = torch.nn.Conv2d(16, 8, 3, padding=1)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            dict(reference.named_parameters())[name].copy_(torch.tensor(parameter.numpy()))
    skip_torch, low_torch = torch.tensor(skip, requires_grad=True), torch.tensor(low, requires_grad=True)
    out = reference.convolution(torch.relu(torch.cat([skip_torch, reference.up(low_torch)], dim=1)))
    (out * torch.tensor(upstream)).sum().backward()
    expected = [skip_torch.grad, low_torch.grad] + [parameter.grad for _, parameter in reference.named_parameters()]
    assert [name for name, _ in model.named_parameters()] == [name for name, _ in reference.named_parameters()]
    for ours, theirs in zip(gradients, expected):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["int32", "int64", "float16", "float64", "bool"])
def test_placements_of_every_dtype_match_the_scatter(rng, dtype):
    source = (rng.standard_normal((3, 4, 5)) * 4).astype(dtype)
    result = mj.reindex_reduce(mj.array(source), "add", [3, 7, 5], ["i0", "i1+2", "i2"])
    assert not scatter_kernels(mj.inspect(result))
    values = result.numpy()
    expected = scatter_reference(source.astype(values.dtype), (3, 7, 5), lambda a, b, c: (a, b + 2, c))
    np.testing.assert_array_equal(values, expected)
