"""Optimizers (PyTorch's torch.optim interface) whose step runs backward and update as one fused plan."""
from . import lr_scheduler  # noqa: F401
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .asgd import ASGD
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .rprop import Rprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam",
           "LBFGS", "Rprop", "ASGD", "lr_scheduler"]


def __getattr__(name):
    """A torch.optim name metajit.optim lacks (SparseAdam, Adafactor, ...): an AttributeError naming it (reasons
    in _absent.py)."""
    from .._absent import absent_name
    raise absent_name(name, "metajit.optim", "torch.optim")
