"""nn.utils: PyTorch's helpers around parameters and gradients (gradient clipping, flattening parameters to one
vector) and the nn.utils.rnn names.

PyTorch names that metajit does not provide yet raise NotImplementedError naming them (module __getattr__),
rather than a bare AttributeError, so a ported program says what is missing. This package must not hold layers
or change how modules register parameters (that is nn.module's)."""
from . import rnn  # noqa: F401
from .clip_grad import clip_grad_norm, clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm
from .convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm",
           "parameters_to_vector", "vector_to_parameters", "rnn"]

# PyTorch's other nn.utils names: reparametrisations and fusion helpers not implemented here.
_NOT_IMPLEMENTED = {"weight_norm", "remove_weight_norm", "spectral_norm", "remove_spectral_norm", "parametrize",
                    "parametrizations", "prune", "stateless", "skip_init", "fuse_conv_bn_eval",
                    "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights",
                    "convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format", "fusion",
                    "memory_format"}


def __getattr__(name):
    if name in _NOT_IMPLEMENTED:
        raise NotImplementedError(f"metajit.nn.utils.{name} (torch.nn.utils.{name}) is not implemented in metajit")
    raise AttributeError(f"module 'metajit.nn.utils' has no attribute '{name}'")
