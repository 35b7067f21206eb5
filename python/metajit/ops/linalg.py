"""Matrix products (matmul, bmm, mm, mv, dot, outer, addmm, baddbmm, linear) as broadcast-multiply-sum, and
the cross and Kronecker products.

Both operands are laid out as [..., M, K, N] views (a reshape plus a broadcast, no copy), multiplied
elementwise and summed over K. The fuser turns this into one kernel whose reduction loop reads both inputs in
place, and the gradients follow from the broadcast and sum rules (broadcast <-> sum)."""
from .. import _core
from .._core import Var

__all__ = ["matmul", "bmm", "mm", "mv", "dot", "outer", "addmm", "baddbmm", "linear", "bilinear", "cross", "kron"]

_FLOAT_DTYPES = ("float16", "float32", "float64")


def _require_var(value, function, argument):
    if not isinstance(value, Var):
        raise TypeError(f"{function}: {argument} must be a metajit Var, got {type(value).__name__}")


def _broadcast_batch(first, second, function):
    """numpy broadcasting of two batch shapes (lists of ints); a clear ValueError when they do not broadcast."""
    length = max(len(first), len(second))
    first = [1] * (length - len(first)) + list(first)
    second = [1] * (length - len(second)) + list(second)
    result = []
    for a, b in zip(first, second):
        if a != b and a != 1 and b != 1:
            raise ValueError(f"{function}: batch dimensions {tuple(first)} and {tuple(second)} cannot be broadcast "
                             "together")
        result.append(b if a == 1 else a)
    return result


def _product_sum(left, right, left_shape, right_shape, batch):
    """left [..., M, K] @ right [..., K, N]: multiply [..., M, K, N] views, sum over K."""
    left = left.reshape(left_shape + [1])                                     # [..., M, K, 1]
    right = right.reshape(right_shape[:-2] + [1] + right_shape[-2:])          # [..., 1, K, N]
    return _product_total(left * right, len(batch) + 1)                      # broadcasts to [*batch, M, K, N]


def _product_total(product, dim):
    """product summed over `dim` in the product's dtype: integer sums widen to int64, PyTorch keeps the operands'
    promoted dtype."""
    result = product.sum(dim)
    if product.dtype not in _FLOAT_DTYPES and result.dtype != product.dtype:
        result = _core.cast(result, product.dtype)
    return result


def _rows_times_transposed(input, weight):
    """input [..., in] @ weight[out, in].T as x [..., 1, in] * weight [out, in] summed over in: the same product
    for the library matcher, but weight's gradient is then a sum over the batch in weight's own [out, in] layout,
    not the transpose of an [in, out] product that each optimizer update would read back through a transpose."""
    return _product_total(input.reshape(list(input.shape[:-1]) + [1, weight.shape[1]]) * weight, -1)


def matmul(input, other):
    """Matrix product with numpy/PyTorch semantics.

    1-D x 1-D is a dot product (0-d result); a 1-D first operand is a row vector and a 1-D second operand a
    column vector, and the added dimension is removed from the result; operands of rank > 2 are stacks of
    matrices whose batch dimensions broadcast."""
    _require_var(input, "matmul", "input")
    _require_var(other, "matmul", "other")
    input_shape, other_shape = list(input.shape), list(other.shape)  # each .shape is built anew in C++: read once
    if not input_shape or not other_shape:
        raise ValueError(f"matmul: both arguments need at least 1 dimension, got shapes {tuple(input_shape)} and "
                         f"{tuple(other_shape)}")
    left_shape = [1] + input_shape if len(input_shape) == 1 else input_shape
    right_shape = other_shape + [1] if len(other_shape) == 1 else other_shape
    rows, inner = left_shape[-2], left_shape[-1]
    if right_shape[-2] != inner:
        raise ValueError(f"matmul: shapes {tuple(input_shape)} and {tuple(other_shape)} cannot be multiplied "
                         f"({inner} columns against {right_shape[-2]} rows)")
    if len(other_shape) == 2:
        source = _core.transposed_matrix_source(other)  # x @ w.T (tied embeddings, hand-written layers)
        if source is not None:
            return _rows_times_transposed(input, source)
    columns = right_shape[-1]
    batch = _broadcast_batch(left_shape[:-2], right_shape[:-2], "matmul") if len(left_shape) > 2 or \
        len(right_shape) > 2 else []
    result = _product_sum(input, other, left_shape, right_shape, batch)
    # Drop the dimensions added for 1-D operands.
    shape = list(batch)
    if len(input_shape) != 1:
        shape.append(rows)
    if len(other_shape) != 1:
        shape.append(columns)
    return result.reshape(shape) if len(input_shape) == 1 or len(other_shape) == 1 else result


def bmm(input, mat2):
    """Batched matrix product of [B, N, M] and [B, M, P] (no broadcasting, as in PyTorch)."""
    _require_var(input, "bmm", "input")
    _require_var(mat2, "bmm", "mat2")
    if input.ndim != 3 or mat2.ndim != 3:
        raise ValueError(f"bmm: both arguments must be 3-D, got shapes {tuple(input.shape)} and "
                         f"{tuple(mat2.shape)}")
    if input.shape[0] != mat2.shape[0]:
        raise ValueError(f"bmm: batch sizes differ: {input.shape[0]} and {mat2.shape[0]}")
    if input.shape[2] != mat2.shape[1]:
        raise ValueError(f"bmm: shapes {tuple(input.shape)} and {tuple(mat2.shape)} cannot be multiplied "
                         f"({input.shape[2]} columns against {mat2.shape[1]} rows)")
    return matmul(input, mat2)


def _require_ranks(function, first, second, first_rank, second_rank, names=("input", "other")):
    _require_var(first, function, names[0])
    _require_var(second, function, names[1])
    if first.ndim != first_rank or second.ndim != second_rank:
        raise ValueError(f"{function}: expected {first_rank}-D and {second_rank}-D arguments, got shapes "
                         f"{tuple(first.shape)} and {tuple(second.shape)}")


def mm(input, mat2):
    """Product of two matrices [N, M] @ [M, P] (no broadcasting, as torch.mm)."""
    _require_ranks("mm", input, mat2, 2, 2, ("input", "mat2"))
    return matmul(input, mat2)


def mv(input, vec):
    """Matrix-vector product [N, M] @ [M] -> [N], as torch.mv."""
    _require_ranks("mv", input, vec, 2, 1, ("input", "vec"))
    return matmul(input, vec)


def dot(input, other):
    """Dot product of two 1-D Vars of the same length (a 0-d result), as torch.dot."""
    _require_ranks("dot", input, other, 1, 1)
    return matmul(input, other)


def outer(input, vec2):
    """Outer product of two 1-D Vars: result[i, j] = input[i] * vec2[j], as torch.outer."""
    _require_ranks("outer", input, vec2, 1, 1, ("input", "vec2"))
    return input.reshape([input.shape[0], 1]) * vec2.reshape([1, vec2.shape[0]])


def addmm(input, mat1, mat2, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2), with input broadcast to the product's shape, as torch.addmm."""
    _require_var(input, "addmm", "input")
    product = mm(mat1, mat2)
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        # PyTorch ignores input's values then (nan and inf in it do not propagate); its shape must still fit.
        _core.broadcast_to(input, list(product.shape))
        return product
    return (input if beta == 1 else input * beta) + product


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * bmm(batch1, batch2), as torch.baddbmm."""
    product = bmm(batch1, batch2)
    if alpha != 1:
        product = product * alpha
    if beta == 0:  # input is ignored, NaN or not, as in PyTorch
        return product
    return (input if beta == 1 else input * beta) + product


def cross(input, other, dim=-1):
    """The cross product of 3-vectors along `dim` (both operands broadcast)."""
    _require_var(input, "cross", "input")
    _require_var(other, "cross", "other")
    axis = dim if dim >= 0 else input.ndim + dim
    if not 0 <= axis < input.ndim or input.shape[axis] != 3 or other.ndim != input.ndim or other.shape[axis] != 3:
        raise ValueError(f"cross: dim {dim} must have extent 3 in both operands, got shapes {tuple(input.shape)} "
                         f"and {tuple(other.shape)}")

    def part(value, index):
        return value[(slice(None),) * axis + (slice(index, index + 1),)]

    a = [part(input, index) for index in range(3)]
    b = [part(other, index) for index in range(3)]
    from .tensor import cat
    return cat([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]], axis)


def kron(input, other):
    """The Kronecker product: every element of input times the whole of other, in blocks."""
    _require_var(input, "kron", "input")
    _require_var(other, "kron", "other")
    rank = max(input.ndim, other.ndim)
    left = input.reshape([1] * (rank - input.ndim) + list(input.shape))
    right = other.reshape([1] * (rank - other.ndim) + list(other.shape))
    # [a0, 1, a1, 1, ...] * [1, b0, 1, b1, ...] -> [a0, b0, a1, b1, ...] -> [a0 * b0, a1 * b1, ...]
    interleaved_left = left.reshape([extent for pair in zip(left.shape, [1] * rank) for extent in pair])
    interleaved_right = right.reshape([extent for pair in zip([1] * rank, right.shape) for extent in pair])
    product = interleaved_left * interleaved_right
    return product.reshape([a * b for a, b in zip(left.shape, right.shape)])


def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] + bias[o], as torch.nn.functional.bilinear:
    one matrix product of input1 with the weight's (i, o*j) view, then a row-wise product with input2."""
    for value, name in ((input1, "input1"), (input2, "input2"), (weight, "weight")):
        _require_var(value, "bilinear", name)
    if weight.ndim != 3 or input1.shape[-1] != weight.shape[1] or input2.shape[-1] != weight.shape[2] or \
            tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise ValueError(f"bilinear: expected input1 (..., {weight.shape[1] if weight.ndim == 3 else 'in1'}), "
                         f"input2 (..., in2) with the same leading dims and weight (out, in1, in2); got "
                         f"{list(input1.shape)}, {list(input2.shape)} and {list(weight.shape)}")
    outputs, first, second = weight.shape
    leading = list(input1.shape[:-1])
    rows = input1.reshape(-1, first)
    mixed = matmul(rows, weight.permute(1, 0, 2).reshape(first, outputs * second)).reshape(-1, outputs, second)
    output = (mixed * input2.reshape(-1, 1, second)).sum(-1).reshape(leading + [outputs])
    if bias is not None:
        _require_var(bias, "bilinear", "bias")
        output = output + bias
    return output


def linear(input, weight, bias=None):
    """input @ weight.T + bias, with weight of shape (out_features, in_features) as in PyTorch."""
    _require_var(input, "linear", "input")
    _require_var(weight, "linear", "weight")
    if weight.ndim not in (1, 2):
        raise ValueError(f"linear: weight must be 1-D or 2-D (out_features, in_features), got shape "
                         f"{tuple(weight.shape)}")
    if input.ndim == 0:
        raise ValueError("linear: input must have at least 1 dimension")
    if input.shape[-1] != weight.shape[-1]:
        raise ValueError(f"linear: input has {input.shape[-1]} features (shape {tuple(input.shape)}) but weight "
                         f"expects {weight.shape[-1]} (shape {tuple(weight.shape)})")
    output = _rows_times_transposed(input, weight) if weight.ndim == 2 else matmul(input, weight)
    if bias is not None:
        _require_var(bias, "linear", "bias")
        expected = list(weight.shape[:-1])
        if list(bias.shape) != expected and not (bias.ndim == 0 and not expected):
            raise ValueError(f"linear: bias must have shape {tuple(expected)}, got {tuple(bias.shape)}")
        output = output + bias
    return output


def _reflected_matmul(self, other):
    from .. import array
    return matmul(other if isinstance(other, Var) else array(other), self)


def _matmul_method(self, other):
    if isinstance(other, Var):
        return matmul(self, other)
    from .. import array
    return matmul(self, array(other))


VAR_METHODS = {"__matmul__": _matmul_method, "__rmatmul__": _reflected_matmul,  # attached by _var_method_table.py
               "matmul": _matmul_method}
