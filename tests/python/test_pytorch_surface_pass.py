"""The names added by the PyTorch-surface pass (issue 40), against PyTorch: element-wise extras, scans,
bucketing, order statistics, stacking, diagonals, index updates, products, the nn.functional additions (grid_sample,
lp_pool, local_response_norm, the multi-class margin losses, ...), the new layers (lazy layers, pads,
ChannelShuffle, ...), Rprop and ASGD, StackDataset, and the declared-absent names' errors. Values and, for
differentiable ops, the gradients of a weighted sum of the output, float32 at rtol 1e-5 / atol 1e-5 unless a
test says otherwise. Expected values always come from PyTorch (or from the definition, for random ops)."""
import numpy as np
import pytest

import metajit as mj
from metajit import nn
from metajit.nn import functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

RTOL, ATOL = 1e-5, 1e-5


@pytest.fixture
def rng():
    return np.random.default_rng(40)


def randn(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def as_numpy(value):
    return value.detach().numpy() if isinstance(value, torch.Tensor) else np.asarray(value.numpy())


def compare(ours, theirs, arrays, differentiable=(), rtol=RTOL, atol=ATOL):
    """ours(*Vars) and theirs(*tensors) on the same arrays: every output's values, then the gradients of the
    inputs listed in `differentiable` (indices) of sum(output * fixed weights) over the float outputs."""
    our_inputs = [mj.array(a, requires_grad=index in differentiable) if isinstance(a, np.ndarray) else a
                  for index, a in enumerate(arrays)]
    their_inputs = [torch.tensor(a, requires_grad=index in differentiable) if isinstance(a, np.ndarray) else a
                    for index, a in enumerate(arrays)]
    got, expected = ours(*our_inputs), theirs(*their_inputs)
    got_list = list(got) if isinstance(got, tuple) else [got]
    expected_list = list(expected) if isinstance(expected, tuple) else [expected]
    assert len(got_list) == len(expected_list)
    for index, (mine, reference) in enumerate(zip(got_list, expected_list)):
        assert tuple(mine.shape) == tuple(reference.shape), f"output {index}: shape"
        np.testing.assert_allclose(as_numpy(mine), as_numpy(reference), rtol=rtol, atol=atol,
                                   err_msg=f"output {index}")
    if not differentiable:
        return
    weights = np.random.default_rng(7)
    our_loss, their_loss = None, None
    for mine, reference in zip(got_list, expected_list):
        if not reference.dtype.is_floating_point:
            continue
        weight = weights.standard_normal(tuple(reference.shape)).astype(np.float32)
        our_term = (mine * mj.array(weight)).sum()
        their_term = (reference * torch.tensor(weight)).sum()
        our_loss = our_term if our_loss is None else our_loss + our_term
        their_loss = their_term if their_loss is None else their_loss + their_term
    their_loss.backward()
    gradients = mj.grad(our_loss, [our_inputs[index] for index in differentiable])
    for index, gradient in zip(differentiable, gradients):
        np.testing.assert_allclose(gradient.numpy(), their_inputs[index].grad.numpy(force=True), rtol=rtol, atol=atol,
                                   err_msg=f"gradient of input {index}")


# ----------------------------------------------------------------------------------------- element-wise extras
@pytest.mark.parametrize("name", ["acosh", "asinh", "atanh", "erfc", "logit", "sinc", "deg2rad", "rad2deg", "sgn",
                                  "absolute", "negative", "positive", "arccos", "arcsin", "arctan", "arcsinh"])
def test_unary_functions(rng, name):
    values = randn(rng, 4, 5)
    if name == "acosh":
        values = np.abs(values) + 1.1
    elif name in ("atanh", "arccos", "arcsin", "logit"):
        values = np.clip(values, -0.9, 0.9) if name != "logit" else rng.uniform(0.05, 0.95, (4, 5)).astype(np.float32)
    compare(getattr(mj, name), getattr(torch, name), [values], differentiable=(0,), rtol=1e-4)


def test_asinh_of_large_negative_values():
    compare(mj.asinh, torch.asinh, [np.array([-1e4, -30.0, 0.0, 30.0], np.float32)], rtol=1e-6)


@pytest.mark.parametrize("name", ["xlogy", "copysign", "fmax", "fmin", "logaddexp2", "multiply", "subtract",
                                  "true_divide", "floor_divide"])
def test_binary_functions(rng, name):
    first, second = randn(rng, 3, 4), randn(rng, 3, 4)
    if name == "xlogy":
        second, first[0, 0], first[1, 1] = np.abs(second) + 0.1, 0.0, 0.0
        second[1, 1] = 0.0  # 0 * log(0) is 0
    differentiable = () if name in ("floor_divide", "fmax", "fmin") else (0, 1)
    if name == "copysign":
        differentiable = (0,)
    compare(getattr(mj, name), getattr(torch, name), [first, second], differentiable=differentiable, rtol=1e-4)


def test_fmax_fmin_skip_nans():
    first = np.array([1.0, np.nan, np.nan, -2.0], np.float32)
    second = np.array([np.nan, 3.0, np.nan, 5.0], np.float32)
    compare(mj.fmax, torch.fmax, [first, second])
    compare(mj.fmin, torch.fmin, [first, second])


@pytest.mark.parametrize("mode", [None, "trunc", "floor"])
def test_divide_rounding_modes(rng, mode):
    compare(lambda a, b: mj.divide(a, b, rounding_mode=mode), lambda a, b: torch.divide(a, b, rounding_mode=mode),
            [randn(rng, 3, 4) * 5, randn(rng, 3, 4)])


def test_signbit_heaviside_isposinf_isneginf_isreal():
    values = np.array([-1.5, -0.0, 0.0, 2.0, np.inf, -np.inf], np.float32)
    for name in ("signbit", "isposinf", "isneginf", "isreal"):
        compare(getattr(mj, name), getattr(torch, name), [values])
    compare(mj.heaviside, torch.heaviside, [values, np.float32(0.5) * np.ones(6, np.float32)])


def test_float_power_is_float64(rng):
    values = np.abs(randn(rng, 5)) + 0.5
    compare(lambda x: mj.float_power(x, 2.5), lambda x: torch.float_power(x, 2.5), [values], differentiable=(0,))


def test_nansum_nanmean(rng):
    values = randn(rng, 4, 6)
    values[1, 2] = values[3, 0] = np.nan
    compare(mj.nansum, torch.nansum, [values])
    compare(lambda x: mj.nansum(x, 1, True), lambda x: torch.nansum(x, 1, True), [values])
    compare(lambda x: mj.nanmean(x, 0), lambda x: torch.nanmean(x, 0), [values])
    compare(lambda x: x.nanmean(), lambda x: x.nanmean(), [values])


# ------------------------------------------------------------------------------------------------------- scans
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cummax_cummin(rng, dim):
    values = randn(rng, 5, 7)
    values[2, 3] = values[2, 1]  # a tie: both keep the latest index
    values[0, 4] = values[3, 4]
    compare(lambda x: mj.cummax(x, dim), lambda x: torch.cummax(x, dim), [values], differentiable=(0,))
    compare(lambda x: x.cummin(dim), lambda x: x.cummin(dim), [values], differentiable=(0,))


@pytest.mark.parametrize("dim", [0, 1])
def test_logcumsumexp(rng, dim):
    values = randn(rng, 6, 9) * 30  # wide range: the naive log(cumsum(exp)) would overflow
    compare(lambda x: mj.logcumsumexp(x, dim), lambda x: torch.logcumsumexp(x, dim), [values], differentiable=(0,),
            rtol=1e-5, atol=1e-4)


# -------------------------------------------------------------------------------------------------- bucketing
@pytest.mark.parametrize("right", [False, True])
def test_bucketize_and_searchsorted(rng, right):
    boundaries = np.sort(randn(rng, 6))
    values = randn(rng, 3, 5)
    values[0, 0], values[1, 1] = boundaries[2], boundaries[5]  # equal to a boundary: left and right differ
    compare(lambda x, b: mj.bucketize(x, b, right=right), lambda x, b: torch.bucketize(x, b, right=right),
            [values, boundaries])
    rows = np.sort(randn(rng, 3, 6), axis=1)
    queries = randn(rng, 3, 4)
    queries[2, 1] = rows[2, 3]
    compare(lambda s, v: mj.searchsorted(s, v, right=right), lambda s, v: torch.searchsorted(s, v, right=right),
            [rows, queries])
    side = "right" if right else "left"
    compare(lambda s, v: mj.searchsorted(s, v, side=side, out_int32=True),
            lambda s, v: torch.searchsorted(s, v, side=side, out_int32=True), [boundaries, values])


def test_searchsorted_with_sorter(rng):
    sequence = randn(rng, 7)
    sorter = np.argsort(sequence).astype(np.int64)
    compare(lambda s, v, o: mj.searchsorted(s, v, sorter=o), lambda s, v, o: torch.searchsorted(s, v, sorter=o),
            [sequence, randn(rng, 5), sorter])


def test_histc(rng):
    values = randn(rng, 200)
    compare(lambda x: mj.histc(x, bins=9), lambda x: torch.histc(x, bins=9), [values])
    compare(lambda x: mj.histc(x, bins=4, min=-1, max=1), lambda x: torch.histc(x, bins=4, min=-1, max=1), [values])
    compare(lambda x: mj.histc(x, bins=3), lambda x: torch.histc(x, bins=3), [np.full(5, 2.0, np.float32)])


# ------------------------------------------------------------------------------------------- order statistics
def test_kthvalue_median_aminmax_msort(rng):
    values = randn(rng, 5, 8)
    compare(lambda x: mj.kthvalue(x, 3, 1), lambda x: torch.kthvalue(x, 3, 1), [values], differentiable=(0,))
    compare(lambda x: x.kthvalue(2, 0, True), lambda x: x.kthvalue(2, 0, True), [values], differentiable=(0,))
    compare(mj.median, torch.median, [values], differentiable=(0,))
    compare(lambda x: mj.median(x, 1), lambda x: torch.median(x, 1), [values], differentiable=(0,))
    compare(lambda x: mj.aminmax(x), lambda x: torch.aminmax(x), [values])
    compare(lambda x: mj.aminmax(x, dim=0, keepdim=True), lambda x: torch.aminmax(x, dim=0, keepdim=True), [values])
    compare(mj.msort, torch.msort, [values], differentiable=(0,))


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "nearest", "midpoint"])
def test_quantile(rng, interpolation):
    values = randn(rng, 4, 9)
    compare(lambda x: mj.quantile(x, 0.3, interpolation=interpolation),
            lambda x: torch.quantile(x, 0.3, interpolation=interpolation), [values], differentiable=(0,))
    levels = [0.0, 0.25, 0.6, 1.0]
    compare(lambda x: mj.quantile(x, levels, dim=1, keepdim=True, interpolation=interpolation),
            lambda x: torch.quantile(x, torch.tensor(levels), dim=1, keepdim=True, interpolation=interpolation),
            [values], differentiable=(0,))


# --------------------------------------------------------------------------------------------------- stacking
def test_stacks(rng):
    a, b = randn(rng, 2, 3), randn(rng, 2, 3)
    for name in ("hstack", "vstack", "row_stack", "dstack", "column_stack"):
        compare(lambda x, y: getattr(mj, name)([x, y]), lambda x, y: getattr(torch, name)([x, y]), [a, b],
                differentiable=(0, 1))
    vector, other = randn(rng, 4), randn(rng, 4)
    for name in ("hstack", "vstack", "dstack", "column_stack"):
        compare(lambda x, y: getattr(mj, name)([x, y]), lambda x, y: getattr(torch, name)([x, y]), [vector, other])


def test_atleast(rng):
    for name in ("atleast_1d", "atleast_2d", "atleast_3d"):
        for shape in [(), (3,), (2, 3), (2, 3, 4)]:
            compare(getattr(mj, name), getattr(torch, name), [randn(rng, *shape)])
        got = getattr(mj, name)(mj.array(randn(rng, 2)), mj.array(randn(rng, 2, 2)))
        assert isinstance(got, tuple) and len(got) == 2


def test_block_diag_cartesian_prod_combinations(rng):
    compare(lambda a, b, c: mj.block_diag(a, b, c), lambda a, b, c: torch.block_diag(a, b, c),
            [randn(rng, 2, 3), randn(rng, 4), np.array(2.5, np.float32)], differentiable=(0, 1, 2))
    compare(lambda a, b: mj.cartesian_prod(a, b), lambda a, b: torch.cartesian_prod(a, b),
            [randn(rng, 3), randn(rng, 2)], differentiable=(0, 1))
    for replacement in (False, True):
        compare(lambda a: mj.combinations(a, 2, replacement), lambda a: torch.combinations(a, 2, replacement),
                [randn(rng, 4)], differentiable=(0,))


def test_broadcast_tensors_and_shapes(rng):
    compare(lambda a, b: mj.broadcast_tensors(a, b), lambda a, b: torch.broadcast_tensors(a, b),
            [randn(rng, 3, 1), randn(rng, 1, 4)], differentiable=(0, 1))
    assert tuple(mj.broadcast_shapes((3, 1), (4,), (2, 1, 1))) == tuple(torch.broadcast_shapes((3, 1), (4,),
                                                                                                  (2, 1, 1)))


def test_tensor_split_and_split_with_sizes(rng):
    values = randn(rng, 7, 4)
    compare(lambda x: mj.tensor_split(x, 3), lambda x: torch.tensor_split(x, 3), [values], differentiable=(0,))
    compare(lambda x: x.tensor_split([1, 5], dim=0), lambda x: x.tensor_split([1, 5], dim=0), [values])
    compare(lambda x: mj.tensor_split(x, [1, -1], 1), lambda x: torch.tensor_split(x, [1, -1], 1), [values])
    compare(lambda x: mj.split_with_sizes(x, [2, 5]), lambda x: torch.split_with_sizes(x, [2, 5]), [values],
            differentiable=(0,))


# ---------------------------------------------------------------------------------------- diagonals, rearrange
@pytest.mark.parametrize("offset", [0, 2, -1])
def test_diagonal_and_diag_embed(rng, offset):
    values = randn(rng, 3, 4, 5)
    compare(lambda x: mj.diagonal(x, offset, 0, 2), lambda x: torch.diagonal(x, offset, 0, 2), [values],
            differentiable=(0,))
    compare(lambda x: x.diagonal(offset, -1, 1), lambda x: x.diagonal(offset, -1, 1), [values],
            differentiable=(0,))
    compare(lambda x: mj.diag_embed(x, offset), lambda x: torch.diag_embed(x, offset), [values],
            differentiable=(0,))
    compare(lambda x: mj.diag_embed(x, offset, 0, 2), lambda x: torch.diag_embed(x, offset, 0, 2), [values],
            differentiable=(0,))
    compare(lambda x: mj.diagflat(x, offset), lambda x: torch.diagflat(x, offset), [randn(rng, 2, 3)],
            differentiable=(0,))


def test_trace_and_triangle_indices(rng):
    compare(mj.trace, torch.trace, [randn(rng, 4, 6)], differentiable=(0,))
    for row, column, offset in [(4, 3, 0), (3, 5, 1), (5, 5, -2), (2, 6, 4)]:
        compare(lambda: mj.tril_indices(row, column, offset), lambda: torch.tril_indices(row, column, offset), [])
        compare(lambda: mj.triu_indices(row, column, offset), lambda: torch.triu_indices(row, column, offset), [])


@pytest.mark.parametrize("turns", [-1, 0, 1, 2, 3, 5])
def test_rot90(rng, turns):
    compare(lambda x: mj.rot90(x, turns, [1, 2]), lambda x: torch.rot90(x, turns, [1, 2]), [randn(rng, 2, 3, 4)],
            differentiable=(0,))


def test_fliplr_ravel_and_sliding_windows(rng):
    values = randn(rng, 3, 10)
    compare(mj.fliplr, torch.fliplr, [values], differentiable=(0,))
    compare(mj.ravel, torch.ravel, [values], differentiable=(0,))
    compare(lambda x: x.unfold(1, 4, 3), lambda x: x.unfold(1, 4, 3), [values], differentiable=(0,))
    compare(lambda x: x.unfold(0, 2, 1), lambda x: x.unfold(0, 2, 1), [values], differentiable=(0,))


# -------------------------------------------------------------------------------------------- index updates
def test_index_add_copy_fill(rng):
    values, source = randn(rng, 5, 4), randn(rng, 3, 4)
    repeated, distinct = np.array([0, 2, 0]), np.array([4, 1, 0])
    compare(lambda x, s: mj.index_add(x, 0, repeated, s, alpha=2.0),
            lambda x, s: torch.index_add(x, 0, torch.tensor(repeated), s, alpha=2.0), [values, source],
            differentiable=(0, 1))
    compare(lambda x, s: x.index_copy(0, distinct, s), lambda x, s: x.index_copy(0, torch.tensor(distinct), s),
            [values, source], differentiable=(0, 1))
    compare(lambda x: mj.index_fill(x, 1, [1, 3], -1.5), lambda x: torch.index_fill(x, 1, torch.tensor([1, 3]), -1.5),
            [values], differentiable=(0,))


def test_masked_scatter_and_take_along_dim(rng):
    values = randn(rng, 4, 5)
    mask = values > 0
    source = randn(rng, 30)
    compare(lambda x, s: mj.masked_scatter(x, mj.array(mask), s),
            lambda x, s: torch.masked_scatter(x, torch.tensor(mask), s), [values, source], differentiable=(0, 1))
    row_mask = np.array([True, False, True, False, True])  # broadcast over the rows
    compare(lambda x, s: x.masked_scatter(mj.array(row_mask), s),
            lambda x, s: x.masked_scatter(torch.tensor(row_mask), s), [values, source], differentiable=(0, 1))
    indices = rng.integers(0, 5, (4, 3))
    compare(lambda x: mj.take_along_dim(x, indices, 1), lambda x: torch.take_along_dim(x, torch.tensor(indices), 1),
            [values], differentiable=(0,))
    compare(lambda x: mj.take_along_dim(x, indices), lambda x: torch.take_along_dim(x, torch.tensor(indices)),
            [values], differentiable=(0,))


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(rng, reduce, include_self):
    values, source = randn(rng, 5, 4), randn(rng, 6, 4)
    index = rng.integers(0, 5, (6, 4))
    differentiable = (0, 1) if reduce in ("sum", "mean") else ()
    compare(lambda x, s: x.scatter_reduce(0, index, s, reduce, include_self=include_self),
            lambda x, s: x.scatter_reduce(0, torch.tensor(index), s, reduce, include_self=include_self),
            [values, source], differentiable=differentiable)


def test_in_place_twins(rng):
    values, source = randn(rng, 5, 4), randn(rng, 3, 4)
    ours, theirs = mj.array(values), torch.tensor(values)
    ours.index_add_(0, mj.array([1, 1, 3]), mj.array(source))
    theirs.index_add_(0, torch.tensor([1, 1, 3]), torch.tensor(source))
    ours.masked_scatter_(ours > 0, mj.array(randn(np.random.default_rng(1), 20)))
    theirs.masked_scatter_(theirs > 0, torch.tensor(randn(np.random.default_rng(1), 20)))
    ours.clamp_(-0.9, 0.9).logit_()
    theirs.clamp_(-0.9, 0.9).logit_()
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-5)
    flags = mj.array(values)
    flags.greater_(0.0)
    np.testing.assert_array_equal(flags.numpy(), torch.tensor(values).greater_(0.0).numpy())


# ------------------------------------------------------------------------------------------------- products
def test_products(rng):
    a, b = randn(rng, 3, 4), randn(rng, 5, 4)
    compare(mj.inner, torch.inner, [a, b], differentiable=(0, 1))
    compare(mj.vdot, torch.vdot, [randn(rng, 6), randn(rng, 6)], differentiable=(0, 1))
    compare(mj.ger, torch.ger, [randn(rng, 3), randn(rng, 4)], differentiable=(0, 1))
    compare(lambda c, m, v: mj.addmv(c, m, v, beta=0.5, alpha=2.0),
            lambda c, m, v: torch.addmv(c, m, v, beta=0.5, alpha=2.0), [randn(rng, 3), a, randn(rng, 4)],
            differentiable=(0, 1, 2))
    compare(lambda c, x, y: mj.addr(c, x, y, alpha=3.0), lambda c, x, y: torch.addr(c, x, y, alpha=3.0),
            [randn(rng, 3, 4), randn(rng, 3), randn(rng, 4)], differentiable=(0, 1, 2))
    compare(lambda c, x, y: mj.addbmm(c, x, y), lambda c, x, y: torch.addbmm(c, x, y),
            [randn(rng, 3, 5), randn(rng, 2, 3, 4), randn(rng, 2, 4, 5)], differentiable=(0, 1, 2), rtol=1e-4)
    compare(lambda x, y, z: mj.chain_matmul(x, y, z), lambda x, y, z: torch.linalg.multi_dot([x, y, z]),
            [a, b.T.copy(), randn(rng, 5, 2)], differentiable=(0, 1, 2), rtol=1e-4)
    compare(lambda x, y: mj.dist(x, y, 3), lambda x, y: torch.dist(x, y, 3), [a, randn(rng, 3, 4)],
            differentiable=(0, 1), rtol=1e-4)


@pytest.mark.parametrize("dims", [0, 1, 2, ([0, 2], [1, 0]), ([2], [0])])
def test_tensordot(rng, dims):
    a = randn(rng, 3, 4, 5)
    b = randn(rng, 5, 6) if dims in (1, ([2], [0])) else randn(rng, 4, 5, 2) if dims == 2 else \
        randn(rng, 2, 3) if dims == 0 else randn(rng, 4, 5, 3)
    if dims == ([0, 2], [1, 0]):
        b = randn(rng, 5, 3, 4)
    compare(lambda x, y: mj.tensordot(x, y, dims), lambda x, y: torch.tensordot(x, y, dims), [a, b],
            differentiable=(0, 1), rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------------------------------- nn.functional
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample(rng, mode, padding_mode, align_corners):
    image = randn(rng, 2, 3, 5, 6)
    # Reaches past [-1, 1] so the padding matters; nearest avoids the exact half-way points.
    grid = rng.uniform(-1.3, 1.3, (2, 4, 7, 2)).astype(np.float32)
    differentiable = (0, 1) if mode == "bilinear" else (0,)
    compare(lambda x, g: F.grid_sample(x, g, mode, padding_mode, align_corners),
            lambda x, g: TF.grid_sample(x, g, mode, padding_mode, align_corners), [image, grid],
            differentiable=differentiable, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_into_grid_sample(rng, align_corners):
    theta = (np.eye(2, 3)[None] + 0.2 * randn(rng, 2, 2, 3)).astype(np.float32)
    image = randn(rng, 2, 1, 6, 5)
    compare(lambda t: F.affine_grid(t, [2, 1, 4, 3], align_corners),
            lambda t: TF.affine_grid(t, [2, 1, 4, 3], align_corners), [theta], differentiable=(0,))
    compare(lambda t, x: F.grid_sample(x, F.affine_grid(t, [2, 1, 4, 3], align_corners),
                                       align_corners=align_corners),
            lambda t, x: TF.grid_sample(x, TF.affine_grid(t, [2, 1, 4, 3], align_corners),
                                        align_corners=align_corners), [theta, image], differentiable=(0, 1),
            rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("norm_type", [1.0, 2.0, 3.0])
def test_lp_pool(rng, norm_type):
    positive = np.abs(randn(rng, 2, 3, 8, 9)) + 0.1  # odd powers of negative windows are NaN in both
    compare(lambda x: F.lp_pool2d(x, norm_type, 3, 2), lambda x: TF.lp_pool2d(x, norm_type, 3, 2), [positive],
            differentiable=(0,), rtol=1e-4)
    compare(lambda x: F.lp_pool1d(x, norm_type, 2), lambda x: TF.lp_pool1d(x, norm_type, 2), [positive[0]],
            differentiable=(0,), rtol=1e-4)
    compare(lambda x: F.lp_pool3d(x, norm_type, (2, 2, 3), ceil_mode=True),
            lambda x: TF.lp_pool3d(x, norm_type, (2, 2, 3), ceil_mode=True), [positive],
            differentiable=(0,), rtol=1e-4)


@pytest.mark.parametrize("shape", [(2, 7, 5), (2, 7, 5, 4), (1, 6, 3, 2, 2)])
@pytest.mark.parametrize("size", [2, 3])
def test_local_response_norm(rng, shape, size):
    compare(lambda x: F.local_response_norm(x, size, alpha=0.1, beta=0.6, k=1.5),
            lambda x: TF.local_response_norm(x, size, alpha=0.1, beta=0.6, k=1.5), [randn(rng, *shape)],
            differentiable=(0,), rtol=1e-4)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multi_margin_loss(rng, p, reduction):
    scores, target = randn(rng, 5, 6), rng.integers(0, 6, 5)
    weight = rng.uniform(0.5, 2.0, 6).astype(np.float32)
    compare(lambda x, w: F.multi_margin_loss(x, target, p=p, margin=0.7, weight=w, reduction=reduction),
            lambda x, w: TF.multi_margin_loss(x, torch.tensor(target), p=p, margin=0.7, weight=w,
                                              reduction=reduction), [scores, weight], differentiable=(0,))
    compare(lambda x: nn.MultiMarginLoss(p=p, reduction=reduction)(x, target),
            lambda x: torch.nn.MultiMarginLoss(p=p, reduction=reduction)(x, torch.tensor(target)), [scores],
            differentiable=(0,))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multilabel_margin_loss(rng, reduction):
    scores = randn(rng, 4, 6)
    target = np.array([[3, 0, -1, 1, 1, 1], [1, 2, 3, -1, 0, 0], [5, 4, 3, 2, 1, 0], [-1, 1, 1, 1, 1, 1]])
    compare(lambda x: F.multilabel_margin_loss(x, target, reduction=reduction),
            lambda x: TF.multilabel_margin_loss(x, torch.tensor(target), reduction=reduction), [scores],
            differentiable=(0,))
    compare(lambda x: nn.MultiLabelMarginLoss(reduction=reduction)(x, target),
            lambda x: torch.nn.MultiLabelMarginLoss(reduction=reduction)(x, torch.tensor(target)), [scores],
            differentiable=(0,))


@pytest.mark.parametrize("swap", [False, True])
def test_triplet_margin_with_distance_loss(rng, swap):
    anchor, positive, negative = randn(rng, 5, 4), randn(rng, 5, 4), randn(rng, 5, 4)
    compare(lambda a, p, n: F.triplet_margin_with_distance_loss(a, p, n, swap=swap, margin=2.0),
            lambda a, p, n: TF.triplet_margin_with_distance_loss(a, p, n, swap=swap, margin=2.0),
            [anchor, positive, negative], differentiable=(0, 1, 2))
    compare(lambda a, p, n: nn.TripletMarginWithDistanceLoss(
                distance_function=lambda x, y: 1.0 - F.cosine_similarity(x, y), margin=0.5)(a, p, n),
            lambda a, p, n: torch.nn.TripletMarginWithDistanceLoss(
                distance_function=lambda x, y: 1.0 - TF.cosine_similarity(x, y), margin=0.5)(a, p, n),
            [anchor, positive, negative], differentiable=(0, 1, 2))


def test_channel_shuffle_pdist_rrelu_eval(rng):
    compare(lambda x: F.channel_shuffle(x, 3), lambda x: TF.channel_shuffle(x, 3), [randn(rng, 2, 6, 3, 2)],
            differentiable=(0,))
    compare(lambda x: nn.ChannelShuffle(2)(x), lambda x: torch.nn.ChannelShuffle(2)(x), [randn(rng, 1, 4, 5)])
    compare(F.pdist, TF.pdist, [randn(rng, 5, 3)], differentiable=(0,), rtol=1e-4)
    compare(lambda x: F.pdist(x, 1.0), lambda x: TF.pdist(x, 1.0), [randn(rng, 4, 3)], differentiable=(0,))
    compare(lambda x: F.rrelu(x, 0.1, 0.3), lambda x: TF.rrelu(x, 0.1, 0.3), [randn(rng, 4, 5)],
            differentiable=(0,))
    compare(lambda x: nn.RReLU().eval()(x), lambda x: torch.nn.RReLU().eval()(x), [randn(rng, 4, 5)])


def test_rrelu_training_slopes_lie_between_the_bounds(rng):
    values = -np.abs(randn(rng, 2000)) - 0.1
    slopes = F.rrelu(mj.array(values), 0.1, 0.3, training=True).numpy() / values
    assert slopes.min() >= 0.1 - 1e-6 and slopes.max() <= 0.3 + 1e-6
    assert abs(slopes.mean() - 0.2) < 0.01  # uniform on [0.1, 0.3]


def test_in_place_activations(rng):
    values = randn(rng, 3, 4)
    for name, arguments in [("relu_", ()), ("elu_", (0.5,)), ("leaky_relu_", (0.2,)), ("hardtanh_", (-0.5, 0.5)),
                            ("celu_", (1.5,)), ("selu_", ()), ("threshold_", (0.1, -1.0))]:
        ours, theirs = mj.array(values), torch.tensor(values)
        result = getattr(F, name)(ours, *arguments)
        getattr(TF, name)(theirs, *arguments)
        assert result is ours
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6, atol=1e-6, err_msg=name)


def test_gumbel_softmax_follows_the_softmax_probabilities(rng):
    """Gumbel-max: the soft sample's argmax is distributed as softmax(logits) (the expected frequencies come from
    torch.softmax); hard samples are one-hot with the soft sample's gradient."""
    logits = np.array([1.0, 0.0, -1.0, 0.5], np.float32)
    mj.manual_seed(0)
    samples = F.gumbel_softmax(mj.array(np.tile(logits, (20000, 1))), tau=0.7).numpy()
    np.testing.assert_allclose(samples.sum(1), 1.0, rtol=1e-5)
    frequencies = np.bincount(samples.argmax(1), minlength=4) / 20000
    np.testing.assert_allclose(frequencies, torch.softmax(torch.tensor(logits), 0).numpy(), atol=0.015)
    source = mj.array(np.tile(logits, (3, 1)), requires_grad=True)
    hard = F.gumbel_softmax(source, hard=True)
    values = hard.numpy()
    assert set(np.unique(values)) <= {0.0, 1.0} and (values.sum(1) == 1).all()
    gradient, = mj.grad((hard * mj.array(np.arange(12, dtype=np.float32).reshape(3, 4))).sum(), [source])
    assert np.abs(gradient.numpy()).sum() > 0  # the straight-through gradient is the soft sample's


def test_alpha_dropout_keeps_mean_and_variance(rng):
    values = randn(rng, 200000)
    mj.manual_seed(1)
    dropped = F.alpha_dropout(mj.array(values), 0.3, training=True).numpy()
    assert abs(dropped.mean()) < 0.02 and abs(dropped.std() - 1.0) < 0.02
    np.testing.assert_array_equal(F.alpha_dropout(mj.array(values), 0.3, training=False).numpy(), values)
    features = F.feature_alpha_dropout(mj.array(randn(rng, 4, 50, 3)), 0.5, training=True).numpy()
    per_channel = features.std(axis=2)  # dropped channels are constant
    assert (per_channel < 1e-6).any() and (per_channel > 1e-3).any()


# ------------------------------------------------------------------------------------------------------ layers
def test_lazy_layers_match_their_eager_counterparts(rng):
    image = randn(rng, 2, 3, 6, 6)
    model = nn.Sequential(nn.LazyConv2d(4, 3), nn.LazyBatchNorm2d(), nn.ReLU(), nn.Flatten(), nn.LazyLinear(5))
    assert not list(model.parameters())
    output = model(mj.array(image))
    assert [type(layer).__name__ for layer in model] == ["Conv2d", "BatchNorm2d", "ReLU", "Flatten", "Linear"]
    reference = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                                    torch.nn.Flatten(), torch.nn.Linear(64, 5))
    assert list(model.state_dict()) == list(reference.state_dict())
    reference.load_state_dict({name: torch.tensor(value.numpy()) for name, value in model.state_dict().items()})
    # The first forward ran in training mode in both; compare that output.
    np.testing.assert_allclose(output.numpy(), reference(torch.tensor(image)).detach().numpy(), rtol=1e-4,
                               atol=1e-5)
    for lazy, size in [(nn.LazyConv1d(2, 3), (4, 5, 9)), (nn.LazyConvTranspose2d(2, 3), (1, 3, 4, 4)),
                       (nn.LazyBatchNorm1d(), (4, 6)), (nn.LazyInstanceNorm2d(), (2, 3, 4, 4))]:
        lazy(mj.array(randn(rng, *size)))
        assert not type(lazy).__name__.startswith("Lazy")


@pytest.mark.parametrize("name, padding, shape", [("CircularPad1d", (2, 1), (2, 3, 5)),
                                                  ("CircularPad2d", 1, (1, 2, 4, 4)),
                                                  ("CircularPad3d", (1, 0, 1, 1, 0, 1), (1, 1, 3, 3, 3)),
                                                  ("ReflectionPad3d", 1, (1, 2, 3, 4, 4)),
                                                  ("ReplicationPad3d", (2, 1, 0, 1, 1, 0), (1, 1, 3, 3, 3))])
def test_new_padding_layers(rng, name, padding, shape):
    compare(lambda x: getattr(nn, name)(padding)(x), lambda x: getattr(torch.nn, name)(padding)(x),
            [randn(rng, *shape)], differentiable=(0,))


def test_pooling_and_normalisation_layers(rng):
    values = np.abs(randn(rng, 2, 4, 6, 6)) + 0.1
    compare(lambda x: nn.LPPool2d(2, 2)(x), lambda x: torch.nn.LPPool2d(2, 2)(x), [values], differentiable=(0,),
            rtol=1e-4)
    compare(lambda x: nn.LPPool1d(3, 3, stride=1)(x), lambda x: torch.nn.LPPool1d(3, 3, stride=1)(x),
            [values[0]], differentiable=(0,), rtol=1e-4)
    compare(lambda x: nn.LocalResponseNorm(3)(x), lambda x: torch.nn.LocalResponseNorm(3)(x), [values],
            differentiable=(0,), rtol=1e-4)


def test_data_parallel_wraps_the_module(rng):
    inner = nn.Linear(3, 2)
    wrapped = nn.DataParallel(inner)
    assert wrapped.module is inner and list(wrapped.state_dict()) == ["module.weight", "module.bias"]
    reference = torch.nn.DataParallel(torch.nn.Linear(3, 2))
    assert list(reference.state_dict()) == list(wrapped.state_dict())
    values = randn(rng, 4, 3)
    np.testing.assert_allclose(wrapped(mj.array(values)).numpy(), inner(mj.array(values)).numpy())


def test_nll_loss_2d_is_nll_loss():
    assert nn.NLLLoss2d is nn.NLLLoss


# --------------------------------------------------------------------------------------------------- optimizers
@pytest.mark.parametrize("name, options", [("Rprop", dict(lr=0.05)), ("Rprop", dict(lr=0.01, etas=(0.3, 1.5),
                                                                                     step_sizes=(1e-3, 0.2),
                                                                                     maximize=True)),
                                           ("ASGD", dict(lr=0.05, t0=2, weight_decay=0.01)),
                                           ("ASGD", dict(lr=0.02, lambd=0.1, alpha=0.5))])
def test_new_optimizers_follow_pytorch(rng, name, options):
    start, inputs = randn(rng, 5, 3), randn(rng, 8, 5)
    theirs = torch.tensor(start, requires_grad=True)
    their_optimizer = getattr(torch.optim, name)([theirs], **options)
    ours = nn.Parameter(mj.array(start))
    our_optimizer = getattr(mj.optim, name)([ours], **options)
    for _ in range(8):
        their_optimizer.zero_grad()
        (torch.tensor(inputs) @ theirs).tanh().pow(2).sum().backward()
        their_optimizer.step()
        our_optimizer.zero_grad()
        (mj.array(inputs) @ ours).tanh().pow(2).sum().backward()
        our_optimizer.step()
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-5, atol=1e-6)
    if name == "ASGD":
        np.testing.assert_allclose(our_optimizer.state[ours]["ax"].numpy(),
                                   their_optimizer.state[theirs]["ax"].numpy(), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------------- data
def test_stack_dataset():
    ours = mj.utils.data.StackDataset([1, 2, 3], ["a", "b", "c"])
    theirs = torch.utils.data.StackDataset([1, 2, 3], ["a", "b", "c"])
    assert len(ours) == len(theirs) and ours[1] == theirs[1]
    keyed = mj.utils.data.StackDataset(number=[1, 2], letter=["x", "y"])
    assert keyed[0] == torch.utils.data.StackDataset(number=[1, 2], letter=["x", "y"])[0]
    with pytest.raises(ValueError, match="Size mismatch"):
        mj.utils.data.StackDataset([1], [1, 2])


# ---------------------------------------------------------------------------------------------- absent names
@pytest.mark.parametrize("namespace, name, reason", [
    (mj, "qr", "decompositions"), (mj, "lgamma", "special functions"), (mj, "bincount", "shape depends"),
    (mj.linalg, "svd", "torch.linalg"), (nn, "AdaptiveLogSoftmaxWithLoss", "adaptive softmax"),
    (F, "linear_cross_entropy", "fused linear"),
    (F, "max_pool2d_with_indices", "return_indices"), (nn.utils, "weight_norm", "reparametrisations"),
    (mj.optim, "SparseAdam", "sparse"), (mj.utils.data, "IterDataPipe", "DataPipes"),
    (nn.utils.rnn, "pack_padded_sequence", "padded")])
def test_absent_names_say_why(namespace, name, reason):
    with pytest.raises(AttributeError, match=reason) as raised:
        getattr(namespace, name)
    assert name in str(raised.value)
    assert isinstance(raised.value, NotImplementedError)  # a left-out feature, not a typo
    assert not hasattr(namespace, name)


def test_absent_tensor_methods_say_why():
    value = mj.zeros(2, 2)
    with pytest.raises(AttributeError, match="in-place shape changes"):
        value.squeeze_()
    with pytest.raises(AttributeError, match="Tensor.qr"):
        value.qr()
    assert not hasattr(value, "lgamma")


def test_an_unknown_name_is_a_plain_missing_attribute():
    with pytest.raises(AttributeError, match="no attribute 'not_a_torch_name'") as raised:
        F.not_a_torch_name  # noqa: B018
    assert not getattr(raised.value, "declared", False)


def test_from_import_of_an_absent_name_keeps_the_reason():
    """Python turns an AttributeError inside `from m import name` into a bare "cannot import name"; the reason
    must survive."""
    with pytest.raises(ImportError, match="adaptive softmax is not implemented") as raised:
        exec("from metajit.nn import AdaptiveLogSoftmaxWithLoss")
    assert isinstance(raised.value, NotImplementedError)
    with pytest.raises(ImportError, match="reparametrisations"):
        exec("from metajit.nn.utils import weight_norm")
