"""PyTorch-compatible functional API: ``import metajit.nn.functional as F`` then ``F.conv2d``,
``F.cross_entropy``, ... Every function is composed from meta-ops (see metajit.ops)."""
import importlib as _importlib

from ..ops import *  # noqa: F401,F403

# Submodules are looked up by name: `from .dropout import *` in metajit.ops rebinds the attribute `dropout`
# to the function of that name.
_MODULES = ["activation", "conv", "dropout", "embedding", "indexing", "interpolate", "linalg", "loss",
            "normalization", "pool", "tensor"]
__all__ = sorted({name for module in _MODULES
                  for name in _importlib.import_module("metajit.ops." + module).__all__})
