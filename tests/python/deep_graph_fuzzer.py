"""Seeded fuzzer of deep and wide graphs (issue "Graphs of any depth never crash the interpreter", part 5): from an
integer seed, a random program of one of four shapes, run by metajit and checked against numpy computed step by
step in float64. tools/fuzz.py --deep drives it in worker processes; tests/python/test_deep_graph_fuzz.py runs a
bounded set; docs/fuzzing.md ("Deep and wide graphs") describes it.

Shapes (sizes: the default range, then the --large range; drawn log-uniformly from the seed):
  chain       a loop whose random body (2-8 steps: scalar and small-tensor elementwise ops, tanh/sin/clamp,
              views: slice, transpose, permute, reshape, flip, cat, broadcast; reductions: sum, mean, amax,
              matmul; in-place ops: +=, mul_, add_, clamp_, x[k] = v) runs until the program has recorded
              10^4..10^5 ops (10^5..10^6), with events every few iterations and random sync points
              (.numpy(), .item()). A quarter of the chains use dyadic constants only, so every value is exact
              and compared bit for bit.
  fanout      one pending value read by 10^3..10^4 consumers (10^4..10^5), combined by sum(list), a loop of
              + or +=, mj.stack or mj.cat (then read, summed, averaged or maxed), or a pairwise fan-in tree;
              a third of them differentiated back to the leaf.
  gradient    a chain of 10^4..5*10^4 ops (10^5..10^6) from a leaf that requires grad, then backward(): steps
              whose derivatives stay near 1 in magnitude (sign flips, signed-permutation matmuls, noise tables
              added or multiplied, sin/tanh residuals and mean mixes of strength ~1/iterations, views, in-place
              ops), so the gradient neither vanishes nor overflows; checked against the derivative accumulated
              in forward mode along the chain (the product of the per-step derivatives for elementwise steps).
  recurrence  an RNN h = tanh(h @ W + X[t]) (plain or leaky, hidden size 2-8) unrolled over 10^3..10^4 steps
              (10^4..10^5), with backward through time half of the time; or a running total
              `total = total + loss` over 10^3..10^4 batches (10^4..10^5): forward only, one backward of the
              total, a backward per batch, or a training loop (W -= lr * W.grad under no_grad) without sync.

A program is Python text (a prelude of seeded numpy helpers, then metajit calls); per-iteration randomness comes
from tables (tensors indexed by the iteration), not from Python numbers, so kernels repeat from iteration to
iteration as they do in real loops. Table contents depend only on their seed and first extent, so a smaller
size runs a prefix of the same program (shrinking).

Tolerance rule: every reference value carries, next to its exact float64 value, an absolute bound on metajit's
error, propagated op by op: the inputs' bounds times the op's sensitivity (|c| for x * c, the larger change of
tanh over the input's interval, 1 for sin, clamp and max, |a| e_b + |b| e_a for products, |A| E_B + E_A |B|
for matmuls), plus roundings of the dtype (u = 2^-24 for float32): u (|a| + |b|) for a sum (so any association
or constant folding is covered), u |r| for a product, 2u for a division or mean, 4u for tanh and sin, n u sum|x|
for a reduction over n terms, (K+1) u |A||B| for a matmul, and the smallest normal for underflow. A result is
exact (bound 0) only where all inputs are exact and every partial result fits the mantissa with 7 bits to spare
(dyadic chains). Derivatives carry their own bound the same way (forward mode over the leaf's elements: the
local derivative's error from its input's bound, plus a rounding per product and per accumulation). metajit must
lie within SAFETY (2) times the bound; exact values must match exactly. Steps are non-expansive in max-norm
(|c| <= 1, tanh, sin, clamp, mixes whose weights sum to at most 1, contractions), so a 10^5-op chain's bound stays
at a few units of rounding where the chain contracts and grows at most linearly with depth where it does not.

A failure names the seed, the shape and its parameters, a command that reruns it (`--seed N [--large]`), a
command that shrinks it (`--shrink`: the smallest failing size, by bisection in subprocesses), and a standalone
reproducer script holding the program and the expected values.

What it must not do: ask metajit anything while building the reference (the reference never sees metajit's
values); draw Python numbers that change every iteration (they would turn every kernel into a new one); make a
case whose reference or program needs unbounded memory; fix or paper over an engine bug (report it instead).
"""
import argparse
import gc
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(os.path.dirname(_HERE))
if os.path.join(_ROOT, "python") not in sys.path:
    sys.path.append(os.path.join(_ROOT, "python"))  # after PYTHONPATH, which may name another build
os.environ.setdefault("METAJIT_CACHE_DIR", os.path.join(_ROOT, "build", "test-kernel-cache"))

SHAPES = ("chain", "fanout", "gradient", "recurrence")
SIZES = {  # shape: (default range, --large range) of its size parameter
    "chain": ((10 ** 4, 10 ** 5), (10 ** 5, 10 ** 6)),  # ops recorded
    "fanout": ((10 ** 3, 10 ** 4), (10 ** 4, 10 ** 5)),  # consumers
    "gradient": ((10 ** 4, 5 * 10 ** 4), (10 ** 5, 10 ** 6)),  # ops recorded before backward
    "recurrence": ((10 ** 3, 10 ** 4), (10 ** 4, 10 ** 5)),  # steps or batches
}
UNIT = {"float32": 2.0 ** -24, "float64": 2.0 ** -53}
MANTISSA = {"float32": 24, "float64": 53}
TINY = {"float32": 1.2e-38, "float64": 2.3e-308}  # smallest normals: an underflow allowance per op
SAFETY = 2.0  # metajit must lie within this many times the propagated bound
MEMORY_LIMIT_MIB = 3072  # a case whose process grows past this peak RSS fails (the graphs must stay bounded)
ADDRESS_SPACE_LIMIT_MIB = 8192  # limit_memory(): past this a case gets MemoryError, not the machine's OOM killer
SABOTAGE = 2.0 ** -16  # --sabotage-reference: relative error put into every reference op (tests must then fail)

PRELUDE = '''\
import numpy as np
import metajit as mj


def uniform(seed, low, high, shape, dtype):
    """Seeded uniform values; a longer first extent only appends rows."""
    return np.random.default_rng(seed).uniform(low, high, size=shape).astype(dtype)


def grid(seed, limit, shape, dtype):
    """Seeded multiples of 1/16 in [-limit, limit]: sums and products of these are exact."""
    return (np.random.default_rng(seed).integers(-16 * limit, 16 * limit + 1, size=shape) / 16).astype(dtype)


def scales(seed, spread, shape, dtype):
    """Seeded factors of random sign whose logarithms are uniform in [-spread, spread]."""
    draw = np.random.default_rng(seed).uniform(-1, 1, size=shape)
    return (np.sign(draw) * np.exp(spread * (2 * np.abs(draw) - 1))).astype(dtype)


def signs(seed, shape, dtype):
    """Seeded matrix of -1, 0 and 1 with at most one nonzero per column (exact in any association)."""
    rng = np.random.default_rng(seed)
    matrix = np.zeros(shape)
    rows = rng.integers(0, shape[0], size=shape[1])
    matrix[rows, np.arange(shape[1])] = rng.choice([-1.0, 0.0, 1.0], size=shape[1])
    return matrix.astype(dtype)


def permutation(seed, size, dtype):
    """Seeded signed permutation matrix (x @ m moves and negates elements: an isometry in every norm)."""
    rng = np.random.default_rng(seed)
    matrix = np.zeros((size, size))
    matrix[rng.permutation(size), np.arange(size)] = rng.choice([-1.0, 1.0], size=size)
    return matrix.astype(dtype)


def contraction(seed, norm, shape, dtype):
    """Seeded matrix whose columns' absolute sums are at most `norm` (x @ m shrinks max |x| by `norm`)."""
    matrix = np.random.default_rng(seed).uniform(-1, 1, size=shape)
    return (matrix * (norm / np.abs(matrix).sum(0).max())).astype(dtype)


def partition(seed, shape, dtype):
    """Seeded positive weights that sum to 1 over the first dim."""
    weights = np.random.default_rng(seed).uniform(0.1, 1.0, size=shape)
    return (weights / weights.sum(0)).astype(dtype)
'''
_PRELUDE_NAMESPACE = {}
exec(compile(PRELUDE.replace("import metajit as mj\n", ""), "<deep fuzzer prelude>", "exec"), _PRELUDE_NAMESPACE)


# ============================================================================================== reference values
class Tracked:
    """A reference value: the exact result in float64, an absolute bound on metajit's error, and (where the case
    differentiates) its derivative with respect to the leaf, parameter axis first, with the derivative's bound."""
    __slots__ = ("value", "error", "jacobian", "jacobian_error")

    def __init__(self, value, error=None, jacobian=None, jacobian_error=None):
        self.value = np.asarray(value, dtype=np.float64)
        self.error = np.zeros(self.value.shape) if error is None else \
            np.array(np.broadcast_to(error, self.value.shape), dtype=np.float64)
        self.jacobian, self.jacobian_error = jacobian, jacobian_error

    @property
    def shape(self):
        return self.value.shape


def _fraction_bits(values):
    """Bits after the binary point each float64 value needs (0 for integers and 0)."""
    mantissa, exponent = np.frexp(values)
    integer = np.abs(mantissa * 2.0 ** 53).astype(np.int64)
    lowest = np.where(integer == 0, 1, integer & -integer).astype(np.float64)
    trailing = np.frexp(lowest)[1] - 1
    return np.maximum(53 - trailing - exponent, 0)


class Reference:
    """The float64 algebra of Tracked values for one dtype. Operands may be Tracked, numpy arrays or Python
    numbers (exact constants); every method returns a new Tracked and never modifies its operands."""

    def __init__(self, dtype, sabotage=False):
        self.dtype, self.unit, self.tiny = dtype, UNIT[dtype], TINY[dtype]
        self.room = 2.0 ** (MANTISSA[dtype] - 7)  # exact results keep 7 spare bits for any association
        self.sabotage = sabotage

    def lift(self, operand):
        return operand if isinstance(operand, Tracked) else Tracked(operand)

    def leaf(self, values):
        values = np.asarray(values, dtype=np.float64)
        count = values.size
        jacobian = np.eye(count).reshape((count,) + values.shape)
        return Tracked(values, None, jacobian, np.zeros(jacobian.shape))

    # ------------------------------------------------------------------------------------------------ helpers
    def _result(self, value, error, jacobian=None, jacobian_error=None):
        if self.sabotage:
            value = value * (1.0 + SABOTAGE)
        return Tracked(value, error, jacobian, jacobian_error)

    def _rounded(self, propagated, magnitude, exact, ulps=1.0):
        rounding = ulps * self.unit * magnitude + self.tiny
        return propagated + rounding if exact is None else np.where(exact, propagated, propagated + rounding)

    def _exact(self, operands, magnitude, product=False):
        """Where a result of these operands is exact in every association (None where it surely is not)."""
        if not all((operand.error == 0).any() for operand in operands):
            return None
        bits = [_fraction_bits(operand.value) for operand in operands]
        fraction = (bits[0] + bits[1]) if product else np.maximum.reduce(np.broadcast_arrays(*bits))
        exact = magnitude * 2.0 ** fraction < self.room
        for operand in operands:
            exact = exact & (operand.error == 0)
        return exact

    @staticmethod
    def _expand(jacobian, shape):
        if jacobian is None:
            return None
        extra = len(shape) - (jacobian.ndim - 1)
        if extra:
            jacobian = jacobian.reshape((jacobian.shape[0],) + (1,) * extra + jacobian.shape[1:])
        return np.broadcast_to(jacobian, (jacobian.shape[0],) + tuple(shape))

    def _jacobians(self, operand, shape):
        return self._expand(operand.jacobian, shape), self._expand(operand.jacobian_error, shape)

    # ------------------------------------------------------------------------------------------------ arithmetic
    def add(self, a, b, sign=1.0):
        a, b = self.lift(a), self.lift(b)
        value = a.value + sign * b.value
        magnitude = np.abs(a.value) + np.abs(b.value)
        error = self._rounded(a.error + b.error, magnitude, self._exact([a, b], magnitude))
        jacobian = jacobian_error = None
        if a.jacobian is not None or b.jacobian is not None:
            ja, ea = self._jacobians(a, value.shape)
            jb, eb = self._jacobians(b, value.shape)
            if ja is None:
                jacobian, jacobian_error = sign * jb, eb + 0.0
            elif jb is None:
                jacobian, jacobian_error = ja + 0.0, ea + 0.0
            else:  # two paths meet: the backward accumulates them
                jacobian = ja + sign * jb
                jacobian_error = ea + eb + self.unit * (np.abs(ja) + np.abs(jb))
        return self._result(value, error, jacobian, jacobian_error)

    def subtract(self, a, b):
        return self.add(a, b, -1.0)

    def multiply(self, a, b, ulps=1.0):
        a, b = self.lift(a), self.lift(b)
        value = a.value * b.value
        propagated = np.abs(a.value) * b.error + np.abs(b.value) * a.error + a.error * b.error
        error = self._rounded(propagated, np.abs(value), self._exact([a, b], np.abs(value), product=True), ulps)
        jacobian = jacobian_error = None
        if a.jacobian is not None or b.jacobian is not None:
            ja, ea = self._jacobians(a, value.shape)
            jb, eb = self._jacobians(b, value.shape)
            jacobian, jacobian_error = 0.0, 0.0
            if ja is not None:
                term = ja * b.value
                jacobian = jacobian + term
                jacobian_error = jacobian_error + ea * np.abs(b.value) + np.abs(ja) * b.error + \
                    ulps * self.unit * np.abs(term)
            if jb is not None:
                term = jb * a.value
                jacobian = jacobian + term
                jacobian_error = jacobian_error + eb * np.abs(a.value) + np.abs(jb) * a.error + \
                    ulps * self.unit * np.abs(term)
            if ja is not None and jb is not None:
                jacobian_error = jacobian_error + self.unit * (np.abs(ja * b.value) + np.abs(jb * a.value))
        return self._result(value, error, jacobian, jacobian_error)

    def square(self, a):
        return self.multiply(a, a, ulps=2.0)  # x ** 2 may be a pow call: two roundings

    def divide(self, a, divisor):
        """a / divisor for a Python number: x * (1 / c) in some kernels, so two roundings."""
        a = self.lift(a)
        value = a.value / divisor
        error = self._rounded(a.error / abs(divisor), np.abs(value), None, 2.0)
        jacobian = jacobian_error = None
        if a.jacobian is not None:
            jacobian = a.jacobian / divisor
            jacobian_error = a.jacobian_error / abs(divisor) + 2 * self.unit * np.abs(jacobian)
        return self._result(value, error, jacobian, jacobian_error)

    def negate(self, a):
        a = self.lift(a)
        return Tracked(-a.value, a.error, None if a.jacobian is None else -a.jacobian, a.jacobian_error)

    def tanh(self, a):
        a = self.lift(a)
        value = np.tanh(a.value)
        propagated = np.maximum(np.abs(np.tanh(a.value - a.error) - value), np.abs(np.tanh(a.value + a.error) - value))
        error = self._rounded(propagated, np.abs(value), None, 4.0)
        jacobian = jacobian_error = None
        if a.jacobian is not None:
            derivative = 1.0 - value * value  # the backward uses the stored output: its error enters here
            slack = 2 * np.abs(value) * error + error * error + 3 * self.unit
            jacobian = a.jacobian * derivative
            jacobian_error = a.jacobian_error * derivative + np.abs(a.jacobian) * slack + \
                self.unit * np.abs(jacobian)
        return self._result(value, error, jacobian, jacobian_error)

    def sin(self, a):
        a = self.lift(a)
        value = np.sin(a.value)
        error = self._rounded(np.minimum(a.error, 2.0), np.abs(value), None, 4.0) + self.unit
        jacobian = jacobian_error = None
        if a.jacobian is not None:
            derivative = np.cos(a.value)
            jacobian = a.jacobian * derivative
            jacobian_error = a.jacobian_error * np.abs(derivative) + np.abs(a.jacobian) * \
                (np.minimum(a.error, 2.0) + 5 * self.unit) + self.unit * np.abs(jacobian)
        return self._result(value, error, jacobian, jacobian_error)

    def clamp(self, a, low, high):
        a = self.lift(a)
        assert a.jacobian is None, "clamp's derivative jumps: differentiated cases do not use it"
        value = np.clip(a.value, low, high)
        settled = (a.value - a.error >= high) | (a.value + a.error <= low)  # clamped for any input in reach
        return self._result(value, np.where(settled, 0.0, a.error))

    # ------------------------------------------------------------------------------------------------ reductions
    @staticmethod
    def _axes(ndim, dim):
        if dim is None:
            return tuple(range(ndim))
        return tuple(d % ndim for d in (dim if isinstance(dim, tuple) else (dim,)))

    def sum(self, a, dim=None, keepdim=False):
        a = self.lift(a)
        axes = self._axes(a.value.ndim, dim)
        count = int(np.prod([a.value.shape[d] for d in axes])) if axes else 1
        value = a.value.sum(axis=axes, keepdims=keepdim)
        magnitude = np.abs(a.value).sum(axis=axes, keepdims=keepdim)
        exact = None
        if (a.error == 0).any() and count <= 128:
            bits = _fraction_bits(a.value).max(axis=axes, keepdims=keepdim)
            exact = (a.error == 0).all(axis=axes, keepdims=keepdim) & (magnitude * 2.0 ** bits < self.room)
        error = self._rounded(a.error.sum(axis=axes, keepdims=keepdim), magnitude, exact, float(count))
        jacobian = jacobian_error = None
        if a.jacobian is not None:
            shifted = tuple(d + 1 for d in axes)
            jacobian = a.jacobian.sum(axis=shifted, keepdims=keepdim)
            jacobian_error = a.jacobian_error.sum(axis=shifted, keepdims=keepdim) + \
                count * self.unit * np.abs(a.jacobian).sum(axis=shifted, keepdims=keepdim)
        return self._result(value, error, jacobian, jacobian_error)

    def mean(self, a, dim=None, keepdim=False):
        a = self.lift(a)
        axes = self._axes(a.value.ndim, dim)
        count = int(np.prod([a.value.shape[d] for d in axes])) if axes else 1
        return self.divide(self.sum(a, dim, keepdim), float(count))

    def amax(self, a, dim=None, keepdim=False):
        a = self.lift(a)
        assert a.jacobian is None, "max's derivative jumps: differentiated cases do not use it"
        axes = self._axes(a.value.ndim, dim)
        return self._result(a.value.max(axis=axes, keepdims=keepdim), a.error.max(axis=axes, keepdims=keepdim))

    def maximum(self, a, b):
        a, b = self.lift(a), self.lift(b)
        assert a.jacobian is None and b.jacobian is None
        value = np.maximum(a.value, b.value)
        return self._result(value, np.maximum(*np.broadcast_arrays(a.error, b.error)))

    def matmul(self, a, b):
        a, b = self.lift(a), self.lift(b)
        inner, outer = a.value.shape[-1], b.value.shape[-1]
        value = a.value @ b.value
        magnitude = np.abs(a.value) @ np.abs(b.value)
        propagated = np.abs(a.value) @ b.error + a.error @ np.abs(b.value) + a.error @ b.error
        exact = None
        if (a.error == 0).all() and (b.error == 0).all() and inner <= 128:
            bits = _fraction_bits(a.value).max() + _fraction_bits(b.value).max()
            exact = magnitude * 2.0 ** bits < self.room
        error = self._rounded(propagated, magnitude, exact, inner + 1.0)
        jacobian = jacobian_error = None
        if a.jacobian is not None or b.jacobian is not None:
            roundings = (inner + outer + 2) * self.unit  # the backward sums over the other extent
            jacobian, jacobian_error = 0.0, 0.0
            if a.jacobian is not None:
                jacobian = jacobian + a.jacobian @ b.value
                jacobian_error = jacobian_error + a.jacobian_error @ np.abs(b.value) + \
                    np.abs(a.jacobian) @ b.error + roundings * (np.abs(a.jacobian) @ np.abs(b.value))
            if b.jacobian is not None:
                jacobian = jacobian + a.value @ b.jacobian
                jacobian_error = jacobian_error + np.abs(a.value) @ b.jacobian_error + \
                    a.error @ np.abs(b.jacobian) + roundings * (np.abs(a.value) @ np.abs(b.jacobian))
        return self._result(value, error, jacobian, jacobian_error)

    # ------------------------------------------------------------------------------------------------ views
    def _view(self, a, on_value, on_jacobian):
        a = self.lift(a)
        jacobian = jacobian_error = None
        if a.jacobian is not None:
            jacobian, jacobian_error = on_jacobian(a.jacobian), on_jacobian(a.jacobian_error)
        return Tracked(on_value(a.value), on_value(a.error), jacobian, jacobian_error)

    def permute(self, a, axes):
        return self._view(a, lambda v: v.transpose(axes), lambda j: j.transpose((0,) + tuple(d + 1 for d in axes)))

    def transpose(self, a, first, second):
        axes = list(range(self.lift(a).value.ndim))
        axes[first], axes[second] = axes[second], axes[first]
        return self.permute(a, tuple(axes))

    def reshape(self, a, shape):
        shape = tuple(shape)
        return self._view(a, lambda v: v.reshape(shape), lambda j: j.reshape((j.shape[0],) + shape))

    def index(self, a, key):
        return self._view(a, lambda v: np.array(v[key]), lambda j: np.array(j[(slice(None),) + key]))

    def flip(self, a, dims):
        return self._view(a, lambda v: np.flip(v, dims).copy(),
                          lambda j: np.flip(j, tuple(d + 1 for d in dims)).copy())

    def unsqueeze(self, a, dim):
        return self._view(a, lambda v: np.expand_dims(v, dim), lambda j: np.expand_dims(j, dim + 1))

    def expand(self, a, shape):
        a = self.lift(a)
        jacobian, jacobian_error = self._jacobians(a, shape)
        return Tracked(np.broadcast_to(a.value, shape), np.broadcast_to(a.error, shape), jacobian, jacobian_error)

    def concatenate(self, parts, dim, stack=False):
        parts = [self.lift(part) for part in parts]
        join = np.stack if stack else np.concatenate
        value = join([part.value for part in parts], axis=dim)
        error = join([part.error for part in parts], axis=dim)
        jacobian = jacobian_error = None
        if any(part.jacobian is not None for part in parts):
            count = next(part.jacobian.shape[0] for part in parts if part.jacobian is not None)

            def of(part, field):
                array = getattr(part, field)
                return np.zeros((count,) + part.value.shape) if array is None else array
            jacobian = join([of(part, "jacobian") for part in parts], axis=dim + 1)
            jacobian_error = join([of(part, "jacobian_error") for part in parts], axis=dim + 1)
        return Tracked(value, error, jacobian, jacobian_error)

    def setitem(self, a, key, number):
        """a with a[key] = number (an exact constant): the written elements lose their error and derivative."""
        a = self.lift(a)
        value, error = a.value.copy(), a.error.copy()
        value[key], error[key] = number, 0.0
        jacobian = jacobian_error = None
        if a.jacobian is not None:
            jacobian, jacobian_error = a.jacobian.copy(), a.jacobian_error.copy()
            jacobian[(slice(None),) + key] = 0.0
            jacobian_error[(slice(None),) + key] = 0.0
        return self._result(value, error, jacobian, jacobian_error)


# ============================================================================================== programs
class Program:
    """A generated case: Python text (run after PRELUDE, with `check` defined) and the expected value and error
    bound of every check it makes, by name."""

    def __init__(self, seed, shape, large, size, parameters, lines, expected, ops, reference_seconds):
        self.seed, self.shape, self.large, self.size = seed, shape, large, size  # size: what --size replaces
        self.parameters = parameters  # what the seed chose: shown in reports and reproducers
        self.lines, self.expected, self.ops = lines, expected, ops
        self.reference_seconds = reference_seconds

    def source(self):
        return "\n".join(self.lines) + "\n"

    def describe(self):
        return ", ".join(f"{key}={value}" for key, value in self.parameters.items())


def _number(value):
    """A literal for a constant that float32 holds exactly (so float32 and float64 programs see the same number)."""
    return repr(float(np.float32(value)))


class _Writer:
    """Collects a program's lines and checks while its reference runs; draws everything from one rng."""

    def __init__(self, seed, rng, shape, large, size, sabotage):
        self.seed, self.rng, self.shape, self.large = seed, rng, shape, large
        self.size_override, self.sabotage = size, sabotage
        self.lines, self.expected, self.ops = [], {}, 0
        self.parameters = {"shape": shape}
        self.tables = {}  # name -> float64 values of a table written after the size is known
        self.pending_tables = []
        self.dtype = self.reference = self.size = None

    def choose_dtype(self, float64_share=0.15):
        self.dtype = "float64" if self.rng.random() < float64_share else "float32"
        self.reference = Reference(self.dtype, self.sabotage)
        self.parameters["dtype"] = self.dtype

    def draw_size(self, scale=1.0):
        """The size parameter: drawn log-uniformly (always, so the rng stream does not depend on an override),
        then replaced by the override. Returns (drawn, used)."""
        low, high = SIZES[self.shape][1 if self.large else 0]
        drawn = int(round(scale * math.exp(self.rng.uniform(math.log(low), math.log(high)))))
        used = drawn if self.size_override is None else int(self.size_override)
        self.size = used
        return drawn, used

    def choice(self, options, weights=None):
        if weights is not None:
            weights = np.asarray(weights, dtype=np.float64)
            weights = weights / weights.sum()
        return options[int(self.rng.choice(len(options), p=weights))]

    def seed_for_array(self):
        return int(self.rng.integers(2 ** 31))

    def array(self, name, call, requires_grad=False):
        """Writes `name = mj.array(call)` and returns the values the call makes (float64 of the dtype's values)."""
        self.lines.append(f"{name} = mj.array({call}{', requires_grad=True' if requires_grad else ''})")
        self.ops += 1
        return np.asarray(eval(call, dict(_PRELUDE_NAMESPACE)), dtype=np.float64)

    def named_array(self, prefix, call):
        """A constant tensor under a fresh name: returns (name, values)."""
        name = f"{prefix}{sum(1 for line in self.lines if ' = mj.array(' in line)}"
        return name, self.array(name, call)

    def call(self, helper, *arguments, shape):
        return f"{helper}({', '.join(str(argument) for argument in arguments)}, {tuple(shape)}, np.{self.dtype})"

    def table(self, helper, arguments, tail):
        """A table indexed by the iteration (first extent: the iteration count, known later). Returns its name."""
        name = f"T{len(self.pending_tables)}"
        self.pending_tables.append((name, helper, (self.seed_for_array(),) + tuple(arguments), tuple(tail)))
        return name

    def write_tables(self, rows):
        for name, helper, arguments, tail in self.pending_tables:
            self.tables[name] = self.array(name, self.call(helper, *arguments, shape=(rows,) + tail))

    def expect(self, name, value, bound):
        self.expected[name] = (np.array(value, dtype=np.float64), np.array(bound, dtype=np.float64))

    def expect_value(self, name, tracked):
        self.expect(name, tracked.value, tracked.error)

    def expect_gradient(self, name, tracked, leaf_shape):
        self.expect(name, tracked.jacobian.reshape(leaf_shape), tracked.jacobian_error.reshape(leaf_shape))

    def sync_points(self, count, drawn, used):
        """Random iterations (absolute, drawn against the drawn size so a smaller size keeps a prefix of them)."""
        points = sorted({int(point) for point in self.rng.integers(0, max(drawn, 1), size=count)})
        return [point for point in points if point < used]


def _random_state_shape(rng, largest):
    while True:
        rank = int(rng.integers(1, 4))
        shape = tuple(int(extent) for extent in rng.integers(1, 6, size=rank))
        if 2 <= int(np.prod(shape)) <= largest:
            return shape


def _factorizations(count):
    """Shapes of 1-3 dims holding `count` elements."""
    shapes = [(count,)]
    for first in range(1, count + 1):
        if count % first:
            continue
        shapes.append((first, count // first))
        rest = count // first
        for second in range(1, rest + 1):
            if rest % second == 0:
                shapes.append((first, second, rest // second))
    return shapes


# ============================================================================================== chain bodies
class Step:
    """One statement of a loop body: its lines (state `x`, iteration `t`), its reference, the ops it records."""
    __slots__ = ("lines", "apply", "ops")

    def __init__(self, lines, apply, ops):
        self.lines, self.apply, self.ops = lines, apply, ops


class _Body:
    """Draws the body of a chain's loop. Flavors: 'float' (random float32 constants), 'exact' (dyadic constants:
    every value exact) and 'gradient' (derivatives stay near 1 in magnitude; no clamp, max or other kink).
    Every step maps the state non-expansively in max-norm (gradient steps: nearly isometrically)."""

    def __init__(self, writer, flavor, shape, noise=0.0, strength=0.0):
        self.w, self.flavor, self.shape = writer, flavor, tuple(shape)
        self.reference = writer.reference
        # gradient flavor: the spread of the noise tables (the state's random walk stays O(1)) and the strength of
        # the steps that are not isometries (residuals, mean mixes): about 1 / iterations, so that neither the
        # derivative nor the propagated bound (which multiplies by 1 + strength per step) drifts by more than e^2
        self.noise, self.strength = noise, strength

    @property
    def exact(self):
        return self.flavor == "exact"

    @property
    def gradient(self):
        return self.flavor == "gradient"

    def constant(self, low, high, limit=2):
        """A constant: a multiple of 1/16 in the exact flavor, else a random float32 value."""
        if self.exact:
            return float(self.w.rng.integers(-16 * limit, 16 * limit + 1)) / 16
        return float(np.float32(self.w.rng.uniform(low, high)))

    def factor(self):
        """A multiplier of magnitude at most 1 (exact flavor: a power of two, sometimes 2 before a clamp)."""
        if self.exact:
            return self.w.choice([1.0, -1.0, 0.5, -0.5, 2.0, -2.0], [4, 4, 2, 2, 1, 1])
        return float(np.float32(self.w.choice([1.0, -1.0]) * self.w.rng.uniform(0.5, 1.0)))

    # ------------------------------------------------------------------------------------------------ step kinds
    def affine(self):
        r = self.reference
        if self.gradient:
            return Step(["x = -x" if self.w.rng.random() < 0.5 else "x = x * -1.0"], lambda s, t: r.negate(s), 1)
        c, d = self.factor(), self.constant(-0.5, 0.5)
        form = self.w.choice(["mul_add", "add_mul", "rsub", "divide", "negate"], [4, 2, 2, 0 if self.exact else 1, 1])
        if form == "mul_add":
            return Step([f"x = x * {_number(c)} + {_number(d)}"], lambda s, t: r.add(r.multiply(s, c), d), 2)
        if form == "add_mul":
            return Step([f"x = (x + {_number(d)}) * {_number(c)}"], lambda s, t: r.multiply(r.add(s, d), c), 2)
        if form == "rsub":
            return Step([f"x = {_number(d)} - x * {_number(c)}"],
                        lambda s, t: r.subtract(d, r.multiply(s, c)), 2)
        if form == "divide":
            divisor = float(np.float32(self.w.choice([1.0, -1.0]) * self.w.rng.uniform(1.0, 2.0)))
            return Step([f"x = x / {_number(divisor)}"], lambda s, t: r.divide(s, divisor), 1)
        return Step(["x = -x"], lambda s, t: r.negate(s), 1)

    def broadcast_tail(self):
        """A table row shape that broadcasts to the state: the state's shape with some extents 1, or fewer dims."""
        tail = [extent if self.w.rng.random() < 0.7 else 1 for extent in self.shape]
        drop = int(self.w.rng.integers(0, len(tail))) if self.w.rng.random() < 0.3 else 0
        return tuple(tail[drop:])

    def table_step(self):
        r, w = self.reference, self.w
        tail = self.broadcast_tail()
        if self.gradient:
            if w.rng.random() < 0.5:
                name = w.table("uniform", (_number(-self.noise), _number(self.noise)), tail)
                form = w.choice(["add", "sub", "rsub"])
            else:
                name = w.table("scales", (_number(self.noise),), tail)
                form = "mul"
        elif self.exact:
            form = w.choice(["add", "sub", "rsub", "mul"])
            name = w.table("grid", (1,), tail) if form != "mul" else w.table("scales", (0.0,), tail)
        else:
            form = w.choice(["add", "sub", "rsub", "mul"])
            name = w.table("uniform", (-0.5, 0.5) if form != "mul" else (-1.0, 1.0), tail)
        tables = w.tables
        if form == "add":
            return Step([f"x = x + {name}[t]"], lambda s, t: r.add(s, tables[name][t]), 2)
        if form == "sub":
            return Step([f"x = x - {name}[t]"], lambda s, t: r.subtract(s, tables[name][t]), 2)
        if form == "rsub":
            return Step([f"x = {name}[t] - x"], lambda s, t: r.subtract(tables[name][t], s), 2)
        return Step([f"x = x * {name}[t]"], lambda s, t: r.multiply(s, tables[name][t]), 2)

    def bounding(self):
        r, w = self.reference, self.w
        if self.gradient:
            return self.residual()
        kind = "clamp" if self.exact else w.choice(["tanh", "sin", "clamp"])
        if kind == "tanh":
            line = w.choice(["x = mj.tanh(x)", "x = x.tanh()"])
            return Step([line], lambda s, t: r.tanh(s), 1)
        if kind == "sin":
            return Step(["x = mj.sin(x)"], lambda s, t: r.sin(s), 1)
        low, high = -abs(self.constant(0.25, 2.0)) - 0.125, abs(self.constant(0.25, 2.0)) + 0.125
        low, high = float(np.float32(low)), float(np.float32(high))
        line = w.choice([f"x = x.clamp({_number(low)}, {_number(high)})",
                         f"x = mj.clamp(x, {_number(low)}, {_number(high)})"])
        return Step([line], lambda s, t: r.clamp(s, low, high), 1)

    def residual(self):
        """Gradient flavor: x + a * f(x * c) with a small a, so the derivative stays within 1 +- |a c|."""
        r, w = self.reference, self.w
        a = float(np.float32(w.choice([1.0, -1.0]) * self.strength * w.rng.uniform(0.5, 1.0)))
        if w.rng.random() < 0.5:
            return Step([f"x = x + mj.sin(x) * {_number(a)}"], lambda s, t: r.add(s, r.multiply(r.sin(s), a)), 3)
        c = float(np.float32(w.rng.uniform(0.5, 1.0)))
        return Step([f"x = x + mj.tanh(x * {_number(c)}) * {_number(a)}"],
                    lambda s, t: r.add(s, r.multiply(r.tanh(r.multiply(s, c)), a)), 4)

    def view(self):
        r, w = self.reference, self.w
        shape, rank = self.shape, len(self.shape)
        kinds = ["reshape", "flip"] + (["transpose", "permute"] if rank >= 2 else []) + \
            (["roll"] if shape[0] >= 2 else []) + ["expand_reduce"]
        kind = w.choice(kinds)
        if kind == "reshape":
            target = w.choice(_factorizations(int(np.prod(shape))))
            self.shape = tuple(target)
            line = w.choice([f"x = x.reshape{target}" if len(target) > 1 else f"x = x.reshape({target[0]})",
                             f"x = x.reshape({list(target)})"])
            return Step([line], lambda s, t: r.reshape(s, target), 1)
        if kind == "flip":
            dims = tuple(sorted({int(d) for d in w.rng.integers(0, rank, size=int(w.rng.integers(1, rank + 1)))}))
            line = w.choice([f"x = x.flip({list(dims)})", f"x = mj.flip(x, {list(dims)})"])
            return Step([line], lambda s, t: r.flip(s, dims), 1)
        if kind == "transpose":
            first, second = (int(d) for d in w.rng.choice(rank, size=2, replace=False))
            swapped = list(shape)
            swapped[first], swapped[second] = swapped[second], swapped[first]
            self.shape = tuple(swapped)
            line = "x = x.t()" if rank == 2 and w.rng.random() < 0.3 else f"x = x.transpose({first}, {second})"
            return Step([line], lambda s, t: r.transpose(s, first, second), 1)
        if kind == "permute":
            axes = tuple(int(d) for d in w.rng.permutation(rank))
            self.shape = tuple(shape[d] for d in axes)
            return Step([f"x = x.permute{axes}"], lambda s, t: r.permute(s, axes), 1)
        if kind == "roll":
            k = int(w.rng.integers(1, shape[0]))
            return Step([f"x = mj.cat([x[{k}:], x[:{k}]], 0)"],
                        lambda s, t: r.concatenate([r.index(s, (slice(k, None),)), r.index(s, (slice(None, k),))], 0),
                        3)
        # expand_reduce: broadcast to m copies, weight them (weights summing to at most 1), sum them back
        copies = int(w.rng.integers(2, 5))
        if not self.exact:
            name, weights = w.named_array("P", w.call("partition", w.seed_for_array(), shape=(copies,) + shape))
        else:  # one copy kept whole, the others weighted 0: exact
            selected = np.zeros((copies,) + shape)
            selected[int(w.rng.integers(copies))] = 1.0
            name, weights = w.named_array("P", f"np.array({selected.tolist()}, dtype=np.{w.dtype})")
        extents = ", ".join(str(extent) for extent in (copies,) + shape)
        return Step([f"x = (x.unsqueeze(0).expand({extents}) * {name}).sum(0)"],
                    lambda s, t: r.sum(r.multiply(r.expand(r.unsqueeze(s, 0), (copies,) + shape), weights), 0), 4)

    def mix(self):
        """A step that reads the state twice: a slice broadcast back, a reduction, a matmul."""
        r, w = self.reference, self.w
        shape, rank = self.shape, len(self.shape)
        if self.gradient:
            kinds = ["reflect", "rotate"]
        else:
            kinds = ["slice", "sum", "amax", "matmul"] + ([] if self.exact else ["mean"])
        kind = w.choice(kinds)
        dim = int(w.rng.integers(0, rank))
        if kind == "reflect":  # x + c mean(x) with a small c: a broadcast and a reduction in the backward
            c = float(np.float32(w.choice([1.0, -1.0]) * self.strength * w.rng.uniform(0.5, 1.0)))
            if w.rng.random() < 0.3:
                return Step([f"x = x + x.mean() * {_number(c)}"], lambda s, t: r.add(s, r.multiply(r.mean(s), c)), 3)
            return Step([f"x = x + x.mean({dim}, keepdim=True) * {_number(c)}"],
                        lambda s, t: r.add(s, r.multiply(r.mean(s, dim, True), c)), 3)
        if kind == "rotate":
            size = shape[-1]
            name, matrix = w.named_array("Q", f"permutation({w.seed_for_array()}, {size}, np.{w.dtype})")
            return Step([w.choice([f"x = x @ {name}", f"x = mj.matmul(x, {name})"])],
                        lambda s, t: r.matmul(s, matrix), 1)
        c = self.factor()
        if kind == "slice":
            k = int(w.rng.integers(0, shape[dim]))
            key = (slice(None),) * dim + (slice(k, k + 1),)
            text = ":, " * dim + f"{k}:{k + 1}"
            c2 = self.share(c, 1)
            return Step([f"x = x * {_number(c)} + x[{text}] * {_number(c2)}"],
                        lambda s, t: r.add(r.multiply(s, c), r.multiply(r.index(s, key), c2)), 4)
        if kind == "sum":
            count = shape[dim]
            c2 = self.share(c, count)
            return Step([f"x = x * {_number(c)} + x.sum({dim}, keepdim=True) * {_number(c2)}"],
                        lambda s, t: r.add(r.multiply(s, c), r.multiply(r.sum(s, dim, True), c2)), 4)
        if kind == "mean":
            c2 = self.share(c, 1)
            if w.rng.random() < 0.3:
                return Step([f"x = x * {_number(c)} + x.mean() * {_number(c2)}"],
                            lambda s, t: r.add(r.multiply(s, c), r.multiply(r.mean(s), c2)), 4)
            return Step([f"x = x * {_number(c)} + x.mean({dim}, keepdim=True) * {_number(c2)}"],
                        lambda s, t: r.add(r.multiply(s, c), r.multiply(r.mean(s, dim, True), c2)), 4)
        if kind == "amax":
            c2 = self.share(c, 1)
            return Step([f"x = x * {_number(c)} - x.amax({dim}, keepdim=True) * {_number(c2)}"],
                        lambda s, t: r.subtract(r.multiply(s, c), r.multiply(r.amax(s, dim, True), c2)), 4)
        size = shape[-1]  # matmul with a max-norm contraction (exact flavor: signed selections)
        if self.exact:
            name, matrix = w.named_array("M", w.call("signs", w.seed_for_array(), shape=(size, size)))
        else:
            norm = _number(w.rng.uniform(0.5, 1.0))
            name, matrix = w.named_array("M", w.call("contraction", w.seed_for_array(), norm, shape=(size, size)))
        return Step([w.choice([f"x = x @ {name}", f"x = mj.matmul(x, {name})"])], lambda s, t: r.matmul(s, matrix), 1)

    def share(self, c, count):
        """A second weight so that |c| + count * |c2| <= 1 (the mix stays non-expansive)."""
        room = max(1.0 - abs(c), 0.0) / count
        if self.exact:
            choices = [value for value in (0.5, 0.25, 0.125, 0.0625) if value <= room] or [0.0]
            return self.w.choice(choices) * self.w.choice([1.0, -1.0])
        return float(np.float32(self.w.rng.uniform(-room, room) * 0.999))

    def in_place(self):
        r, w = self.reference, self.w
        shape, rank = self.shape, len(self.shape)
        if self.gradient:  # no x[k] = v: with the moving views it would zero the whole derivative
            kinds = ["negate", "table"]
        else:
            kinds = ["add", "mul", "table", "setitem", "clamp"] + ([] if self.exact else ["tanh"])
        kind = w.choice(kinds, [3, 3, 3, 1, 2, 1][:len(kinds)] if not self.gradient else [1, 2])
        if kind == "negate":
            return Step([w.choice(["x.mul_(-1.0)", "x *= -1.0"])], lambda s, t: r.negate(s), 1)
        if kind == "add":
            d = self.constant(-0.5, 0.5)
            if w.rng.random() < 0.5:
                return Step([f"x += {_number(d)}"], lambda s, t: r.add(s, d), 1)
            return Step([f"x -= {_number(d)}"], lambda s, t: r.subtract(s, d), 1)
        if kind == "mul":
            c = self.factor()
            return Step([w.choice([f"x.mul_({_number(c)})", f"x *= {_number(c)}"])],
                        lambda s, t: r.multiply(s, c), 1)
        if kind == "table":
            tail = self.broadcast_tail()
            if self.gradient:
                name = w.table("uniform", (_number(-self.noise), _number(self.noise)), tail)
            else:
                name = w.table("grid" if self.exact else "uniform", (1,) if self.exact else (-0.5, 0.5), tail)
            tables = w.tables
            if w.rng.random() < 0.5:
                return Step([w.choice([f"x.add_({name}[t])", f"x += {name}[t]"])],
                            lambda s, t: r.add(s, tables[name][t]), 2)
            return Step([w.choice([f"x.sub_({name}[t])", f"x -= {name}[t]"])],
                        lambda s, t: r.subtract(s, tables[name][t]), 2)
        if kind == "setitem":
            value = self.constant(-1.0, 1.0, limit=1)
            if rank >= 2 and w.rng.random() < 0.5:
                k = int(w.rng.integers(0, shape[-1]))
                return Step([f"x[..., {k}] = {_number(value)}"], lambda s, t: r.setitem(s, (Ellipsis, k), value), 1)
            k = int(w.rng.integers(0, shape[0]))
            return Step([f"x[{k}] = {_number(value)}"], lambda s, t: r.setitem(s, (k,), value), 1)
        if kind == "clamp":
            low = float(np.float32(-abs(self.constant(0.5, 2.0)) - 0.25))
            high = float(np.float32(abs(self.constant(0.5, 2.0)) + 0.25))
            return Step([f"x.clamp_({_number(low)}, {_number(high)})"], lambda s, t: r.clamp(s, low, high), 1)
        return Step(["x.tanh_()"], lambda s, t: r.tanh(s), 1)

    # ------------------------------------------------------------------------------------------------ drawing
    def draw(self):
        """The body (shape restored at its end) and its events: [(period, remainder, step)]."""
        w = self.w
        initial = self.shape
        kinds = ["affine", "table_step", "bounding", "view", "mix", "in_place"]
        weights = [2, 3, 2, 2, 2, 2] if self.gradient else [3, 3, 2, 2, 2, 2]
        steps = []
        for _ in range(int(w.rng.integers(2, 9))):
            steps.append(getattr(self, w.choice(kinds, weights))())
        if not self.gradient:  # something must bound the magnitude: |c| <= 1 alone may still drift
            steps.append(self.bounding())
        if self.shape != initial:
            self.shape = initial
            steps.append(Step([f"x = x.reshape({list(initial)})"], lambda s, t: self.reference.reshape(s, initial), 1))
        events = []
        for _ in range(int(w.rng.choice([0, 1, 2], p=[0.4, 0.4, 0.2]))):
            period = int(w.choice([2, 3, 4, 5, 8, 10]))
            remainder = int(w.rng.integers(0, period))
            kind = w.choice(["in_place", "mix", "affine"])
            step = getattr(self, kind)()
            if self.shape != initial:  # a step that changed the shape: not an event
                self.shape = initial
                continue
            events.append((period, remainder, step))
        return steps, events


def _run_loop(reference_state, steps, events, iterations, syncs, on_sync):
    state = reference_state
    sync_set = set(syncs)
    for t in range(iterations):
        for step in steps:
            state = step.apply(state, t)
        for period, remainder, step in events:
            if t % period == remainder:
                state = step.apply(state, t)
        if t in sync_set:
            on_sync(t, state)
    return state


def _loop_lines(steps, events, iterations, syncs, sync_line):
    lines = [f"for t in range({iterations}):"]
    for step in steps:
        lines += ["    " + line for line in step.lines]
    for period, remainder, step in events:
        lines.append(f"    if t % {period} == {remainder}:")
        lines += ["        " + line for line in step.lines]
    if syncs:
        lines.append(f"    if t in {set(syncs)}:")
        lines.append("        " + sync_line)
    return lines


# ============================================================================================== shapes
def _chain(w):
    w.choose_dtype()
    flavor = "exact" if w.rng.random() < 0.25 else "float"
    shape = _random_state_shape(w.rng, 24)
    drawn_ops, target_ops = w.draw_size()
    body = _Body(w, flavor, shape)
    if flavor == "exact":
        initial = w.array("x", w.call("grid", w.seed_for_array(), 1, shape=shape))
    else:
        initial = w.array("x", w.call("uniform", w.seed_for_array(), -1.0, 1.0, shape=shape))
    steps, events = body.draw()
    per_iteration = sum(step.ops for step in steps) + sum(step.ops / period for period, _, step in events)
    drawn_iterations = max(1, int(round(drawn_ops / per_iteration)))
    iterations = max(1, int(round(target_ops / per_iteration)))
    read = w.choice(["numpy", "item"])
    syncs = w.sync_points(int(w.rng.choice([0, 1, 2, 3])), drawn_iterations, iterations)
    w.write_tables(iterations)
    sync_line = 'check(f"x at iteration {t}", x.numpy())' if read == "numpy" else \
        'check(f"sum at iteration {t}", x.sum().item())'
    w.lines += _loop_lines(steps, events, iterations, syncs, sync_line)
    w.lines.append('check("x", x.numpy())')
    w.parameters.update(flavor=flavor, state=shape, iterations=iterations, body=len(steps), events=len(events),
                        syncs=len(syncs))
    w.ops += int(per_iteration * iterations)
    r = w.reference

    def on_sync(t, state):
        if read == "numpy":
            w.expect_value(f"x at iteration {t}", state)
        else:
            w.expect_value(f"sum at iteration {t}", r.sum(state))
    final = _run_loop(Tracked(initial), steps, events, iterations, syncs, on_sync)
    w.expect_value("x", final)


def _gradient(w):
    w.choose_dtype()
    shape = _random_state_shape(w.rng, 12)
    drawn_ops, target_ops = w.draw_size()
    initial = w.array("a", w.call("uniform", w.seed_for_array(), -1.0, 1.0, shape=shape), requires_grad=True)
    w.lines.append("x = a.clone()  # in-place steps must not touch the leaf")
    w.ops += 1
    # noise and residual strengths shrink with the drawn length, so the state's random walk and the derivative's
    # drift stay O(1) however long the chain (a smaller size override keeps the same program prefix)
    body_estimate = max(drawn_ops / 12.0, 1.0)
    body = _Body(w, "gradient", shape, noise=1.0 / math.sqrt(body_estimate), strength=min(0.3, 2.0 / body_estimate))
    steps, events = body.draw()
    per_iteration = sum(step.ops for step in steps) + sum(step.ops / period for period, _, step in events)
    drawn_iterations = max(1, int(round(drawn_ops / per_iteration)))
    iterations = max(1, int(round(target_ops / per_iteration)))
    syncs = w.sync_points(int(w.rng.choice([0, 1, 2])), drawn_iterations, iterations)
    weights_call = w.call("uniform", w.seed_for_array(), -1.0, 1.0, shape=shape)
    w.write_tables(iterations)
    w.lines += _loop_lines(steps, events, iterations, syncs, 'check(f"x at iteration {t}", x.detach().numpy())')
    weights = w.array("W", weights_call)
    w.lines += ["loss = (x * W).sum()", "loss.backward()", 'check("loss", loss.item())',
                'check("a.grad", a.grad.numpy())']
    w.ops += int(per_iteration * iterations) + 2
    w.parameters.update(state=shape, iterations=iterations, body=len(steps), events=len(events), syncs=len(syncs))
    r = w.reference
    final = _run_loop(r.leaf(initial), steps, events, iterations, syncs,
                      lambda t, state: w.expect_value(f"x at iteration {t}", state))
    loss = r.sum(r.multiply(final, weights))
    w.expect_value("loss", loss)
    w.expect_gradient("a.grad", loss, shape)


def _fanout(w):
    w.choose_dtype()
    r = w.reference
    shape = _random_state_shape(w.rng, 8)
    drawn, consumers = w.draw_size()
    gradient = w.rng.random() < 0.35
    combiner = w.choice(["sum", "loop", "in_place", "stack", "cat", "tree"])
    reduction = w.choice(["none", "sum", "mean"] + ([] if gradient else ["amax"]))
    tree_op = w.choice(["add", "average"] + ([] if gradient else ["maximum"]))
    kinds = [w.choice(["affine", "tanh", "sin", "slice", "reduce"]) for _ in range(int(w.rng.integers(1, 5)))]
    w.parameters.update(state=shape, consumers=consumers, combiner=combiner, differentiated=gradient)
    leaf_values = w.array("v0", w.call("uniform", w.seed_for_array(), -1.0, 1.0, shape=shape), requires_grad=gradient)
    c0, d0 = float(np.float32(w.rng.uniform(0.5, 1.0))), float(np.float32(w.rng.uniform(-0.5, 0.5)))
    base = w.choice(["affine", "tanh"])
    v0 = r.leaf(leaf_values) if gradient else Tracked(leaf_values)
    if base == "affine":
        w.lines.append(f"v = v0 * {_number(c0)} + {_number(d0)}  # pending: every consumer reads it")
        v = r.add(r.multiply(v0, c0), d0)
    else:
        w.lines.append(f"v = mj.tanh(v0 * {_number(c0)})  # pending: every consumer reads it")
        v = r.tanh(r.multiply(v0, c0))
    table = w.array("T", w.call("uniform", w.seed_for_array(), -1.0, 1.0, shape=(consumers,) + shape))
    dim = int(w.rng.integers(0, len(shape)))
    k = int(w.rng.integers(0, shape[0]))
    c = float(np.float32(w.rng.uniform(-1.0, 1.0)))
    templates = {
        "affine": (f"v * T[i] + {_number(c)}", lambda i: r.add(r.multiply(v, table[i]), c)),
        "tanh": ("mj.tanh(v + T[i])", lambda i: r.tanh(r.add(v, table[i]))),
        "sin": ("mj.sin(v) * T[i]", lambda i: r.multiply(r.sin(v), table[i])),
        "slice": (f"v[{k}:{k + 1}] * T[i]", lambda i: r.multiply(r.index(v, (slice(k, k + 1),)), table[i])),
        "reduce": (f"(v * T[i]).sum({dim}, keepdim=True) + v",
                   lambda i: r.add(r.sum(r.multiply(v, table[i]), dim, True), v)),
    }
    w.lines.append("consumers = []")
    w.lines.append(f"for i in range({consumers}):")
    for position, kind in enumerate(kinds):
        keyword = "if" if position == 0 else "elif"
        if len(kinds) > 1:
            w.lines.append(f"    {keyword} i % {len(kinds)} == {position}:" if position < len(kinds) - 1
                           else "    else:")
            w.lines.append(f"        consumers.append({templates[kind][0]})")
        else:
            w.lines.append(f"    consumers.append({templates[kind][0]})")
    references = [templates[kinds[i % len(kinds)]][1](i) for i in range(consumers)]
    w.ops += consumers * 3
    for j in w.sync_points(int(w.rng.choice([0, 1, 2])), drawn, consumers):
        w.lines.append(f'check("consumer {j}", consumers[{j}].numpy())')
        w.expect_value(f"consumer {j}", references[j])
    if combiner == "sum":
        w.lines.append("result = sum(consumers)")
    elif combiner == "loop":
        w.lines += ["result = consumers[0]", "for item in consumers[1:]:", "    result = result + item"]
    elif combiner == "in_place":
        w.lines += [f"result = mj.zeros({', '.join(str(e) for e in shape)}, dtype=\"{w.dtype}\")",
                    "for item in consumers:", "    result += item"]
    elif combiner in ("stack", "cat"):
        w.lines.append("result = mj.stack(consumers)" if combiner == "stack" else "result = mj.cat(consumers, 0)")
        if reduction != "none":
            w.lines.append(f"result = result.{reduction}(0)")
    else:
        operation = {"add": "level[j] + level[j + 1]", "average": "(level[j] + level[j + 1]) * 0.5",
                     "maximum": "mj.maximum(level[j], level[j + 1])"}[tree_op]
        w.lines += ["level = consumers", "while len(level) > 1:",
                    f"    paired = [{operation} for j in range(0, len(level) - 1, 2)]",
                    "    level = paired + level[len(paired) * 2:]", "result = level[0]"]

    def combine(items):
        if combiner in ("sum", "loop", "in_place"):
            total = items[0] if combiner != "in_place" else r.add(Tracked(np.zeros(shape)), items[0])
            for item in items[1:]:
                total = r.add(total, item)
            return total
        if combiner in ("stack", "cat"):
            joined = r.concatenate(items, 0, stack=combiner == "stack")
            return joined if reduction == "none" else getattr(r, reduction)(joined, 0)
        level = items
        while len(level) > 1:
            if tree_op == "add":
                paired = [r.add(level[j], level[j + 1]) for j in range(0, len(level) - 1, 2)]
            elif tree_op == "average":
                paired = [r.multiply(r.add(level[j], level[j + 1]), 0.5) for j in range(0, len(level) - 1, 2)]
            else:
                paired = [r.maximum(level[j], level[j + 1]) for j in range(0, len(level) - 1, 2)]
            level = paired + level[len(paired) * 2:]
        return level[0]
    result = combine(references)
    w.ops += consumers * (2 if combiner == "tree" else 1)
    w.lines.append('check("result", result.numpy())')
    w.expect_value("result", result)
    if gradient:
        weights = w.array("W", w.call("uniform", w.seed_for_array(), -1.0, 1.0, shape=result.shape))
        w.lines += ["loss = (result * W).sum()", "loss.backward()", 'check("v0.grad", v0.grad.numpy())']
        loss = r.sum(r.multiply(result, weights))
        # The backward adds the consumers' contributions at v one after another (2 per consumer at most): up to
        # 2N roundings of the sum of their magnitudes, which the forward mode's own sums (a tree's are only
        # log N deep) do not cover. The magnitudes: the same combination (linear, nonnegative) over |J|.
        magnitudes = [Tracked(item.value, item.error, np.abs(item.jacobian), np.zeros(item.jacobian.shape))
                      for item in references]
        absolute = r.sum(r.multiply(combine(magnitudes), np.abs(weights))).jacobian
        accumulation = 2 * consumers * r.unit * absolute
        w.expect("v0.grad", loss.jacobian.reshape(shape), (loss.jacobian_error + accumulation).reshape(shape))


def _recurrence(w):
    kind = w.choice(["rnn", "running_total"])
    return _rnn(w) if kind == "rnn" else _running_total(w)


def _rnn(w):
    w.choose_dtype()
    r = w.reference
    batch, hidden = int(w.rng.integers(1, 4)), int(w.rng.integers(2, 9))
    drawn, steps = w.draw_size()
    gradient = w.rng.random() < 0.5
    cell = w.choice(["plain", "leaky"])
    running = gradient and w.rng.random() < 0.5
    alpha = float(np.float32(w.rng.uniform(0.2, 0.8)))
    w.parameters.update(variant="rnn", batch=batch, hidden=hidden, steps=steps, cell=cell, differentiated=gradient,
                        loss="every step" if running else "last step")
    weight_values = w.array("W", w.call("contraction", w.seed_for_array(), 0.9, shape=(hidden, hidden)),
                            requires_grad=gradient)
    inputs = w.array("X", w.call("uniform", w.seed_for_array(), -1.0, 1.0, shape=(steps, batch, hidden)))
    start = w.array("h", w.call("uniform", w.seed_for_array(), -0.5, 0.5, shape=(batch, hidden)))
    readout = w.array("V", w.call("uniform", w.seed_for_array(), -1.0, 1.0, shape=(batch, hidden)))
    syncs = w.sync_points(int(w.rng.choice([0, 1, 2])), drawn, steps)
    update = "mj.tanh(h @ W + X[t])" if w.rng.random() < 0.7 else "mj.tanh(mj.matmul(h, W) + X[t])"
    if cell == "leaky":
        update = f"h * {_number(1.0 - alpha)} + {update} * {_number(alpha)}"
    if running:
        w.lines.append(f"total = mj.zeros((), dtype=\"{w.dtype}\")")
    w.lines += [f"for t in range({steps}):", f"    h = {update}"]
    if running:
        w.lines.append("    total = total + (h * V).sum()")
    if syncs:
        w.lines += [f"    if t in {set(syncs)}:", '        check(f"h at step {t}", h.detach().numpy())']
    w.lines.append('check("h", h.detach().numpy())')
    w.ops += steps * (4 + (5 if cell == "leaky" else 0) + (3 if running else 0))
    weight = r.leaf(weight_values) if gradient else Tracked(weight_values)
    h = Tracked(start)
    total = Tracked(np.zeros(()))
    sync_set = set(syncs)
    for t in range(steps):
        new = r.tanh(r.add(r.matmul(h, weight), inputs[t]))
        if cell == "leaky":
            new = r.add(r.multiply(h, float(np.float32(1.0 - alpha))), r.multiply(new, alpha))
        h = new
        if running:
            total = r.add(total, r.sum(r.multiply(h, readout)))
        if t in sync_set:
            w.expect_value(f"h at step {t}", h)
    w.expect_value("h", h)
    if gradient:
        if not running:
            w.lines.append("total = (h * V).sum()")
            total = r.sum(r.multiply(h, readout))
        w.lines += ["total.backward()", 'check("total", total.item())', 'check("W.grad", W.grad.numpy())']
        w.expect_value("total", total)
        w.expect_gradient("W.grad", total, (hidden, hidden))


def _running_total(w):
    w.choose_dtype()
    r = w.reference
    features, outputs = int(w.rng.integers(2, 7)), int(w.rng.integers(1, 5))
    batch, distinct = int(w.rng.integers(2, 9)), int(w.rng.integers(1, 9))
    drawn, batches = w.draw_size()
    variant = w.choice(["forward", "backward_once", "backward_each", "training"], [2, 2, 1, 2])
    w.parameters.update(variant=f"running total, {variant}", batches=batches, features=features, outputs=outputs,
                        batch=batch, distinct_batches=distinct)
    weight_values = w.array("W", w.call("uniform", w.seed_for_array(), -1.0, 1.0, shape=(features, outputs)),
                            requires_grad=variant != "forward")
    inputs = w.array("X", w.call("uniform", w.seed_for_array(), -1.0, 1.0, shape=(distinct, batch, features)))
    targets = w.array("Y", w.call("uniform", w.seed_for_array(), -1.0, 1.0, shape=(distinct, batch, outputs)))
    syncs = w.sync_points(int(w.rng.choice([0, 1, 2])), drawn, batches)
    scale = 2.0 / (batch * outputs)
    # the error bound of the training loop grows by at most e^rate: |1 - lr H| is bounded by 1 + lr |H| per step
    steepest = max(float(np.abs(scale * (inputs[p].T @ inputs[p])).sum(1).max()) for p in range(distinct))
    rate = float(np.float32(w.rng.uniform(0.3, 2.0) / (max(drawn, 1) * steepest)))
    w.lines.append(f"total = mj.zeros((), dtype=\"{w.dtype}\")")
    w.lines.append(f"for b in range({batches}):")
    w.lines.append(f"    loss = ((X[b % {distinct}] @ W - Y[b % {distinct}]) ** 2).mean()")
    if variant in ("backward_each", "training"):
        w.lines.append("    loss.backward()")
    if variant == "training":
        w.lines += ["    with mj.no_grad():", f"        W -= {_number(rate)} * W.grad", "    W.grad = None"]
    w.lines.append("    total = total + loss" if variant in ("forward", "backward_once") else
                   "    total = total + loss.detach()")
    if syncs:
        w.lines += [f"    if b in {set(syncs)}:", '        check(f"total after batch {b}", total.item())']
    w.lines.append('check("total", total.item())')
    w.ops += batches * (8 + (6 if variant in ("backward_each", "training") else 0))
    differentiated = variant in ("backward_once", "backward_each")
    weight = r.leaf(weight_values) if differentiated else Tracked(weight_values)
    total = Tracked(np.zeros(()))
    sync_set = set(syncs)
    for b in range(batches):
        x, y = inputs[b % distinct], targets[b % distinct]
        residual = r.subtract(r.matmul(x, weight), y)
        loss = r.mean(r.square(residual))
        if variant == "training":  # the gradient metajit's backward computes: X^T (2 / n) (X W - Y)
            frozen = Tracked(weight.value, weight.error)
            gradient = r.multiply(r.matmul(x.T, r.subtract(r.matmul(x, frozen), y)), scale, ulps=3.0)
            weight = r.subtract(weight, r.multiply(gradient, rate))
        total = r.add(total, loss if differentiated else Tracked(loss.value, loss.error))
        if b in sync_set:
            w.expect_value(f"total after batch {b}", total)
    w.expect_value("total", total)
    if variant == "backward_once":
        w.lines.append("total.backward()")
    if differentiated:
        w.lines.append('check("W.grad", W.grad.numpy())')
        w.expect_gradient("W.grad", total, (features, outputs))
    if variant == "training":
        w.lines.append('check("W", W.detach().numpy())')
        w.expect_value("W", weight)


_GENERATORS = {"chain": _chain, "fanout": _fanout, "gradient": _gradient, "recurrence": _recurrence}


def generate(seed, large=False, shape=None, size=None, sabotage=False):
    """The program of case `seed` with its reference. `shape` and `size` replace what the seed draws (the rest of
    the program stays the same: a smaller size runs a prefix of it); `sabotage` puts a small relative error into
    every reference op (a deliberately wrong reference, which must make the case fail)."""
    rng = np.random.default_rng(seed)
    drawn_shape = SHAPES[int(rng.integers(len(SHAPES)))]
    shape = shape or drawn_shape
    writer = _Writer(seed, rng, shape, large, size, sabotage)
    started = time.perf_counter()
    _GENERATORS[shape](writer)
    writer.parameters["size"] = writer.size
    return Program(seed, shape, large, writer.size, writer.parameters, writer.lines, writer.expected, writer.ops,
                   time.perf_counter() - started)


# ============================================================================================== running
class Failure:
    """A failing case: what went wrong and how to rerun, shrink and reproduce it."""

    def __init__(self, seed, mode, message, program=None, reproducer_path=None):
        self.seed, self.mode, self.message = seed, mode, message
        self.program, self.reproducer_path = program, reproducer_path

    def __str__(self):
        large = " --large" if self.mode == "deep-large" else ""
        text = f"deep fuzz case seed={self.seed} ({self.mode} mode): {self.message}"
        if self.program is not None:
            text += f"\n  parameters: {self.program.describe()}"
            flags = f"--seed {self.seed}{large} --shape {self.program.shape}"
            text += f"\n  rerun:  python tests/python/deep_graph_fuzzer.py {flags}"
            text += f"\n  shrink: python tests/python/deep_graph_fuzzer.py {flags} --shrink"
        if self.reproducer_path:
            text += f"\n  standalone reproducer: {self.reproducer_path}"
        return text


class _Mismatch(Exception):
    pass


def compare(name, actual, expected, bound, dtype):
    """Raises _Mismatch unless `actual` lies within SAFETY * bound of `expected` everywhere."""
    if isinstance(actual, np.ndarray) and actual.dtype != np.dtype(dtype):
        raise _Mismatch(f"{name}: dtype {actual.dtype}, expected {dtype}")
    actual = np.asarray(actual, dtype=np.float64)
    if actual.shape != expected.shape:
        raise _Mismatch(f"{name}: shape {actual.shape}, expected {expected.shape}")
    distance = np.abs(actual - expected)
    bad = ~(distance <= SAFETY * bound)
    if bad.any():
        ratio = np.where(bound > 0, distance / np.where(bound > 0, bound, 1.0), np.inf)
        worst = np.unravel_index(int(np.argmax(np.where(bad, ratio, -1.0))), bad.shape) if bad.ndim else ()
        raise _Mismatch(f"{name}: {int(bad.sum())} of {bad.size} elements outside the bound; worst at "
                        f"{tuple(int(i) for i in worst)}: metajit {actual[worst]!r}, expected {expected[worst]!r} "
                        f"+- {SAFETY * bound[worst]!r} (distance {distance[worst]!r})")
    return float(np.max(np.where(bound > 0, distance / np.where(bound > 0, bound, 1.0), 0.0), initial=0.0))


LAST_REPORT = None  # one line about the last case run: what it was, its wall time, its memory


def _memory_mib(field):
    """VmRSS or VmHWM of this process in MiB (None where /proc is missing)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _reset_peak_memory():
    """Starts a new high-water mark (Linux: clear_refs 5), so each case's peak is its own, not its worker's."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
    except OSError:
        pass


def limit_memory():
    """Caps this process's address space (once per process: tools/fuzz.py's workers, this file's command line),
    so a runaway case raises MemoryError and is reported instead of waking the OOM killer on a shared machine."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = ADDRESS_SPACE_LIMIT_MIB * 2 ** 20
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    if soft == resource.RLIM_INFINITY or soft > limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _peak_rss_mib():
    peak = _memory_mib("VmHWM")
    return peak if peak is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def execute(program):
    """Runs the program with metajit; returns (failure message or None, measurements)."""
    import metajit as mj
    namespace = {}
    exec(compile(PRELUDE, "<deep fuzzer prelude>", "exec"), namespace)
    checked = {}

    def check(name, actual):
        if name not in program.expected:
            raise _Mismatch(f"the program checked {name!r}, which the reference does not know")
        value, bound = program.expected[name]
        checked[name] = compare(name, actual, value, bound, program.parameters["dtype"])
    namespace["check"] = check
    stats_before = mj.stats()
    resident_before = _memory_mib("VmRSS") or 0.0
    _reset_peak_memory()
    started = time.perf_counter()
    message = None
    try:
        exec(compile(program.source(), "<deep program>", "exec"), namespace)
        missing = sorted(set(program.expected) - set(checked))
        if missing:
            message = f"the program never checked {missing}"
    except _Mismatch as mismatch:
        message = f"wrong value: {mismatch}"
    except Exception as error:  # noqa: BLE001  (an error metajit raises is a finding)
        lines = program.lines
        where = ""
        for frame in traceback.extract_tb(error.__traceback__):
            if frame.filename == "<deep program>" and 1 <= frame.lineno <= len(lines):
                where = f" at program line {frame.lineno}: {lines[frame.lineno - 1].strip()}"
        message = f"error{where}: {type(error).__name__}: {error}\n" + \
            "".join(traceback.format_exception(type(error), error, error.__traceback__)[-6:])
    seconds = time.perf_counter() - started
    namespace.clear()  # the prelude's functions hold the namespace in a cycle: free the program's tensors now
    gc.collect()
    stats_after = mj.stats()
    measurements = {
        "seconds": seconds,
        "kernels_compiled": int(stats_after["kernels_compiled"] - stats_before["kernels_compiled"]),
        "compile_seconds": stats_after["compile_seconds"] - stats_before["compile_seconds"],
        "peak_mib": _peak_rss_mib(),
        "resident_before_mib": resident_before,
        "vars_live": int(stats_after["vars_live"]),  # after the program's tensors are gone: what stays
        "worst_ratio": max(checked.values(), default=0.0),
    }
    if message is None and measurements["peak_mib"] > MEMORY_LIMIT_MIB:
        message = f"memory: the process peaked at {measurements['peak_mib']:.0f} MiB (limit {MEMORY_LIMIT_MIB})"
    return message, measurements


def reproducer_text(program):
    """A standalone script: the program and its expected values; exits with status 1 on a mismatch."""
    entries = []
    for name, (value, bound) in program.expected.items():
        entries.append(f"    {name!r}: (np.array({value.tolist()!r}), np.array({bound.tolist()!r})),")
    header = (f'"""Reproducer of deep fuzz case seed={program.seed}{" (large)" if program.large else ""}: '
              f'{program.describe()}.\nRegenerate: python tests/python/deep_graph_fuzzer.py --seed {program.seed}'
              f'{" --large" if program.large else ""} --shape {program.shape} --size <size>"""\n')
    checker = (f"SAFETY = {SAFETY}\nEXPECTED = {{\n" + "\n".join(entries) + "\n}\n\n\n"
               "def check(name, actual):\n"
               "    value, bound = EXPECTED[name]\n"
               "    actual = np.asarray(actual, dtype=np.float64)\n"
               "    distance = np.abs(actual - value)\n"
               "    if actual.shape != value.shape or not np.all(distance <= SAFETY * bound):\n"
               "        print(f'MISMATCH at {name}: metajit {actual}, expected {value} +- {SAFETY * bound}')\n"
               "        raise SystemExit(1)\n"
               "    print(f'ok: {name}')\n\n\n")
    return header + PRELUDE + "\n\n" + checker + program.source() + 'print("all checks passed")\n'


def _reproducer_directory():
    directory = os.environ.get("METAJIT_DEEP_FUZZ_DIR") or os.path.join(tempfile.gettempdir(), "metajit-deep-fuzz")
    os.makedirs(directory, exist_ok=True)
    return directory


def write_reproducer(program):
    name = f"deep-case-{program.seed}{'-large' if program.large else ''}-{program.shape}.py"
    path = os.path.join(_reproducer_directory(), name)
    with open(path, "w") as handle:
        handle.write(reproducer_text(program))
    return path


def run_case(seed, mode="deep", exclude=(), shape=None, size=None, sabotage=False, write=True):
    """Runs case `seed` (mode 'deep' or 'deep-large'); returns a list with its Failure, or an empty list. Sets
    LAST_REPORT. `exclude` is accepted for tools/fuzz.py's interface (this fuzzer knows no bugs to leave out)."""
    global LAST_REPORT
    del exclude
    large = mode == "deep-large"
    LAST_REPORT = f"seed {seed}: generating"
    try:
        program = generate(seed, large, shape, size, sabotage)
    except Exception:  # noqa: BLE001  (a generator bug is reported like a failure)
        LAST_REPORT = f"seed {seed}: the generator failed"
        return [Failure(seed, mode, "fuzzer error while generating:\n" + traceback.format_exc())]
    message, measured = execute(program)
    LAST_REPORT = (f"seed {seed} {program.shape} ({program.describe()}; ~{program.ops} ops): "
                   f"{'FAILED' if message else 'passed'} in {measured['seconds']:.1f} s "
                   f"(reference {program.reference_seconds:.1f} s, {measured['kernels_compiled']} kernels compiled "
                   f"in {measured['compile_seconds']:.1f} s, peak {measured['peak_mib']:.0f} MiB "
                   f"from {measured['resident_before_mib']:.0f} MiB, {measured['vars_live']} Vars live after, "
                   f"worst error {measured['worst_ratio']:.2g} of the bound)")
    if message is None:
        return []
    path = None
    if write:
        try:
            path = write_reproducer(program)
        except OSError as error:
            path = f"(could not write it: {error})"
    return [Failure(seed, mode, message, program, path)]


# ============================================================================================== command line
def _subprocess_fails(seed, large, shape, size, timeout):
    command = [sys.executable, os.path.abspath(__file__), "--seed", str(seed), "--shape", shape, "--size",
               str(size), "--no-reproducer"] + (["--large"] if large else [])
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return True, f"size {size}: hang (more than {timeout} s)"
    return result.returncode != 0, f"size {size}: exit status {result.returncode}: " + \
        (result.stdout.strip().splitlines() or [""])[-1][:300]


def shrink(seed, large, shape, size, budget, timeout):
    """The smallest size at which the case still fails, by bisection in subprocesses (a crash counts too).
    Returns (shape, size) or None when the case passes."""
    program = generate(seed, large, shape, size)
    high = program.size
    failing, why = _subprocess_fails(seed, large, program.shape, high, timeout)
    print(why, flush=True)
    if not failing:
        print("the case passes at its full size: nothing to shrink")
        return None
    low, started = 1, time.time()
    while low < high and time.time() - started < budget:
        middle = (low + high) // 2
        failing, why = _subprocess_fails(seed, large, program.shape, middle, timeout)
        print(why, flush=True)
        if failing:
            high = middle
        else:
            low = middle + 1
    return program.shape, high


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--large", action="store_true", help="the --large size ranges")
    parser.add_argument("--shape", choices=SHAPES, help="this shape instead of the one the seed draws")
    parser.add_argument("--size", type=int, help="this size instead of the one the seed draws")
    parser.add_argument("--show-program", action="store_true", help="print the program")
    parser.add_argument("--no-reproducer", action="store_true", help="do not write a reproducer script")
    parser.add_argument("--sabotage-reference", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--shrink", action="store_true", help="find the smallest failing size")
    parser.add_argument("--shrink-seconds", type=float, default=600)
    parser.add_argument("--case-timeout", type=float, default=600)
    args = parser.parse_args(argv)
    limit_memory()
    mode = "deep-large" if args.large else "deep"
    if args.shrink:
        found = shrink(args.seed, args.large, args.shape, args.size, args.shrink_seconds, args.case_timeout)
        if found is None:
            return 0
        program = generate(args.seed, args.large, *found)
        print(f"smallest failing size: {found[1]} ({program.describe()})")
        print(f"rerun: python tests/python/deep_graph_fuzzer.py --seed {args.seed}"
              f"{' --large' if args.large else ''} --shape {found[0]} --size {found[1]}")
        print(f"standalone reproducer: {write_reproducer(program)}")
        print(program.source())
        return 1
    if args.show_program:
        print(generate(args.seed, args.large, args.shape, args.size, args.sabotage_reference).source())
    failures = run_case(args.seed, mode, shape=args.shape, size=args.size, sabotage=args.sabotage_reference,
                        write=not args.no_reproducer)
    print(LAST_REPORT, flush=True)
    for failure in failures:
        print(failure, flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
