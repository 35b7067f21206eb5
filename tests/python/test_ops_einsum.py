"""einsum against numpy.einsum over PyTorch's notation (explicit and implicit outputs, '...', diagonals, several
operands, operands as one list), gradients against finite differences, lowering of product-shaped contractions
to oneDNN, and clear errors."""
import numpy as np
import pytest

import metajit as mj
from conftest import cpu_backend
from gradient_check import check_gradients

CASES = [
    ("ij,jk->ik", [(5, 6), (6, 7)]),
    ("ij,kj->ik", [(5, 6), (7, 6)]),
    ("bij,bjk->bik", [(3, 4, 5), (3, 5, 2)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("...ij,...jk->...ik", [(2, 3, 4, 5), (5, 6)]),
    ("...ij,...jk", [(3, 1, 4, 5), (2, 5, 6)]),
    ("ij,jk", [(4, 5), (5, 3)]),            # implicit output: ik
    ("ba,ca", [(4, 5), (3, 5)]),            # implicit output in alphabetical order: bc
    ("i,i->", [(7,), (7,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("ii->i", [(5, 5)]),
    ("ii", [(5, 5)]),                       # trace
    ("bii->b", [(2, 4, 4)]),
    ("ij,jk,kl->il", [(3, 4), (4, 5), (5, 2)]),
    ("ab,ab,ab->a", [(3, 4), (3, 4), (3, 4)]),
    ("Ab,bC->AC", [(3, 4), (4, 2)]),
    (" ij , jk -> ik ", [(2, 3), (3, 2)]),
]


@pytest.mark.parametrize("equation, shapes", CASES)
def test_matches_numpy(rng, equation, shapes):
    arrays = [rng.standard_normal(shape).astype(np.float32) for shape in shapes]
    result = mj.einsum(equation, *[mj.array(array) for array in arrays])
    expected = np.einsum(equation.replace(" ", ""), *[array.astype(np.float64) for array in arrays])
    assert tuple(result.shape) == expected.shape
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-4, atol=1e-4)


def test_operands_as_one_list_and_integer_dtypes(rng):
    a, b = rng.integers(-5, 5, (3, 4)), rng.integers(-5, 5, (4, 2))
    result = mj.einsum("ij,jk->ik", [mj.array(a), mj.array(b)])
    assert result.dtype == "int64"
    np.testing.assert_array_equal(result.numpy(), a @ b)


@pytest.mark.parametrize("equation, shapes", [("bij,bjk->bik", [(2, 3, 4), (2, 4, 3)]), ("ii->i", [(4, 4)]),
                                              ("ij,jk,kl->il", [(2, 3), (3, 2), (2, 3)]),
                                              ("...d,kd->...k", [(2, 3, 4), (5, 4)])])
def test_gradients_match_finite_differences(rng, equation, shapes):
    arrays = [rng.standard_normal(shape) for shape in shapes]
    check_gradients(lambda *inputs: mj.einsum(equation, *inputs), *arrays)


@cpu_backend
def test_product_shaped_contractions_are_library_calls(rng):
    a = rng.standard_normal((4, 2, 64, 32)).astype(np.float32)
    b = rng.standard_normal((4, 2, 48, 32)).astype(np.float32)
    mj.reset_stats()
    result = mj.einsum("bhqd,bhkd->bhqk", mj.array(a), mj.array(b)).numpy()
    assert mj.stats()["library_calls"] == 1
    np.testing.assert_allclose(result, np.einsum("bhqd,bhkd->bhqk", a, b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("equation, shapes, message", [
    ("ij,jk->ik", [(2, 3)], "names 2 operand"),
    ("ij,jk->ik", [(2, 3), (4, 5)], "extent 3 in one operand and 4"),
    ("ij->iz", [(2, 3)], "'z' does not appear"),
    ("ij->ii", [(2, 3)], "appears more than once"),
    ("ijk->i", [(2, 3)], "name 3 dims"),
    ("i1->i", [(2, 3)], "invalid subscript '1'"),
    ("...ij->ij", [(4, 2, 3)], "drops the '...'"),
    ("ij->i->j", [(2, 3)], "more than one '->'"),
    ("ii->i", [(2, 3)], "repeated with extents 2 and 3"),
])
def test_errors_name_the_problem(equation, shapes, message):
    with pytest.raises(ValueError, match=message):
        mj.einsum(equation, *[mj.array(np.zeros(shape, np.float32)) for shape in shapes])
