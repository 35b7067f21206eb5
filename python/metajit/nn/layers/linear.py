"""Linear (y = x W^T + b), Bilinear (y = x1^T A x2 + b) and Identity."""
import math

from .. import functional as F
from .. import init
from ..module import Module
from ._common import check_positive_int, default_uniform_, empty_parameter

__all__ = ["Linear", "Bilinear", "Identity"]


class Identity(Module):
    """Returns its input; accepts and ignores any constructor arguments (as PyTorch)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """Linear(in_features, out_features, bias=True, device=None, dtype=None): y = x @ weight.T + bias, with
    weight of shape (out_features, in_features)."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        check_positive_int(in_features, "in_features", "Linear")
        check_positive_int(out_features, "out_features", "Linear")
        self.in_features = in_features
        self.out_features = out_features
        self.weight = empty_parameter((out_features, in_features), dtype)
        if bias:
            self.bias = empty_parameter((out_features,), dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        default_uniform_(self.weight, self.bias, self.in_features)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Bilinear(Module):
    """Bilinear(in1_features, in2_features, out_features, bias=True): y = x1^T A x2 + b, with weight of shape
    (out_features, in1_features, in2_features); weight and bias start U(-1/sqrt(in1), 1/sqrt(in1)) as in PyTorch."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        for value, name in ((in1_features, "in1_features"), (in2_features, "in2_features"),
                            (out_features, "out_features")):
            check_positive_int(value, name, "Bilinear")
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        self.weight = empty_parameter((out_features, in1_features, in2_features), dtype)
        if bias:
            self.bias = empty_parameter((out_features,), dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
