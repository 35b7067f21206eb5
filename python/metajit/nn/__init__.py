"""Neural-network building blocks (PyTorch-style): Module, Parameter, layers, losses and init; functional ops in
metajit.nn.functional; gradient clipping and parameter helpers in metajit.nn.utils."""
from . import functional  # noqa: F401
from . import init  # noqa: F401
from . import utils  # noqa: F401
from . import parallel  # noqa: F401  (DistributedDataParallel)
from .parallel.sync_batch_norm import SyncBatchNorm  # noqa: F401
from .layers import *  # noqa: F401,F403
from .layers import __all__ as _layer_names
from .module import Module
from .parameter import Parameter

__all__ = ["Module", "Parameter", "functional", "init", "utils", "parallel", "SyncBatchNorm"] + list(_layer_names)


def __getattr__(name):
    """A torch.nn name metajit.nn lacks: an AttributeError that names it and points at the supported list."""
    from .._absent import absent_name
    raise absent_name(name, "metajit.nn", "torch.nn")
