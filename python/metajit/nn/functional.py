"""PyTorch-compatible functional API: ``import metajit.nn.functional as F`` then ``F.conv2d``,
``F.cross_entropy``, ... Every function is composed from meta-ops (see metajit.ops)."""
from .. import ops as _ops
from ..ops import *  # noqa: F401,F403

__all__ = list(_ops.__all__)


def __getattr__(name):
    """A torch.nn.functional name metajit lacks: an AttributeError that names it (reasons in _absent.py)."""
    from .._absent import absent_name
    raise absent_name(name, "metajit.nn.functional", "torch.nn.functional")
