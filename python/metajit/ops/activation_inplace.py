"""The in-place activation functions of torch.nn.functional (F.relu_, F.elu_, F.leaky_relu_, F.hardtanh_,
F.celu_, F.selu_, F.threshold_, F.rrelu_): each writes the out-of-place activation into its input through
metajit's in-place write (docs/mutation.md) and returns the input."""
from .. import _core, _inplace
from .activation import celu, elu, hardtanh, leaky_relu, relu, rrelu, selu, threshold

__all__ = ["relu_", "elu_", "leaky_relu_", "hardtanh_", "celu_", "selu_", "threshold_", "rrelu_"]


def _in_place(name, function):
    def apply(input, *args, **kwargs):
        first_node_id = _core.next_node_id()
        return _inplace.write(input, function(input, *args, **kwargs), name, first_node_id)
    apply.__name__ = name
    apply.__doc__ = f"In place: input becomes F.{name[:-1]}(input, ...); returns input."
    return apply


relu_ = _in_place("relu_", relu)
elu_ = _in_place("elu_", elu)
leaky_relu_ = _in_place("leaky_relu_", leaky_relu)
hardtanh_ = _in_place("hardtanh_", hardtanh)
celu_ = _in_place("celu_", celu)
selu_ = _in_place("selu_", selu)
threshold_ = _in_place("threshold_", threshold)
rrelu_ = _in_place("rrelu_", lambda input, lower=1.0 / 8, upper=1.0 / 3, training=False: rrelu(input, lower, upper,
                                                                                                 training))
