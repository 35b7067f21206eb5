"""Optimizers (PyTorch's torch.optim interface) whose step runs backward and update as one fused plan."""
from . import lr_scheduler  # noqa: F401
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]
