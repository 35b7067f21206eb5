"""mj.linalg's solvers and decompositions (solve, solve_triangular, inv, det, slogdet, cholesky, lstsq) and the
torch.* spellings (inverse, det, logdet, slogdet, cholesky, cholesky_solve, cholesky_inverse, triangular_solve)
against PyTorch: values and the gradients of a weighted sum of every float output (torch.autograd is the
reference), batched and single matrices, float32 (rtol 1e-4, atol 1e-4) and float64 (rtol 1e-9, atol 1e-9), and
PyTorch's errors for singular and non-positive-definite matrices."""
import numpy as np
import pytest

import metajit as mj

torch = pytest.importorskip("torch")

TOLERANCES = {"float32": (1e-4, 1e-4), "float64": (1e-9, 1e-9)}


def well_conditioned(rng, *shape):
    return rng.standard_normal(shape) + 3 * np.eye(shape[-1])


def positive_definite(rng, *shape):
    factor = rng.standard_normal(shape)
    return factor @ np.swapaxes(factor, -1, -2) + shape[-1] * np.eye(shape[-1])


def compare(ours, theirs, arrays, dtype, differentiable=None):
    """ours(*Vars) and theirs(*tensors): every output's values, then the gradients of the float inputs of
    sum(output * fixed weights) over the float outputs."""
    rtol, atol = TOLERANCES[dtype]
    arrays = [np.asarray(a, dtype=dtype) for a in arrays]
    differentiable = range(len(arrays)) if differentiable is None else differentiable
    our_inputs = [mj.array(a, requires_grad=index in differentiable) for index, a in enumerate(arrays)]
    their_inputs = [torch.tensor(a, requires_grad=index in differentiable) for index, a in enumerate(arrays)]
    got, expected = ours(*our_inputs), theirs(*their_inputs)
    got = list(got) if isinstance(got, tuple) else [got]
    expected = list(expected) if isinstance(expected, tuple) else [expected]
    our_loss, their_loss = 0, 0
    weights = np.random.default_rng(7)
    for index, (mine, reference) in enumerate(zip(got, expected)):
        assert tuple(mine.shape) == tuple(reference.shape), f"output {index}: shape"
        assert mine.dtype == str(reference.dtype).replace("torch.", ""), f"output {index}: dtype"
        np.testing.assert_allclose(mine.numpy(), reference.detach().numpy(), rtol=rtol, atol=atol,
                                   err_msg=f"output {index}")
        if reference.dtype.is_floating_point and reference.requires_grad:
            weight = weights.standard_normal(tuple(reference.shape)).astype(dtype)
            our_loss = our_loss + (mine * mj.array(weight)).sum()
            their_loss = their_loss + (reference * torch.tensor(weight)).sum()
    if not differentiable:
        return
    their_loss.backward()
    gradients = mj.grad(our_loss, [our_inputs[index] for index in differentiable])
    for index, gradient in zip(differentiable, gradients):
        np.testing.assert_allclose(gradient.numpy(), their_inputs[index].grad.numpy(), rtol=rtol, atol=atol,
                                   err_msg=f"gradient of input {index}")


@pytest.fixture
def rng():
    return np.random.default_rng(4)


DTYPES = ["float32", "float64"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("a_shape, b_shape, left", [
    ((4, 4), (4, 2), True), ((4, 4), (4,), True), ((3, 4, 4), (3, 4), True), ((2, 3, 3), (3, 5), True),
    ((3, 3), (1, 3, 2), True), ((4, 4), (2, 4), False), ((2, 3, 3), (2, 5, 3), False)])
def test_solve(rng, dtype, a_shape, b_shape, left):
    compare(lambda a, b: mj.linalg.solve(a, b, left=left), lambda a, b: torch.linalg.solve(a, b, left=left),
            [well_conditioned(rng, *a_shape), rng.standard_normal(b_shape)], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3), (1, 1)])
def test_inverse_and_determinants(rng, dtype, shape):
    matrix = well_conditioned(rng, *shape)
    compare(mj.linalg.inv, torch.linalg.inv, [matrix], dtype)
    compare(mj.inverse, torch.inverse, [matrix], dtype)
    compare(mj.linalg.det, torch.linalg.det, [matrix], dtype)
    compare(mj.det, torch.det, [matrix], dtype)
    compare(lambda a: tuple(mj.linalg.slogdet(a)), lambda a: tuple(torch.linalg.slogdet(a)), [matrix], dtype)
    compare(lambda a: tuple(mj.slogdet(a)), lambda a: tuple(torch.slogdet(a)), [matrix], dtype)
    compare(mj.logdet, torch.logdet, [positive_definite(rng, *shape)], dtype)


def test_det_of_a_singular_matrix_has_pytorchs_gradient():
    singular = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    compare(mj.linalg.det, torch.linalg.det, [singular], "float64")
    negative = np.array([[0.0, 1.0], [1.0, 0.0]])
    compare(mj.logdet, torch.logdet, [negative], "float64", differentiable=())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (3, 2, 2)])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_family(rng, dtype, shape, upper):
    matrix = positive_definite(rng, *shape)
    compare(lambda a: mj.linalg.cholesky(a, upper=upper), lambda a: torch.linalg.cholesky(a, upper=upper), [matrix],
            dtype)
    factor = np.linalg.cholesky(matrix)
    factor = np.swapaxes(factor, -1, -2) if upper else factor
    right = rng.standard_normal(shape[:-1] + (3,))
    compare(lambda b, f: mj.cholesky_solve(b, f, upper), lambda b, f: torch.cholesky_solve(b, f, upper),
            [right, factor], dtype)
    compare(lambda f: mj.cholesky_inverse(f, upper), lambda f: torch.cholesky_inverse(f, upper), [factor], dtype)


def test_deprecated_cholesky_takes_upper_positionally(rng):
    matrix = positive_definite(rng, 3, 3)
    with pytest.warns(UserWarning):
        expected = torch.cholesky(torch.tensor(matrix), True)
    np.testing.assert_allclose(mj.cholesky(mj.array(matrix), True).numpy(), expected.numpy(), rtol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper, left, unitriangular", [(True, True, False), (False, True, False),
                                                        (True, False, True), (False, False, False)])
def test_solve_triangular(rng, dtype, upper, left, unitriangular):
    matrix = well_conditioned(rng, 2, 4, 4)  # both triangles hold values: only one may be read
    right = rng.standard_normal((2, 4, 3) if left else (2, 3, 4))
    compare(lambda a, b: mj.linalg.solve_triangular(a, b, upper=upper, left=left, unitriangular=unitriangular),
            lambda a, b: torch.linalg.solve_triangular(a, b, upper=upper, left=left, unitriangular=unitriangular),
            [matrix, right], dtype)


@pytest.mark.filterwarnings("ignore:torch.triangular_solve is deprecated")
@pytest.mark.parametrize("transpose", [False, True])
def test_triangular_solve(rng, transpose):
    matrix, right = well_conditioned(rng, 4, 4), rng.standard_normal((4, 2))
    compare(lambda b, a: tuple(mj.triangular_solve(b, a, False, transpose)),
            lambda b, a: tuple(torch.triangular_solve(b, a, False, transpose)), [right, matrix], "float64")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("a_shape, b_shape", [((6, 3), (6, 2)), ((2, 5, 3), (2, 5, 4)), ((3, 5), (3, 2)),
                                              ((6, 3), (6,))])
@pytest.mark.parametrize("driver", [None, "gels", "gelsd", "gelss"])
def test_lstsq(rng, dtype, a_shape, b_shape, driver):
    if driver == "gels" and a_shape[-2] < a_shape[-1]:
        pytest.skip("gels assumes full column rank")
    compare(lambda a, b: tuple(mj.linalg.lstsq(a, b, driver=driver)),
            lambda a, b: tuple(torch.linalg.lstsq(a, b, driver=driver)),
            [rng.standard_normal(a_shape), rng.standard_normal(b_shape)], dtype)


def test_singular_and_indefinite_matrices_raise_pytorchs_errors():
    singular = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]], np.float32)
    stacked = np.stack([np.eye(3, dtype=np.float32), singular])
    indefinite = np.array([[1.0, 2.0], [2.0, 1.0]], np.float32)
    cases = [(lambda m: m.linalg.inv(singular), "inv"), (lambda m: m.linalg.inv(stacked), "inv"),
             (lambda m: m.linalg.solve(stacked, np.ones((2, 3, 1), np.float32)), "solve"),
             (lambda m: m.linalg.solve(singular, np.ones(3, np.float32)), "solve"),
             (lambda m: m.linalg.cholesky(indefinite), "cholesky"),
             (lambda m: m.linalg.cholesky(np.stack([np.eye(2, dtype=np.float32), indefinite])), "cholesky")]
    for call, _ in cases:
        with pytest.raises(torch.linalg.LinAlgError) as theirs:
            call(_Namespace(torch, torch.tensor))
        with pytest.raises(mj.linalg.LinAlgError) as ours:
            call(_Namespace(mj, mj.array))
        assert str(ours.value) == str(theirs.value)
        assert isinstance(ours.value, RuntimeError)


class _Namespace:
    """torch or mj with array arguments converted, so one call is written once for both."""

    def __init__(self, module, convert):
        self.linalg = _Converting(module.linalg, convert)


class _Converting:
    def __init__(self, namespace, convert):
        self.namespace, self.convert = namespace, convert

    def __getattr__(self, name):
        function = getattr(self.namespace, name)
        return lambda *arrays: function(*(self.convert(a) for a in arrays))


def test_shape_and_dtype_errors_match_pytorch():
    for call, message in [(lambda m, t: m.linalg.inv(t(np.ones((2, 3), np.float32))),
                           "linalg.inv: A must be batches of square matrices, but they are 2 by 3 matrices"),
                          (lambda m, t: m.linalg.det(t(np.ones(3, np.float32))),
                           "linalg.det: The input tensor A must have at least 2 dimensions."),
                          (lambda m, t: m.linalg.inv(t(np.ones((3, 3), np.int64))),
                           "linalg.inv: Expected a floating point or complex tensor as input. Got Long"),
                          (lambda m, t: m.linalg.inv(t(np.eye(2, dtype=np.float16))),
                           "linalg.inv: Low precision dtypes not supported. Got Half"),
                          (lambda m, t: m.linalg.solve(t(np.eye(3, dtype=np.float32)), t(np.ones(4, np.float32))),
                           "linalg.solve: Incompatible shapes of A and B for the equation AX = B (3x3 and 4x1)"),
                          (lambda m, t: m.linalg.lstsq(t(np.ones((3, 2), np.float32)), t(np.ones((4, 1), np.float32))),
                           "torch.linalg.lstsq: input.size(-2) should match other.size(-2)")]:
        with pytest.raises(RuntimeError) as theirs:
            call(torch, torch.tensor)
        with pytest.raises(RuntimeError) as ours:
            call(mj, mj.array)
        assert str(ours.value) == str(theirs.value) == message


def test_unlisted_linalg_names_say_why():
    with pytest.raises(AttributeError, match="torch.linalg.svd"):
        mj.linalg.svd  # noqa: B018


@pytest.mark.parametrize("name", ["inv", "solve", "solve_triangular", "cholesky", "cholesky_solve", "det", "slogdet",
                                  "lstsq_tall", "lstsq_wide"])
def test_second_derivatives(rng, name):
    """mj.grad's results are differentiable again: the second derivative of each solver (through a weighted sum
    of its first gradient) is torch.autograd's with create_graph=True, float64 at rtol 1e-9 / atol 1e-9."""
    square, right = well_conditioned(rng, 3, 3), rng.standard_normal((3, 2))
    factor = np.linalg.cholesky(positive_definite(rng, 3, 3))
    cases = {"inv": (lambda m, a: m.linalg.inv(a), [square]),
             "solve": (lambda m, a, b: m.linalg.solve(a, b), [square, right]),
             "solve_triangular": (lambda m, a, b: m.linalg.solve_triangular(a, b, upper=True), [square, right]),
             "cholesky": (lambda m, a: m.linalg.cholesky(a), [positive_definite(rng, 3, 3)]),
             "cholesky_solve": (lambda m, f, b: m.cholesky_solve(b, f), [factor, right]),
             "det": (lambda m, a: m.linalg.det(a), [square]),
             "slogdet": (lambda m, a: m.linalg.slogdet(a)[1], [square]),
             "lstsq_tall": (lambda m, a, b: m.linalg.lstsq(a, b).solution,
                            [rng.standard_normal((5, 3)), rng.standard_normal((5, 2))]),
             "lstsq_wide": (lambda m, a, b: m.linalg.lstsq(a, b).solution,
                            [rng.standard_normal((3, 5)), rng.standard_normal((3, 2))])}
    call, arrays = cases[name]
    weight = rng.standard_normal(arrays[0].shape)
    ours = [mj.array(a, requires_grad=True) for a in arrays]
    first, = mj.grad(call(mj, *ours).sum(), [ours[0]])
    second, = mj.grad((first * mj.array(weight)).sum(), [ours[0]])
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    their_first, = torch.autograd.grad(call(torch, *theirs).sum(), [theirs[0]], create_graph=True)
    their_second, = torch.autograd.grad((their_first * torch.tensor(weight)).sum(), [theirs[0]])
    np.testing.assert_allclose(first.numpy(), their_first.detach().numpy(), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(second.numpy(), their_second.numpy(), rtol=1e-9, atol=1e-9)


def test_the_solvers_are_also_var_methods():
    """x.det(), x.inverse(), b.cholesky_solve(L), ...: torch.Tensor's method spellings, against PyTorch's."""
    a = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
    b = np.array([[1.0, 0.0], [2.0, 1.0], [0.5, -1.0]])
    x, t = mj.array(a), torch.tensor(a)
    lower, torch_lower = x.cholesky(), torch.linalg.cholesky(t)
    pairs = [(x.det(), t.det()), (x.logdet(), t.logdet()), (x.inverse(), t.inverse()), (lower, torch_lower),
             (x.slogdet()[1], t.slogdet()[1]), (lower.cholesky_inverse(), torch.cholesky_inverse(torch_lower)),
             (mj.array(b).cholesky_solve(lower), torch.cholesky_solve(torch.tensor(b), torch_lower)),
             (mj.array(b).triangular_solve(lower, upper=False)[0],
              torch.linalg.solve_triangular(torch_lower, torch.tensor(b), upper=False))]
    for ours, theirs in pairs:
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-9, atol=1e-12)
