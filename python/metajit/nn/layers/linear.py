"""Linear (y = x W^T + b) and Identity."""
from .. import functional as F
from ..module import Module
from ._common import check_positive_int, default_uniform_, empty_parameter

__all__ = ["Linear", "Identity"]


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
