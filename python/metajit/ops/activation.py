"""Activation functions and the softmax family, composed from elementwise ops and reductions.

Numerically stable forms throughout: softmax, log_softmax and logsumexp subtract the row maximum (taken without
gradient: the result does not depend on the shift, so every derivative is unchanged), softplus uses
max(x, 0) + log1p(exp(-|x|)), and branches that could overflow are clamped before the overflowing op so that
the unused side of a `where` never produces inf * 0 = nan in a gradient. `inplace=` arguments are accepted for
PyTorch compatibility only: Vars are immutable, a new Var is always returned.
"""
import math
import warnings

from .. import _core, _dtype_name, where
from .tensor import _as_var, _normalize_dim, _normalize_dims

__all__ = ["softmax", "log_softmax", "logsumexp", "relu", "relu6", "leaky_relu", "gelu", "silu", "sigmoid", "tanh",
           "elu", "softplus", "hardtanh", "hardsigmoid", "hardswish", "mish", "prelu", "selu", "celu", "glu",
           "logsigmoid", "softsign", "softmin", "threshold", "hardshrink", "softshrink", "tanhshrink", "rrelu"]


def _implicit_softmax_dim(name, ndim):
    """PyTorch's legacy choice when `dim` is not given (deprecated there too)."""
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X "
                  "as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def _softmax_input(name, input, dim, dtype):
    input = _as_var(input)
    if dtype is not None:
        input = _core.cast(input, _dtype_name(dtype))
    if not input.dtype.startswith("float"):
        raise TypeError(f"{name}: expected a floating-point input, got {input.dtype} (pass dtype=)")
    if dim is None:
        dim = _implicit_softmax_dim(name, input.ndim)
    return input, _normalize_dim(dim, input.ndim, name)


def _shifted(input, dims, infinite_maximum_shifts_by_zero=True):
    """input minus its maximum over `dims` (kept), the shift carrying no gradient. For logsumexp, a row whose
    maximum is -inf or inf is shifted by 0, so its result is that infinity instead of nan. Softmax and
    log-softmax pass False: x - max gives nan for a row holding inf (inf - inf), which is what PyTorch and numpy
    give for the whole row."""
    maximum = _core.reduce(input, "max", dims, True).detach()
    if infinite_maximum_shifts_by_zero:
        finite = (maximum - maximum) == 0  # false for +-inf and nan
        maximum = where(finite, maximum, 0.0)
    return input - maximum, maximum


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """exp(x) / sum(exp(x)) along `dim`, computed as exp(x - max) / sum(exp(x - max))."""
    input, dim = _softmax_input("softmax", input, dim, dtype)
    if input.ndim == 0:
        return (input - input).exp()
    exponentials = _shifted(input, [dim], False)[0].exp()
    # Times the reciprocal of the sum, as PyTorch's softmax computes it: one division per row, not per element.
    # It is part of the graph, so every kernel that computes the softmax rounds it the same way.
    return exponentials * (1.0 / exponentials.sum(dim, keepdim=True))


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """x - logsumexp(x) along `dim`, with the maximum subtracted first."""
    input, dim = _softmax_input("log_softmax", input, dim, dtype)
    if input.ndim == 0:
        return input - input
    shifted = _shifted(input, [dim], False)[0]
    return shifted - shifted.exp().sum(dim, keepdim=True).log()


def logsumexp(input, dim, keepdim=False):
    """log(sum(exp(x))) over `dim` (an int or a sequence), as max + log(sum(exp(x - max)))."""
    input = _as_var(input)
    if not input.dtype.startswith("float"):
        input = _core.cast(input, "float32")
    dims = _normalize_dims(dim, input.ndim, "logsumexp")
    if not dims:
        return input
    shifted, maximum = _shifted(input, dims)
    result = shifted.exp().sum(dims, keepdim=True).log() + maximum
    if keepdim:
        return result
    kept = [extent for position, extent in enumerate(input.shape) if position not in dims]
    return result.reshape(kept)


def relu(input, inplace=False):
    return _as_var(input).relu()


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """Clamps to [min_val, max_val]; the gradient is zero at and beyond the bounds, as in PyTorch."""
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val})")
    input = _as_var(input)
    return where(input <= min_val, min_val, where(input >= max_val, max_val, input))


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    input = _as_var(input)
    return where(input > 0, input, input * negative_slope)


def gelu(input, approximate="none"):
    """x * Phi(x). approximate='none' uses the erf op (the prelude's mj_erf on float32, within 1.2 ulp, vectorised;
    its gradient is the closed form 2/sqrt(pi) exp(-x^2)); 'tanh' is PyTorch's tanh approximation
    0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    input = _as_var(input)
    if approximate == "none":
        return input * 0.5 * (1.0 + _core.unary("erf", input * (1.0 / math.sqrt(2.0))))
    if approximate == "tanh":
        inner = math.sqrt(2.0 / math.pi) * (input + 0.044715 * input * input * input)
        return 0.5 * input * (1.0 + inner.tanh())
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def silu(input, inplace=False):
    input = _as_var(input)
    return input * input.sigmoid()


def sigmoid(input):
    return _as_var(input).sigmoid()


def tanh(input):
    return _as_var(input).tanh()


def elu(input, alpha=1.0, inplace=False):
    """x for x > 0, alpha * (exp(x) - 1) otherwise. The exponential only sees the non-positive part (so it cannot
    overflow into the unused branch), taken by a where that passes the gradient at 0, so d/dx = alpha there as in
    PyTorch."""
    input = _as_var(input)
    positive = input > 0
    return where(positive, input, alpha * where(positive, 0.0, input).expm1())


def _softplus_of(z):
    """log(1 + exp(z)) as max(z, 0) + log1p(exp(-|z|)): never overflows. The max and |z| share the branch z >= 0,
    so the gradient at z = 0 is exactly 1/2."""
    non_negative = z >= 0
    magnitude = where(non_negative, z, -z)
    return where(non_negative, z, 0.0) + (-magnitude).exp().log1p()


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta in the overflow-free form; x itself where beta x > threshold (as PyTorch)."""
    input = _as_var(input)
    scaled = input * beta if beta != 1 else input
    stable = _softplus_of(scaled)
    if beta != 1:
        stable = stable / beta
    return where(scaled > threshold, input, stable)


def hardsigmoid(input, inplace=False):
    """relu6(x + 3) / 6: 0 below -3, 1 above 3, linear between (gradient 1/6 strictly inside, as PyTorch)."""
    input = _as_var(input)
    return where(input <= -3.0, 0.0, where(input >= 3.0, 1.0, input / 6.0 + 0.5))


def hardswish(input, inplace=False):
    """x * hardsigmoid(x) (MobileNetV3)."""
    input = _as_var(input)
    return where(input <= -3.0, 0.0, where(input >= 3.0, input, input * (input + 3.0) / 6.0))


def mish(input, inplace=False):
    """x * tanh(softplus(x))."""
    input = _as_var(input)
    return input * _softplus_of(input).tanh()


def prelu(input, weight):
    """x if x >= 0 else weight * x, with one weight or one per channel (dim 1)."""
    input, weight = _as_var(input), _as_var(weight)
    if weight.numel() != 1:
        if input.ndim < 2 or weight.ndim != 1 or weight.shape[0] != input.shape[1]:
            raise ValueError(f"prelu: weight of shape {list(weight.shape)} needs one entry or one per channel "
                             f"(dim 1 of the input, shape {list(input.shape)})")
        weight = weight.reshape([1, weight.shape[0]] + [1] * (input.ndim - 2))
    else:
        weight = weight.reshape([])
    return where(input > 0, input, input * weight)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input, inplace=False):
    """scale * elu(x, alpha) with the self-normalising constants."""
    return _SELU_SCALE * elu(input, _SELU_ALPHA)


def celu(input, alpha=1.0, inplace=False):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    if alpha == 0:
        raise ValueError("celu: alpha cannot be 0")
    input = _as_var(input)
    positive = input > 0
    return where(positive, input, alpha * (where(positive, 0.0, input) / alpha).expm1())


def glu(input, dim=-1):
    """The first half of `dim` times the sigmoid of the second half."""
    input = _as_var(input)
    dim = _normalize_dim(dim, input.ndim, "glu")
    extent = input.shape[dim]
    if extent % 2:
        raise ValueError(f"glu: dim {dim} must have an even extent, got {extent}")
    half = extent // 2
    first = input[(slice(None),) * dim + (slice(0, half),)]
    second = input[(slice(None),) * dim + (slice(half, extent),)]
    return first * second.sigmoid()


def logsigmoid(input):
    """log(sigmoid(x)) = -softplus(-x), without overflow."""
    return -_softplus_of(-_as_var(input))


def softsign(input):
    """x / (1 + |x|)."""
    input = _as_var(input)
    return input / (1.0 + abs(input))


def _method_softmax(self, dim=None, dtype=None):
    return softmax(self, dim, dtype=dtype)


def _method_log_softmax(self, dim=None, dtype=None):
    return log_softmax(self, dim, dtype=dtype)


def _method_logsumexp(self, dim, keepdim=False):
    return logsumexp(self, dim, keepdim)


VAR_METHODS = {"softmax": _method_softmax, "log_softmax": _method_log_softmax,  # attached by _var_method_table.py
               "logsumexp": _method_logsumexp}


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """softmax(-input), as torch.nn.functional.softmin."""
    return softmax(-input, dim, dtype=dtype)


def threshold(input, threshold, value, inplace=False):
    """input where input > threshold, else value."""
    return where(input > threshold, input, value)


def hardshrink(input, lambd=0.5):
    """input where |input| > lambd, else 0."""
    return where(abs(input) > lambd, input, 0.0)


def softshrink(input, lambd=0.5):
    """input - lambd above lambd, input + lambd below -lambd, else 0."""
    if lambd < 0:
        raise ValueError(f"softshrink: lambda must be greater or equal to 0, but found to be {lambd}.")
    return where(input > lambd, input - lambd, where(input < -lambd, input + lambd, 0.0))


def tanhshrink(input):
    """input - tanh(input)."""
    return input - input.tanh()


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Randomized leaky ReLU: negative inputs times a slope drawn uniformly from [lower, upper] per element while
    training (from mj.rand), times the mean slope (lower + upper) / 2 otherwise."""
    input = _as_var(input)
    if training:
        from .. import rand
        slope = _core.cast(rand(*input.shape, dtype="float32"), input.dtype) * (upper - lower) + lower
    else:
        slope = (lower + upper) / 2.0
    result = where(input >= 0, input, input * slope)
    return input.copy_(result) if inplace else result
