"""Tensor manipulation ops (metajit.ops.tensor) against PyTorch: cat/stack/split/chunk, pad in every mode,
gather/scatter/scatter_add/index_select, clamp, argmax/argmin, cumsum, shape helpers, roll, one_hot; gradients
against finite differences (float64) and PyTorch; errors."""
import numpy as np
import pytest

import metajit as mj
from conftest import assert_close
from gradient_check import check_gradients, torch_gradients

torch = pytest.importorskip("torch")
functional = torch.nn.functional


def check_against_torch(ours, reference, *arrays, rtol=1e-10, atol=1e-12):
    """Forward values equal PyTorch's, and gradients match finite differences and PyTorch."""
    assert_close(ours(*[mj.array(a) for a in arrays]), reference(*[torch.tensor(a) for a in arrays]).numpy(),
                 rtol=rtol, atol=atol)
    got = check_gradients(ours, *arrays)
    for index, (mine, theirs) in enumerate(zip(got, torch_gradients(reference, *arrays))):
        np.testing.assert_allclose(mine, theirs, rtol=rtol, atol=atol, err_msg=f"gradient of input {index}")


@pytest.fixture
def cube():
    return np.random.default_rng(21).uniform(-2, 2, size=(2, 3, 4))


# ------------------------------------------------------------------------------------------ joining and splitting
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat_matches_torch_with_gradients(dim, cube):
    shape = list(cube.shape)
    shape[dim] = 2 if dim == 0 else 1  # the pieces differ along the joined dim only
    other = np.random.default_rng(1).uniform(-1, 1, size=shape)
    check_against_torch(lambda a, b: mj.cat([a, b, a], dim), lambda a, b: torch.cat([a, b, a], dim), cube, other)


def test_cat_of_different_extents_promotes_dtypes_and_skips_empty_vectors(rng):
    first = rng.uniform(-1, 1, size=(2, 3)).astype(np.float32)
    second = rng.integers(-5, 5, size=(2, 5))
    got = mj.concat([mj.array(first), mj.array(second)], dim=1)
    expected = torch.cat([torch.tensor(first), torch.tensor(second)], 1)
    assert_close(got, expected.numpy(), rtol=0, dtype="float32")
    assert_close(mj.concatenate([mj.array(first), mj.array(first[:1])], axis=0),
                 np.concatenate([first, first[:1]], axis=0), rtol=0)
    empty = np.zeros((0,), np.float32)
    assert_close(mj.cat([mj.array(first), mj.array(empty)], 1), first, rtol=0)
    flags = mj.cat([mj.array(np.array([True, False])), mj.array(np.array([True]))])
    assert_close(flags, np.array([True, False, True]), dtype="bool")


def test_cat_keeps_signed_zeros_and_special_values():
    first = np.array([-0.0, np.inf, np.nan], np.float32)
    second = np.array([-np.inf, -0.0], np.float32)
    got = mj.cat([mj.array(first), mj.array(second)]).numpy()
    expected = np.concatenate([first, second])
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


def test_stack_of_many_pieces_with_gradients(rng):
    """More than four pieces take the buffered path (see tensor._join)."""
    pieces = [rng.uniform(-1, 1, size=(2, 3)) for _ in range(7)]
    check_against_torch(lambda *p: mj.stack(list(p), 1) ** 2, lambda *p: torch.stack(list(p), 1) ** 2, *pieces)
    check_against_torch(lambda *p: mj.cat(list(p), 0) * 3, lambda *p: torch.cat(list(p), 0) * 3, *pieces)


@pytest.mark.parametrize("count", [9, 64, 70])
def test_joins_of_more_pieces_than_a_kernel_loops_over_go_in_groups(rng, count):
    """A kernel renders its loop once per piece for up to 8 pieces; more are joined in groups of 8 first (stacking
    64 [32, 1024] pieces: 7.2 -> 1.1 ms; concatenating them along dim 1: 65 -> 6.4 ms). Values and gradients
    match PyTorch's, for a count that fills the groups, one that does not, and one over 64 (groups of groups)."""
    pieces = [rng.uniform(-1, 1, size=(3, 2 + index % 3)) for index in range(count)]
    check_against_torch(lambda *p: mj.cat(list(p), 1) * 3, lambda *p: torch.cat(list(p), 1) * 3, *pieces)
    same = [rng.uniform(-1, 1, size=(3, 4)) for _ in range(count)]
    check_against_torch(lambda *p: mj.stack(list(p), 0) ** 2, lambda *p: torch.stack(list(p), 0) ** 2, *same)


def test_buffered_joins_are_stored_by_pointwise_kernels(rng):
    """The buffered path stores the join with an add-scatter onto its own indices; each element lands once, so it
    lowers as a plain pointwise kernel of the join (jit/ir/lowering.cc stores_its_source_unchanged): as a scatter it
    zeroed the buffer and added every element in, 1.6 ms against 1.0 for 64 [32, 1024] pieces. Values and the
    gradient of the scale they all share match numpy."""
    datas = [rng.standard_normal((3, 5)).astype(np.float32) for _ in range(12)]
    scale = mj.array(np.array([1.5], np.float32))
    scale.requires_grad = True
    joined = mj.stack([mj.array(data) * scale for data in datas], 0)
    kernels = mj.inspect(joined, device="cpu")
    assert kernels and all(kernel.header.startswith("// metajit kernel: pointwise") for kernel in kernels), \
        [kernel.header.splitlines()[0] for kernel in kernels]
    np.testing.assert_allclose(joined.numpy(), np.stack(datas) * 1.5, rtol=1e-6)
    weights = rng.standard_normal((12, 3, 5)).astype(np.float32)
    gradient, = mj.grad((mj.stack([mj.array(data) * scale for data in datas], 0) * mj.array(weights)).sum(), [scale])
    np.testing.assert_allclose(gradient.numpy(), [(np.stack(datas).astype(np.float64) * weights).sum()], rtol=1e-4)


def test_cat_is_one_kernel(rng):
    pieces = [mj.array(rng.uniform(size=(4, n)).astype(np.float32)) for n in (1, 2, 3)]
    assert len(mj.inspect_kernels(mj.cat(pieces, 1) * 2)) == 1


@pytest.mark.parametrize("dim", [0, 2, -1])
def test_stack_matches_torch_with_gradients(dim, cube):
    other = cube[::-1].copy() * 0.5
    check_against_torch(lambda a, b: mj.stack([a, b], dim), lambda a, b: torch.stack([a, b], dim), cube, other)


def test_split_and_chunk_match_torch(cube):
    t = torch.tensor(cube)
    cases = [
        (mj.split(mj.array(cube), 3, 2), torch.split(t, 3, 2)),
        (mj.split(mj.array(cube), [1, 0, 2], 1), torch.split(t, [1, 0, 2], 1)),
        (mj.array(cube).split(1), t.split(1)),
        (mj.chunk(mj.array(cube), 3, -1), torch.chunk(t, 3, -1)),
        (mj.array(cube).chunk(5, 1), t.chunk(5, 1)),
        (mj.chunk(mj.array(cube), 2, 1), torch.chunk(t, 2, 1)),
    ]
    for ours, theirs in cases:
        assert len(ours) == len(theirs)
        for piece, expected in zip(ours, theirs):
            assert_close(piece, expected.numpy(), rtol=0)


def test_split_gradients(cube):
    def ours(x):
        first, second = mj.split(x, [1, 3], 2)
        low, high = x.chunk(2, 0)
        return first * 2 + second.sum(2, keepdim=True) + (low * high).sum()

    def reference(x):
        first, second = torch.split(x, [1, 3], 2)
        low, high = x.chunk(2, 0)
        return first * 2 + second.sum(2, keepdim=True) + (low * high).sum()

    check_against_torch(ours, reference, cube)


# ------------------------------------------------------------------------------------------------------- padding
@pytest.mark.parametrize("mode,amounts", [
    ("constant", (1, 2)), ("constant", (2, 0, 1, 1)), ("constant", (-1, 1, 0, -2)), ("constant", (1, 1, 1, 1, 1, 0)),
    ("reflect", (2, 3)), ("reflect", (1, 2, 2, 0)), ("replicate", (3, 1)), ("replicate", (2, 2, 1, 3)),
    ("circular", (2, 4)), ("circular", (1, 2, 3, 0)),
], ids=repr)
def test_pad_matches_torch_with_gradients(mode, amounts, cube):
    check_against_torch(lambda x: mj.pad(x, amounts, mode), lambda x: functional.pad(x, amounts, mode), cube)


def test_pad_constant_value_and_integer_dtypes(rng):
    data = rng.integers(-5, 5, size=(2, 3))
    got = mj.pad(mj.array(data), (1, 1, 0, 1), value=7)
    assert_close(got, functional.pad(torch.tensor(data), (1, 1, 0, 1), value=7).numpy(), dtype="int64")
    floats = rng.uniform(size=(2, 3)).astype(np.float32)
    assert_close(mj.pad(mj.array(floats), (0, 2), value=-1.5),
                 functional.pad(torch.tensor(floats), (0, 2), value=-1.5).numpy(), rtol=0)


def test_pad_errors(cube):
    x = mj.array(cube)
    with pytest.raises(ValueError, match="divisible by 2"):
        mj.pad(x, (1,))
    with pytest.raises(ValueError, match="too large"):
        mj.pad(x, (1,) * 8)
    with pytest.raises(ValueError, match="mode"):
        mj.pad(x, (1, 1), mode="mirror")
    with pytest.raises(ValueError, match="less than the corresponding input dimension"):
        mj.pad(x, (4, 0), mode="reflect")
    with pytest.raises(ValueError, match="padded size"):
        mj.pad(x, (-3, -2))
    with pytest.raises(ValueError, match="value"):
        mj.pad(x, (1, 1), mode="replicate", value=3)


# ------------------------------------------------------------------------------------ gather, scatter, selection
@pytest.fixture
def index():
    return np.random.default_rng(4).integers(0, 3, size=(2, 4, 4))  # duplicates along dim 1


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_gather_matches_torch_with_gradients(dim, cube, index):
    index = np.random.default_rng(dim).integers(0, cube.shape[dim], size=(2, 2, 3))
    check_against_torch(lambda x: mj.gather(x, dim, mj.array(index)),
                        lambda x: torch.gather(x, dim, torch.tensor(index)), cube)
    assert_close(mj.array(cube).gather(dim, index), torch.tensor(cube).gather(dim, torch.tensor(index)).numpy(),
                 rtol=0)


def test_scatter_add_accumulates_duplicates_with_gradients(cube, index):
    source = np.random.default_rng(9).uniform(-1, 1, size=(2, 4, 5))
    check_against_torch(lambda x, s: mj.scatter_add(x, 1, mj.array(index), s),
                        lambda x, s: torch.scatter_add(x, 1, torch.tensor(index), s), cube, source[:, :, :4].copy())
    # A src larger than index contributes its leading block (PyTorch's backward fails on this case, so the
    # gradient is checked against finite differences only).
    got = check_gradients(lambda x, s: mj.scatter_add(x, 1, mj.array(index[:, :2]), s), cube, source)
    assert np.all(got[1][:, 2:] == 0) and np.all(got[1][..., 4] == 0)


def test_scatter_replaces_with_the_last_duplicate_like_torch(cube):
    index = np.array([[[0, 2, 1, 0], [0, 0, 1, 2]], [[2, 2, 2, 2], [1, 0, 1, 0]]])
    source = np.arange(16, dtype=np.float64).reshape(2, 2, 4) + 100
    expected = torch.scatter(torch.tensor(cube), 1, torch.tensor(index), torch.tensor(source)).numpy()
    assert_close(mj.scatter(mj.array(cube), 1, index, mj.array(source)), expected, rtol=0)
    # Gradients: an overwritten duplicate does not reach the output, so its gradient is 0 (finite differences
    # agree; PyTorch's backward gathers the gradient for every duplicate, so it is compared without duplicates).
    got = check_gradients(lambda x, s: mj.scatter(x, 1, mj.array(index), s), cube, source)
    assert got[1][0, 0, 0] == 0 and got[1][1, 1, 0] > 0
    distinct = np.array([[[0, 2, 1, 0], [2, 0, 0, 1]], [[1, 1, 2, 2], [0, 2, 1, 0]]])
    check_against_torch(lambda x, s: mj.scatter(x, 1, mj.array(distinct), s),
                        lambda x, s: torch.scatter(x, 1, torch.tensor(distinct), s), cube, source)
    assert_close(mj.array(cube).scatter(1, index, 2.5), torch.tensor(cube).scatter(1, torch.tensor(index), 2.5).numpy(),
                 rtol=0)
    multiplied = mj.scatter(mj.array(cube), 1, index, mj.array(source), reduce="multiply")
    with pytest.warns(UserWarning):
        expected = torch.scatter(torch.tensor(cube), 1, torch.tensor(index), torch.tensor(source), reduce="multiply")
    assert_close(multiplied, expected.numpy(), rtol=1e-12)


@pytest.mark.parametrize("dim", [0, 2])
def test_index_select_matches_torch_with_gradients(dim, cube):
    index = np.array([1, 0, 1, 1])
    check_against_torch(lambda x: mj.index_select(x, dim, mj.array(index)),
                        lambda x: torch.index_select(x, dim, torch.tensor(index)), cube)
    assert_close(mj.array(cube).index_select(dim, [1]), torch.tensor(cube).index_select(dim, torch.tensor([1])).numpy(),
                 rtol=0)


def test_gather_with_a_lazy_index(cube):
    index = mj.array(cube).argmax(1, keepdim=True)  # lazy: read in the same plan, no host check
    expected = np.take_along_axis(cube, cube.argmax(1)[:, None, :], 1)
    assert_close(mj.gather(mj.array(cube), 1, index), expected, rtol=0)


def test_gather_scatter_and_select_errors(cube, index):
    x = mj.array(cube)
    with pytest.raises(IndexError, match="out of bounds"):
        mj.gather(x, 1, mj.array(np.full((2, 1, 4), 3)))
    with pytest.raises(IndexError, match="out of bounds"):
        mj.gather(x, 1, np.full((2, 1, 4), -1))
    with pytest.raises(ValueError, match="same number of dimensions"):
        mj.gather(x, 1, np.zeros((2, 4), np.int64))
    with pytest.raises(ValueError, match="must not exceed"):
        mj.gather(x, 1, np.zeros((3, 1, 4), np.int64))
    with pytest.raises(TypeError, match="integer"):
        mj.gather(x, 1, mj.array(np.zeros((2, 1, 4))))
    with pytest.raises(IndexError, match="out of range"):
        mj.index_select(x, 0, [2])
    with pytest.raises(ValueError, match="0-D or 1-D"):
        mj.index_select(x, 0, [[0]])
    with pytest.raises(IndexError, match="out of bounds"):
        mj.scatter_add(x, 2, np.full((1, 1, 1), 4), mj.array(np.ones((1, 1, 1))))
    with pytest.raises(ValueError, match="reduce"):
        mj.scatter(x, 0, np.zeros((1, 1, 1), np.int64), 1.0, reduce="max")
    with pytest.raises(IndexError, match="out of range"):
        mj.gather(x, 3, np.zeros((2, 3, 4), np.int64))


# ---------------------------------------------------------------------------------------------------- clamping
def test_clamp_matches_torch_including_gradients_at_the_bounds(rng):
    data = np.array([-2.0, -1.0, -0.3, 0.0, 0.5, 1.0, 3.0])
    for low, high in ((-1.0, 1.0), (None, 0.5), (-0.3, None), (1.0, -1.0)):
        x = mj.array(data, requires_grad=True)
        value = mj.clamp(x, low, high)
        gradient = mj.grad(value.sum(), x).numpy()
        t = torch.tensor(data, requires_grad=True)
        expected = torch.clamp(t, low, high)
        expected.sum().backward()
        assert_close(value, expected.detach().numpy(), rtol=0)
        np.testing.assert_array_equal(gradient, t.grad.numpy(), err_msg=f"clamp({low}, {high})")
    values = rng.uniform(-2, 2, size=(3, 4))
    check_against_torch(lambda x: x.clip(-1.0, 0.8), lambda t: t.clip(-1.0, 0.8), values)


def test_clamp_with_tensor_bounds_dtype_promotion_and_nan(rng):
    data = rng.uniform(-2, 2, size=(3, 4))
    low = rng.uniform(-1, 0, size=(4,))
    high = rng.uniform(0, 1, size=(3, 1))
    check_against_torch(lambda x, a, b: mj.clamp(x, a, b), lambda x, a, b: torch.clamp(x, a, b), data, low, high)
    integers = np.array([1, 5, -3])
    assert_close(mj.clamp(mj.array(integers), 0.5, 2.5), torch.clamp(torch.tensor(integers), 0.5, 2.5).numpy(),
                 dtype="float32")
    assert_close(mj.clamp(mj.array(integers), 0, 2), np.clip(integers, 0, 2), dtype="int64")
    with_nan = np.array([np.nan, 3.0, -3.0], np.float32)
    assert_close(mj.clip(mj.array(with_nan), -1, 1), np.array([np.nan, 1, -1], np.float32), equal_nan=True)
    with pytest.raises(ValueError, match="at least one"):
        mj.clamp(mj.array(data))


# ---------------------------------------------------------------------------------------------- arg-reductions
def test_argmax_and_argmin_take_the_first_tie_like_torch():
    data = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, -1.0, -1.0], [5.0, 5.0, 5.0, 5.0]], np.float32)
    t = torch.tensor(data)
    for dim in (None, 0, 1, -1):
        for keepdim in (False, True):
            assert_close(mj.argmax(mj.array(data), dim, keepdim), torch.argmax(t, dim, keepdim).numpy(),
                         dtype="int64")
            assert_close(mj.array(data).argmin(dim, keepdim=keepdim), t.argmin(dim, keepdim=keepdim).numpy(),
                         dtype="int64")


def test_argmax_of_nan_integers_and_bools():
    with_nan = np.array([[1.0, np.nan, 5.0, np.nan], [0.0, 2.0, 1.0, 2.0]], np.float32)
    assert_close(mj.argmax(mj.array(with_nan), 1), torch.argmax(torch.tensor(with_nan), 1).numpy())
    assert_close(mj.argmin(mj.array(with_nan), 1), torch.argmin(torch.tensor(with_nan), 1).numpy())
    integers = np.array([[3, -7, 9, 9], [-2, -2, 0, -7]])
    assert_close(mj.argmax(mj.array(integers), 1), np.argmax(integers, 1))
    assert_close(mj.argmin(mj.array(integers), 0), np.argmin(integers, 0))
    flags = np.array([False, True, True])
    assert mj.argmax(mj.array(flags)).item() == 1


def test_argmax_does_not_carry_gradient(rng):
    x = mj.array(rng.uniform(size=(3, 4)), requires_grad=True)
    assert not mj.argmax(x, 1).requires_grad


# ---------------------------------------------------------------------------------------------- cumulative sum
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_matches_torch_with_gradients(dim, cube):
    check_against_torch(lambda x: mj.cumsum(x, dim), lambda t: torch.cumsum(t, dim), cube)
    assert_close(mj.array(cube).cumsum(dim), np.cumsum(cube, axis=dim), rtol=1e-12)


def test_cumsum_of_long_rows_uses_blocks(rng):
    data = rng.uniform(-1, 1, size=(2, 150))
    check_against_torch(lambda x: mj.cumsum(x, 1), lambda t: torch.cumsum(t, 1), data[:, :70].copy(), rtol=1e-9)
    assert_close(mj.cumsum(mj.array(data), 1), np.cumsum(data, 1), rtol=1e-10, atol=1e-12)
    column = rng.uniform(-1, 1, size=(1000, 1)).astype(np.float32)
    assert_close(mj.cumsum(mj.array(column), 0), np.cumsum(column.astype(np.float64), 0), rtol=1e-4, atol=1e-4)


def test_cumsum_dtypes():
    flags = np.array([True, False, True, True])
    assert_close(mj.cumsum(mj.array(flags), 0), np.cumsum(flags), dtype="int64")
    small = np.array([100, 100, 100], np.int8)
    assert_close(mj.cumsum(mj.array(small), 0), np.array([100, 200, 300]), dtype="int64")
    assert_close(mj.cumsum(mj.array(small), 0, dtype="float32"), np.array([100, 200, 300], np.float32))


# ----------------------------------------------------------------------------------------------- shape helpers
def test_flatten_squeeze_unsqueeze_flip_match_torch(cube):
    t = torch.tensor(cube)
    x = mj.array(cube)
    single = torch.tensor(cube[:, :1, None])
    pairs = [
        (mj.flatten(x), torch.flatten(t)), (x.flatten(1), t.flatten(1)), (mj.flatten(x, 0, 1), torch.flatten(t, 0, 1)),
        (mj.flatten(mj.array(np.float32(2))), torch.flatten(torch.tensor(np.float32(2)))),
        (mj.squeeze(mj.array(cube[:, :1, None])), torch.squeeze(single)),
        (mj.array(cube[:, :1, None]).squeeze(1), single.squeeze(1)),
        (mj.squeeze(mj.array(cube[:, :1, None]), (0, 3)), torch.squeeze(single, (0, 3))),
        (mj.unsqueeze(x, 0), torch.unsqueeze(t, 0)), (x.unsqueeze(-1), t.unsqueeze(-1)),
        (x.unsqueeze(2), t.unsqueeze(2)),
        (mj.flip(x, (0, 2)), torch.flip(t, (0, 2))), (x.flip(1), t.flip(1)), (x.flip(-1, 0), t.flip(-1, 0)),
    ]
    for ours, theirs in pairs:
        assert_close(ours, theirs.numpy(), rtol=0)
    check_against_torch(lambda v: mj.flip(v, (0, 2)) * mj.flatten(v, 1).reshape(2, 3, 4),
                        lambda v: torch.flip(v, (0, 2)) * torch.flatten(v, 1).reshape(2, 3, 4), cube)
    check_against_torch(lambda v: mj.squeeze(v[:, :1], 1).unsqueeze(0) * v.flip([1])[:, 1],
                        lambda v: torch.squeeze(v[:, :1], 1).unsqueeze(0) * v.flip([1])[:, 1], cube)


@pytest.mark.parametrize("shifts,dims", [(1, 0), (-2, 2), ((1, 5), (0, -1)), (7, None), (-3, 1)], ids=repr)
def test_roll_matches_torch_with_gradients(shifts, dims, cube):
    check_against_torch(lambda x: mj.roll(x, shifts, dims), lambda t: torch.roll(t, shifts, dims), cube)


def test_one_hot_matches_torch():
    labels = np.array([[0, 3], [2, 2]])
    assert_close(mj.one_hot(mj.array(labels)), functional.one_hot(torch.tensor(labels)).numpy(), dtype="int64")
    assert_close(mj.one_hot(labels, num_classes=6), functional.one_hot(torch.tensor(labels), 6).numpy())
    with pytest.raises(ValueError, match="smaller than num_classes"):
        mj.one_hot(mj.array(labels), 3)
    with pytest.raises(ValueError, match="non-negative"):
        mj.one_hot(mj.array(np.array([-1, 0])))
    with pytest.raises(TypeError, match="integer"):
        mj.one_hot(mj.array(np.array([0.0, 1.0])))


def test_shape_helper_errors(cube):
    x = mj.array(cube)
    with pytest.raises(IndexError, match="out of range"):
        mj.unsqueeze(x, 4)
    with pytest.raises(IndexError, match="out of range"):
        mj.squeeze(x, 3)
    with pytest.raises(ValueError, match="start_dim"):
        mj.flatten(x, 2, 1)
    with pytest.raises(ValueError, match="multiple times"):
        mj.flip(x, (0, -3))
    with pytest.raises(ValueError, match="align"):
        mj.roll(x, (1, 2), 0)
    with pytest.raises(ValueError, match="equal size"):
        mj.stack([x, x[:1]])
    with pytest.raises(ValueError, match="sizes of Vars must match"):
        mj.cat([x, x[:, :2, :1]], 1)
    with pytest.raises(ValueError, match="same number of dimensions"):
        mj.cat([x, x[0]])
    with pytest.raises(TypeError, match="sequence"):
        mj.cat(x)
    with pytest.raises(ValueError, match="sum exactly"):
        mj.split(x, [1, 1], 1)
    with pytest.raises(ValueError, match="positive"):
        mj.chunk(x, 0)


def test_tensor_ops_are_exposed_in_nn_functional_and_top_level():
    import metajit.nn.functional as F
    for name in ("cat", "concat", "concatenate", "stack", "split", "chunk", "pad", "gather", "scatter",
                 "scatter_add", "index_select", "clamp", "clip", "argmax", "argmin", "cumsum", "flatten", "squeeze",
                 "unsqueeze", "flip", "roll", "one_hot"):
        assert callable(getattr(mj, name)), name
        assert callable(getattr(F, name)), name
