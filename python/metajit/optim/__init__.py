"""Optimizers (PyTorch's torch.optim interface) whose step runs backward and update as one fused plan."""
from . import lr_scheduler  # noqa: F401
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam",
           "LBFGS", "lr_scheduler"]


def __getattr__(name):
    """A torch.optim name metajit.optim lacks (ASGD, Rprop, SparseAdam, ...): an AttributeError naming it."""
    from .._absent import absent_name
    raise absent_name(name, "metajit.optim", "torch.optim")
