"""nn.utils: PyTorch's helpers around parameters and gradients (gradient clipping, flattening parameters to one
vector) and the nn.utils.rnn names.

PyTorch names that metajit does not provide raise metajit._absent.AbsentNameError naming them (an AttributeError
and a NotImplementedError), so a ported program says what is missing. This package must not hold layers
or change how modules register parameters (that is nn.module's)."""
from . import rnn  # noqa: F401
from .clip_grad import clip_grad_norm, clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm
from .convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm",
           "parameters_to_vector", "vector_to_parameters", "rnn"]


def __getattr__(name):
    """A torch.nn.utils name metajit lacks: weight_norm, spectral_norm, pruning, ... (reasons in _absent.py)."""
    from ..._absent import absent_name
    raise absent_name(name, "metajit.nn.utils", "torch.nn.utils")
