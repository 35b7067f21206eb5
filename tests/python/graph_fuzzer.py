"""Seeded differential fuzzer: random graphs of meta-ops and library ops, run by metajit and by an independent numpy
reference, compared element by element; plus random differentiable programs whose mj.grad is compared with central
finite differences.

A case is a pure function of its integer seed (numpy.random.default_rng(seed)): `generate(seed)` builds a small
program (a list of statements, each one line of Python calling metajit's public API) together with its numpy
reference, `run_case(seed)` executes the program text with metajit and compares every output. A failing case
prints a self-contained reproducer: the metajit calls with the literal input arrays and the expected values.

The reference never asks metajit anything. It encodes the documented semantics (docs/type_promotion.md,
docs/index_expressions.md, tests/python/test_elementwise.py): PyTorch type promotion (no int16: uint8 with a signed
type gives int32; bool arithmetic counts in int64; Python scalars decide only the category), true division of
integers giving float32, floor division/modulo with Python semantics and 0 for an integer zero divisor, wrapping
int8/uint8 arithmetic, float16 computed in float32 and rounded when stored, sum/prod of integers in int64, mean of
integers in float32, reindex/reindex_reduce with overflow values and conditions, floor semantics and clamped
extras in index expressions.

Floats: each reference value carries the exact real result (computed in float64), an absolute error bound `err`
(propagated through every op: input errors times the op's sensitivity plus a few units of rounding of the op's
dtype; 0 where the result is exact) and a `valid` mask. Elements where the documented result is undefined (float
to integer casts out of range, integer overflow in int32/int64) or where the result is discontinuous within the
error bound (a comparison of nearly equal inexact values, floor of a value within err of an integer, x // y near
an integer, a cast of an inexact value near an integer boundary, values near float overflow) are masked out.
Everything else is compared: integers and bools exactly, floats within 2 * err (exact float results exactly);
NaN and infinities only where the reference produces them from exact inputs, compared with equal_nan semantics.

Undefined constructs are avoided rather than masked where metajit documents nothing (int32/int64 overflow:
such an op is not generated; max/min of an integer tensor over an empty dim; negative integer exponents;
subtraction of two bools, which raises). The sign of a zero is tracked (Ref.zsign) so that 1 / x is compared only
where the sign of x == 0 is defined. Gradient mode reuses the reference with every input uncertain by
GRAD_RADIUS, so no kink or discontinuity lies within reach of the finite differences. See docs/fuzzing.md.
"""
import math
import os
import sys
import traceback

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(os.path.dirname(_HERE))
if os.path.join(_ROOT, "python") not in sys.path:
    sys.path.append(os.path.join(_ROOT, "python"))  # after PYTHONPATH, which may name another build
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
os.environ.setdefault("METAJIT_CACHE_DIR", os.path.join(_ROOT, "build", "test-kernel-cache"))

import metajit as mj  # noqa: E402
import metajit.nn.functional as F  # noqa: E402

DTYPES = ["bool", "int8", "uint8", "int32", "int64", "float16", "float32", "float64"]
FLOAT_DTYPES = ("float16", "float32", "float64")
INT_DTYPES = ("int8", "uint8", "int32", "int64")
UNIT = {"float16": 2.0 ** -11, "float32": 2.0 ** -24, "float64": 2.0 ** -53}  # unit roundoff
MANTISSA = {"float16": 11, "float32": 24, "float64": 53}
LIMIT = {"float16": 3.0e4, "float32": 1.0e36, "float64": 1.0e290}  # larger finite values: too close to overflow
TINY = {"float16": 6.2e-5, "float32": 1.2e-38, "float64": 2.3e-308}  # smallest normals: underflow allowance
SAFETY = 2.0  # comparison slack on the propagated error bounds
MAX_NUMEL = 256  # no intermediate gets bigger than this (keeps literals and kernels small)
GRAD_RADIUS = 1e-5  # gradient mode: inputs count as uncertain by this much, so no kink lies within reach of the
#                     finite differences (epsilon 1e-6)


class Reject(Exception):
    """The generator's choice is not allowed (undefined behaviour, too big, a known bug); it picks another."""


# ============================================================================================== dtypes, promotion
def category(dtype):
    return 0 if dtype == "bool" else 2 if dtype in FLOAT_DTYPES else 1


def is_float(dtype):
    return dtype in FLOAT_DTYPES


def promote(a, b):
    """Result dtype of two tensors (docs/type_promotion.md)."""
    ca, cb = category(a), category(b)
    if ca != cb:
        return a if ca > cb else b
    if a == b:
        return a
    if ca == 2:
        return max(a, b, key=FLOAT_DTYPES.index)
    if "uint8" in (a, b):
        other = b if a == "uint8" else a
        return "int64" if other == "int64" else "int32"
    return max(a, b, key=["int8", "int32", "int64"].index)


def scalar_dtype(value, tensor_dtype):
    """A Python scalar next to a tensor: the tensor's dtype unless the scalar's category is higher."""
    default = "bool" if isinstance(value, bool) else "int64" if isinstance(value, int) else "float32"
    return tensor_dtype if category(default) <= category(tensor_dtype) else default


# ============================================================================================== reference values
class Ref:
    """Reference value: `value` (float64 holding the exact real result for float dtypes, else the dtype itself),
    `err` (float64 absolute error bound, 0 where exact), `valid` (elements that are compared) and `zsign` (False
    where the value is a zero whose sign nothing documents: the zero of a sum, of a max/min of +0 and -0, of
    relu(-0.0), of a float modulo (Python gives the divisor's sign, PyTorch the dividend's); dividing by such a
    zero gives an infinity of unknown sign)."""
    __slots__ = ("dtype", "value", "err", "valid", "zsign")

    def __init__(self, dtype, value, err=None, valid=None, zsign=None):
        value = np.asarray(value)
        self.dtype = dtype
        if dtype in FLOAT_DTYPES:
            self.value = np.array(value, dtype=np.float64)
        else:
            self.value = np.array(value).astype(dtype)
        shape = self.value.shape
        self.err = np.zeros(shape) if err is None else np.array(np.broadcast_to(err, shape), dtype=np.float64)
        self.valid = np.ones(shape, bool) if valid is None else np.array(np.broadcast_to(valid, shape), dtype=bool)
        self.zsign = np.ones(shape, bool) if zsign is None else np.array(np.broadcast_to(zsign, shape), dtype=bool)

    @property
    def shape(self):
        return self.value.shape

    @property
    def ndim(self):
        return self.value.ndim

    @property
    def size(self):
        return self.value.size

    def map(self, function):
        """The same dtype with a shape function (reshape, transpose, slice, ...) applied to all three arrays."""
        return Ref(self.dtype, np.array(function(self.value)), np.array(function(self.err)),
                   np.array(function(self.valid)), np.array(function(self.zsign)))

    def literal_array(self):
        """The value as an array of its own dtype (float values rounded to the dtype)."""
        return self.value.astype(self.dtype)


def _broadcast(*arrays):
    return [np.array(a) for a in np.broadcast_arrays(*arrays)]


def _representable(r, dtype):
    with np.errstate(all="ignore"):
        return r.astype(dtype).astype(np.float64) == r


def finish_float(dtype, r, err, valid, inexact, exact, ulps=1.0, certain_nan=None, zsign=True):
    """A float result: adds `ulps` roundings of `dtype` to the propagated error (none where `exact` and the value
    is representable), masks values near overflow and non-finite values reached from inexact inputs (unless
    `certain_nan`: NaN for every input within the error bounds)."""
    with np.errstate(all="ignore"):
        r = np.asarray(r, dtype=np.float64)
        if certain_nan is not None:
            inexact = inexact & ~np.broadcast_to(certain_nan, r.shape)
        err, valid, inexact, exact = _broadcast(err, valid, inexact, exact)
        err, valid, inexact, exact = [np.broadcast_to(a, r.shape) for a in (err, valid, inexact, exact)]
        finite = np.isfinite(r)
        total = err + ulps * UNIT[dtype] * np.abs(r) + TINY[dtype]
        total = np.where(exact & _representable(r, dtype), 0.0, total)
        valid = valid & ~(~finite & inexact) & ~(finite & (np.abs(r) > LIMIT[dtype])) & (np.isfinite(total) | ~finite)
        total = np.where(finite & valid, total, 0.0)
    return Ref(dtype, r, total, valid, zsign)


def truth(x):
    """x != 0 with its validity (an inexact float within err of 0 has no certain truth value)."""
    if x.dtype == "bool":
        return x.value.copy(), x.valid.copy()
    value = x.value != 0
    valid = x.valid.copy()
    if is_float(x.dtype):
        valid &= ~((np.abs(x.value) <= x.err) & (x.err > 0))
    return value, valid


def cast_ref(x, target):
    """astype semantics: ints wrap, floats truncate toward zero (out of range and NaN are undefined: masked),
    float to float rounds, anything to bool is != 0."""
    source = x.dtype
    if source == target:
        return x
    with np.errstate(all="ignore"):
        if category(source) < 2:
            if target == "bool":
                return Ref("bool", x.value != 0, None, x.valid)
            if target in INT_DTYPES:
                return Ref(target, x.value.astype(np.int64).astype(target), None, x.valid)
            f = x.value.astype(np.float64)
            err = np.where(np.abs(f) < 2.0 ** MANTISSA[target], 0.0, UNIT[target] * np.abs(f))
            valid = x.valid & (np.abs(f) <= LIMIT[target])
            return Ref(target, f, err, valid)
        v, e = x.value, x.err
        if target == "bool":
            value, valid = truth(x)
            return Ref("bool", value, None, valid)
        if target in INT_DTYPES:
            info = np.iinfo(target)
            t = np.trunc(v)
            valid = x.valid & np.isfinite(v) & (t >= info.min) & (t <= info.max)
            valid &= ~((e > 0) & (np.abs(v - np.round(v)) <= e))
            t = np.where(valid, t, 0)
            return Ref(target, t.astype(np.int64).astype(target), None, valid)
        return finish_float(target, v, e, x.valid, e > 0, e == 0, zsign=x.zsign)


def _object(array):
    return np.asarray(array).astype(object)


def _wrap_integers(result, dtype, valid):
    """Exact integer results (object array) in `dtype`: int8/uint8 wrap (documented, as numpy); int32/int64
    overflow is not defined, so such an op is rejected."""
    result = np.asarray(result, dtype=object)
    info = np.iinfo(dtype)
    if dtype in ("int8", "uint8", "bool"):
        span = int(info.max) - int(info.min) + 1
        result = np.asarray((result - int(info.min)) % span + int(info.min), dtype=object)
    else:
        outside = np.asarray((result < int(info.min)) | (result > int(info.max)), dtype=bool)
        if (outside & valid).any():
            raise Reject("integer overflow")
        result = np.asarray(np.where(outside, 0, result), dtype=object)
    return Ref(dtype, result.astype(np.int64).astype(dtype), None, valid)


def _integer_power(base, exponent, dtype, valid):
    """Exact integer powers (object array); results too big to matter are kept modulo 2**64, which is all that
    int8/uint8 wrapping needs; for int32/int64 they are overflow (rejected)."""
    out = np.empty(np.shape(base), dtype=object)
    for index in np.ndindex(np.shape(base)):
        b, e = int(base[index]), int(exponent[index])
        if abs(b) <= 1 or e * math.log2(abs(b)) < 80:
            out[index] = b ** e
        else:
            if dtype not in ("int8", "uint8") and valid[index]:
                raise Reject("integer overflow")
            out[index] = pow(b, e, 2 ** 64)
    return out


def _integer_valued(v):
    with np.errstate(all="ignore"):
        return np.isfinite(v) & (np.floor(v) == v)


def _dyadic(v, dtype):
    """Multiples of 1/1024 small enough that sums of them are exact in `dtype`."""
    with np.errstate(all="ignore"):
        scaled = v * 1024.0
        return np.isfinite(v) & (np.floor(scaled) == scaled)


def _twosum_exact(a, b, s):
    with np.errstate(all="ignore"):
        bb = s - a
        rounding = (a - (s - bb)) + (b - bb)
        return np.isfinite(s) & (rounding == 0)


# ---------------------------------------------------------------------------------------------------- unary ops
def _sigmoid(v):
    with np.errstate(all="ignore"):
        return 1.0 / (1.0 + np.exp(-v))


def _erf(v):
    return np.vectorize(math.erf, otypes=[np.float64])(v) if np.size(v) else np.zeros(np.shape(v))


FLOAT_FUNCTIONS = {  # name: (function, error model, ulps)
    # "monotone": the error bound is the larger change at the ends of the input's interval; "lipschitz1": a
    # derivative of at most 1 in magnitude (the change is at most the input's error, and never more than 2);
    # "tan": monotone between poles, no bound across one; "cosh": convex with its minimum 1 at 0.
    "exp": (np.exp, "monotone", 4), "log": (np.log, "monotone", 4), "sqrt": (np.sqrt, "monotone", 1),
    "rsqrt": (lambda v: 1.0 / np.sqrt(v), "monotone", 2), "sin": (np.sin, "lipschitz1", 4),
    "cos": (np.cos, "lipschitz1", 4), "tanh": (np.tanh, "monotone", 4), "sigmoid": (_sigmoid, "monotone", 6),
    # the libm functions (computed in float32 for float16 and float32, in double for float64)
    "log1p": (np.log1p, "monotone", 4), "expm1": (np.expm1, "monotone", 4), "log2": (np.log2, "monotone", 4),
    "log10": (np.log10, "monotone", 4), "erf": (_erf, "monotone", 4), "tan": (np.tan, "tan", 4),
    "asin": (np.arcsin, "monotone", 4), "acos": (np.arccos, "monotone", 4), "atan": (np.arctan, "monotone", 4),
    "sinh": (np.sinh, "monotone", 4), "cosh": (np.cosh, "cosh", 4),
}
UNARY_OPS = list(FLOAT_FUNCTIONS) + ["neg", "abs", "relu", "floor", "ceil", "round", "logical_not", "bitwise_not"]


def _kink(valid, distance, err, grad):
    """Gradient mode: a kink (max, abs, relu) within the error bound is as bad as a discontinuity."""
    return valid & ~(grad & (np.abs(distance) <= err)) if grad else valid


def ref_unary(op, x, grad=False):
    d = x.dtype
    with np.errstate(all="ignore"):
        if op in FLOAT_FUNCTIONS:
            if not is_float(d):
                x, d = cast_ref(x, "float32"), "float32"
            function, model, ulps = FLOAT_FUNCTIONS[op]
            v, e = x.value, x.err
            r = function(v)
            below, above = function(v - e), function(v + e)
            if model == "lipschitz1":
                err = np.minimum(e, 2.0)
            else:
                err = np.maximum(np.abs(below - r), np.abs(above - r))
            if model == "cosh":  # the interval holds 0: cosh falls to 1 there
                err = np.where(np.abs(v) <= e, np.maximum(err, r - 1.0), err)
            err = np.where(e > 0, err, 0.0)
            certain_nan = np.isnan(r) & np.isnan(below) & np.isnan(above)  # e.g. log of a surely negative value
            valid = x.valid
            if model == "tan":  # a pole (pi/2 + k pi) within the input's interval: any value is possible
                branch = lambda t: np.floor(t / np.pi + 0.5)  # noqa: E731
                valid = valid & ((e == 0) | (branch(v - e) == branch(v + e)))
            if op == "rsqrt":  # rsqrt(+-0) = +-inf
                valid = valid & ~((v == 0) & (e == 0) & ~x.zsign)
            return finish_float(d, r, err, valid, e > 0, False, ulps, certain_nan, x.zsign)
        if op == "neg":
            if d == "bool":
                raise Reject("neg of bool raises")
            if is_float(d):
                return Ref(d, -x.value, x.err, x.valid, x.zsign)
            return _wrap_integers(-_object(x.value), d, x.valid)
        if op == "abs":
            if d == "bool":
                return x
            if is_float(d):
                return Ref(d, np.abs(x.value), x.err, _kink(x.valid, x.value, x.err, grad))
            return _wrap_integers(np.abs(_object(x.value)), d, x.valid)
        if op == "relu":
            if d == "bool":
                x, d = cast_ref(x, "int64"), "int64"
            if is_float(d):
                v = x.value
                r = np.where(v < 0, 0.0, v)
                return Ref(d, r, np.where(v < 0, 0.0, x.err), _kink(x.valid, v, x.err, grad), x.zsign & (r != 0))
            return Ref(d, np.maximum(x.value, 0), None, x.valid)
        if op in ("floor", "ceil", "round"):
            if d == "bool":
                return cast_ref(x, "int64")
            if not is_float(d):
                return x
            v, e = x.value, x.err
            r = {"floor": np.floor, "ceil": np.ceil, "round": np.round}[op](v)
            jump = v - 0.5 if op == "round" else v
            valid = x.valid & ~((e > 0) & (np.abs(jump - np.round(jump)) <= e))
            if grad:
                raise Reject("floor/ceil/round have no useful gradient")
            return finish_float(d, r, 0.0, valid, e > 0, True, zsign=x.zsign)
        if op == "logical_not":
            value, valid = truth(x)
            return Ref("bool", ~value, None, valid)
        if op == "bitwise_not":
            if is_float(d):
                raise Reject("bitwise_not needs an integer or bool operand")
            if d == "bool":
                return Ref("bool", ~x.value, None, x.valid)
            return Ref(d, np.invert(x.value), None, x.valid)
    raise ValueError(op)


# ---------------------------------------------------------------------------------------------------- binary ops
ARITHMETIC = ["add", "sub", "mul", "div", "floor_div", "mod", "pow", "maximum", "minimum"]
COMPARISONS = {"less": np.less, "less_equal": np.less_equal, "greater": np.greater,
               "greater_equal": np.greater_equal, "equal": np.equal, "not_equal": np.not_equal}
LOGICAL = {"logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor}
BITWISE = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor}
BINARY_OPS = ARITHMETIC + list(COMPARISONS) + list(LOGICAL) + list(BITWISE)


def binary_result_dtype(op, a, b):
    if op in COMPARISONS or op in LOGICAL:
        return "bool"
    d = promote(a, b)
    if op in BITWISE:
        if is_float(d):
            raise Reject("bitwise ops need integer or bool operands")
        return d
    if op == "div":
        return d if is_float(d) else "float32"
    if d == "bool":
        if op == "sub":
            raise Reject("subtraction of two bools raises")
        if op in ("add", "mul", "floor_div", "mod", "pow"):
            return "int64"
    return d


def _near_integer(q, eq):
    with np.errstate(all="ignore"):
        return np.abs(q - np.round(q)) <= eq


def ref_binary(op, a, b, grad=False):
    result = binary_result_dtype(op, a.dtype, b.dtype)
    with np.errstate(all="ignore"):
        if op in COMPARISONS or op in LOGICAL or op in BITWISE:
            d = promote(a.dtype, b.dtype)
            if op in LOGICAL:
                (ta, va), (tb, vb) = truth(a), truth(b)
                ta, tb, va, vb = _broadcast(ta, tb, va, vb)
                return Ref("bool", LOGICAL[op](ta, tb), None, va & vb)
            A, B = cast_ref(a, d), cast_ref(b, d)
            x, y, ex, ey, oka, okb = _broadcast(A.value, B.value, A.err, B.err, A.valid, B.valid)
            valid = oka & okb
            if op in COMPARISONS:
                if is_float(d):
                    valid &= ~((np.abs(x - y) <= ex + ey) & (ex + ey > 0))
                return Ref("bool", COMPARISONS[op](x, y), None, valid)
            if d == "bool":
                return Ref("bool", {"bitwise_and": np.logical_and, "bitwise_or": np.logical_or,
                                    "bitwise_xor": np.logical_xor}[op](x, y), None, valid)
            return Ref(d, BITWISE[op](x, y), None, valid)
        A, B = cast_ref(a, result), cast_ref(b, result)
        x, y, ex, ey, oka, okb, za, zb = _broadcast(A.value, B.value, A.err, B.err, A.valid, B.valid, A.zsign,
                                                    B.zsign)
        valid = oka & okb
        zsign = za & zb
        if not is_float(result):
            if result == "bool":  # maximum/minimum of bools
                return Ref("bool", np.logical_or(x, y) if op == "maximum" else np.logical_and(x, y), None, valid)
            X, Y = _object(x), _object(y)
            if op == "add":
                r = X + Y
            elif op == "sub":
                r = X - Y
            elif op == "mul":
                r = X * Y
            elif op in ("floor_div", "mod"):
                zero = np.asarray(Y == 0, dtype=bool)
                safe = np.asarray(np.where(zero, 1, Y), dtype=object)
                r = np.where(zero, 0, X // safe if op == "floor_div" else X % safe)
            elif op == "pow":
                if ((y < 0) & valid).any():
                    raise Reject("negative integer exponent")
                r = _integer_power(x, np.where(y < 0, 0, y), result, valid)
            elif op == "maximum":
                r = np.maximum(X, Y)
            elif op == "minimum":
                r = np.minimum(X, Y)
            else:
                raise ValueError(op)
            return _wrap_integers(r, result, valid)
        inexact = (ex > 0) | (ey > 0)
        exact_in = ~inexact
        single = result != "float64"
        ulps = 1.0
        if op == "add":
            r, err = x + y, ex + ey
            exact = exact_in & _twosum_exact(x, y, r)
        elif op == "sub":
            r, err = x - y, ex + ey
            exact = exact_in & _twosum_exact(x, -y, r)
        elif op == "mul":
            r = x * y
            err = np.abs(x) * ey + np.abs(y) * ex + ex * ey
            exact = exact_in & (single | (_integer_valued(x) & _integer_valued(y) & (np.abs(r) < 2.0 ** 53)))
        elif op == "div":
            valid &= ~((y == 0) & (ey == 0) & ~zb & (x != 0))  # x / +-0: an infinity of unknown sign
            r = x / y
            denominator = np.abs(y) - ey
            err = np.where(denominator > 0, (ex + np.abs(r) * ey) / denominator, np.nan)
            exact = exact_in & single & _representable(r, result) & (r * y == x)
        elif op in ("floor_div", "mod"):
            if op == "floor_div":
                valid &= ~((y == 0) & (ey == 0) & ~zb & (x != 0))
            q = x / y
            denominator = np.abs(y) - ey
            eq = np.where(denominator > 0, (ex + np.abs(q) * ey) / denominator, np.inf) + 4 * UNIT[result] * np.abs(q)
            valid &= ~(inexact & ((denominator <= 0) | _near_integer(q, eq)))
            if op == "floor_div":
                r = np.floor_divide(x, y)
                # From 2^(mantissa - 1) on, integers are whole ulps apart: numpy and PyTorch derive the quotient
                # in the dtype ((x - fmod(x, y)) / y, then minus 1 when the signs differ), and those roundings
                # may land on the next representable integer (16777216 // -0.75 is -22369624 in float32).
                big = np.abs(q) >= 2.0 ** (MANTISSA[result] - 1)
                err = np.where(big, 4 * UNIT[result] * np.abs(q), 0.0)
                exact = valid & ~big
            else:
                r = np.mod(x, y)
                err = ex + (np.abs(np.floor(q)) + 1) * ey + 2 * UNIT[result] * np.abs(y)
                exact = exact_in & _integer_valued(x) & _integer_valued(y)
                zsign = zsign & (r != 0)  # a zero remainder: divisor's sign in Python, dividend's in PyTorch
        elif op == "pow":
            valid &= ~((x == 0) & (ex == 0) & ~za & (y < 0))  # (+-0) ** negative: sign unknown
            # A base whose error interval holds 0, to a power that may be negative: any magnitude, either sign
            # (a float32 log_softmax of 1 + 2e-11 rounds to +0 where the exact value is -2e-11).
            valid &= ~((ex > 0) & (np.abs(x) <= ex) & (y - ey < 0))
            r = np.power(x, y)
            corners = [np.power(x + sx * ex, y + sy * ey) for sx in (-1, 1) for sy in (-1, 1)]
            err = np.max([np.abs(c - r) for c in corners], axis=0)
            # a negative base (surely) with a non-integer exponent (surely) is NaN everywhere in between
            certain_nan = np.isnan(r) & (x + ex < 0) & (np.floor(y - ey) == np.floor(y + ey)) & \
                (np.floor(y - ey) != y - ey) & (np.floor(y + ey) != y + ey)
            err = np.where(inexact, err, 0.0)
            exact = exact_in & _integer_valued(x) & _integer_valued(y) & (y >= 0) & \
                (np.abs(r) < 2.0 ** MANTISSA[result])
            ulps = 4.0
        elif op in ("maximum", "minimum"):
            r = np.maximum(x, y) if op == "maximum" else np.minimum(x, y)
            err = np.maximum(ex, ey)
            zsign = zsign & (r != 0)  # max(+0, -0)
            exact = exact_in
            valid = _kink(valid, x - y, ex + ey, grad)
        else:
            raise ValueError(op)
        return finish_float(result, r, err, valid, inexact, exact, ulps, certain_nan if op == "pow" else None,
                            zsign)


def ref_where(c, x, y):
    tc, vc = truth(c)
    d = promote(x.dtype, y.dtype)
    X, Y = cast_ref(x, d), cast_ref(y, d)
    tc, vc, xv, yv, xe, ye, xok, yok, xz, yz = _broadcast(tc, vc, X.value, Y.value, X.err, Y.err, X.valid, Y.valid,
                                                          X.zsign, Y.zsign)
    return Ref(d, np.where(tc, xv, yv), np.where(tc, xe, ye), vc & np.where(tc, xok, yok), np.where(tc, xz, yz))


# ---------------------------------------------------------------------------------------------------- reductions
def _axes(dims, ndim):
    if dims is None:
        return tuple(range(ndim))
    if isinstance(dims, int):
        dims = [dims]
    return tuple(sorted(d % ndim for d in dims))


def _grouped(array, axes):
    """`array` with the reduced axes moved last and flattened: shape (kept..., n)."""
    kept = [d for d in range(array.ndim) if d not in axes]
    moved = np.transpose(array, kept + list(axes))
    return moved.reshape(moved.shape[:len(kept)] + (int(np.prod([array.shape[a] for a in axes])),))


def ref_reduce(op, x, dims, keepdim, grad=False):
    """sum, prod, max, min, mean, and, or over `dims` (int, sequence or None)."""
    axes = _axes(dims, x.ndim) if x.ndim else ()
    n = int(np.prod([x.shape[a] for a in axes])) if axes else 1
    out_shape = tuple(1 if d in axes else s for d, s in enumerate(x.shape) if keepdim or d not in axes)

    def fold(array, function):
        grouped = _grouped(np.asarray(array), axes) if axes else np.asarray(array)[..., None]
        return function(grouped).reshape(out_shape)

    valid = fold(x.valid, lambda g: g.all(-1))
    if op == "mean":
        total = ref_reduce("sum", x, dims, keepdim)
        if not is_float(total.dtype):
            total = cast_ref(total, "float32")
        return ref_binary("div", total, Ref(total.dtype, np.array(n)))
    with np.errstate(all="ignore"):
        if op in ("and", "or"):
            if x.dtype != "bool":
                raise Reject("and/or reductions are used on bools only")
            return Ref("bool", fold(x.value, lambda g: g.all(-1) if op == "and" else g.any(-1)), None, valid)
        if op in ("sum", "prod"):
            d = x.dtype if is_float(x.dtype) else "int64"
            x = cast_ref(x, d)
            if not is_float(d):
                magnitude = fold(np.abs(x.value.astype(np.float64)), lambda g: g.sum(-1) if op == "sum" else g.prod(-1))
                if ((magnitude > 2.0 ** 62) & valid).any():
                    raise Reject("int64 overflow")
                r = fold(x.value, lambda g: g.sum(-1) if op == "sum" else g.prod(-1))
                return Ref(d, r, None, valid)
            v, e = x.value, x.err
            inexact = fold(e > 0, lambda g: g.any(-1))
            absolute = np.abs(v)
            # partial results may overflow in some summation order: not defined then
            if op == "sum":
                r = fold(v, lambda g: g.sum(-1))
                magnitude = fold(absolute, lambda g: g.sum(-1))
                valid = valid & ~(magnitude > LIMIT[d])
                err = fold(e, lambda g: g.sum(-1)) + (n + 1) * UNIT[d] * magnitude
                exact = ~inexact & fold(_dyadic(v, d), lambda g: g.all(-1)) & \
                    (magnitude * 1024 < 2.0 ** MANTISSA[d])
            else:
                r = fold(v, lambda g: g.prod(-1))
                upper = fold(absolute + e, lambda g: g.prod(-1))
                valid = valid & ~(fold(np.maximum(absolute + e, 1.0), lambda g: g.prod(-1)) > LIMIT[d])
                err = upper - fold(absolute, lambda g: g.prod(-1)) + (n + 1) * UNIT[d] * upper
                exact = ~inexact & fold(_integer_valued(v), lambda g: g.all(-1)) & (upper < 2.0 ** MANTISSA[d])
            return finish_float(d, r, err, valid, inexact, exact, zsign=r != 0)
        if op in ("max", "min"):
            d = x.dtype
            if n == 0:
                if not is_float(d):
                    raise Reject("max/min of an integer tensor over an empty dim is not defined")
                return Ref(d, np.full(out_shape, -np.inf if op == "max" else np.inf), None, valid)
            r = fold(x.value, lambda g: g.max(-1) if op == "max" else g.min(-1))
            if not is_float(d):
                return Ref(d, r, None, valid)
            err = fold(x.err, lambda g: g.max(-1))
            inexact = fold(x.err > 0, lambda g: g.any(-1))
            if grad and n > 1:
                ordered = np.sort(_grouped(x.value, axes) if axes else x.value[..., None], axis=-1)
                gap = (ordered[..., -1] - ordered[..., -2]) if op == "max" else (ordered[..., 1] - ordered[..., 0])
                valid = valid & ~(gap.reshape(out_shape) <= 2 * err)
            return finish_float(d, r, err, valid, inexact, ~inexact, zsign=r != 0)
    raise ValueError(op)


def ref_argreduce(name, x, dim, keepdim):
    """argmax/argmin (int64): first position of the extreme, NaN wins; undecidable where another element is
    within the error bounds of the extreme."""
    source = x if x.dtype != "bool" else cast_ref(x, "uint8")
    v, e = source.value, source.err
    if dim is None:
        flat = Ref(source.dtype, v.reshape(-1), e.reshape(-1), source.valid.reshape(-1))
        result = ref_argreduce(name, flat, 0, False)
        return Ref("int64", result.value.reshape((1,) * x.ndim if keepdim else ()), None,
                   result.valid.reshape((1,) * x.ndim if keepdim else ()))
    axis = dim % v.ndim
    with np.errstate(all="ignore"):
        position = (np.argmax if name == "argmax" else np.argmin)(v, axis=axis)
        if is_float(source.dtype):
            nan = np.isnan(v)
            has_nan = nan.any(axis=axis)
            position = np.where(has_nan, np.argmax(nan, axis=axis), position)
        expanded = np.expand_dims(position, axis)
        best = np.take_along_axis(v, expanded, axis)
        best_err = np.take_along_axis(e, expanded, axis)
        close = (np.abs(v - best) <= e + best_err) & (e + best_err > 0)
        others = close & (np.arange(v.shape[axis]).reshape([-1 if a == axis else 1 for a in range(v.ndim)]) != expanded)
        valid = source.valid.all(axis=axis) & ~others.any(axis=axis)
        if keepdim:
            position, valid = np.expand_dims(position, axis), np.expand_dims(valid, axis)
    return Ref("int64", position, None, valid)


# ---------------------------------------------------------------------------------------------------- index expressions
class IE:
    """An index expression node, rendered to metajit's index language and evaluated with numpy (floor division and
    modulo with a zero divisor giving 0, extras read at clamped indices)."""
    __slots__ = ("kind", "arg", "children")

    def __init__(self, kind, arg=None, children=()):
        self.kind, self.arg, self.children = kind, arg, tuple(children)

    def render(self):
        k, a, c = self.kind, self.arg, self.children
        if k == "i":
            return f"i{a}"
        if k == "c":
            return str(a) if a >= 0 else f"({a})"
        if k == "b":
            return "true" if a else "false"
        if k == "xs":
            return f"xshape{a}"
        if k == "ys":
            return f"yshape{a}"
        if k == "e":
            return f"@e{a}(" + ", ".join(child.render() for child in c) + ")"
        if k in ("op", "cmp", "logic"):
            return f"({c[0].render()} {a} {c[1].render()})"
        if k == "neg":
            return f"(-{c[0].render()})"
        if k == "not":
            return f"(!{c[0].render()})"
        if k in ("min", "max", "abs"):
            return f"{k}(" + ", ".join(child.render() for child in c) + ")"
        if k == "ite":
            return f"({c[0].render()} ? {c[1].render()} : {c[2].render()})"
        raise ValueError(k)

    def evaluate(self, ctx):
        """(values, valid) broadcast to ctx['grid']."""
        k, a, c = self.kind, self.arg, self.children
        grid = ctx["grid"]
        full = lambda value: np.full(grid, value)  # noqa: E731
        ok = np.ones(grid, bool)
        if k == "i":
            return ctx["loops"][a], ok
        if k == "c":
            return full(np.int64(a)), ok
        if k == "b":
            return full(bool(a)), ok
        if k == "xs":
            return full(np.int64(ctx["xshape"][a])), ok
        if k == "ys":
            return full(np.int64(ctx["yshape"][a])), ok
        if k == "e":
            extra = ctx["extras"][a]
            positions, valid = [], ok.copy()
            for axis, child in enumerate(c):
                value, child_ok = child.evaluate(ctx)
                positions.append(np.clip(value, 0, extra.shape[axis] - 1))
                valid &= child_ok
            index = tuple(positions)
            read = extra.value[index] if index else np.broadcast_to(extra.value, grid)
            read_ok = extra.valid[index] if index else np.broadcast_to(extra.valid, grid)
            read = read.astype(bool) if extra.dtype == "bool" else read.astype(np.int64)
            return np.broadcast_to(read, grid).copy(), valid & read_ok
        values = [child.evaluate(ctx) for child in c]
        valid = ok.copy()
        for _, child_ok in values:
            valid &= child_ok
        v = [value for value, _ in values]
        with np.errstate(all="ignore"):
            if k == "op":
                if a == "+":
                    return v[0] + v[1], valid
                if a == "-":
                    return v[0] - v[1], valid
                if a == "*":
                    return v[0] * v[1], valid
                zero = v[1] == 0
                safe = np.where(zero, 1, v[1])
                result = np.floor_divide(v[0], safe) if a == "/" else np.mod(v[0], safe)
                return np.where(zero, 0, result), valid
            if k == "cmp":
                return {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal,
                        "!=": np.not_equal}[a](v[0], v[1]), valid
            if k == "logic":
                return (np.logical_and if a == "&&" else np.logical_or)(v[0], v[1]), valid
            if k == "not":
                return ~v[0], valid
            if k == "neg":
                return -v[0], valid
            if k == "abs":
                return np.abs(v[0]), valid
            if k == "min":
                return np.minimum(v[0], v[1]), valid
            if k == "max":
                return np.maximum(v[0], v[1]), valid
            if k == "ite":
                valid = values[0][1] & np.where(v[0], values[1][1], values[2][1])
                return np.where(v[0], v[1], v[2]), valid
        raise ValueError(k)


def _index_context(grid_shape, xshape, yshape, extras):
    grid_shape = tuple(grid_shape)
    loops = [np.array(loop) for loop in np.indices(grid_shape, dtype=np.int64)] if grid_shape else []
    return {"grid": grid_shape, "loops": loops, "xshape": tuple(xshape), "yshape": tuple(yshape), "extras": extras}


def ref_reindex(x, extras, shape, indexes, overflow_value, conditions):
    shape = tuple(shape)
    ctx = _index_context(shape, x.shape, shape, extras)
    valid = np.ones(shape, bool)
    overflow = np.zeros(shape, bool)
    positions = []
    for axis, expression in enumerate(indexes):
        value, ok = expression.evaluate(ctx)
        valid &= ok
        overflow |= (value < 0) | (value >= x.shape[axis])
        positions.append(value)
    for condition in conditions:
        value, ok = condition.evaluate(ctx)
        valid &= ok
        overflow |= value
    if x.size:
        index = tuple(np.clip(p, 0, extent - 1) for p, extent in zip(positions, x.shape))
        gathered = [np.broadcast_to(array[index] if index else array, shape)
                    for array in (x.value, x.err, x.valid, x.zsign)]
    else:
        gathered = [np.zeros(shape, x.value.dtype), np.zeros(shape), np.ones(shape, bool), np.ones(shape, bool)]
    fill = np.array(overflow_value).astype(np.float64 if is_float(x.dtype) else x.dtype)
    return Ref(x.dtype, np.where(overflow, fill, gathered[0]), np.where(overflow, 0.0, gathered[1]),
               valid & np.where(overflow, True, gathered[2]), np.where(overflow, True, gathered[3]))


REINDEX_REDUCE_OPS = ["add", "mul", "max", "min", "and", "or"]


def reindex_reduce_dtype(op, dtype):
    if op in ("and", "or"):
        return "bool"
    if op in ("add", "mul") and not is_float(dtype):
        return "int64"
    return dtype


def ref_reindex_reduce(x, extras, op, shape, indexes, conditions):
    shape = tuple(shape)
    d = reindex_reduce_dtype(op, x.dtype)
    if op in ("and", "or") and x.dtype != "bool":
        raise Reject("and/or reindex_reduce on bools only")
    if d != x.dtype:
        x = cast_ref(x, d)
    ctx = _index_context(x.shape, x.shape, shape, extras)
    targets_ok = np.ones(x.shape, bool)
    expressions_ok = np.ones(x.shape, bool)
    positions = []
    for axis, expression in enumerate(indexes):
        value, ok = expression.evaluate(ctx)
        expressions_ok &= ok
        targets_ok &= (value >= 0) & (value < shape[axis])
        positions.append(value)
    for condition in conditions:
        value, ok = condition.evaluate(ctx)
        expressions_ok &= ok
        targets_ok &= ~value
    size = int(np.prod(shape)) if shape else 1
    selected = targets_ok.reshape(-1)
    if shape:
        flat = np.ravel_multi_index(tuple(np.clip(p, 0, max(e - 1, 0)).reshape(-1)[selected]
                                          for p, e in zip(positions, shape)), shape) if size else np.zeros(0, int)
    else:
        flat = np.zeros(int(selected.sum()), dtype=np.int64)
    if size == 0:
        flat = flat[:0]
        selected = np.zeros_like(selected)
    values = x.value.reshape(-1)[selected]
    errors = x.err.reshape(-1)[selected]
    oks = x.valid.reshape(-1)[selected]
    valid = np.ones(size, bool)
    np.logical_and.at(valid, flat, oks)
    if not expressions_ok.all():
        valid[:] = False
    count = np.zeros(size)
    np.add.at(count, flat, 1)
    with np.errstate(all="ignore"):
        if d == "bool":
            identity = op in ("min", "and")
            out = np.full(size, identity)
            (np.logical_and if identity else np.logical_or).at(out, flat, values)
            return Ref("bool", out.reshape(shape), None, valid.reshape(shape))
        if not is_float(d):
            if op in ("add", "mul"):
                magnitude = np.full(size, 0.0 if op == "add" else 1.0)
                (np.add if op == "add" else np.multiply).at(magnitude, flat, np.abs(values.astype(np.float64)))
                if ((magnitude > 2.0 ** 62) & valid).any():
                    raise Reject("int64 overflow")
                out = np.full(size, 0 if op == "add" else 1, dtype=np.int64)
                (np.add if op == "add" else np.multiply).at(out, flat, values.astype(np.int64))
            else:
                info = np.iinfo(d)
                out = np.full(size, info.min if op == "max" else info.max, dtype=d)
                (np.maximum if op == "max" else np.minimum).at(out, flat, values)
            return Ref(d, out.reshape(shape), None, valid.reshape(shape))
        identity = {"add": 0.0, "mul": 1.0, "max": -np.inf, "min": np.inf}[op]
        out = np.full(size, identity)
        ufunc = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}[op]
        ufunc.at(out, flat, values)
        inexact = np.zeros(size, bool)
        np.logical_or.at(inexact, flat, errors > 0)
        absolute = np.abs(values)
        if op == "add":
            err = np.zeros(size)
            np.add.at(err, flat, errors)
            magnitude = np.zeros(size)
            np.add.at(magnitude, flat, absolute)
            err += (count + 1) * UNIT[d] * magnitude
            valid &= ~(magnitude > LIMIT[d])
            dyadic = np.ones(size, bool)
            np.logical_and.at(dyadic, flat, _dyadic(values, d))
            exact = ~inexact & dyadic & (magnitude * 1024 < 2.0 ** MANTISSA[d])
        elif op == "mul":
            upper, lower = np.ones(size), np.ones(size)
            np.multiply.at(upper, flat, absolute + errors)
            np.multiply.at(lower, flat, absolute)
            err = upper - lower + (count + 1) * UNIT[d] * upper
            order_bound = np.ones(size)
            np.multiply.at(order_bound, flat, np.maximum(absolute + errors, 1.0))
            valid &= ~(order_bound > LIMIT[d])
            integral = np.ones(size, bool)
            np.logical_and.at(integral, flat, _integer_valued(values))
            exact = ~inexact & integral & (upper < 2.0 ** MANTISSA[d])
        else:
            err = np.zeros(size)
            np.maximum.at(err, flat, errors)
            exact = ~inexact
        return finish_float(d, out.reshape(shape), err.reshape(shape), valid.reshape(shape), inexact.reshape(shape),
                            exact.reshape(shape), zsign=out.reshape(shape) != 0)


# ---------------------------------------------------------------------------------------------------- library ops
def _finite_valid(x):
    return x.valid & np.isfinite(x.value)


def ref_matmul(a, b):
    d = promote(a.dtype, b.dtype)
    with np.errstate(all="ignore"):
        A, B = np.abs(a.value), np.abs(b.value)
        r = np.matmul(a.value, b.value)
        k = a.shape[-1]
        magnitude = np.matmul(A, B)
        err = np.matmul(A, b.err) + np.matmul(a.err, B) + np.matmul(a.err, b.err) + (k + 2) * UNIT[d] * magnitude
        bad = np.matmul((~_finite_valid(a)).astype(np.float64), np.ones(b.shape)) + \
            np.matmul(np.ones(a.shape), (~_finite_valid(b)).astype(np.float64))
        inexact = (np.matmul((a.err > 0).astype(np.float64), np.ones(b.shape)) +
                   np.matmul(np.ones(a.shape), (b.err > 0).astype(np.float64))) > 0
        return finish_float(d, r, err, np.asarray((bad == 0) & ~(magnitude > LIMIT[d])), np.asarray(inexact),
                            np.zeros(np.shape(r), bool), zsign=np.asarray(r) != 0)


def ref_softmax(x, dim, log=False):
    d = x.dtype
    dim = dim % x.ndim
    n = x.shape[dim]
    with np.errstate(all="ignore"):
        v = x.value
        shift = np.max(v, axis=dim, keepdims=True) if n else np.zeros_like(v)
        exponentials = np.exp(v - shift)
        total = exponentials.sum(axis=dim, keepdims=True)
        row_ok = np.broadcast_to(_finite_valid(x).all(axis=dim, keepdims=True), v.shape)
        max_err = np.broadcast_to(x.err.max(axis=dim, keepdims=True) if n else np.zeros_like(v), v.shape)
        inexact = max_err > 0
        if log:
            r = v - shift - np.log(total)
            err = 2 * max_err + (n + 4) * UNIT[d] * (np.abs(r) + np.abs(v - shift) + 1)
        else:
            r = exponentials / total
            err = r * np.expm1(2 * max_err) + (n + 4) * UNIT[d] * r
        return finish_float(d, r, err, row_ok, inexact, np.zeros(v.shape, bool), ulps=4, zsign=r != 0)


def cumprod_ref(source, d, dim, valid):
    """Running products along dim. The error bound is the interval one, prod(|v| + e) - prod(|v|), plus one
    rounding per factor. Past a partial product that overflows, or that falls below the smallest normal (it
    loses relative precision there, which later factors scale up), the row is not compared."""
    with np.errstate(all="ignore"):
        v = source.value
        if not is_float(d):
            magnitude = np.cumprod(np.abs(v.astype(np.float64)), axis=dim)
            if ((magnitude > 2.0 ** 62) & valid).any():
                raise Reject("int64 overflow")
            return Ref(d, np.cumprod(v, axis=dim), None, valid)
        n = source.shape[dim]
        r = np.cumprod(v, axis=dim)
        absolute = np.cumprod(np.abs(v), axis=dim)
        bound = np.cumprod(np.abs(v) + source.err, axis=dim)
        err = (bound - absolute) + (n + 1) * UNIT[d] * bound
        hazard = (bound > LIMIT[d]) | ((absolute > 0) & (absolute < TINY[d]))
        if source.size:
            hazard = np.logical_or.accumulate(hazard, axis=dim)
        inexact = np.logical_or.accumulate(source.err > 0, axis=dim) if source.size else source.err > 0
        return finish_float(d, r, err, valid & ~hazard, inexact, np.zeros(r.shape, bool), zsign=r != 0)


def _conv2d_numpy(x, w, stride, padding, dilation, groups):
    n, c, h, width = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh = (h + 2 * padding - dilation * (kh - 1) - 1) // stride + 1
    ow = (width + 2 * padding - dilation * (kw - 1) - 1) // stride + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg]
        ws = w[g * og:(g + 1) * og]
        for r in range(kh):
            for s in range(kw):
                patch = xs[:, :, r * dilation:r * dilation + stride * (oh - 1) + 1:stride,
                           s * dilation:s * dilation + stride * (ow - 1) + 1:stride]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, ws[:, :, r, s])
    return out


def ref_conv2d(x, w, bias, stride, padding, dilation, groups):
    d = promote(x.dtype, w.dtype)
    with np.errstate(all="ignore"):
        r = _conv2d_numpy(x.value, w.value, stride, padding, dilation, groups)
        X, W = np.abs(x.value), np.abs(w.value)
        k = w.shape[1] * w.shape[2] * w.shape[3]
        magnitude = _conv2d_numpy(X, W, stride, padding, dilation, groups)
        err = (_conv2d_numpy(X, w.err, stride, padding, dilation, groups) +
               _conv2d_numpy(x.err, W, stride, padding, dilation, groups) +
               _conv2d_numpy(x.err, w.err, stride, padding, dilation, groups) +
               (k + 3) * UNIT[d] * magnitude)
        # a non-finite weight makes its whole output channel uncertain: zero padding times infinity may count as
        # NaN or as nothing
        bad = _conv2d_numpy((~_finite_valid(x)).astype(float), np.ones(w.shape), stride, padding, dilation, groups) + \
            (~_finite_valid(w)).reshape(w.shape[0], -1).any(1).reshape(1, -1, 1, 1)
        inexact = (_conv2d_numpy((x.err > 0).astype(float), np.ones(w.shape), stride, padding, dilation, groups) +
                   _conv2d_numpy(np.ones(x.shape), (w.err > 0).astype(float), stride, padding, dilation, groups)) > 0
        # terms near overflow: a partial sum may overflow in some order even where the exact total is finite (as
        # for matmul)
        valid = (bad == 0) & ~(magnitude > LIMIT[d])
        if bias is not None:
            shaped = (1, -1, 1, 1)
            r = r + bias.value.reshape(shaped)
            err = err + bias.err.reshape(shaped) + UNIT[d] * np.abs(r)
            valid = valid & _finite_valid(bias).reshape(shaped)
            inexact = inexact | (bias.err > 0).reshape(shaped)
        return finish_float(d, r, err, valid, inexact, np.zeros(r.shape, bool), zsign=r != 0)


# ============================================================================================== literals
def _float_literal(value, dtype):
    if np.isnan(value):
        return "np.nan"
    if np.isinf(value):
        return "np.inf" if value > 0 else "-np.inf"
    text = np.format_float_positional(np.array(value, dtype=dtype), unique=True, trim="-")
    if len(text) > 24 or "e" in text:
        text = repr(float(value))
    if np.array(float(text)).astype(dtype) != np.array(value, dtype=dtype) or (value == 0 and np.signbit(value)):
        text = repr(float(value))
    if text.endswith("."):
        text += "0"
    return text


def array_literal(array, dtype):
    """np.array(...) source for `array` (exact for every dtype; NaN and infinities as np.nan / np.inf)."""
    array = np.asarray(array).astype(dtype)
    type_name = "np.bool_" if dtype == "bool" else f"np.{dtype}"
    if array.size == 0:
        return f"np.zeros({tuple(array.shape)!r}, dtype={type_name})"

    def element(value):
        if dtype == "bool":
            return "True" if value else "False"
        if dtype in INT_DTYPES:
            return str(int(value))
        return _float_literal(value, dtype)

    def nested(a):
        if a.ndim == 0:
            return element(a[()])
        return "[" + ", ".join(nested(part) for part in a) + "]"

    return f"np.array({nested(array)}, dtype={type_name})"


def scalar_literal(value):
    if isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


# ============================================================================================== program
class Stmt:
    """One line of the program: `code` (Python using mj/F/np, defining `out`), the names it reads (`args`) and the
    reference rule `compute(refs) -> Ref`. Input statements hold their literal Ref."""

    def __init__(self, out, args, code, compute, info, literal=None):
        self.out, self.args, self.code, self.compute = out, list(args), code, compute
        self.info, self.literal = info, literal


def literal_stmt(name, ref):
    return Stmt(name, [], f"{name} = mj.array({array_literal(ref.literal_array(), ref.dtype)})",
                lambda refs, r=ref: r, {"kind": "input", "dtype": ref.dtype}, literal=ref)


def recompute(stmts):
    refs = {}
    for stmt in stmts:
        refs[stmt.out] = stmt.compute([refs[name] for name in stmt.args])
    return refs


def closure(stmts, outputs):
    needed = set(outputs)
    kept = []
    for stmt in reversed(stmts):
        if stmt.out in needed:
            kept.append(stmt)
            needed.update(stmt.args)
    return kept[::-1]


class Program:
    def __init__(self, seed, mode, stmts, outputs, refs, sequential=False, inputs=None):
        self.seed, self.mode, self.stmts, self.outputs, self.refs = seed, mode, stmts, outputs, refs
        self.sequential = sequential
        self.inputs = inputs or []  # gradient mode: the function's arguments

    def source(self):
        return "\n".join(stmt.code for stmt in self.stmts)


class Failure:
    def __init__(self, seed, mode, output, message, reproducer=""):
        self.seed, self.mode, self.output, self.message, self.reproducer = seed, mode, output, message, reproducer

    def __str__(self):
        text = f"fuzz case seed={self.seed} mode={self.mode}: {self.message}"
        if self.reproducer:
            text += "\n--- reproducer ---\n" + self.reproducer
        return text


# ============================================================================================== generator
def _numel(shape):
    return int(np.prod(shape)) if len(shape) else 1


def _broadcasts_to(shape, target):
    try:
        return np.broadcast_shapes(tuple(shape), tuple(target)) == tuple(target)
    except ValueError:
        return False


class Generator:
    """Builds one random program from a seed. `mode` is 'value' or 'grad'; `exclude` lists KNOWN_BUGS entries
    whose constructs are not generated."""

    def __init__(self, seed, mode="value", exclude=()):
        self.seed = seed
        self.mode = mode
        self.grad = mode == "grad"
        self.rng = np.random.default_rng(seed)
        self.exclude = list(exclude)
        self.stmts = []
        self.refs = {}
        self.counter = 0
        self.inputs = []  # gradient mode: names of the differentiated inputs
        self.ancestors = {}
        self.wide = not self.grad and self.coin(0.15)

    # ------------------------------------------------------------------------------------------ helpers
    def choice(self, options, p=None):
        if p is not None:
            p = np.asarray(p, dtype=float)
            p = p / p.sum()
        return options[int(self.rng.choice(len(options), p=p))]

    def coin(self, probability):
        return bool(self.rng.random() < probability)

    def integer(self, low, high):  # inclusive
        return int(self.rng.integers(low, high + 1))

    def name(self):
        name = f"t{self.counter}"
        self.counter += 1
        return name

    def add(self, args, code_of, compute, info, aux=False, limit=MAX_NUMEL):
        """Computes the reference for a new statement (may raise Reject) and appends it. `aux`: gradient mode
        allows a non-float result (a where condition)."""
        info = dict(info)
        info["in_dtypes"] = tuple(self.refs[a].dtype for a in args)
        info["in_shapes"] = tuple(self.refs[a].shape for a in args)
        info["grad"] = self.grad
        # "kind/op/dtype" of every statement this one depends on (for KNOWN_BUGS that need a context)
        info["ancestors"] = frozenset().union(*[self.ancestors.get(a, frozenset()) for a in args])
        for bug in self.exclude:
            if bug["matches"](info):
                raise Reject("known bug: " + bug["name"])
        ref = compute([self.refs[a] for a in args])
        if ref.size > limit:
            raise Reject("too big")
        if self.grad:
            if ref.dtype != "float64" and not aux:
                raise Reject("gradient mode keeps float64")
            if not ref.valid.all() or (ref.size and is_float(ref.dtype) and not (np.abs(ref.value) < 1e3).all()):
                raise Reject("not smooth enough for finite differences")
        out = self.name()
        info["out_dtype"] = ref.dtype
        self.stmts.append(Stmt(out, args, code_of(out), compute, info))
        self.refs[out] = ref
        self.ancestors[out] = info["ancestors"] | {f"{info['kind']}/{info.get('op')}/{ref.dtype}"}
        return out

    def input(self, shape, dtype, values=None):
        shape = tuple(int(s) for s in shape)
        if values is None:
            values = self.random_values(shape, dtype)
        ref = Ref(dtype, np.asarray(values).astype(dtype))
        if self.grad:
            ref = Ref(dtype, ref.value, np.full(shape, GRAD_RADIUS))
        out = self.name()
        stmt = literal_stmt(out, Ref(dtype, np.asarray(values).astype(dtype)))
        if self.grad:
            stmt.compute = lambda refs, r=ref: r
            if dtype == "float64":
                self.inputs.append(out)
        self.stmts.append(stmt)
        self.refs[out] = ref
        return out

    def constant_input(self, shape, dtype, values=None):
        """A literal that is not differentiated (gradient mode: an index array, a mask)."""
        shape = tuple(int(s) for s in shape)
        if values is None:
            values = self.random_values(shape, dtype)
        out = self.name()
        ref = Ref(dtype, np.asarray(values).astype(dtype))
        self.stmts.append(literal_stmt(out, ref))
        self.refs[out] = ref
        return out

    def random_values(self, shape, dtype):
        rng = self.rng
        if dtype == "bool":
            return rng.random(shape) < 0.5
        if dtype in INT_DTYPES:
            info = np.iinfo(dtype)
            if self.coin(0.1) and dtype in ("int8", "uint8"):
                low, high = int(info.min), int(info.max)
            elif dtype == "uint8":
                low, high = 0, 12
            elif self.coin(0.05):
                low, high = -1000, 1000
            else:
                low, high = -12, 12
            values = rng.integers(low, high + 1, size=shape).astype(dtype)
            if dtype in ("int32", "int64") and values.size and self.coin(0.08):  # extremes: comparisons, casts
                extremes = np.array([info.min, info.max, info.min + 1, info.max - 1, 2 ** 24 + 1, -(2 ** 24) - 1],
                                    dtype=np.int64).astype(dtype)
                values.reshape(-1)[self.integer(0, values.size - 1)] = self.choice(list(extremes))
            return values
        if self.grad:
            values = rng.uniform(-2, 2, size=shape)
            return values.astype(dtype)
        style = self.choice(["dyadic", "uniform", "special"], p=[0.35, 0.5, 0.15])
        if style == "dyadic":
            values = rng.integers(-32, 33, size=shape) / 8.0
        else:
            values = rng.uniform(-4, 4, size=shape)
        values = np.asarray(values, dtype=np.float64)
        if style == "special" and values.size:
            specials = [0.0, -0.0, 0.5, -1.5, 2.5, 1.0, np.inf, -np.inf, np.nan]
            specials += {"float16": [65504.0, 6e-8, -1e-5, 2049.0], "float32": [3e38, 1e-40, -1e-39, 16777217.0],
                         "float64": [1e300, 5e-324, 2.0 ** 53 + 2, -1e-310]}[dtype]
            specials = np.array(specials)
            count = self.integer(1, max(1, values.size // 3))
            flat = values.reshape(-1)
            flat[rng.choice(values.size, count, replace=False)] = rng.choice(specials, count)
        return values.astype(dtype)

    def random_shape(self, rank=None, zero=0.05, wide=None):
        """Small shapes; `wide` shapes have a long last dim (vector loops with remainders)."""
        if rank is None:
            rank = self.choice([0, 1, 2, 3, 4], p=[0.08, 0.25, 0.35, 0.22, 0.1])
        if wide is None:
            wide = self.wide
        shape = []
        for _ in range(rank):
            shape.append(0 if self.coin(zero) else self.choice([1, 1, 2, 3, 4, 5]))
        while _numel(shape) > 48:
            shape[int(self.rng.integers(len(shape)))] = self.choice([1, 2])
        if wide and rank:
            shape = shape[-2:]
            shape[-1] = self.choice([8, 13, 16, 17, 31, 33, 37, 64, 65])
            if _numel(shape) > 160:
                shape[0] = 1 if len(shape) == 2 else shape[0]
        return tuple(shape)

    def random_dtype(self):
        if self.grad:
            return "float64"
        return self.choice(DTYPES)

    def pick(self, predicate=lambda ref: True, fresh=None):
        """A value from the pool satisfying `predicate` (recent values preferred); else `fresh()` or Reject."""
        names = [name for name in self.refs if predicate(self.refs[name])]
        if self.grad:
            names = [name for name in names if self.refs[name].dtype == "float64"]
        if not names:
            if fresh is not None:
                return fresh()
            raise Reject("no operand")
        weights = np.arange(1, len(names) + 1, dtype=float) ** 2.5
        return self.choice(names, p=weights)

    def partner_shape(self, shape):
        """A shape that broadcasts with `shape` (numpy rules): trailing dims kept, some set to 1, size-1 dims
        expanded, sometimes a new leading dim."""
        original = list(shape)
        result = list(original)
        if result and self.coin(0.3):
            result = result[self.integer(1, len(result)):]
        offset = len(original) - len(result)
        result = [self.choice([2, 3]) if original[offset + i] == 1 and self.coin(0.15)
                  else (1 if self.coin(0.3) else s) for i, s in enumerate(result)]
        if len(result) < 4 and self.coin(0.12):
            result = [self.choice([1, 2, 3])] + result
        try:
            if _numel(np.broadcast_shapes(tuple(original), tuple(result))) <= MAX_NUMEL:
                return tuple(int(s) for s in result)
        except ValueError:
            pass
        return tuple(original)

    def partner(self, name):
        shape = self.refs[name].shape

        def compatible(ref):
            try:
                return _numel(np.broadcast_shapes(shape, ref.shape)) <= MAX_NUMEL
            except ValueError:
                return False
        if self.coin(0.55):
            try:
                return self.pick(compatible)
            except Reject:
                pass
        return self.input(self.partner_shape(shape), self.random_dtype())

    # ------------------------------------------------------------------------------------------ ops
    def op_unary(self):
        x = self.pick()
        if self.grad:
            op = self.choice(["exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "neg", "abs", "relu",
                              "log1p", "expm1", "log2", "log10", "erf", "tan", "asin", "acos", "atan", "sinh",
                              "cosh"])
            v = self.refs[x].value
            if op in ("exp", "expm1", "sinh", "cosh") and v.size and np.abs(v).max() > 4:
                raise Reject("too big")
            if op in ("log", "sqrt", "rsqrt", "log2", "log10") and v.size and v.min() < 0.2:
                raise Reject("outside the smooth domain")
            if op == "log1p" and v.size and v.min() < -0.8:
                raise Reject("outside the smooth domain")
            if op == "tan" and v.size and np.abs(v).max() > 1.2:
                raise Reject("too close to a pole")
            if op in ("asin", "acos") and v.size and np.abs(v).max() > 0.8:
                raise Reject("outside the smooth domain")
        else:
            op = self.choice(UNARY_OPS)
        spelling = self.integer(0, 2)
        if op == "neg" and spelling == 0:
            code = lambda out: f"{out} = -{x}"  # noqa: E731
        elif op == "abs" and spelling == 0:
            code = lambda out: f"{out} = abs({x})"  # noqa: E731
        elif op == "bitwise_not" and spelling == 0:
            code = lambda out: f"{out} = ~{x}"  # noqa: E731
        elif spelling == 1 and op not in ("logical_not", "bitwise_not", "relu", "neg", "abs") or \
                op in ("floor", "ceil", "round", "rsqrt") and spelling == 2:
            code = lambda out: f"{out} = {x}.{op}()"  # noqa: E731
        else:
            code = lambda out: f"{out} = mj.{op}({x})"  # noqa: E731
        grad = self.grad
        return self.add([x], code, lambda refs: ref_unary(op, refs[0], grad), {"kind": "unary", "op": op})

    OPERATORS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floor_div": "//", "mod": "%", "pow": "**",
                 "less": "<", "less_equal": "<=", "greater": ">", "greater_equal": ">=", "equal": "==",
                 "not_equal": "!=", "bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^"}

    def _binary_op(self):
        if self.grad:
            return self.choice(["add", "sub", "mul", "div", "pow", "maximum", "minimum"])
        return self.choice(BINARY_OPS, p=[3, 3, 3, 2, 2, 2, 1.5, 1.5, 1.5] + [1] * 6 + [0.7] * 3 + [0.7] * 3)

    def _grad_operands_ok(self, op, a, b):
        """Gradient mode: keep div and pow inside their smooth domains (a, b: Refs)."""
        if not self.grad:
            return
        if op == "div" and b.size and np.min(np.abs(b.value)) < 0.3:
            raise Reject("denominator too small")
        if op == "pow" and ((a.size and np.min(a.value) < 0.2) or (b.size and np.max(np.abs(b.value)) > 3)):
            raise Reject("pow outside the smooth domain")

    def op_binary(self):
        a = self.pick()
        b = self.partner(a)
        if self.coin(0.5):
            a, b = b, a
        op = self._binary_op()
        self._grad_operands_ok(op, self.refs[a], self.refs[b])
        spelling = self.integer(0, 2)
        if op in self.OPERATORS and spelling < 2:
            symbol = self.OPERATORS[op]
            code = lambda out: f"{out} = {a} {symbol} {b}"  # noqa: E731
        elif op in ("maximum", "minimum") and spelling == 1:
            code = lambda out: f"{out} = {a}.{op}({b})"  # noqa: E731
        else:
            function = "eq" if op == "equal" else op  # mj.equal is torch.equal: one bool, not elementwise
            code = lambda out: f"{out} = mj.{function}({a}, {b})"  # noqa: E731
        grad = self.grad
        return self.add([a, b], code, lambda refs: ref_binary(op, refs[0], refs[1], grad),
                        {"kind": "binary", "op": op})

    def op_scalar(self):
        x = self.pick()
        d = self.refs[x].dtype
        if self.grad:
            op = self.choice(["add", "sub", "mul", "div", "pow"])
        else:
            op = self.choice(ARITHMETIC[:7] + list(COMPARISONS) + list(BITWISE), p=[3, 3, 3, 2, 2, 2, 1.5] + [1] * 6 +
                             [0.7] * 3)
        reflected = self.coin(0.35)
        if op in BITWISE:
            if is_float(d):
                raise Reject("bitwise ops need integer or bool operands")
            value = bool(self.coin(0.5)) if d == "bool" else self.integer(0, 7)
        elif op == "pow":
            kind = "float" if self.grad or self.coin(0.5) else "int"
            if reflected:
                value = float(self.choice([0.5, 2.0, 1.5])) if kind == "float" else self.choice([1, 2, 3])
            else:
                value = float(self.choice([2.0, 0.5, 3.0, -1.0, 1.5])) if kind == "float" else self.choice([0, 1, 2, 3])
        else:
            kind = "float" if self.grad else self.choice(["int", "float", "bool"], p=[0.45, 0.45, 0.1])
            if kind == "bool" and op not in ("add", "mul") and op not in COMPARISONS:
                kind = "int"
            if kind == "bool":
                value = bool(self.coin(0.5))
            elif kind == "int":
                value = self.integer(0, 9) if d == "uint8" else self.integer(-9, 9)
                if d in ("int8", "uint8") and self.coin(0.3):
                    # out of the tensor's range: wraps into its dtype, except in true division
                    # (test_elementwise.py, as PyTorch)
                    value = self.choice([300, -200, 255, 256, -129, 1000])
            else:
                value = float(self.choice([0.5, 1.5, -2.0, 2.5, -0.25, 3.0, 0.75, -1.0, 2.0]))
                if self.coin(0.08):
                    # finite as a double, beyond float16 or float32: an infinity (or 0) in the tensor's dtype
                    value = float(self.choice([1e60, -1e60, 1e-50, 7e4, -3.5e38]))
        if op == "sub" and d == "bool" and isinstance(value, bool):
            raise Reject("subtraction of two bools raises")
        scalar = _scalar_ref(value, d, op)
        if self.grad:
            left, right = (scalar, self.refs[x]) if reflected else (self.refs[x], scalar)
            self._grad_operands_ok(op, left, right)
        literal = scalar_literal(value)
        grad = self.grad
        symbol = self.OPERATORS[op]
        if reflected:
            code = lambda out: f"{out} = {literal} {symbol} {x}"  # noqa: E731
            compute = lambda refs: ref_binary(op, _scalar_ref(value, refs[0].dtype, op), refs[0], grad)  # noqa: E731
        else:
            if self.coin(0.2) and op in ARITHMETIC:
                code = lambda out: f"{out} = mj.{op}({x}, {literal})"  # noqa: E731
            else:
                code = lambda out: f"{out} = {x} {symbol} {literal}"  # noqa: E731
            compute = lambda refs: ref_binary(op, refs[0], _scalar_ref(value, refs[0].dtype, op), grad)  # noqa: E731
        return self.add([x], code, compute, {"kind": "scalar", "op": op, "scalar": type(value).__name__,
                                              "reflected": reflected})

    def op_where(self):
        x = self.pick()
        if self.grad:
            shape = self.refs[x].shape
            condition = self.constant_input(self.partner_shape(shape), "bool") if self.coin(0.5) else None
            if condition is None:
                other = self.partner(x)
                y = self.add([x, other], lambda out: f"{out} = {x} > {other}",
                             lambda refs: ref_binary("greater", refs[0], refs[1]), {"kind": "binary", "op": "greater"},
                             aux=True)
                condition = y
        else:
            condition = self.pick(lambda r: True) if self.coin(0.4) else self.input(
                self.partner_shape(self.refs[x].shape), self.choice(DTYPES, p=[4, 1, 1, 1, 1, 1, 1, 1]))
        choices = []
        for _ in range(2):
            if self.coin(0.2) and not self.grad:
                choices.append(self.choice([1, -2, 0.5, 2.5, True]))
            elif self.coin(0.2) and self.grad:
                choices.append(float(self.choice([0.5, -1.5])))
            else:
                choices.append(self.partner(x) if self.coin(0.5) else x)
        args = [condition] + [c for c in choices if isinstance(c, str)]
        try:
            if _numel(np.broadcast_shapes(*[self.refs[a].shape for a in args])) > MAX_NUMEL:
                raise Reject("too big")
        except ValueError:
            raise Reject("operands do not broadcast") from None
        rendered = [c if isinstance(c, str) else scalar_literal(c) for c in choices]
        positions = [i for i, c in enumerate(choices) if isinstance(c, str)]

        def compute(refs, choices=tuple(choices), positions=tuple(positions)):
            values = list(choices)
            for slot, ref in zip(positions, refs[1:]):
                values[slot] = ref
            numbers = [not isinstance(v, Ref) for v in values]
            for slot in range(2):
                if numbers[slot]:
                    other = values[1 - slot]
                    values[slot] = _scalar_ref(values[slot], None if numbers[1 - slot] else other.dtype)
            return ref_where(refs[0], values[0], values[1])
        return self.add(args, lambda out: f"{out} = mj.where({condition}, {rendered[0]}, {rendered[1]})", compute,
                        {"kind": "where"})

    def op_cast(self):
        x = self.pick()
        target = self.choice(DTYPES)
        if target == self.refs[x].dtype and self.coin(0.7):
            raise Reject("same dtype")
        spelling = self.integer(0, 2)
        if spelling == 0:
            code = lambda out: f"{out} = {x}.astype({target!r})"  # noqa: E731
        elif spelling == 1:
            code = lambda out: f"{out} = {x}.astype(np.{target if target != 'bool' else 'bool_'})"  # noqa: E731
        else:
            code = lambda out: f"{out} = mj.cast({x}, {target!r})"  # noqa: E731
        return self.add([x], code, lambda refs: cast_ref(refs[0], target), {"kind": "cast", "to": target})

    def random_dims(self, ndim):
        if ndim == 0:
            return None
        form = self.choice(["none", "int", "tuple", "list"], p=[0.15, 0.45, 0.25, 0.15])
        if form == "none":
            return None
        if form == "int":
            dim = self.integer(0, ndim - 1)
            return dim - ndim if self.coin(0.3) else dim
        count = self.integer(1, ndim)
        dims = [int(d) for d in self.rng.choice(ndim, count, replace=False)]
        dims = [d - ndim if self.coin(0.3) else d for d in dims]
        return tuple(dims) if form == "tuple" else list(dims)

    def op_reduce(self):
        x = self.pick()
        ref = self.refs[x]
        if self.grad:
            op = self.choice(["sum", "mean", "max", "min", "prod"], p=[3, 2, 1.5, 1.5, 0.7])
            if op == "prod" and ref.size and np.min(np.abs(ref.value)) < 0.3:
                raise Reject("prod gradient near zero")
        else:
            op = self.choice(["sum", "mean", "max", "min", "prod", "and", "or"], p=[3, 2, 2, 2, 1.5, 0.5, 0.5])
            if op in ("and", "or") and ref.dtype != "bool":
                op = "sum"
        dims = self.random_dims(ref.ndim)
        keepdim = self.coin(0.4)
        spelling = self.integer(0, 2)
        method = {"and": None, "or": None, "max": "amax", "min": "amin"}.get(op, op)  # x.max(dims): PyTorch's tuple
        if method and spelling < 2:
            if dims is None and not keepdim and spelling == 0:
                code = lambda out: f"{out} = {x}.{method}()"  # noqa: E731
            else:
                code = lambda out: f"{out} = {x}.{method}({dims!r}, keepdim={keepdim})"  # noqa: E731
        elif op != "mean":
            name = {"sum": "add", "prod": "mul"}.get(op, op)
            code = lambda out: f"{out} = mj.reduce({x}, {name!r}, {dims!r}, keepdim={keepdim})"  # noqa: E731
        else:
            code = lambda out: f"{out} = {x}.mean(dim={dims!r}, keepdim={keepdim})"  # noqa: E731
        grad = self.grad
        return self.add([x], code, lambda refs: ref_reduce(op, refs[0], dims, keepdim, grad),
                        {"kind": "reduce", "op": op, "keepdim": keepdim, "dims": dims})

    def op_reshape(self):
        x = self.pick()
        shape = self.refs[x].shape
        n = _numel(shape)
        if n == 0:
            target = list(self.rng.permutation(list(shape) + [1] * self.integer(0, 1)))
        else:
            factors = []
            rest = n
            while rest > 1 and len(factors) < 3:
                divisors = [d for d in range(2, rest + 1) if rest % d == 0]
                d = self.choice(divisors)
                factors.append(d)
                rest //= d
            if rest > 1:
                factors.append(rest)
            target = list(self.rng.permutation(factors)) if factors else []
            for _ in range(self.integer(0, 1)):
                target.insert(self.integer(0, len(target)), 1)
        target = [int(t) for t in target]
        if target and n and self.coin(0.3):
            shown = list(target)
            shown[self.integer(0, len(target) - 1)] = -1
        else:
            shown = list(target)
        method = self.choice(["reshape", "view"])
        if method == "view":  # a transposed Var cannot be viewed (PyTorch's rule): contiguous() first
            method = "contiguous().view"
        arguments = repr(shown) if self.coin(0.5) or not shown else ", ".join(map(str, shown))
        code = lambda out: f"{out} = {x}.{method}({arguments})"  # noqa: E731
        return self.add([x], code, lambda refs: refs[0].map(lambda a: np.reshape(a, target)),
                        {"kind": "reshape"})

    def op_permute(self):
        x = self.pick(lambda r: r.ndim >= 2)
        ndim = self.refs[x].ndim
        form = self.choice(["permute", "transpose", "T"])
        if form == "permute":
            perm = [int(p) for p in self.rng.permutation(ndim)]
            shown = [p - ndim if self.coin(0.2) else p for p in perm]
            code = lambda out: f"{out} = {x}.permute({', '.join(map(str, shown))})"  # noqa: E731
            function = lambda a: np.transpose(a, perm)  # noqa: E731
        elif form == "transpose":
            d0, d1 = [int(d) for d in self.rng.choice(ndim, 2, replace=False)]
            shown = d0 - ndim if self.coin(0.3) else d0
            code = lambda out: f"{out} = {x}.transpose({shown}, {d1})"  # noqa: E731
            function = lambda a: np.swapaxes(a, d0, d1)  # noqa: E731
        else:
            code = lambda out: f"{out} = {x}.T"  # noqa: E731
            function = lambda a: np.transpose(a)  # noqa: E731
        return self.add([x], code, lambda refs: refs[0].map(function), {"kind": "permute", "form": form})

    def random_key(self, shape):
        key = []
        for extent in shape:
            kind = self.choice(["full", "slice", "int", "none"], p=[0.25, 0.55, 0.15, 0.05])
            if kind == "none":
                key.append(None)
                kind = "full"
            if kind == "full":
                key.append(slice(None))
            elif kind == "int" and extent > 0:
                index = self.integer(-extent, extent - 1)
                key.append(index)
            else:
                step = self.choice([1, 1, 2, 3, -1, -1, -2, None])
                start = self.choice([None, self.integer(-extent - 1, extent + 1)])
                stop = self.choice([None, self.integer(-extent - 1, extent + 1)])
                key.append(slice(start, stop, step))
        if key and self.coin(0.2):
            cut = self.integer(0, len(key) - 1)
            key = key[:cut] + [Ellipsis] + key[cut + 1:] if key[cut] == slice(None) else key
        return tuple(key)

    @staticmethod
    def render_key(key):
        parts = []
        for item in key:
            if item is None:
                parts.append("None")
            elif item is Ellipsis:
                parts.append("...")
            elif isinstance(item, int):
                parts.append(str(item))
            else:
                text = ("" if item.start is None else str(item.start)) + ":" + \
                    ("" if item.stop is None else str(item.stop))
                if item.step is not None:
                    text += ":" + str(item.step)
                parts.append(text)
        if not parts:
            return "..."
        return ", ".join(parts) + ("," if len(parts) == 1 and parts[0] not in ("...",) and ":" not in parts[0] else "")

    def op_slice(self):
        x = self.pick(lambda r: r.ndim >= 1)
        key = self.random_key(self.refs[x].shape)
        text = self.render_key(key)
        return self.add([x], lambda out: f"{out} = {x}[{text}]", lambda refs: refs[0].map(lambda a: a[key]),
                        {"kind": "slice"})

    def op_index_list(self):
        x = self.pick(lambda r: r.ndim >= 1 and r.shape[0] > 0)
        extent = self.refs[x].shape[0]
        count = self.integer(1, 4)
        indices = [self.integer(-extent, extent - 1) for _ in range(count)]
        return self.add([x], lambda out: f"{out} = {x}[{indices!r}]",
                        lambda refs: refs[0].map(lambda a: np.take(a, indices, axis=0)), {"kind": "index_list"})

    def op_flip(self):
        x = self.pick(lambda r: r.ndim >= 1)
        ndim = self.refs[x].ndim
        dims = sorted(int(d) for d in self.rng.choice(ndim, self.integer(1, ndim), replace=False))
        return self.add([x], lambda out: f"{out} = {x}.flip({dims!r})",
                        lambda refs: refs[0].map(lambda a: np.flip(a, dims)), {"kind": "flip"})

    def op_broadcast_to(self):
        x = self.pick()
        shape = list(self.refs[x].shape)
        expanded = [int(self.choice([2, 3, 2, 3, 0])) if s == 1 and self.coin(0.6) else int(s) for s in shape]
        form = self.choice(["method", "function", "jittor"])
        new = self.choice([0, 0, 1, 2])
        if form == "jittor":  # dims: the output dims x does not have; x's dims fill the others in order
            total = len(expanded) + new
            dims = sorted(int(d) for d in self.rng.choice(total, new, replace=False)) if new else []
            rest = iter(expanded)
            target = [int(self.choice([1, 2, 3])) if position in dims else next(rest) for position in range(total)]

            def function(a):
                return np.broadcast_to(np.expand_dims(a, dims) if dims else a, target)
            code = lambda out: f"{out} = mj.broadcast({x}, {target!r}, dims={dims!r})"  # noqa: E731
        else:
            target = [int(self.choice([1, 2, 3])) for _ in range(new)] + expanded

            def function(a):
                return np.broadcast_to(a, target)
            if form == "method" and target:
                code = lambda out: f"{out} = {x}.broadcast_to({', '.join(map(str, target))})"  # noqa: E731
            else:
                code = lambda out: f"{out} = mj.broadcast_to({x}, {target!r})"  # noqa: E731
        if _numel(target) > MAX_NUMEL:
            raise Reject("too big")
        return self.add([x], code, lambda refs: refs[0].map(function), {"kind": "broadcast", "form": form})

    def op_join(self):
        stack = self.coin(0.35)
        x = self.pick(lambda r: r.ndim >= (0 if stack else 1))
        ref = self.refs[x]
        pieces = [x]
        count = self.integer(2, 4 if self.coin(0.2) else 3)
        if stack:
            dim = self.integer(0, ref.ndim)
            for _ in range(count - 1):
                same = [n for n, r in self.refs.items()
                        if r.shape == ref.shape and (not self.grad or r.dtype == "float64")]
                pieces.append(self.choice(same) if same and self.coin(0.5) else
                              self.input(ref.shape, self.random_dtype()))
        else:
            dim = self.integer(0, ref.ndim - 1)
            if ref.ndim == 1 and ref.shape[0] == 0:
                raise Reject("1-D empty pieces are skipped by cat (legacy behaviour)")
            for _ in range(count - 1):
                shape = list(ref.shape)
                shape[dim] = self.choice([0, 1, 2, 3]) if ref.ndim > 1 else self.choice([1, 2, 3])
                fits = [n for n, r in self.refs.items() if r.ndim == ref.ndim and
                        all(a == b for i, (a, b) in enumerate(zip(r.shape, ref.shape)) if i != dim) and
                        not (r.ndim == 1 and r.shape[0] == 0) and (not self.grad or r.dtype == "float64")]
                pieces.append(self.choice(fits) if fits and self.coin(0.5) else self.input(shape, self.random_dtype()))
        shown = dim - (ref.ndim + (1 if stack else 0)) if self.coin(0.25) else dim
        function = "stack" if stack else self.choice(["cat", "concat"])
        listing = "[" + ", ".join(pieces) + "]"

        def compute(refs):
            d = refs[0].dtype
            for r in refs[1:]:
                d = promote(d, r.dtype)
            cast = [cast_ref(r, d) for r in refs]
            join = (lambda arrays: np.stack(arrays, dim)) if stack else (lambda arrays: np.concatenate(arrays, dim))
            return Ref(d, join([r.value for r in cast]), join([r.err for r in cast]), join([r.valid for r in cast]),
                       join([r.zsign for r in cast]))
        return self.add(pieces, lambda out: f"{out} = F.{function}({listing}, {shown})", compute,
                        {"kind": "join", "stack": stack})

    # ------------------------------------------------------------------------------------------ index expressions
    def gen_extra(self, boolean):
        """An extra input for an index expression: an integer (or bool) tensor without empty dims."""
        def usable(ref):
            return ref.ndim in (1, 2) and ref.size > 0 and (ref.dtype == "bool") == boolean and \
                not is_float(ref.dtype) and ref.valid.all()
        if not self.grad and self.coin(0.35):
            try:
                return self.pick(usable)
            except Reject:
                pass
        rank = self.choice([1, 1, 2])
        shape = tuple(self.integer(1, 5) for _ in range(rank))
        if boolean:
            return self.constant_input(shape, "bool")
        dtype = self.choice(list(INT_DTYPES))
        values = self.rng.integers(0 if dtype == "uint8" else -2, 7, size=shape).astype(dtype)
        return self.constant_input(shape, dtype, values)

    def gen_int(self, loops, extents, xshape_count, yshape_count, extras, depth=0, target=None):
        """A random integer index expression over `loops` loop variables."""
        kinds = ["var", "affine", "flip", "scaled", "div", "mod", "sum", "clamp", "abs", "ite", "extra", "const",
                 "deep"]
        weights = [5, 4, 1.5, 1.5, 1.2, 1.2, 1, 1, 0.7, 0.7, 1.2, 0.6, 0.6]
        if depth > 1:
            kinds, weights = ["var", "const", "affine"], [3, 1, 2]
        if loops == 0:
            kinds, weights = ["const", "extra", "deep"], [3, 1, 0.5]
        kind = self.choice(kinds, p=weights)

        def var():
            return IE("i", self.integer(0, loops - 1)) if loops else IE("c", self.integer(0, 3))

        def const(low=-2, high=4):
            return IE("c", self.integer(low, high))

        def sub(*args):
            return self.gen_int(loops, extents, xshape_count, yshape_count, extras, depth + 1)
        if kind == "var":
            return var()
        if kind == "affine":
            return IE("op", self.choice(["+", "-"]), [var(), const(0, 2)])
        if kind == "flip":
            if target is not None and xshape_count:
                return IE("op", "-", [IE("op", "-", [IE("xs", target), IE("c", 1)]), var()])
            return IE("op", "-", [const(2, 5), var()])
        if kind == "scaled":
            return IE("op", "+", [IE("op", "*", [var(), IE("c", self.choice([2, 3, -1]))]), const(-1, 2)])
        if kind == "div":
            return IE("op", "/", [IE("op", "-", [var(), const(0, 3)]) if self.coin(0.5) else var(),
                                  IE("c", self.choice([2, 3, -2, 0, 2]))])
        if kind == "mod":
            modulus = IE("xs", target) if target is not None and xshape_count and self.coin(0.4) else \
                IE("c", self.choice([2, 3, -3, 0, 2]))
            return IE("op", "%", [IE("op", "-", [var(), const(0, 3)]), modulus])
        if kind == "sum":
            return IE("op", "-", [IE("op", "+", [var(), var()]), const(0, 2)])
        if kind == "clamp":
            upper = IE("op", "-", [IE("xs", target), IE("c", 1)]) if target is not None and xshape_count else \
                const(1, 4)
            return IE("min", None, [IE("max", None, [IE("op", "-", [var(), const(0, 2)]), IE("c", 0)]), upper])
        if kind == "abs":
            return IE("abs", None, [IE("op", "-", [var(), const(0, 3)])])
        if kind == "ite":
            return IE("ite", None, [self.gen_bool(loops, extents, xshape_count, yshape_count, extras, depth + 1),
                                    sub(), sub()])
        if kind == "extra":
            extra_index = self.use_extra(extras, boolean=False)
            if extra_index is None:
                return var()
            rank = self.refs[extras[extra_index]].ndim
            args = [var() if self.coin(0.7) else (IE("op", "+", [var(), IE("c", 1)]) if loops else const(0, 3))
                    for _ in range(rank)]
            return IE("e", extra_index, args)
        if kind == "const":
            return const(-1, 4)
        op = self.choice(["+", "-", "*", "/", "%", "min", "max", "neg"])
        if op in ("min", "max"):
            return IE(op, None, [sub(), sub()])
        if op == "neg":
            return IE("neg", None, [sub()])
        return IE("op", op, [sub(), sub() if op in "+-" else const(-3, 3)])

    def gen_bool(self, loops, extents, xshape_count, yshape_count, extras, depth=0):
        kind = self.choice(["cmp", "parity", "extra", "logic", "not", "literal"], p=[4, 2, 1, 1.2, 0.6, 0.3])
        if depth > 1:
            kind = "cmp"

        def var():
            return IE("i", self.integer(0, loops - 1)) if loops else IE("c", self.integer(0, 3))
        if kind == "cmp":
            right = var() if self.coin(0.5) else IE("c", self.integer(0, 3))
            return IE("cmp", self.choice(["<", "<=", ">", ">=", "==", "!="]), [var(), right])
        if kind == "parity":
            return IE("cmp", self.choice(["==", "!="]), [IE("op", "%", [var(), IE("c", 2)]), IE("c", 0)])
        if kind == "extra":
            extra_index = self.use_extra(extras, boolean=True)
            if extra_index is not None:
                rank = self.refs[extras[extra_index]].ndim
                return IE("e", extra_index, [var() for _ in range(rank)])
            return IE("cmp", ">", [var(), IE("c", 1)])
        if kind == "logic":
            return IE("logic", self.choice(["&&", "||"]),
                      [self.gen_bool(loops, extents, xshape_count, yshape_count, extras, depth + 1),
                       self.gen_bool(loops, extents, xshape_count, yshape_count, extras, depth + 1)])
        if kind == "not":
            return IE("not", None, [self.gen_bool(loops, extents, xshape_count, yshape_count, extras, depth + 1)])
        return IE("b", self.coin(0.3))

    def use_extra(self, extras, boolean):
        """Index of an extra of the right kind in `extras` (adding one if allowed), or None."""
        matching = [i for i, name in enumerate(extras) if (self.refs[name].dtype == "bool") == boolean]
        if matching and self.coin(0.6):
            return self.choice(matching)
        if len(extras) >= 2:
            return matching[0] if matching else None
        extras.append(self.gen_extra(boolean))
        return len(extras) - 1

    def op_reindex(self):
        x = self.pick()
        ref = self.refs[x]
        rank = min(4, max(0, ref.ndim + self.choice([-1, 0, 0, 0, 1])))
        if self.coin(0.1):
            rank = 0
        shape = []
        for axis in range(rank):
            base = ref.shape[axis] if axis < ref.ndim else 2
            shape.append(max(0, base + self.choice([0, 0, 1, 2, -1])) if not self.coin(0.04) else 0)
        while _numel(shape) > MAX_NUMEL:
            shape[self.integer(0, rank - 1)] = 1
        extras = []
        indexes = [self.gen_int(rank, shape, ref.ndim, rank, extras, target=axis) for axis in range(ref.ndim)]
        conditions = [self.gen_bool(rank, shape, ref.ndim, rank, extras) for _ in range(self.choice([0, 0, 0, 1, 2]))]
        d = ref.dtype
        if d == "bool":
            overflow = self.choice([0, 1])
        elif d == "uint8":
            overflow = self.choice([0, 3, 7])
        elif d in INT_DTYPES:
            overflow = self.choice([0, -1, 7])
        else:
            overflow = self.choice([0.0, -1.5, 2.25, 7.0, 0.0])
        texts = [e.render() for e in indexes]
        condition_texts = [c.render() for c in conditions]
        args = [x] + extras
        parts = [f"mj.reindex({x}, {shape!r}, {texts!r}"]
        if overflow != 0 or self.coin(0.3):
            parts.append(f"overflow_value={scalar_literal(overflow)}")
        if conditions:
            parts.append(f"overflow_conditions={condition_texts!r}")
        if extras:
            parts.append("extras=[" + ", ".join(extras) + "]")
        call = ", ".join(parts) + ")"
        shape = [int(s) for s in shape]
        return self.add(args, lambda out: f"{out} = {call}",
                        lambda refs: ref_reindex(refs[0], refs[1:], shape, indexes, overflow, conditions),
                        {"kind": "reindex", "conditions": len(conditions), "extras": len(extras),
                         "texts": tuple(texts + condition_texts)})

    def op_reindex_reduce(self):
        x = self.pick()
        ref = self.refs[x]
        if self.grad:
            op = "add"
        else:
            op = self.choice(REINDEX_REDUCE_OPS, p=[4, 1, 2, 2, 0.5, 0.5])
            if op in ("and", "or") and ref.dtype != "bool":
                op = "add"
        rank = self.choice([0, 1, 1, 2, 2, 3])
        shape = [self.integer(1, 4) if not self.coin(0.04) else 0 for _ in range(rank)]
        extras = []
        indexes = [self.gen_int(ref.ndim, ref.shape, ref.ndim, rank, extras) for _ in range(rank)]
        conditions = [self.gen_bool(ref.ndim, ref.shape, ref.ndim, rank, extras) for _ in range(self.choice([0, 0, 1]))]
        texts = [e.render() for e in indexes]
        condition_texts = [c.render() for c in conditions]
        parts = [f"mj.reindex_reduce({x}, {op!r}, {shape!r}, {texts!r}"]
        if conditions:
            parts.append(f"overflow_conditions={condition_texts!r}")
        if extras:
            parts.append("extras=[" + ", ".join(extras) + "]")
        call = ", ".join(parts) + ")"
        return self.add([x] + extras, lambda out: f"{out} = {call}",
                        lambda refs: ref_reindex_reduce(refs[0], refs[1:], op, shape, indexes, conditions),
                        {"kind": "reindex_reduce", "op": op, "conditions": len(conditions), "extras": len(extras),
                         "texts": tuple(texts + condition_texts)})

    # ------------------------------------------------------------------------------------------ library ops
    def float_dtype(self):
        return "float64" if self.grad else self.choice(["float32", "float64"])

    def op_matmul(self):
        big = not self.grad and self.coin(0.2)
        if big:  # big enough (>= 4096 multiply-adds, float32) for the oneDNN lowering
            m, k, n = self.choice([(16, 24, 12), (8, 32, 16), (12, 16, 24)])
            batch = [self.choice([2, 3])] if self.coin(0.2) else []
            if self.coin(0.3):  # a transposed view on the left
                source = self.input(tuple(batch) + (k, m), "float32")
                a = self.add([source], lambda out: f"{out} = {source}.transpose(-1, -2)",
                             lambda refs: refs[0].map(lambda v: np.swapaxes(v, -1, -2)), {"kind": "permute"},
                             limit=4096)
            else:
                a = self.input(tuple(batch) + (m, k), "float32")
            b = self.input((k, n) if self.coin(0.6) else tuple(batch) + (k, n), "float32")
        else:
            usable = lambda r: r.dtype in ("float32", "float64") and 1 <= r.ndim <= 3  # noqa: E731
            if self.coin(0.7):  # left operand from the pool
                a = self.pick(usable, fresh=lambda: self.input(self.random_shape(self.choice([1, 2, 3])),
                                                                 self.float_dtype()))
                ra = self.refs[a]
                k = ra.shape[-1]
                form = self.choice(["matrix", "vector", "batched"]) if ra.ndim <= 2 else "matrix"
                shape = {"vector": (k,), "matrix": (k, self.integer(1, 4)),
                         "batched": (self.choice([1, 2]), k, self.integer(1, 4))}[form]
                b = self.input(shape, ra.dtype)
            else:  # right operand from the pool
                b = self.pick(usable, fresh=lambda: self.input(self.random_shape(self.choice([1, 2, 3])),
                                                                 self.float_dtype()))
                rb = self.refs[b]
                k = rb.shape[-2] if rb.ndim >= 2 else rb.shape[0]
                shape = (k,) if self.coin(0.25) else (self.integer(1, 4), k)
                a = self.input(shape, rb.dtype)
        spelling = self.choice(["@", "mj.matmul", "method"])
        code = {"@": lambda out: f"{out} = {a} @ {b}", "mj.matmul": lambda out: f"{out} = mj.matmul({a}, {b})",
                "method": lambda out: f"{out} = {a}.matmul({b})"}[spelling]
        return self.add([a, b], code, lambda refs: ref_matmul(refs[0], refs[1]), {"kind": "matmul", "big": big},
                        limit=4096 if big else MAX_NUMEL)

    def op_softmax(self):
        allowed = ("float64",) if self.grad else FLOAT_DTYPES
        x = self.pick(lambda r: r.dtype in allowed and r.ndim >= 1,
                      fresh=lambda: self.input(self.random_shape(self.choice([1, 2, 3])), self.choice(list(allowed))))
        ndim = self.refs[x].ndim
        dim = self.integer(-ndim, ndim - 1)
        log = self.coin(0.35)
        name = "log_softmax" if log else "softmax"
        code = (lambda out: f"{out} = F.{name}({x}, dim={dim})") if self.coin(0.6) else \
            (lambda out: f"{out} = {x}.{name}({dim})")
        return self.add([x], code, lambda refs: ref_softmax(refs[0], dim, log), {"kind": "softmax", "log": log})

    def op_conv2d(self):
        dtype = self.float_dtype()
        n, c = self.integer(1, 2), self.integer(1, 3)
        groups = 1
        out_channels = self.integer(1, 3)
        if c == 2 and out_channels in (2,) and self.coin(0.4):
            groups = 2
        kh, kw = self.integer(1, 3), self.integer(1, 3)
        stride, padding, dilation = self.choice([1, 1, 2]), self.choice([0, 1]), self.choice([1, 1, 2])
        h, w = self.integer(3, 5), self.integer(3, 5)
        if not self.grad and self.coin(0.25):  # big enough (>= 4096 multiply-adds, float32) for oneDNN
            dtype, n, c, out_channels, groups, h, w, kh, kw = "float32", 1, 4, 8, 1, 8, 8, 3, 3
        if h + 2 * padding - dilation * (kh - 1) - 1 < 0 or w + 2 * padding - dilation * (kw - 1) - 1 < 0:
            raise Reject("empty convolution")
        x = self.pick(lambda r: r.dtype == dtype and r.shape == (n, c, h, w),
                      fresh=lambda: self.input((n, c, h, w), dtype))
        weight = self.input((out_channels, c // groups, kh, kw), dtype)
        bias = self.input((out_channels,), dtype) if self.coin(0.5) else None
        args = [x, weight] + ([bias] if bias else [])
        options = f"stride={stride}, padding={padding}, dilation={dilation}, groups={groups}"
        code = lambda out: f"{out} = F.conv2d({x}, {weight}, {bias if bias else 'None'}, {options})"  # noqa: E731
        return self.add(args, code, lambda refs: ref_conv2d(refs[0], refs[1], refs[2] if len(refs) > 2 else None,
                                                              stride, padding, dilation, groups),
                        {"kind": "conv2d"})

    def op_contraction(self):
        """A matrix product written with meta-ops (broadcast, multiply, sum), operands possibly transposed views:
        the library lowering recognises such contractions from the kernel IR."""
        big = not self.grad and self.coin(0.3)
        dtype = "float32" if big else self.float_dtype()
        m, k, n = self.choice([(16, 24, 12), (12, 32, 16)]) if big else (self.integer(1, 4), self.integer(0, 5),
                                                                         self.integer(1, 4))
        transpose_a, transpose_b = self.coin(0.4), self.coin(0.4)
        a = self.input((k, m) if transpose_a else (m, k), dtype)
        b = self.input((n, k) if transpose_b else (k, n), dtype)
        left = f"{a}.T" if transpose_a else a
        right = f"{b}.T" if transpose_b else b
        form = self.choice(["broadcast_to", "jittor", "index"])
        if form == "broadcast_to":
            expression = f"({left}.reshape({m}, {k}, 1) * {right}.reshape(1, {k}, {n})).sum(1)"
        elif form == "jittor":
            expression = f"(mj.broadcast({left}, [{m}, {k}, {n}], dims=[2]) * mj.broadcast({right}, [{m}, {k}, {n}], " \
                f"dims=[0])).sum(1)"
        else:
            expression = f"({left}[:, :, None] * {right}[None]).sum(1)"
        if self.coin(0.3):  # an epilogue fused after the sum
            expression = f"({expression} + 1.5).relu()"
            epilogue = True
        else:
            epilogue = False

        def compute(refs):
            A = refs[0].map(np.transpose) if transpose_a else refs[0]
            B = refs[1].map(np.transpose) if transpose_b else refs[1]
            product = ref_matmul(A, B)
            if epilogue:
                product = ref_unary("relu", ref_binary("add", product, Ref(product.dtype, np.array(1.5))))
            return product
        return self.add([a, b], lambda out: f"{out} = {expression}", compute,
                        {"kind": "contraction", "big": big, "form": form})

    def op_pad(self):
        x = self.pick(lambda r: r.ndim >= 1)
        ref = self.refs[x]
        count = self.integer(1, min(2, ref.ndim))
        mode = self.choice(["constant", "constant", "reflect", "replicate", "circular"])
        amounts = []
        for pair in range(count):
            extent = ref.shape[ref.ndim - 1 - pair]
            for _ in range(2):
                if mode == "constant":
                    amounts.append(self.integer(-min(extent, 2), 2))
                elif mode == "reflect":
                    if extent == 0:
                        raise Reject("reflect needs a non-empty dim")
                    amounts.append(self.integer(0, max(0, min(2, extent - 1))))
                elif mode == "replicate":
                    if extent == 0:
                        raise Reject("replicate needs a non-empty dim")
                    amounts.append(self.integer(0, 2))
                else:
                    amounts.append(self.integer(0, min(2, extent)))
        for pair in range(count):
            extent = ref.shape[ref.ndim - 1 - pair]
            if extent + amounts[2 * pair] + amounts[2 * pair + 1] < 0:
                raise Reject("negative size")
        value = None
        if mode == "constant" and self.coin(0.6):
            value = self.choice([1, -2, 3]) if not is_float(ref.dtype) else float(self.choice([1.5, -2.0, 0.25]))
            if ref.dtype == "uint8":
                value = abs(value)
            if ref.dtype == "bool":
                value = 1
        options = f", mode={mode!r}" + (f", value={scalar_literal(value)}" if value is not None else "")

        def compute(refs):
            source = refs[0]
            numpy_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
            crop = [slice(None)] * source.ndim
            widths = [(0, 0)] * source.ndim
            for pair in range(count):
                dim = source.ndim - 1 - pair
                left, right = amounts[2 * pair], amounts[2 * pair + 1]
                crop[dim] = slice(max(0, -left), source.shape[dim] - max(0, -right))
                widths[dim] = (max(0, left), max(0, right))
            cropped = source.map(lambda a: a[tuple(crop)])
            if numpy_mode == "constant":
                fill = np.array(0 if value is None else value).astype(
                    np.float64 if is_float(source.dtype) else source.dtype)
                return Ref(source.dtype, np.pad(cropped.value, widths, constant_values=fill),
                           np.pad(cropped.err, widths), np.pad(cropped.valid, widths, constant_values=True),
                           np.pad(cropped.zsign, widths, constant_values=True))
            return cropped.map(lambda a: np.pad(a, widths, mode=numpy_mode))
        return self.add([x], lambda out: f"{out} = F.pad({x}, {amounts!r}{options})", compute,
                        {"kind": "pad", "mode": mode})

    def op_cumsum(self):
        x = self.pick(lambda r: r.ndim >= 1)
        ndim = self.refs[x].ndim
        dim = self.integer(-ndim, ndim - 1)
        name = "cumprod" if self.coin(0.3) else "cumsum"
        if name == "cumprod" and self.grad and self.refs[x].size and np.abs(self.refs[x].value).max() > 2:
            raise Reject("products of large factors")

        def compute(refs):
            source = refs[0]
            d = source.dtype if is_float(source.dtype) else "int64"
            source = cast_ref(source, d)
            valid = np.logical_and.accumulate(source.valid, axis=dim) if source.size else source.valid
            if name == "cumprod":
                return cumprod_ref(source, d, dim, valid)
            if not is_float(d):
                magnitude = np.cumsum(np.abs(source.value.astype(np.float64)), axis=dim)
                if ((magnitude > 2.0 ** 62) & valid).any():
                    raise Reject("int64 overflow")
                return Ref(d, np.cumsum(source.value, axis=dim), None, valid)
            with np.errstate(all="ignore"):
                v = source.value
                n = source.shape[dim]
                r = np.cumsum(v, axis=dim)
                magnitude = np.cumsum(np.abs(v), axis=dim)
                err = np.cumsum(source.err, axis=dim) + (n + 1) * UNIT[d] * magnitude
                valid = valid & ~(magnitude > LIMIT[d])
                inexact = np.logical_or.accumulate(source.err > 0, axis=dim) if source.size else source.err > 0
                dyadic = np.logical_and.accumulate(_dyadic(v, d), axis=dim) if source.size else _dyadic(v, d)
                exact = ~inexact & dyadic & (magnitude * 1024 < 2.0 ** MANTISSA[d])
                # an infinity or NaN poisons the rest of its row
                return finish_float(d, r, err, valid, inexact, exact, zsign=r != 0)
        spelling = self.coin(0.5)
        code = (lambda out: f"{out} = {x}.{name}({dim})") if spelling else \
            (lambda out: f"{out} = F.{name}({x}, {dim})")
        return self.add([x], code, compute, {"kind": name})

    def shape_into(self, target):
        """A shape that broadcasts to `target` (not the other way round)."""
        target = list(target)
        shape = target[self.integer(0, len(target)):] if target and self.coin(0.3) else list(target)
        return tuple(1 if self.coin(0.3) else s for s in shape)

    def op_setitem(self):
        """x[key] = value on a copy (y = x[...]; y[key] = value): computed at once by assign(); x keeps its
        value (Vars never share storage). Also masked_fill and index_put (out of place)."""
        x = self.pick(lambda r: r.ndim >= 1)
        ref = self.refs[x]
        d = ref.dtype
        form = self.choice(["setitem", "setitem", "masked_fill", "index_put"])
        if form == "masked_fill":
            mask = self.constant_input(self.shape_into(ref.shape), "bool") if self.coin(0.5) else None
            if mask is None:
                other = self.pick(lambda r: r.dtype == "bool" and _broadcasts_to(r.shape, ref.shape),
                                  fresh=lambda: self.constant_input(self.shape_into(ref.shape), "bool"))
                mask = other
            value = self._fill_value(d)
            literal = scalar_literal(value)

            def compute(refs):
                source, condition = refs
                return ref_where(condition, cast_ref(_scalar_ref(value, None), source.dtype), source)
            return self.add([x, mask], lambda out: f"{out} = {x}.masked_fill({mask}, {literal})", compute,
                            {"kind": "masked_fill"})
        if self.coin(0.3) and ref.shape[0] > 0:
            extent = ref.shape[0]
            chosen = [int(i) for i in self.rng.choice(extent, self.integer(1, min(3, extent)), replace=False)]
            shown = [i - extent if self.coin(0.3) else i for i in chosen]
            key, key_text = (np.array(shown),), repr(shown)
        else:
            key = self.random_key(ref.shape)
            key_text = self.render_key(key)
        target = np.empty(ref.shape)[key].shape
        if self.coin(0.3) and form == "setitem":
            value = self._fill_value(d)
            value_text = scalar_literal(value)
            args = [x]
        else:
            value = self.input(self.shape_into(target), self.random_dtype())
            value_text = value
            args = [x, value]

        def compute(refs):
            source = refs[0]
            given = refs[1] if len(refs) > 1 else _scalar_ref(value, None)
            given = cast_ref(given, source.dtype)
            out = Ref(source.dtype, source.value.copy(), source.err.copy(), source.valid.copy(), source.zsign.copy())
            for mine, theirs in ((out.value, given.value), (out.err, given.err), (out.valid, given.valid),
                                 (out.zsign, given.zsign)):
                mine[key] = np.broadcast_to(theirs, target)
            return out
        if form == "setitem":
            # a new Var to assign into (x[...], x[:], x.astype(x.dtype) return x itself, and assigning into x would
            # make the ops recorded from x earlier refuse to run); * 1 and & True copy exactly
            copy = f"{x} & True" if d == "bool" else f"{x} * 1"
            code = lambda out: f"{out} = {copy}\n{out}[{key_text}] = {value_text}"  # noqa: E731
        else:
            if key_text.startswith("["):
                index_text = f"({key_text},)"
            else:
                index_text = f"({key_text})" if key_text.endswith(",") else f"({key_text},)"
            index_text = index_text.replace("...", "Ellipsis")
            if ":" in index_text:
                raise Reject("index_put takes slices only as slice objects")
            code = lambda out: f"{out} = {x}.index_put({index_text}, {value_text})"  # noqa: E731
        return self.add(args, code, compute, {"kind": form})

    def op_misc(self):
        """A few more library ops from ops/tensor.py and ops/indexing.py: argmax/argmin, clamp, gather,
        index_select, roll and boolean-mask indexing."""
        choices = ["clamp", "gather", "index_select", "roll"] if self.grad else \
            ["argmax", "clamp", "gather", "index_select", "roll", "mask"]
        form = self.choice(choices)
        x = self.pick(lambda r: r.ndim >= 1 and r.size > 0)
        ref = self.refs[x]
        ndim = ref.ndim
        if form == "argmax":
            name = self.choice(["argmax", "argmin"])
            dim = None if self.coin(0.3) else self.integer(-ndim, ndim - 1)
            keepdim = self.coin(0.4)
            if dim is not None and ref.shape[dim] == 0:
                raise Reject("empty dim")
            code = (lambda out: f"{out} = {x}.{name}({dim}, keepdim={keepdim})") if self.coin(0.5) else \
                (lambda out: f"{out} = F.{name}({x}, dim={dim}, keepdim={keepdim})")
            return self.add([x], code, lambda refs: ref_argreduce(name, refs[0], dim, keepdim), {"kind": name})
        if form == "clamp":
            low, high = sorted([self._fill_value(ref.dtype), self._fill_value(ref.dtype)]) \
                if ref.dtype != "bool" else (0, 1)
            if self.coin(0.15):
                low, high = high, low  # min > max gives max (PyTorch)
            which = self.choice(["both", "min", "max"])
            low = None if which == "max" else low
            high = None if which == "min" else high
            text = ", ".join(([f"min={scalar_literal(low)}"] if low is not None else []) +
                             ([f"max={scalar_literal(high)}"] if high is not None else []))
            grad = self.grad

            def compute(refs):
                result = refs[0]
                if low is not None:
                    result = ref_where(ref_binary("less", result, _scalar_ref(low, result.dtype), grad),
                                       _scalar_ref(low, result.dtype), result)
                if high is not None:
                    result = ref_where(ref_binary("greater", result, _scalar_ref(high, result.dtype), grad),
                                       _scalar_ref(high, result.dtype), result)
                return result
            return self.add([x], lambda out: f"{out} = {x}.clamp({text})", compute, {"kind": "clamp"})
        if form == "gather":
            dim = self.integer(0, ndim - 1)
            shape = [self.integer(1, s) if d != dim and s > 0 else self.integer(1, 4) for d, s in enumerate(ref.shape)]
            if any(s == 0 for s in ref.shape):
                raise Reject("gather from an empty dim")
            values = self.rng.integers(0, ref.shape[dim], size=shape)
            index = self.constant_input(shape, self.choice(["int64", "int32", "uint8"]), values)
            shown = dim - ndim if self.coin(0.3) else dim

            def compute(refs):
                source, positions = refs
                crop = tuple(slice(0, e) if d != dim else slice(None) for d, e in enumerate(positions.shape))
                take = positions.value.astype(np.int64)
                return source.map(lambda a: np.take_along_axis(a[crop], take, dim))
            return self.add([x, index], lambda out: f"{out} = F.gather({x}, {shown}, {index})", compute,
                            {"kind": "gather"})
        if form == "index_select":
            dim = self.integer(0, ndim - 1)
            if ref.shape[dim] == 0:
                raise Reject("empty dim")
            values = self.rng.integers(0, ref.shape[dim], size=self.integer(1, 4))
            index = self.constant_input(values.shape, self.choice(["int64", "int32"]), values)
            return self.add([x, index], lambda out: f"{out} = F.index_select({x}, {dim}, {index})",
                            lambda refs: refs[0].map(lambda a: np.take(a, refs[1].value.astype(np.int64), axis=dim)),
                            {"kind": "index_select"})
        if form == "roll":
            if self.coin(0.3):
                shift = self.integer(-5, 5)
                return self.add([x], lambda out: f"{out} = {x}.roll({shift})",
                                lambda refs: refs[0].map(lambda a: np.roll(a, shift)), {"kind": "roll"})
            dims = [int(d) for d in self.rng.choice(ndim, self.integer(1, ndim), replace=False)]
            shifts = [self.integer(-5, 5) for _ in dims]
            return self.add([x], lambda out: f"{out} = F.roll({x}, {tuple(shifts)!r}, {tuple(dims)!r})",
                            lambda refs: refs[0].map(lambda a: np.roll(a, shifts, dims)), {"kind": "roll"})
        # a boolean mask over the leading dims: the result's size depends on the data (the mask is computed first)
        count = self.integer(1, ndim)
        mask_shape = ref.shape[:count]

        def usable(r):
            return r.dtype == "bool" and r.shape == mask_shape and r.valid.all()
        mask = self.pick(usable, fresh=lambda: self.constant_input(mask_shape, "bool"))
        return self.add([x, mask], lambda out: f"{out} = {x}[{mask}]",
                        lambda refs: refs[0].map(lambda a: a[refs[1].value]), {"kind": "mask_index"})

    def _fill_value(self, dtype):
        if dtype == "bool":
            return self.choice([True, False])
        if dtype == "uint8":
            return self.integer(0, 9)
        if dtype in INT_DTYPES:
            return self.integer(-9, 9)
        return float(self.choice([1.5, -2.0, 0.25, 3.0]))

    # ------------------------------------------------------------------------------------------ programs
    VALUE_OPS = {"op_unary": 12, "op_binary": 16, "op_scalar": 8, "op_where": 5, "op_cast": 7, "op_reduce": 10,
                 "op_reshape": 5, "op_permute": 4, "op_slice": 7, "op_index_list": 2, "op_flip": 2,
                 "op_broadcast_to": 4, "op_join": 5, "op_reindex": 10, "op_reindex_reduce": 8, "op_matmul": 3,
                 "op_softmax": 3, "op_conv2d": 1.5, "op_contraction": 1.5, "op_pad": 2, "op_cumsum": 1.5,
                 "op_setitem": 3, "op_misc": 4}
    GRAD_OPS = {"op_unary": 12, "op_binary": 14, "op_scalar": 6, "op_where": 3, "op_reduce": 8, "op_reshape": 4,
                "op_permute": 4, "op_slice": 5, "op_broadcast_to": 3, "op_join": 4, "op_reindex": 8,
                "op_reindex_reduce": 5, "op_matmul": 5, "op_softmax": 4, "op_conv2d": 1.5, "op_contraction": 1.5,
                "op_pad": 2, "op_cumsum": 1.5, "op_misc": 3}

    def generate(self):
        table = self.GRAD_OPS if self.grad else self.VALUE_OPS
        names, weights = list(table), list(table.values())
        base = self.random_shape(zero=0.0 if self.grad else (0.3 if self.coin(0.25) else 0.0))
        if self.grad:
            while _numel(base) > 12:
                base = self.random_shape()
        for _ in range(self.integer(1, 3)):
            shape = self.partner_shape(base) if self.coin(0.6) else base
            if self.grad and _numel(shape) > 12:
                shape = base
            self.input(shape, self.random_dtype())
        count = self.integer(3, 12) if not self.grad else self.integer(3, 9)
        made = 0
        attempts = 0
        while made < count and attempts < count * 12:
            attempts += 1
            method = self.choice(names, p=weights)
            mark = (len(self.stmts), dict(self.refs), self.counter, len(self.inputs), dict(self.ancestors))
            try:
                getattr(self, method)()
                made += 1
            except Reject:
                # drop whatever the failed attempt added (fresh inputs) so the program stays minimal
                self.stmts = self.stmts[:mark[0]]
                self.refs = mark[1]
                self.counter = mark[2]
                self.inputs = self.inputs[:mark[3]]
                self.ancestors = mark[4]
        computed = [s.out for s in self.stmts if s.literal is None]
        if self.grad:
            if not computed:
                raise Reject("nothing computed")
            used = {a for s in self.stmts for a in s.args}
            sinks = [s.out for s in self.stmts if s.literal is None and s.out not in used and
                     self.refs[s.out].dtype == "float64"]
            if not sinks:
                raise Reject("no float output")
            output = sinks[-1]
            if len(sinks) > 1:  # differentiate all sinks at once: the sum of their sums
                terms = " + ".join(f"{name}.sum()" for name in sinks)

                def compute(refs):
                    total = ref_reduce("sum", refs[0], None, False)
                    for ref in refs[1:]:
                        total = ref_binary("add", total, ref_reduce("sum", ref, None, False))
                    return total
                output = self.add(sinks, lambda out: f"{out} = {terms}", compute, {"kind": "sum_of_sinks"})
            stmts = closure(self.stmts, [output])
            inputs = [name for name in self.inputs if any(s.out == name for s in stmts)]
            if not inputs:
                raise Reject("output depends on no input")
            return Program(self.seed, self.mode, stmts, [output], self.refs, inputs=inputs)
        if not computed:
            raise Reject("nothing computed")
        used = {a for s in self.stmts for a in s.args}
        outputs = [s.out for s in self.stmts if s.literal is None and (s.out not in used or self.coin(0.25))]
        if not outputs:
            outputs = [self.stmts[-1].out]
        return Program(self.seed, self.mode, list(self.stmts), outputs, self.refs, sequential=self.coin(0.2))


def _scalar_ref(value, tensor_dtype, op=None):
    """A Python scalar as a 0-d Ref: next to a tensor of `tensor_dtype` (scalar rule; an integer out of the
    tensor's range wraps, except in true division, which gives float32 of the exact value), alone (None) in its
    default dtype (bool, int64, float32)."""
    if op == "div" and isinstance(value, int) and not isinstance(value, bool) and tensor_dtype is not None and \
            not is_float(tensor_dtype):
        rounding = 0.0 if abs(value) < 2 ** 24 else UNIT["float32"] * abs(value)
        return Ref("float32", np.array(float(value)), np.array(rounding))
    if tensor_dtype is None:
        d = "bool" if isinstance(value, bool) else "int64" if isinstance(value, int) else "float32"
    else:
        d = scalar_dtype(value, tensor_dtype)
    if is_float(d):
        # Rounded first to the precision the op computes in, as PyTorch does: 1e60 next to float32 is an infinity;
        # next to float16 it is a float32 (half arithmetic runs in float32: float16(0.5) * 7e4 is 3.5e4).
        with np.errstate(over="ignore", under="ignore"):
            precision = "float32" if d == "float16" else d
            return Ref(d, np.array(float(value)).astype(precision).astype(np.float64))
    return Ref(d, np.array(value).astype(d))


def generate(seed, mode="value", exclude=()):
    """The program of a seed. Retries with derived generators when a whole program is rejected (rare)."""
    for attempt in range(20):
        generator = Generator(seed * 1000 + attempt if attempt else seed, mode, exclude)
        try:
            program = generator.generate()
            program.seed = seed
            return program
        except Reject:
            continue
    raise RuntimeError(f"seed {seed}: could not generate a program")


# ============================================================================================== known and fixed bugs
# Genuine bugs the fuzzer found and that are not fixed yet. Each entry: name, description, a standalone
# `reproducer` that raises while the bug is present, and `matches(info)`, which keeps the construct out of
# generated programs. test_fuzz.py runs every reproducer as an xfail, so fixing a bug turns its test red until the
# entry moves to FIXED_BUGS.
KNOWN_BUGS = []

# Bugs the fuzzer found and that were fixed: every reproducer must pass, and every listed (mode, seed) must pass
# with nothing excluded, so none of them can come back unnoticed.
FIXED_BUGS = [
    {
        "name": "sum/prod of a 0-d integer or bool tensor kept its dtype",
        "description": "`sum` and `prod` of bool or integer tensors give int64 (docs/type_promotion.md, as "
                       "PyTorch). A 0-d input has no dim to reduce and reduce() returned it unchanged, so int8, "
                       "uint8, int32 and bool stayed as they were (True.sum() was True, not 1). Fixed in "
                       "meta_ops/reduce.cc: a reduction over nothing still casts to its result type.",
        "reproducer": "import numpy as np\n"
                      "import metajit as mj\n"
                      "x = mj.array(np.array(3, dtype=np.int8))\n"
                      "assert x.sum().dtype == 'int64', x.sum().dtype\n"
                      "assert x.prod().dtype == 'int64', x.prod().dtype\n"
                      "assert mj.array(np.array(True)).sum().dtype == 'int64'\n"
                      "assert mj.array(np.array(True)).sum().item() == 1\n",
        "seeds": [("value", 46), ("value", 130), ("value", 316)],
    },
    {
        "name": "a product over copies of pow(negative, non-integer) gave a number instead of NaN",
        "description": "Reduction loops were generated with `#pragma clang fp reassociate(on)` over the whole "
                       "loop body, so LLVM folded pow(x, a) * pow(x, a) into pow(x, 2a): pow(-2, 3.5) twice "
                       "gave pow(-2, 7) = -128 instead of NaN. Fixed in jit/codegen/cpp/cpp_renderer.cc: only the "
                       "accumulation of a sum is reassociated, products never.",
        "reproducer": "import numpy as np\n"
                      "import metajit as mj\n"
                      "x = mj.array(np.array(-2.0, dtype=np.float32))\n"
                      "result = (x ** 3.5).broadcast_to(2).prod().numpy()\n"
                      "assert np.isnan(result), result\n"
                      "y = mj.array(np.full(3, -2.0))\n"
                      "total = ((y ** 3.5) * (y ** 3.5)).sum().numpy()  # the same fold inside a sum's body\n"
                      "assert np.isnan(total), total\n",
        "seeds": [("value", 694)],
    },
    {
        "name": "scatter kernels with repeated targets lost additions (Clang 14 loop-vectoriser miscompile)",
        "description": "A reindex_reduce kernel whose small inner loops repeat a target (abs(i1 - 2) over [5, 4]) "
                       "had those loops fully unrolled into the outer row loop, which Clang 14 then vectorised "
                       "with an interleaved store group holding the same element twice; one addition was lost "
                       "([1, 1, 1, 0] instead of [1, 2, 1, 0] in the first four rows). It happens with any AVX2 "
                       "or AVX-512 target (-march=skylake too; not with -mllvm "
                       "-enable-interleaved-mem-accesses=false). Users saw wrong gradients of F.pad with "
                       "reflect, circular and replicate modes. Fixed in jit/codegen/cpp/cpp_renderer.cc: only the "
                       "innermost loop of a scatter may be vectorised.",
        "reproducer": "import numpy as np\n"
                      "import metajit as mj\n"
                      "result = mj.reindex_reduce(mj.array(np.ones((5, 4))), 'add', [5, 4], ['i0', 'abs(i1 - 2)'])\n"
                      "np.testing.assert_array_equal(result.numpy(), np.tile([1.0, 2.0, 1.0, 0.0], (5, 1)))\n"
                      "folded = mj.reindex_reduce(mj.array(np.ones((4, 4, 5), dtype=np.int32)), 'add', [4, 2, 2],\n"
                      "                           ['i0', 'i1 % 2', '(i2 - 2) % 2'])\n"
                      "expected = np.zeros((4, 2, 2), dtype=np.int64)\n"
                      "for i1 in range(4):\n"
                      "    for i2 in range(5):\n"
                      "        expected[:, i1 % 2, (i2 - 2) % 2] += 1\n"
                      "np.testing.assert_array_equal(folded.numpy(), expected)\n",
        "seeds": [("grad", 106182), ("grad", 200581), ("grad", 203771)],
    },
    {
        "name": "cumsum over more than 64 elements turned a whole block into NaN around an infinity",
        "description": "Rows longer than 64 are scanned in blocks of about sqrt(n). The offset of each block was "
                       "the inclusive scan of the block totals minus the block's own total, inf - inf = NaN for "
                       "the block holding an infinity, so elements before the infinity became NaN. Fixed in "
                       "ops/tensor.py (_scan_along): the exclusive scan is the inclusive scan of the totals "
                       "shifted by one.",
        "reproducer": "import numpy as np\n"
                      "import metajit as mj\n"
                      "x = np.ones(65, dtype=np.float32)\n"
                      "x[60] = np.inf\n"
                      "np.testing.assert_array_equal(mj.array(x).cumsum(0).numpy(), np.cumsum(x))\n"
                      "y = np.ones((2, 200))\n"
                      "y[1, 150] = np.nan\n"
                      "np.testing.assert_array_equal(mj.array(y).cumsum(1).numpy(), np.cumsum(y, axis=1))\n",
        "seeds": [("value", 202849)],
    },
    {
        "name": "a reduction inside a per-row reduction's loop read the enclosing loop's values",
        "description": "Found while per-row reductions were being added (before they landed): in the [1, 1] "
                       "kernel of a matmul operand's gradient, the softmax-over-dim-0 backward's per-row sum "
                       "needed the forward's max and sum, which (all dims being 1) looked like reductions at the "
                       "kernel's output index and were emitted inside the enclosing loop, where their "
                       "loop variable r0 shadowed the outer one and they reused its loads: the gradient came out "
                       "-0.016 instead of 0.177. Fixed in jit/ir/lowering.cc: inside a per-row loop only per-row "
                       "reductions are inlined, so reduction loops are never nested.",
        "reproducer": "import numpy as np\n"
                      "import metajit as mj\n"
                      "import metajit.nn.functional as F\n"
                      "a = mj.array(np.array([[-0.8679109710943052]]), requires_grad=True)\n"
                      "b = mj.array(np.array([[0.17739478934363095], [0.9793590066601143]]), requires_grad=True)\n"
                      "product = mj.matmul(b, a)\n"
                      "loss = F.softmax(product, dim=-2).sum() + mj.reduce(product, 'min', 1)[::2].sum()\n"
                      "grad_a, grad_b = mj.grad(loss, [a, b])\n"
                      "np.testing.assert_allclose(grad_a.numpy(), [[0.17739478934363095]], rtol=1e-12)\n"
                      "np.testing.assert_allclose(grad_b.numpy(), [[-0.8679109710943052], [0.0]], rtol=1e-12)\n",
        "seeds": [("grad", 300902)],
    },
    {
        "name": "argmin/argmax of a computed float16 tensor gave the out-of-range index",
        "description": "float16 kernels computed in float32 and rounded only when storing. argmin stores the "
                       "minimum (rounded to float16) and then compares the recomputed, unrounded values with it: "
                       "no value matched, so every result was the dim's length (5 for 5 rows). Found by seed "
                       "401461 (value mode): argmin(exp(float16 [5, 31]), dim=0). Fixed in jit/ir/lowering.cc: "
                       "every float16 op's result is rounded as it is produced (docs/type_promotion.md).",
        "reproducer": "import numpy as np\n"
                      "import metajit as mj\n"
                      "import metajit.nn.functional as F\n"
                      "x = np.random.default_rng(3).uniform(-4, 4, size=(5, 31)).astype(np.float16)\n"
                      "y = np.exp(x.astype(np.float32)).astype(np.float16)\n"
                      "t = mj.exp(mj.array(x))\n"
                      "np.testing.assert_array_equal(F.argmin(t, dim=0).numpy(), y.argmin(0))\n"
                      "np.testing.assert_array_equal(F.argmax(t, dim=1).numpy(), y.argmax(1))\n"
                      "np.testing.assert_array_equal(t.numpy(), y)\n",
        "seeds": [("value", 401461)],
    },
    {
        "name": "the gradient of min/max over a softmax lost its one-hot element",
        "description": "Row kernels divided by a per-row value through its reciprocal, a rewrite of the kernel "
                       "(jit/row_reciprocals.cc) that other kernels computing the same softmax did not make, so "
                       "the value recomputed in the gradient's kernel differed in the last bit from the stored "
                       "minimum and matched nowhere. Found by seed 30262222 (grad mode): softmax(x).min(). "
                       "Fixed: the rewrite is gone, and softmax is e * (1 / sum) in the graph itself "
                       "(ops/activation.py), so every kernel rounds it alike.",
        "reproducer": "import numpy as np\n"
                      "import metajit as mj\n"
                      "data = np.array([[-1.8870599670650217, -1.7952008324172843, 0.5161634037529783]])\n"
                      "x = mj.array(data, requires_grad=True)\n"
                      "gradient = mj.grad(x.softmax(-1).min(), [x])[0].numpy()\n"
                      "e = np.exp(data - data.max()); p = e / e.sum()\n"
                      "expected = p[0, 0] * (np.array([[1.0, 0.0, 0.0]]) - p)\n"
                      "np.testing.assert_allclose(gradient, expected, rtol=1e-6, atol=1e-9)\n",
        "seeds": [("grad", 30262222)],
    },
    {
        "name": "a max gradient lost its tie when a multiply-add was contracted in one loop only",
        "description": "Kernels were compiled with -ffp-contract=fast, so the backend fused a multiply into the "
                       "subtraction after it wherever it chose: in max(sum(p) - p) with p = softmax(x), the loop "
                       "computing the maximum and the element loop of the gradient rounded sum(p) - p differently "
                       "(1 ulp), the tie mask matched nowhere there, and the gradient came out wrong. Found by seed "
                       "71103 (grad mode). Fixed in jit/toolchain/clang_compiler.cc: -ffp-contract=on contracts only "
                       "within one expression, and a kernel writes each op as its own statement.",
        "reproducer": "import numpy as np\n"
                      "import metajit as mj\n"
                      "data = np.array([[-1.3568611401622506, -1.6293696481038196]])\n"
                      "x = mj.array(data, requires_grad=True)\n"
                      "p = x.softmax(1)\n"
                      "gradient = mj.grad((mj.reduce(p, 'add', [0, 1]) - p).max(), [x])[0].numpy()\n"
                      "e = np.exp(data - data.max()); q = e / e.sum()\n"
                      "expected = q * (np.array([[1.0, 0.0]]) - q[0, 0])\n"
                      "np.testing.assert_allclose(gradient, expected, rtol=1e-9, atol=1e-12)\n",
        "seeds": [("grad", 71103)],
    },
]


# ============================================================================================== running, comparing
def compare(dtype, got, ref, limit=4):
    """None if `got` (numpy, from metajit with Var dtype `dtype`) matches the reference, else a description."""
    if dtype != ref.dtype:
        return f"dtype {dtype}, expected {ref.dtype}"
    if tuple(got.shape) != tuple(ref.shape):
        return f"shape {tuple(got.shape)}, expected {tuple(ref.shape)}"
    valid = ref.valid
    if not is_float(ref.dtype):
        bad = valid & (got != ref.value)
        tolerance = np.zeros(ref.shape)
    else:
        g = got.astype(np.float64)
        r = ref.value
        tolerance = SAFETY * ref.err
        with np.errstate(all="ignore"):
            both_nan = np.isnan(g) & np.isnan(r)
            same_inf = np.isinf(r) & (g == r)
            close = np.abs(g - r) <= tolerance
            bad = valid & ~(both_nan | same_inf | close)
    if not bad.any():
        return None
    positions = np.argwhere(bad)[:limit]
    lines = [f"{int(bad.sum())} of {int(valid.sum())} compared elements differ ({int(valid.size - valid.sum())} "
             f"not compared)"]
    for position in positions:
        index = tuple(int(p) for p in position)
        lines.append(f"  at {index}: metajit {got[index]!r}, numpy {ref.value[index]!r} (tolerance "
                     f"{tolerance[index]:.3g})")
    return "\n".join(lines)


def _namespace():
    return {"np": np, "mj": mj, "F": F}


def execute(stmts, outputs, refs, sequential=False):
    """Runs the program text with metajit; returns [(output, message)] for the outputs that disagree."""
    namespace = _namespace()
    source = "\n".join(stmt.code for stmt in stmts)
    try:
        exec(compile(source, "<fuzz case>", "exec"), namespace)
        variables = [namespace[name] for name in outputs]
        if not sequential:
            mj.sync(variables)
        results = [(name, var.dtype, var.numpy()) for name, var in zip(outputs, variables)]
    except Exception as error:  # noqa: BLE001  (any exception from metajit is a finding)
        # the statement that raised, if it was one (the line number inside "<fuzz case>")
        lines = [frame.lineno for frame in traceback.extract_tb(error.__traceback__) if frame.filename == "<fuzz case>"]
        culprit = None
        if lines:
            line = 0
            for stmt in stmts:
                line += stmt.code.count("\n") + 1
                if line >= lines[-1]:
                    culprit = stmt.out
                    break
        return [(None, f"metajit raised {type(error).__name__}: {error}", culprit)]
    failures = []
    for name, dtype, got in results:
        message = compare(dtype, got, refs[name])
        if message:
            failures.append((name, message, None))
    return failures


def _still_fails(stmts, output, sequential):
    try:
        refs = recompute(stmts)
    except Reject:
        return None
    failures = execute(stmts, [output], refs, sequential)
    return refs if any(name == output for name, _, _ in failures) else None


def shrink(program, output):
    """Smallest program found that still fails at `output`: its dependency closure, then intermediate results
    replaced by literals (of the reference value) while the failure persists."""
    stmts = closure(program.stmts, [output])
    refs = _still_fails(stmts, output, program.sequential)
    if refs is None:
        return program.stmts, program.outputs, program.refs, False
    changed = True
    while changed:
        changed = False
        for position, stmt in enumerate(stmts):
            if stmt.literal is not None or stmt.out == output:
                continue
            candidate = list(stmts)
            candidate[position] = literal_stmt(stmt.out, Ref(refs[stmt.out].dtype, refs[stmt.out].literal_array()))
            candidate = closure(candidate, [output])
            new_refs = _still_fails(candidate, output, program.sequential)
            if new_refs is not None:
                stmts, refs, changed = candidate, new_refs, True
                break
    return stmts, [output], refs, True


def value_reproducer(seed, stmts, output, refs, message):
    ref = refs[output]
    lines = _header(seed, message)
    lines += [stmt.code for stmt in stmts]
    lines += ["", f"got = {output}.numpy()",
              f"expected = {array_literal(ref.value, 'float64' if is_float(ref.dtype) else ref.dtype)}"
              f"  # numpy reference (exact value), expected dtype {ref.dtype}"]
    compared = "compared" if not ref.valid.all() else "True"
    if not ref.valid.all():
        lines.append(f"compared = {array_literal(ref.valid, 'bool')}  # elements the reference defines")
    if is_float(ref.dtype):
        lines.append(f"tolerance = {array_literal(SAFETY * ref.err, 'float64')}")
        lines.append(f"wrong = ~np.isclose(got, expected, rtol=0, atol=tolerance, equal_nan=True) & {compared}")
    else:
        lines.append(f"wrong = (got != expected) & {compared}")
    lines += [f"print({output}.dtype, got)", "print(expected)", "print('wrong at', np.argwhere(wrong).tolist())"]
    return "\n".join(lines)


def _header(seed, message):
    return [f"# metajit fuzz case: seed {seed} (value mode; tools/fuzz.py --seed {seed})",
            "# " + message.replace("\n", "\n# "), "import numpy as np", "import metajit as mj",
            "import metajit.nn.functional as F", ""]


def run_value_case(seed, exclude=(), shrink_failures=True):
    """Generates and runs one value case; returns a list of Failure (empty when it passes)."""
    program = generate(seed, "value", exclude)
    failures = execute(program.stmts, program.outputs, program.refs, program.sequential)
    if not failures:
        return []
    output, message, culprit = failures[0]
    if output is None:  # metajit raised: the statement that raised and what it needs, else the whole program
        stmts = closure(program.stmts, [culprit]) if culprit else program.stmts
        tail = [] if culprit else [f"mj.sync([{', '.join(program.outputs)}])"]
        text = "\n".join(_header(seed, message) + [s.code for s in stmts] + tail)
        return [Failure(seed, "value", culprit, message, text)]
    if not shrink_failures:
        text = value_reproducer(seed, closure(program.stmts, [output]), output, program.refs, message)
        return [Failure(seed, "value", output, message, text)]
    stmts, outputs, refs, alone = shrink(program, output)
    if alone:
        final = execute(stmts, outputs, refs, program.sequential)
        message = final[0][1] if final else message
        text = value_reproducer(seed, stmts, output, refs, message)
        if program.sequential:
            text += "\n# (outputs were read one at a time with .numpy())"
    else:
        text = "\n".join(_header(seed, message + "\n(fails only when all outputs are computed together)") +
                         [s.code for s in program.stmts] +
                         [f"mj.sync([{', '.join(program.outputs)}])", f"print({output}.numpy())"])
    return [Failure(seed, "value", output, message, text)]


# ---------------------------------------------------------------------------------------------------- gradients
GRAD_RTOL, GRAD_ATOL = 1e-5, 1e-6


def gradient_function_source(program):
    body = [stmt.code for stmt in program.stmts if stmt.out not in program.inputs]
    return "\n".join([f"def f({', '.join(program.inputs)}):"] + ["    " + line for line in body] +
                     [f"    return {program.outputs[0]}"])


def gradient_reproducer(seed, program, message):
    arrays = [array_literal(program.refs[name].value, "float64") for name in program.inputs]
    lines = [f"# metajit fuzz case: seed {seed} (gradient mode; tools/fuzz.py --gradients --seed {seed})",
             "# " + message.replace("\n", "\n# "),
             "import numpy as np", "import metajit as mj", "import metajit.nn.functional as F", "",
             gradient_function_source(program), "",
             f"arrays = [{', '.join(arrays)}]",
             "inputs = [mj.array(a, requires_grad=True) for a in arrays]",
             "output = f(*inputs)",
             "weights = np.random.default_rng(0).uniform(0.5, 1.5, size=output.shape)",
             "analytic = [g.numpy() for g in mj.grad((output * mj.array(weights)).sum(), inputs)]",
             "def scalar(values):",
             "    return float((f(*[mj.array(v) for v in values]).numpy() * weights).sum())",
             "for k, a in enumerate(arrays):",
             "    numeric = np.zeros_like(a)",
             "    for p in range(a.size):",
             "        up = [b.copy() for b in arrays]; down = [b.copy() for b in arrays]",
             "        up[k].reshape(-1)[p] += 1e-6; down[k].reshape(-1)[p] -= 1e-6",
             "        numeric.reshape(-1)[p] = (scalar(up) - scalar(down)) / 2e-6",
             f"    np.testing.assert_allclose(analytic[k], numeric, rtol={GRAD_RTOL}, atol={GRAD_ATOL}, "
             "err_msg=f'gradient of input {k}')"]
    return "\n".join(lines)


def run_gradient_case(seed, exclude=()):
    from gradient_check import check_gradients
    program = generate(seed, "grad", exclude)
    namespace = _namespace()
    source = gradient_function_source(program)
    arrays = [program.refs[name].value for name in program.inputs]
    expected = program.refs[program.outputs[0]]
    try:
        exec(compile(source, "<fuzz gradient case>", "exec"), namespace)
        function = namespace["f"]
        value = function(*[mj.array(a) for a in arrays])
        # the inputs are exact here: float64 rounding with a generous factor
        forward = compare(value.dtype, value.numpy(),
                          Ref("float64", expected.value, 1e-9 * (np.abs(expected.value) + 1)))
        if forward:
            message = "forward value differs from numpy: " + forward
        else:
            check_gradients(function, *arrays, rtol=GRAD_RTOL, atol=GRAD_ATOL)
            return []
    except AssertionError as error:
        message = "gradient differs from finite differences: " + str(error).strip()[:1500]
    except Exception as error:  # noqa: BLE001
        message = f"metajit raised {type(error).__name__}: {error}"
    return [Failure(seed, "grad", program.outputs[0], message, gradient_reproducer(seed, program, message))]


def run_case(seed, mode="value", exclude=()):
    return run_gradient_case(seed, exclude) if mode == "grad" else run_value_case(seed, exclude)
