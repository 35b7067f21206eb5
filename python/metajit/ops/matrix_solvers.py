"""Matrix solvers and decompositions with gradients: solve, solve_triangular, inverse, det, slogdet, logdet,
cholesky, cholesky_solve, cholesky_inverse, triangular_solve and lstsq (mj.linalg and their torch.* names).

Why the host: these are sequential pivoting algorithms (LU, Cholesky, QR/SVD) with no reindex / reduce form that
would fuse or parallelise well, so the forward computes its inputs (a sync) and calls numpy's LAPACK at the host
boundary, as ops/host.py does for data-dependent results. Each is an mj.Function: its gradient is written in lazy
ops (matrix products and the solvers here again), so it fuses with the rest of the backward graph. A backward
that needs the forward's result calls the solver again rather than saving it: the saved value would have no
history, and a second derivative through it would be silently wrong (det's gradient at an exactly singular matrix
is still such a constant: first-order only there; recomputing costs one more LAPACK call per backward).

What this file must not do: loop over matrix elements in Python on the normal path (only the error path walks a
matrix, to name the failing pivot or minor as LAPACK's info does; lstsq loops over the matrices of a batch
because numpy's lstsq takes one), or hide a failed factorisation: a singular matrix raises LinAlgError with
PyTorch's message."""
import collections

import numpy as np

from .. import _core, array
from .._function import Function
from .tensor import _as_var, tril, triu

__all__ = ["det", "logdet", "slogdet", "inverse", "cholesky", "cholesky_solve", "cholesky_inverse",
           "triangular_solve"]

SlogdetResult = collections.namedtuple("slogdet", ["sign", "logabsdet"])
LstsqResult = collections.namedtuple("lstsq", ["solution", "residuals", "rank", "singular_values"])
TriangularSolveResult = collections.namedtuple("triangular_solve", ["solution", "cloned_coefficient"])

_FLOAT_DTYPES = ("float32", "float64")
_TORCH_DTYPE_NAMES = {"int64": "Long", "int32": "Int", "int8": "Char", "uint8": "Byte", "bool": "Bool",
                      "float16": "Half"}


class LinAlgError(RuntimeError):
    """A matrix the solver cannot handle (singular, not positive-definite): PyTorch's torch.linalg.LinAlgError,
    also a RuntimeError."""


# ------------------------------------------------------------------------------------------------ checks
def _check_square(function, matrix, at_least=2):
    matrix = _as_var(matrix)
    if matrix.ndim < at_least:
        raise RuntimeError(f"{function}: The input tensor A must have at least 2 dimensions.")
    if matrix.shape[-1] != matrix.shape[-2]:
        raise RuntimeError(f"{function}: A must be batches of square matrices, but they are {matrix.shape[-2]} by "
                           f"{matrix.shape[-1]} matrices")
    _check_float(function, matrix)
    return matrix


def _check_float(function, matrix):
    if matrix.dtype == "float16":
        raise RuntimeError(f"{function}: Low precision dtypes not supported. Got Half")
    if matrix.dtype not in _FLOAT_DTYPES:
        name = _TORCH_DTYPE_NAMES.get(matrix.dtype, matrix.dtype)
        raise RuntimeError(f"{function}: Expected a floating point or complex tensor as input. Got {name}")


def _batch_prefix(values, index):
    """PyTorch's "(Batch element k): " for a failure in a batch (its flat index), nothing for one matrix."""
    return "" if values.ndim == 2 else f"(Batch element {index}): "


def _first_zero_pivot(matrix):
    """LAPACK getrf's info for one square matrix: the 1-based column of the first exactly-zero pivot of LU with
    partial pivoting (0 if none). Only called after numpy reported the matrix singular, to name the element."""
    work = np.array(matrix, dtype=np.float64)
    size = work.shape[0]
    for column in range(size):
        pivot = column + int(np.argmax(np.abs(work[column:, column])))
        if work[pivot, column] == 0:
            return column + 1
        work[[column, pivot]] = work[[pivot, column]]
        work[column + 1:] -= np.outer(work[column + 1:, column] / work[column, column], work[column])
    return 0


def _singular_element(values):
    """(flat batch index, info) of the first singular matrix in a stack."""
    flat = values.reshape(-1, values.shape[-2], values.shape[-1])
    for index, matrix in enumerate(flat):
        info = _first_zero_pivot(matrix)
        if info:
            return index, info
    return 0, values.shape[-1]


def _solve_on_host(matrix, right, function, blamed):
    """numpy's LAPACK solve of matrix @ x = right; a singular matrix raises PyTorch's error, naming the batch
    element of `blamed` (the matrix the user passed: for cholesky_solve its factor)."""
    try:
        return np.linalg.solve(matrix, right)
    except np.linalg.LinAlgError:
        index, _ = _singular_element(blamed)
        raise LinAlgError(f"{function}: {_batch_prefix(blamed, index)}The solver failed because the input matrix "
                          "is singular.") from None


def _matrix_transpose(value):
    return value.transpose(-1, -2)


def _broadcast_batches(function, first, second):
    """Both operands broadcast to one batch shape (their last two dims kept), as PyTorch's solvers do; the
    broadcast is a lazy op, so the gradients sum back over the broadcast dims."""
    try:
        batch = list(np.broadcast_shapes(tuple(first.shape[:-2]), tuple(second.shape[:-2])))
    except ValueError:
        raise RuntimeError(f"{function}: the batch dimensions of {list(first.shape)} and {list(second.shape)} "
                           "cannot be broadcast together") from None
    if list(first.shape[:-2]) != batch:
        first = first.broadcast_to(batch + list(first.shape[-2:]))
    if list(second.shape[:-2]) != batch:
        second = second.broadcast_to(batch + list(second.shape[-2:]))
    return first, second


# ------------------------------------------------------------------------------------------------ inverse
class _Inverse(Function):
    @staticmethod
    def forward(ctx, matrix):
        values = matrix.numpy()
        try:
            result = np.linalg.inv(values)
        except np.linalg.LinAlgError:
            index, info = _singular_element(values)
            raise LinAlgError(f"linalg.inv: {_batch_prefix(values, index)}The diagonal element {info} is zero, the "
                              "inversion could not be completed because the input matrix is singular.") from None
        ctx.save_for_backward(matrix)
        return array(result.astype(values.dtype, copy=False))

    @staticmethod
    def backward(ctx, grad):
        matrix, = ctx.saved_tensors
        transposed = _matrix_transpose(_Inverse.apply(matrix))
        return -(transposed @ grad @ transposed)


def inverse(input):
    """The inverse of a square matrix (or a batch of them), as torch.inverse / torch.linalg.inv; a singular
    matrix raises LinAlgError naming the zero pivot."""
    return _Inverse.apply(_check_square("linalg.inv", input))


# ------------------------------------------------------------------------------------------------ solve
class _Solve(Function):
    """A X = B for same-batch A [..., n, n] and B [..., n, k]."""

    @staticmethod
    def forward(ctx, matrix, right, function):
        values = matrix.numpy()
        result = _solve_on_host(values, right.numpy(), function, values)
        ctx.save_for_backward(matrix, right)
        ctx.function = function
        return array(result.astype(values.dtype, copy=False))

    @staticmethod
    def backward(ctx, grad):
        matrix, right = ctx.saved_tensors
        solution = _Solve.apply(matrix, right, ctx.function)
        grad_right = _Solve.apply(_matrix_transpose(matrix), grad, ctx.function)
        return -(grad_right @ _matrix_transpose(solution)), grad_right, None


def _is_vector_right_side(matrix, right):
    """PyTorch's rule: B is a (batch of) vector(s) when it is 1-D or has A's shape without the last dim."""
    return right.ndim == 1 or (right.ndim == matrix.ndim - 1 and list(right.shape) == list(matrix.shape[:-1]))


def solve(A, B, *, left=True):
    """X with A X = B (left=True) or X A = B, as torch.linalg.solve; batch dims broadcast, and B may be a
    vector (1-D, or A's shape without the last dim)."""
    function = "torch.linalg.solve"
    A = _check_square("linalg.solve", A)
    B = _as_var(B)
    _check_float("linalg.solve", B)
    if A.dtype != B.dtype:
        raise RuntimeError(f"linalg.solve: Expected A and B to have the same dtype, but found A of type {A.dtype} "
                           f"and B of type {B.dtype} instead")
    vector = _is_vector_right_side(A, B)
    right = B.unsqueeze(-1) if vector else B
    size = A.shape[-1]
    if left and right.shape[-2] != size or not left and right.shape[-1] != size:
        shape = f"{right.shape[-2]}x{right.shape[-1]}"
        equation = "AX = B" if left else "XA = B"
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation {equation} "
                           f"({size}x{size} and {shape})")
    if not left:
        A, right = _matrix_transpose(A), _matrix_transpose(right)
    A, right = _broadcast_batches("linalg.solve", A, right)
    result = _Solve.apply(A, right, function)
    if not left:
        result = _matrix_transpose(result)
    return result.squeeze(-1) if vector else result


# ---------------------------------------------------------------------------------------- solve_triangular
def _triangle(matrix, upper, unitriangular):
    """The triangle the solver reads (the other one is ignored, as LAPACK's trtrs does), unit diagonal if asked."""
    part = np.triu(matrix) if upper else np.tril(matrix)
    if unitriangular:
        size = matrix.shape[-1]
        part = part.copy()
        part[..., np.arange(size), np.arange(size)] = 1
    return part


class _SolveTriangular(Function):
    """A X = B for a triangular A [..., n, n] (same batch as B [..., n, k])."""

    @staticmethod
    def forward(ctx, matrix, right, upper, unitriangular):
        values = _triangle(matrix.numpy(), upper, unitriangular)
        try:
            result = np.linalg.solve(values, right.numpy())
        except np.linalg.LinAlgError:
            index, _ = _singular_element(values)
            raise LinAlgError(f"linalg.solve_triangular: {_batch_prefix(values, index)}The solver failed because the "
                              "input matrix is singular.") from None
        ctx.save_for_backward(matrix, right)
        ctx.upper, ctx.unitriangular = upper, unitriangular
        return array(result.astype(values.dtype, copy=False))

    @staticmethod
    def backward(ctx, grad):
        matrix, right = ctx.saved_tensors
        solution = _SolveTriangular.apply(matrix, right, ctx.upper, ctx.unitriangular)
        grad_right = _SolveTriangular.apply(_matrix_transpose(matrix), grad, not ctx.upper, ctx.unitriangular)
        grad_matrix = -(grad_right @ _matrix_transpose(solution))
        grad_matrix = triu(grad_matrix, 1 if ctx.unitriangular else 0) if ctx.upper else \
            tril(grad_matrix, -1 if ctx.unitriangular else 0)
        return grad_matrix, grad_right, None, None


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    """X with A X = B (left) or X A = B for a triangular A, as torch.linalg.solve_triangular: only A's upper
    (upper=True) or lower triangle is read, its diagonal taken as ones when unitriangular."""
    A = _check_square("linalg.solve_triangular", A)
    B = _as_var(B)
    if B.ndim < 2:
        raise RuntimeError("linalg.solve_triangular: The input tensor B must have at least 2 dimensions.")
    size = A.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != size:
        raise RuntimeError(f"linalg.solve_triangular: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({size}x{size} and {B.shape[-2]}x{B.shape[-1]})")
    if not left:  # X A = B is A^T X^T = B^T, and A^T's triangle is the other one
        A, B, upper = _matrix_transpose(A), _matrix_transpose(B), not upper
    A, B = _broadcast_batches("linalg.solve_triangular", A, B)
    result = _SolveTriangular.apply(A, B, bool(upper), bool(unitriangular))
    return result if left else _matrix_transpose(result)


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False):
    """(solution, cloned_coefficient) of A X = b (A^T X = b with transpose), as the deprecated
    torch.triangular_solve."""
    A = _as_var(A)
    coefficient = _matrix_transpose(A) if transpose else A
    solution = solve_triangular(coefficient, b, upper=upper != bool(transpose), unitriangular=unitriangular)
    return TriangularSolveResult(solution, A * 1)


# ------------------------------------------------------------------------------------------------ determinants
def _determinant_gradient(values, determinant):
    """det(A) A^-T, the cofactor matrix, per matrix of a stack; 0 where the determinant is exactly 0, which is what
    PyTorch's first-order gradient gives there (its LU solve of det * I with det = 0)."""
    flat = values.reshape(-1, values.shape[-2], values.shape[-1])
    flat_determinant = np.asarray(determinant).reshape(-1)
    result = np.zeros_like(flat)
    invertible = flat_determinant != 0
    if invertible.any():
        inverse_transposed = np.swapaxes(np.linalg.inv(flat[invertible]), -1, -2)
        result[invertible] = flat_determinant[invertible][:, None, None] * inverse_transposed
    return result.reshape(values.shape)


class _Determinant(Function):
    @staticmethod
    def forward(ctx, matrix):
        ctx.values = matrix.numpy()
        ctx.determinant = np.asarray(np.linalg.det(ctx.values), dtype=ctx.values.dtype)
        ctx.save_for_backward(matrix)
        return array(ctx.determinant)

    @staticmethod
    def backward(ctx, grad):
        matrix, = ctx.saved_tensors
        if np.all(ctx.determinant != 0):
            # det(A) A^-T in ops over recomputed outputs, so the gradient is differentiable again.
            determinant = _Determinant.apply(matrix).unsqueeze(-1).unsqueeze(-1)
            return grad.unsqueeze(-1).unsqueeze(-1) * determinant * _matrix_transpose(_Inverse.apply(matrix))
        return grad.unsqueeze(-1).unsqueeze(-1) * array(_determinant_gradient(ctx.values, ctx.determinant))


def det(A):
    """The determinant of a square matrix (or batch), as torch.det / torch.linalg.det. Its gradient is
    det(A) A^-T, and 0 at an exactly singular matrix, as PyTorch's first-order gradient."""
    return _Determinant.apply(_check_square("linalg.det", A))


class _LogAbsDeterminant(Function):
    @staticmethod
    def forward(ctx, matrix):
        sign, logarithm = np.linalg.slogdet(matrix.numpy())
        ctx.save_for_backward(matrix)
        dtype = matrix.dtype
        return array(np.asarray(sign, dtype=dtype)), array(np.asarray(logarithm, dtype=dtype))

    @staticmethod
    def backward(ctx, grad_sign, grad_logarithm):
        matrix, = ctx.saved_tensors
        return grad_logarithm.unsqueeze(-1).unsqueeze(-1) * _matrix_transpose(inverse(matrix))


def slogdet(A):
    """(sign, logabsdet) of the determinant, as torch.linalg.slogdet; the gradient flows through logabsdet."""
    sign, logarithm = _LogAbsDeterminant.apply(_check_square("linalg.slogdet", A))
    return SlogdetResult(sign.detach(), logarithm)


def logdet(input):
    """log(det(A)): NaN where the determinant is negative, -inf where it is 0, as torch.logdet."""
    sign, logarithm = slogdet(input)
    return _core.where(sign < 0, _core.constant([], logarithm.dtype, float("nan")), logarithm)


# ------------------------------------------------------------------------------------------------ Cholesky
def _first_failing_minor(values):
    """(flat batch index, order) of the first leading minor that is not positive-definite."""
    flat = values.reshape(-1, values.shape[-2], values.shape[-1])
    for index, matrix in enumerate(flat):
        for order in range(1, matrix.shape[0] + 1):
            try:
                np.linalg.cholesky(matrix[:order, :order])
            except np.linalg.LinAlgError:
                return index, order
    return 0, values.shape[-1]


class _Cholesky(Function):
    @staticmethod
    def forward(ctx, matrix, function):
        values = matrix.numpy()
        try:
            factor = np.linalg.cholesky(values)  # reads the lower triangle, as PyTorch does
        except np.linalg.LinAlgError:
            index, order = _first_failing_minor(np.tril(values) + np.swapaxes(np.tril(values, -1), -1, -2))
            raise LinAlgError(f"{function}: {_batch_prefix(values, index)}The factorization could not be completed "
                              f"because the input is not positive-definite (the leading minor of order {order} is "
                              "not positive-definite).") from None
        ctx.save_for_backward(matrix)
        ctx.function = function
        return array(factor.astype(values.dtype, copy=False))

    @staticmethod
    def backward(ctx, grad):
        # PyTorch's cholesky_backward (Murray 2016): gA = L^-T Phi(L^T gL) L^-1, symmetrised.
        matrix, = ctx.saved_tensors
        factor = _Cholesky.apply(matrix, ctx.function)
        product = tril(_matrix_transpose(factor) @ grad)
        product = 0.5 * (product + _matrix_transpose(tril(product, -1)))
        inverse_factor = inverse(factor)
        return _matrix_transpose(inverse_factor) @ product @ inverse_factor, None


def _cholesky(A, upper, function):
    factor = _Cholesky.apply(_check_square(function, A), function)
    return _matrix_transpose(factor) if upper else factor


def linalg_cholesky(A, *, upper=False):
    """L with A = L L^T (or U with A = U^T U when upper), as torch.linalg.cholesky; only A's lower triangle is
    read; a matrix that is not positive-definite raises LinAlgError naming the failing leading minor."""
    return _cholesky(A, upper, "linalg.cholesky")


def cholesky(input, upper=False):
    """The deprecated torch.cholesky (positional upper): torch.linalg.cholesky's factor."""
    return _cholesky(input, upper, "cholesky")


class _CholeskySolve(Function):
    """(L L^T) X = B (or U^T U X = B) for same-batch B [..., n, k] and L [..., n, n]: the forward reads only L's
    triangle; the gradient w.r.t. L is PyTorch's (a full matrix: -(G X^T + X G^T) L)."""

    @staticmethod
    def forward(ctx, right, factor, upper):
        factor_values = _triangle(factor.numpy(), upper, False)
        matrix = np.swapaxes(factor_values, -1, -2) @ factor_values if upper else \
            factor_values @ np.swapaxes(factor_values, -1, -2)
        result = _solve_on_host(matrix, right.numpy(), "cholesky_solve", factor_values)
        ctx.save_for_backward(right, factor)
        ctx.upper = upper
        return array(result.astype(factor_values.dtype, copy=False))

    @staticmethod
    def backward(ctx, grad):
        right, factor = ctx.saved_tensors
        solution = _CholeskySolve.apply(right, factor, ctx.upper)
        grad_right = _CholeskySolve.apply(grad, factor, ctx.upper)
        common = grad_right @ _matrix_transpose(solution)
        common = common + _matrix_transpose(common)
        grad_factor = -(factor @ common) if ctx.upper else -(common @ factor)
        return grad_right, grad_factor, None


def cholesky_solve(B, L, upper=False):
    """X with (L L^T) X = B given the Cholesky factor L (or U^T U = A with upper), as torch.cholesky_solve."""
    L = _check_square("cholesky_solve", L)
    B = _as_var(B)
    if B.ndim < 2 or B.shape[-2] != L.shape[-1]:
        raise RuntimeError(f"cholesky_solve: Incompatible matrix sizes for cholesky_solve: each A matrix is "
                           f"{L.shape[-1]} by {L.shape[-1]} but each b matrix is "
                           f"{B.shape[-2] if B.ndim >= 2 else 1} by {B.shape[-1]}")
    B, L = _broadcast_batches("cholesky_solve", B, L)
    return _CholeskySolve.apply(B, L, bool(upper))


def cholesky_inverse(L, upper=False):
    """(L L^T)^-1 (or (U^T U)^-1) from the Cholesky factor, as torch.cholesky_inverse."""
    L = _check_square("cholesky_inverse", L)
    matrix = _matrix_transpose(L) @ L if upper else L @ _matrix_transpose(L)
    return inverse(matrix)


# ------------------------------------------------------------------------------------------------ lstsq
_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


class _LeastSquares(Function):
    """The minimum-norm least-squares solution X = pinv(A) B for same-batch A [..., m, n], B [..., m, k]. The
    gradient is that of the normal equations for A of full rank (X = (A^T A)^-1 A^T B when m >= n, else
    A^T (A A^T)^-1 B), written with solve, so it is differentiable again."""

    @staticmethod
    def forward(ctx, matrix, right, rcond):
        values, targets = matrix.numpy(), right.numpy()
        rows, columns = values.shape[-2:]
        flat_values = values.reshape(-1, rows, columns)
        flat_targets = targets.reshape(-1, rows, targets.shape[-1])
        solutions, ranks, singular_values = [], [], []
        for one_matrix, one_target in zip(flat_values, flat_targets):
            solution, _, rank, singular = np.linalg.lstsq(one_matrix, one_target, rcond=rcond)
            solutions.append(solution)
            ranks.append(rank)
            singular_values.append(singular)
        batch = list(values.shape[:-2])
        ctx.ranks = np.array(ranks, dtype=np.int64).reshape(batch)
        ctx.singular_values = np.array(singular_values, dtype=values.dtype).reshape(batch + [min(rows, columns)])
        ctx.save_for_backward(matrix, right)
        return array(np.array(solutions, dtype=values.dtype).reshape(batch + [columns, targets.shape[-1]]))

    @staticmethod
    def backward(ctx, grad):
        matrix, right = ctx.saved_tensors
        transposed = _matrix_transpose(matrix)
        function = "torch.linalg.lstsq"
        if matrix.shape[-2] >= matrix.shape[-1]:
            normal = transposed @ matrix
            solution = _Solve.apply(normal, transposed @ right, function)
            weighted = _Solve.apply(normal, grad, function)                      # (A^T A)^-1 G
            grad_matrix = (right - matrix @ solution) @ _matrix_transpose(weighted) \
                - matrix @ weighted @ _matrix_transpose(solution)
            return grad_matrix, matrix @ weighted, None
        normal = matrix @ transposed
        multiplier = _Solve.apply(normal, right, function)                       # X = A^T multiplier
        weighted = _Solve.apply(normal, matrix @ grad, function)                 # (A A^T)^-1 A G
        grad_matrix = multiplier @ _matrix_transpose(grad) - weighted @ _matrix_transpose(multiplier) @ matrix \
            - multiplier @ _matrix_transpose(weighted) @ matrix
        return grad_matrix, weighted, None


def lstsq(A, B, rcond=None, *, driver=None):
    """(solution, residuals, rank, singular_values) of min ||A X - B||, as torch.linalg.lstsq (CPU, default
    driver 'gelsy'). The solution is the minimum-norm one (numpy's SVD-based solver, which 'gelsy' agrees with
    up to rounding); residuals are filled for 'gels', 'gelsd' and 'gelss' when m > n and every matrix has full
    rank, rank for all but 'gels', singular values for 'gelsd' and 'gelss', as PyTorch's."""
    A, B = _as_var(A), _as_var(B)
    if driver is None:
        driver = "gelsy"
    if driver not in _DRIVERS:
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    if A.ndim < 2:
        raise RuntimeError("torch.linalg.lstsq: input must have at least 2 dimensions.")
    _check_float("torch.linalg.lstsq", A)
    vector = B.ndim == A.ndim - 1
    right = B.unsqueeze(-1) if vector else B
    if right.shape[-2] != A.shape[-2]:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    A, right = _broadcast_batches("torch.linalg.lstsq", A, right)
    function = _LeastSquares()
    solution = function(A, right, rcond)
    rows, columns = A.shape[-2], A.shape[-1]
    dtype = A.dtype
    empty = array(np.zeros([0], dtype=dtype))
    full_rank = bool(np.all(function.ranks == min(rows, columns)))
    if driver != "gelsy" and rows > columns and full_rank:
        residual = right - A @ solution
        residuals = (residual * residual).sum(-2)
    else:
        residuals = empty
    rank = array(function.ranks) if driver != "gels" else array(np.zeros([0], dtype=np.int64))
    singular_values = array(function.singular_values) if driver in ("gelsd", "gelss") else empty
    if vector:
        solution = solution.squeeze(-1)
    return LstsqResult(solution, residuals, rank, singular_values)


# Tensor methods (x.det(), x.cholesky_solve(L), ...): the functions with the Var first; attached by
# _var_method_table.py.
VAR_METHODS = {"det": det, "logdet": logdet, "slogdet": slogdet, "inverse": inverse, "cholesky": cholesky,
               "cholesky_solve": cholesky_solve, "cholesky_inverse": cholesky_inverse,
               "triangular_solve": triangular_solve}
