"""Activation modules: ReLU, ReLU6, LeakyReLU, GELU, SiLU, Sigmoid, Tanh, ELU, Softplus, Softmax, LogSoftmax,
Hardtanh, Hardsigmoid, Hardswish, Mish, SELU, CELU, GLU, LogSigmoid, Softsign and PReLU (each calls the
functional op of the same name; PReLU learns its slopes)."""
from .. import functional as F
from ..module import Module
from ._common import check_positive_int, empty_parameter

__all__ = ["ReLU", "ReLU6", "LeakyReLU", "GELU", "SiLU", "Sigmoid", "Tanh", "ELU", "Softplus", "Softmax", "Softmax2d",
           "LogSoftmax", "Hardtanh", "Hardsigmoid", "Hardswish", "Mish", "SELU", "CELU", "GLU", "LogSigmoid",
           "Softsign", "PReLU", "Softmin", "Threshold", "Hardshrink", "Softshrink", "Tanhshrink", "RReLU"]


class ReLU(Module):
    """max(x, 0). `inplace` is accepted for compatibility; metajit values are immutable, so it changes nothing."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class ReLU6(ReLU):
    """min(max(x, 0), 6)."""

    def forward(self, input):
        return F.relu6(input)


class LeakyReLU(Module):
    """x if x >= 0 else negative_slope * x."""

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class GELU(Module):
    """x * Phi(x); approximate='tanh' uses the tanh approximation."""

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    """x * sigmoid(x)."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.silu(input)


class Sigmoid(Module):
    def forward(self, input):
        return F.sigmoid(input)


class Tanh(Module):
    def forward(self, input):
        return F.tanh(input)


class ELU(Module):
    """x if x > 0 else alpha * (exp(x) - 1)."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return F.elu(input, self.alpha)

    def extra_repr(self):
        return f"alpha={self.alpha}"


class Softplus(Module):
    """log(1 + exp(beta * x)) / beta, linear above `threshold`."""

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmax2d(Module):
    """Softmax over the channels of (N, C, H, W) or (C, H, W): at every position, as PyTorch's Softmax2d."""

    def forward(self, input):
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected a 3-D or 4-D input, got shape {list(input.shape)}")
        return F.softmax(input, -3)


class LogSoftmax(Softmax):
    def forward(self, input):
        return F.log_softmax(input, self.dim)


class Hardtanh(Module):
    """Clamps to [min_val, max_val]."""

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        if min_val > max_val:
            raise ValueError(f"Hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val})")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}"


def _simple(name, function, doc):
    """A module without arguments (but PyTorch's `inplace`, accepted and ignored) calling `function`."""
    def __init__(self, inplace=False):
        Module.__init__(self)
        self.inplace = inplace

    def forward(self, input):
        return function(input)
    return type(name, (Module,), {"__init__": __init__, "forward": forward, "__doc__": doc})


Hardsigmoid = _simple("Hardsigmoid", lambda x: F.hardsigmoid(x), "relu6(x + 3) / 6.")
Hardswish = _simple("Hardswish", lambda x: F.hardswish(x), "x * hardsigmoid(x).")
Mish = _simple("Mish", lambda x: F.mish(x), "x * tanh(softplus(x)).")
SELU = _simple("SELU", lambda x: F.selu(x), "scale * elu(x, alpha) with the self-normalising constants.")
LogSigmoid = _simple("LogSigmoid", lambda x: F.logsigmoid(x), "log(sigmoid(x)).")
Softsign = _simple("Softsign", lambda x: F.softsign(x), "x / (1 + |x|).")
for _module in (Hardsigmoid, Hardswish, Mish, SELU, LogSigmoid, Softsign):
    _module.__module__ = __name__


class CELU(Module):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.celu(input, self.alpha)

    def extra_repr(self):
        return f"alpha={self.alpha}"


class GLU(Module):
    """The first half of `dim` times the sigmoid of the second half."""

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class PReLU(Module):
    """x if x >= 0 else a * x, with `num_parameters` learned slopes (1, or one per channel) starting at `init`."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        check_positive_int(num_parameters, "num_parameters", "PReLU")
        self.num_parameters = num_parameters
        self.init = init
        self.weight = empty_parameter((num_parameters,), dtype)
        self.reset_parameters()

    def reset_parameters(self):
        from .. import init as initializers
        initializers.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class Softmin(Softmax):
    def forward(self, input):
        return F.softmin(input, self.dim)


class Threshold(Module):
    """input where input > threshold, else value."""

    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}"


class Hardshrink(Module):
    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return F.hardshrink(input, self.lambd)

    def extra_repr(self):
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    def forward(self, input):
        return F.softshrink(input, self.lambd)


class Tanhshrink(Module):
    def forward(self, input):
        return F.tanhshrink(input)


class RReLU(Module):
    """RReLU(lower=1/8, upper=1/3): negative inputs times a random slope from [lower, upper] while training, the
    mean slope in eval mode (F.rrelu)."""

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace else "")
