"""Advanced indexing and index assignment (metajit.ops.indexing, Var.__getitem__ / __setitem__): integer arrays
(lists, numpy, Vars; negative entries), boolean masks, mixtures with slices/None/..., PyTorch's placement of
the index dims, gradients (repeated indices accumulate), x[key] = value for every key kind, index_put and
masked_fill, and the errors (out of range, bad index types, assignment into Vars with gradient history)."""
import itertools
import numpy as np
import pytest

import metajit as mj
from conftest import assert_close
from gradient_check import check_gradients, torch_gradients

torch = pytest.importorskip("torch")


def as_torch_key(key):
    """The same key for a torch tensor (arrays and Vars become tensors)."""
    if not isinstance(key, tuple):
        key = (key,)
    converted = []
    for item in key:
        if isinstance(item, mj.Var):
            item = torch.tensor(item.numpy())
        elif isinstance(item, (list, np.ndarray)):
            array = np.asarray(item)
            item = torch.tensor(array if array.size else array.astype(np.int64))
        converted.append(item)
    return tuple(converted)


@pytest.fixture
def cube():
    return np.arange(60, dtype=np.float64).reshape(3, 4, 5) * 0.5 - 7


KEYS = [
    [2, 0, 2],
    ([0, 2], [1, 3]),
    ([[0], [2]], [1, 3, -1]),
    (slice(None), [3, -4, 0]),
    (Ellipsis, [4, 0]),
    (1, slice(None), [0, 1]),          # PyTorch: the integer selects first, the array stays in place -> (4, 2)
    (slice(None), 1, [0, 1]),
    ([0, 1], slice(None), [2, 3]),     # separated arrays: their dims lead
    ([0, 1], slice(1, None, 2), 0),
    (None, [1, 0], slice(1, None, 2)),
    (np.array([1, 0]), np.array([[3], [0]])),
    (np.array(2), slice(1, 3)),
    ([], slice(None)),
    (slice(None), [True, False, True, True]),
    (np.array([[True, False, True, False]] * 3), 1),
]


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_advanced_getitem_matches_torch(key, cube):
    expected = torch.tensor(cube)[as_torch_key(key)].numpy()
    assert_close(mj.array(cube)[key], expected, rtol=0)


def test_negative_steps_with_arrays_match_numpy(cube):
    for key in [(slice(None), slice(None, None, -1), [1, 1, 2]), ([2, 0], slice(None, None, -2), slice(4, 0, -3)),
                (None, [1, 0], slice(None, None, -1))]:
        assert_close(mj.array(cube)[key], cube[key], rtol=0)


def test_var_indices_computed_and_lazy(cube):
    x = mj.array(cube)
    rows = mj.array(np.array([2, -1, 0]))
    assert_close(x[rows], cube[[2, -1, 0]], rtol=0)
    assert_close(x[rows, :, mj.array(np.array([4, -5, 0], np.int32))], cube[[2, -1, 0], :, [4, -5, 0]], rtol=0)
    lazy = mj.arange(3)[::-1] - 1  # [1, 0, -1], not computed yet
    assert not lazy.is_computed
    assert_close(x[:, lazy], cube[:, [1, 0, -1]], rtol=0)


def test_boolean_masks(cube):
    x = mj.array(cube)
    mask = cube > 5
    assert_close(x[mask], cube[mask], rtol=0)
    assert_close(x[mj.array(mask)], cube[mask], rtol=0)
    lazy_mask = x.sum(2) > 0  # synced to count its true entries
    assert_close(x[lazy_mask], cube[cube.sum(2) > 0], rtol=0)
    assert_close(x[mask[:, :, 0], 1:3], cube[mask[:, :, 0], 1:3], rtol=0)
    assert_close(x[True], cube[None], rtol=0)
    assert x[False].shape == (0, 3, 4, 5)
    assert_close(x[mj.array(np.zeros((3, 4), bool))], np.zeros((0, 5)), rtol=0)


def test_advanced_indexing_gradients_accumulate_repeats(cube):
    small = cube[:2, :3, :2].copy()
    cases = [
        (lambda v: v[[0, 0, 1]], lambda t: t[[0, 0, 1]]),
        (lambda v: v[:, [2, -1, 2], 1], lambda t: t[:, [2, -1, 2], 1]),
        (lambda v: v[[1, 0], :, [1, 1]], lambda t: t[[1, 0], :, [1, 1]]),
        (lambda v: v[np.array([[True, False, True], [False, True, True]])],
         lambda t: t[torch.tensor([[True, False, True], [False, True, True]])]),
    ]
    for ours, reference in cases:
        got = check_gradients(ours, small)
        np.testing.assert_allclose(got[0], torch_gradients(reference, small)[0], rtol=1e-12)


def test_basic_keys_still_give_views(cube):
    x = mj.array(cube)
    assert x[1:, ::2].op == "view"
    assert x[0, ..., None].op == "view"
    assert x[[0, 1]].op != "view"


@pytest.mark.parametrize("key,error,message", [
    ([3], IndexError, "out of bounds"),
    ((slice(None), [-5]), IndexError, "out of bounds"),
    ([0.5], IndexError, "integer or boolean"),
    ("a", TypeError, "not supported"),
    (([0, 1], [0, 1, 2]), IndexError, "shape mismatch"),
    (np.ones((3, 5), bool), IndexError, "does not match"),
    ((0, 0, 0, 0), IndexError, "too many indices"),
    (([0], [0], [0], [0]), IndexError, "too many indices"),
    ((Ellipsis, [0], Ellipsis), IndexError, "single ellipsis"),
], ids=repr)
def test_indexing_errors(key, error, message, cube):
    with pytest.raises(error, match=message):
        mj.array(cube)[key]


def test_float_var_index_is_rejected(cube):
    with pytest.raises(IndexError, match="long, int, byte or bool"):
        mj.array(cube)[mj.array(np.array([0.0]))]


# ---------------------------------------------------------------------------------------------------- setitem
SET_CASES = [
    (1, 9.0),
    ((slice(None), 0), np.arange(3.0)[:, None]),
    ((slice(1, None, 2), slice(None, None, -2)), -1.0),
    ((0, slice(1, 3), slice(4, 0, -3)), np.array([[1.0, 2.0], [3.0, 4.0]])),
    ((None, 2, Ellipsis, 0), np.array([[10.0, 20.0, 30.0, 40.0]])),
    ([2, 0], np.zeros((4, 5))),
    ((slice(None), [1, 1, 3], 2), np.arange(9.0).reshape(3, 3)),  # repeated position: the last value wins
    (([0, 2], slice(None), [4, -5]), 7.5),
    ((Ellipsis, [0, -1]), np.array([1.0, 2.0])),
    (np.arange(60).reshape(3, 4, 5) % 7 == 0, 0.0),
    (np.arange(60).reshape(3, 4, 5) % 7 == 0, np.arange(9.0)),
    (np.array([True, False, True]), np.array([1.0, 2.0, 3.0, 4.0, 5.0])),
    ((np.array([True, False, True]), 1), np.array([[5.0], [6.0]])),
]


@pytest.mark.parametrize("key,value", SET_CASES, ids=range(len(SET_CASES)))
def test_setitem_matches_numpy(key, value, cube):
    x = mj.array(cube)
    expected = cube.copy()
    expected[key] = value
    x[key] = value
    assert_close(x, expected, rtol=0)


def test_setitem_with_var_keys_and_values_and_dtype_conversion(cube):
    x = mj.array(cube)
    expected = cube.copy()
    x[mj.array(np.array([0, -1]))] = mj.array(np.full((4, 5), 3.0, np.float32))
    expected[[0, -1]] = 3.0
    assert_close(x, expected, rtol=0, dtype="float64")
    mask = x > 2  # a lazy mask with a scalar value: a where, no count needed
    x[mask] = 2
    expected[expected > 2] = 2
    assert_close(x, expected, rtol=0)
    integers = mj.array(np.arange(6))
    integers[1:3] = 2.7
    assert_close(integers, np.array([0, 2, 2, 3, 4, 5]), dtype="int64")
    integers[[1, 1, 4]] = mj.array(np.array([7, 8, 9]))
    assert_close(integers, np.array([0, 8, 2, 3, 9, 5]), dtype="int64")
    flags = mj.array(np.zeros(5, bool))
    flags[[0, 3]] = True
    assert_close(flags, np.array([True, False, False, True, False]), dtype="bool")


def test_setitem_on_a_lazy_var_and_augmented_assignment():
    x = mj.zeros(2, 3)
    x[0, 1] = 4.0
    x[:, [0, 2]] += 1.5
    x[x > 3] -= 1
    expected = np.zeros((2, 3), np.float32)
    expected[0, 1] = 4.0
    expected[:, [0, 2]] += 1.5
    expected[expected > 3] -= 1
    assert_close(x, expected, rtol=0)


def test_setitem_value_shape_mismatch_raises(cube):
    x = mj.array(cube)
    with pytest.raises(ValueError, match="cannot be broadcast"):
        x[0] = np.ones(3)
    with pytest.raises(ValueError, match="cannot be broadcast"):
        x[[0, 1]] = np.ones((3, 4, 5))
    with pytest.raises(ValueError, match="cannot be broadcast"):
        x[cube > 0] = np.ones(2)
    with pytest.raises(IndexError, match="out of bounds"):
        x[[0, 5]] = 1.0


def test_setitem_follows_pytorch_autograd_rules(cube):
    parameter = mj.array(cube, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad is being used in an in-place operation"):
        parameter[0] = 1.0
    # Writing into a Var computed from a parameter, and writing a value that requires grad: both differentiable.
    torch_parameter = torch.tensor(cube, requires_grad=True)
    torch_derived = torch_parameter * 2
    torch_derived[0] = torch_parameter[1] * 3
    torch_derived.sum().backward()
    derived = parameter * 2
    derived[0] = parameter[1] * 3
    derived.sum().backward()
    assert_close(derived, torch_derived.detach().numpy())
    assert_close(parameter.grad, torch_parameter.grad.numpy())
    with mj.no_grad():  # initialisation of a parameter is allowed
        parameter[0] = 1.0
        parameter[1, [0, 3]] = -2.0
    expected = cube.copy()
    expected[0] = 1.0
    expected[1, [0, 3]] = -2.0
    assert_close(parameter, expected, rtol=0)
    assert parameter.requires_grad and parameter.is_leaf


# ------------------------------------------------------------------------------------ out-of-place assignment
def test_index_put_matches_torch_with_gradients(cube):
    small = cube[:3, :4, 0].copy()
    rows, columns = np.array([0, 2, 0]), np.array([1, 3, 1])
    values = np.array([10.0, 20.0, 30.0])
    for accumulate in (False, True):
        expected = torch.index_put(torch.tensor(small), (torch.tensor(rows), torch.tensor(columns)),
                                   torch.tensor(values), accumulate=accumulate).numpy()
        got = mj.index_put(mj.array(small), (mj.array(rows), mj.array(columns)), mj.array(values), accumulate)
        if accumulate:
            assert_close(got, expected, rtol=1e-12)
        else:  # repeated (0, 1): PyTorch's CPU loop and metajit both keep the last value
            assert_close(got, expected, rtol=0)
    distinct = (np.array([0, 2, 1]), np.array([1, 3, 1]))

    def ours(x, v):
        return mj.index_put(x, (mj.array(distinct[0]), mj.array(distinct[1])), v)

    def reference(x, v):
        return torch.index_put(x, (torch.tensor(distinct[0]), torch.tensor(distinct[1])), v)

    got = check_gradients(ours, small, values)
    for mine, theirs in zip(got, torch_gradients(reference, small, values)):
        np.testing.assert_allclose(mine, theirs, rtol=1e-12)

    def accumulated(x, v):
        return mj.index_put(x, (mj.array(rows), mj.array(columns)), v, accumulate=True)

    def accumulated_reference(x, v):
        return torch.index_put(x, (torch.tensor(rows), torch.tensor(columns)), v, accumulate=True)

    got = check_gradients(accumulated, small, values)
    for mine, theirs in zip(got, torch_gradients(accumulated_reference, small, values)):
        np.testing.assert_allclose(mine, theirs, rtol=1e-12)


def test_index_put_with_slices_and_last_duplicate_gradient(cube):
    small = cube[:2, :3, 0].copy()
    values = np.array([1.0, 2.0, 3.0])
    got = check_gradients(lambda x, v: x.index_put((slice(None), [0, 2, 0]), v[None, :]), small, values)
    # (r, 0) is written by values[0] and then values[2]: only the last reaches the output.
    assert got[1][0] == 0 and got[1][2] > 0
    assert np.all(got[0][:, [0, 2]] == 0) and np.all(got[0][:, 1] > 0)


def test_masked_fill_matches_torch_with_gradients(cube):
    small = cube[:2, :3, 0].copy()
    mask = np.array([[True, False, True]])
    got = check_gradients(lambda x: mj.masked_fill(x, mj.array(mask), -1.0), small)
    expected = torch_gradients(lambda t: t.masked_fill(torch.tensor(mask), -1.0), small)
    np.testing.assert_allclose(got[0], expected[0], rtol=0)
    assert_close(mj.array(small).masked_fill(mask, 5), torch.tensor(small).masked_fill(torch.tensor(mask), 5).numpy(),
                 rtol=0, dtype="float64")
    integers = np.arange(6).reshape(2, 3)
    assert_close(mj.masked_fill(mj.array(integers), mj.array(integers > 2), mj.array(np.int64(-1))),
                 np.where(integers > 2, -1, integers), dtype="int64")
    with pytest.raises(TypeError, match="boolean"):
        mj.masked_fill(mj.array(small), mj.array(np.ones((2, 3))), 1.0)
    with pytest.raises(ValueError, match="cannot be broadcast"):
        mj.masked_fill(mj.array(small), mj.array(np.ones((3, 3), bool)), 1.0)
    with pytest.raises(ValueError, match="0-dimensional"):
        mj.masked_fill(mj.array(small), mj.array(mask), mj.array(np.ones(3)))


def test_basic_slices_follow_pythons_rules_for_every_bound():
    """x[a:b:c, d:e:f] takes the fast path (meta_ops/basic_index.cc, Python's slice clamping rewritten in C++):
    every combination of negative, out-of-range and missing bounds and of positive and negative steps, against
    numpy, plus integers with a reversed slice."""
    values = np.arange(7 * 5).reshape(7, 5).astype(np.float32)
    x = mj.array(values)
    bounds, steps = [None, -9, -7, -3, -1, 0, 2, 5, 7, 9], [None, 1, 2, -1, -2, 3]
    for first, second, step in itertools.product(bounds, bounds, steps):
        key = (slice(first, second, step), slice(second, first, step))
        np.testing.assert_array_equal(x[key].numpy(), values[key], err_msg=str(key))
    for index in range(-7, 7):
        np.testing.assert_array_equal(x[index, ::-2].numpy(), values[index, ::-2])
    with pytest.raises(IndexError):
        x[7]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        x[::0]
