"""narrow, movedim, swapaxes, repeat, tile, diag, meshgrid (ops/layout.py), norm, linspace and full_like against
numpy, with gradients where they matter and clear errors."""
import numpy as np
import pytest

import metajit as mj
from gradient_check import check_gradients


@pytest.fixture
def cube(rng):
    return rng.standard_normal((3, 4, 5)).astype(np.float32)


def test_narrow(cube):
    x = mj.array(cube)
    np.testing.assert_array_equal(mj.narrow(x, 1, 1, 2).numpy(), cube[:, 1:3])
    np.testing.assert_array_equal(x.narrow(-1, -3, 3).numpy(), cube[..., 2:5])
    with pytest.raises(IndexError, match="do not fit dim 1 of extent 4"):
        mj.narrow(x, 1, 3, 2)


@pytest.mark.parametrize("source, destination", [(0, 2), (-1, 0), ((0, 1), (2, 0)), ([2], [1])])
def test_movedim_matches_numpy(cube, source, destination):
    np.testing.assert_array_equal(mj.movedim(mj.array(cube), source, destination).numpy(),
                                  np.moveaxis(cube, source, destination))


def test_movedim_errors_and_swapaxes(cube):
    x = mj.array(cube)
    with pytest.raises(ValueError, match="same length"):
        mj.movedim(x, (0, 1), 2)
    with pytest.raises(ValueError, match="repeats a dim"):
        mj.movedim(x, (0, 1), (2, 2))
    np.testing.assert_array_equal(x.swapaxes(0, 2).numpy(), np.swapaxes(cube, 0, 2))
    np.testing.assert_array_equal(mj.swapdims(x, 1, 2).numpy(), np.swapaxes(cube, 1, 2))


@pytest.mark.parametrize("repeats", [(2, 1, 3), (1, 1, 1), (2, 2, 1, 1), (3, 0, 1, 2)])
def test_repeat_matches_numpy_tile(cube, repeats):
    np.testing.assert_array_equal(mj.array(cube).repeat(*repeats).numpy(), np.tile(cube, repeats))


def test_tile_fills_missing_counts_and_repeat_needs_them(cube):
    np.testing.assert_array_equal(mj.tile(mj.array(cube), (2,)).numpy(), np.tile(cube, (1, 1, 2)))
    with pytest.raises(ValueError, match="at least 3"):
        mj.array(cube).repeat(2, 2)


def test_repeat_gradient_sums_the_copies(rng):
    check_gradients(lambda x: x.repeat(2, 3), rng.standard_normal((2, 3)))


@pytest.mark.parametrize("offset", [-2, 0, 1, 3])
def test_diag_both_ways(rng, offset):
    vector = rng.standard_normal(4).astype(np.float32)
    matrix = rng.standard_normal((4, 6)).astype(np.float32)
    np.testing.assert_array_equal(mj.diag(mj.array(vector), offset).numpy(), np.diag(vector, offset))
    np.testing.assert_array_equal(mj.array(matrix).diag(offset).numpy(), np.diag(matrix, offset))


def test_meshgrid_both_indexings(rng):
    a, b, c = np.arange(3), np.arange(4) * 10, np.arange(2) * 100
    for indexing in ("ij", "xy"):
        ours = mj.meshgrid(mj.array(a), mj.array(b), mj.array(c), indexing=indexing)
        for got, expected in zip(ours, np.meshgrid(a, b, c, indexing=indexing)):
            np.testing.assert_array_equal(got.numpy(), expected)
    with pytest.raises(ValueError, match="'ij' or 'xy'"):
        mj.meshgrid(mj.array(a), indexing="yx")


@pytest.mark.parametrize("p, order", [("fro", None), (2, None), (1, 1), (3, 3), (np.inf, np.inf),
                                      (-np.inf, -np.inf), (0, 0)])
def test_norm_matches_numpy(rng, p, order):
    data = rng.standard_normal((4, 6)).astype(np.float32)
    data[0, 0] = 0.0
    x = mj.array(data)
    np.testing.assert_allclose(mj.norm(x, p, dim=1).numpy(), np.linalg.norm(data, ord=order, axis=1), rtol=1e-5)
    np.testing.assert_allclose(x.norm(p, dim=(0, 1)).numpy(),
                               np.linalg.norm(data.ravel(), ord=order), rtol=1e-5)


def test_norm_gradient_and_zero_vector(rng):
    check_gradients(lambda x: mj.norm(x, dim=1), rng.standard_normal((3, 4)))
    check_gradients(lambda x: mj.norm(x, 3, dim=0), rng.standard_normal((3, 4)) + 3)
    zero = mj.array(np.zeros(3), requires_grad=True)
    np.testing.assert_array_equal(mj.grad(mj.norm(zero), zero).numpy(), np.zeros(3))
    with pytest.raises(TypeError, match="floating-point"):
        mj.norm(mj.array(np.arange(3)))


@pytest.mark.parametrize("p", [2, 1, 3])
def test_norm_of_values_with_nan_or_inf_is_nan_or_inf_as_numpy(p):
    data = np.array([[1.0, np.nan, 2.0], [0.0, 0.0, 0.0], [1.0, np.inf, 0.0]], np.float32)
    np.testing.assert_array_equal(mj.norm(mj.array(data), p, dim=1).numpy(),
                                  np.linalg.norm(data, ord=p, axis=1).astype(np.float32))


def test_linspace_and_full_like():
    np.testing.assert_allclose(mj.linspace(-1, 2, 7).numpy(), np.linspace(-1, 2, 7, dtype=np.float32))
    assert mj.linspace(0, 1, 3, dtype="float64").dtype == "float64"
    assert tuple(mj.linspace(0, 1, 0).shape) == (0,)
    like = mj.full_like(mj.zeros(2, 3, dtype="int32"), 7)
    assert like.dtype == "int32"
    np.testing.assert_array_equal(like.numpy(), np.full((2, 3), 7))


def test_select_unflatten(cube):
    x = mj.array(cube)
    np.testing.assert_array_equal(x.select(1, -1).numpy(), cube[:, -1])
    np.testing.assert_array_equal(mj.select(x, 0, 2).numpy(), cube[2])
    with pytest.raises(IndexError, match="out of range"):
        mj.select(x, 2, 5)
    np.testing.assert_array_equal(mj.unflatten(x, 2, (5, -1)).numpy(), cube.reshape(3, 4, 5, 1))
    with pytest.raises(ValueError, match="multiply to 6"):
        x.unflatten(1, (2, 3))


def test_repeat_interleave(cube):
    x = mj.array(cube)
    np.testing.assert_array_equal(mj.repeat_interleave(x, 3, 1).numpy(), np.repeat(cube, 3, axis=1))
    np.testing.assert_array_equal(x.repeat_interleave(2).numpy(), np.repeat(cube.ravel(), 2))
    np.testing.assert_array_equal(mj.repeat_interleave(x, [1, 0, 2], 0).numpy(), np.repeat(cube, [1, 0, 2], axis=0))
    with pytest.raises(ValueError, match="one per element"):
        mj.repeat_interleave(x, [1, 2], 0)


def test_repeat_interleave_gradient(rng):
    check_gradients(lambda x: mj.repeat_interleave(x, 3, 0), rng.standard_normal((2, 3)))


def test_take(cube):
    flat = cube.ravel()
    np.testing.assert_array_equal(mj.take(mj.array(cube), [[0, -1], [7, 59]]).numpy(), flat[[[0, -1], [7, 59]]])
    np.testing.assert_array_equal(mj.array(cube).take(mj.array(np.array([-60, 3]))).numpy(), flat[[-60, 3]])
    with pytest.raises(IndexError, match="out of range"):
        mj.take(mj.array(cube), [60])


@pytest.mark.parametrize("n, dim", [(1, -1), (2, 0), (3, 1), (0, 2)])
def test_diff_matches_numpy(cube, n, dim):
    np.testing.assert_allclose(mj.diff(mj.array(cube), n, dim).numpy(), np.diff(cube, n, axis=dim), rtol=1e-5,
                               atol=1e-5)


def test_diff_with_prepend_append_and_bools(cube):
    ones = np.ones((3, 4, 1), np.float32)
    np.testing.assert_allclose(mj.array(cube).diff(prepend=mj.array(ones), append=mj.array(ones)).numpy(),
                               np.diff(cube, prepend=ones, append=ones), rtol=1e-5, atol=1e-6)
    flags = np.array([True, True, False, True])
    np.testing.assert_array_equal(mj.diff(mj.array(flags)).numpy(), np.diff(flags))


def test_function_forms_of_methods(cube):
    x = mj.array(cube)
    np.testing.assert_array_equal(mj.permute(x, (2, 0, 1)).numpy(), cube.transpose(2, 0, 1))
    np.testing.assert_array_equal(mj.reshape(x, (12, 5)).numpy(), cube.reshape(12, 5))
    np.testing.assert_array_equal(mj.t(mj.array(cube[0])).numpy(), cube[0].T)
    np.testing.assert_array_equal(mj.clone(x).numpy(), cube)
    assert mj.numel(x) == 60 and len(mj.unbind(x, 2)) == 5


def test_cross_kron_baddbmm(rng):
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    np.testing.assert_allclose(mj.cross(mj.array(a), mj.array(b)).numpy(), np.cross(a, b), rtol=1e-10)
    np.testing.assert_allclose(mj.cross(mj.array(a.T), mj.array(b.T), dim=0).numpy(), np.cross(a, b).T, rtol=1e-10)
    with pytest.raises(ValueError, match="extent 3"):
        mj.cross(mj.array(a[:, :2]), mj.array(b[:, :2]))
    k1, k2 = rng.standard_normal((2, 3)), rng.standard_normal((4, 1, 2))
    np.testing.assert_allclose(mj.kron(mj.array(k1), mj.array(k2)).numpy(), np.kron(k1, k2), rtol=1e-10)
    base, b1, b2 = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 5)), rng.standard_normal((2, 5, 4))
    np.testing.assert_allclose(mj.baddbmm(mj.array(base), mj.array(b1), mj.array(b2), beta=0.5, alpha=2).numpy(),
                               0.5 * base + 2 * b1 @ b2, rtol=1e-10)
    check_gradients(lambda u, v: mj.cross(u, v), a, b)
