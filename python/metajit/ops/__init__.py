"""The operator library: every operator is composed from metajit's meta-ops (reindex, reindex-reduce,
elementwise) and Var operations, so its gradient comes from the meta-ops' rules and it fuses with its
neighbours. No operator here has a hand-written kernel. PyTorch names and signatures throughout; the
PyTorch-style entry point is metajit.nn.functional."""
from .activation import *  # noqa: F401,F403
from .activation_inplace import *  # noqa: F401,F403
from .attention import *  # noqa: F401,F403
from .bucketing import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403
from .ctc_loss import *  # noqa: F401,F403
from .diagonals import *  # noqa: F401,F403
from .distance import *  # noqa: F401,F403
from .dropout import *  # noqa: F401,F403
from .einsum import *  # noqa: F401,F403
from .embedding import *  # noqa: F401,F403
from .embedding_bag import *  # noqa: F401,F403
from .fractional_max_pool import *  # noqa: F401,F403
from .grid_sample import *  # noqa: F401,F403
from .gumbel_softmax import *  # noqa: F401,F403
from .host import *  # noqa: F401,F403
from .index_update import *  # noqa: F401,F403
from .indexing import *  # noqa: F401,F403
from .interpolate import *  # noqa: F401,F403
from .layout import *  # noqa: F401,F403
from .linalg import *  # noqa: F401,F403
from .local_response_norm import *  # noqa: F401,F403
from .loss import *  # noqa: F401,F403
from .lp_pool import *  # noqa: F401,F403
from .margin_loss import *  # noqa: F401,F403
from .math_functions import *  # noqa: F401,F403
from .matrix_solvers import *  # noqa: F401,F403
from .multi_margin_loss import *  # noqa: F401,F403
from .normalization import *  # noqa: F401,F403
from .order_statistics import *  # noqa: F401,F403
from .pointwise import *  # noqa: F401,F403
from .pool import *  # noqa: F401,F403
from .products import *  # noqa: F401,F403
from .rearrange import *  # noqa: F401,F403
from .reduction import *  # noqa: F401,F403
from .sampling import *  # noqa: F401,F403
from .scans import *  # noqa: F401,F403
from .sorting import *  # noqa: F401,F403
from .stacking import *  # noqa: F401,F403
from .statistics import *  # noqa: F401,F403
from .tensor import *  # noqa: F401,F403
from .unpool import *  # noqa: F401,F403

import importlib as _importlib

# Submodules are looked up by name: the star imports above rebind e.g. `dropout` to the function.
_MODULES = ["activation", "activation_inplace", "attention", "bucketing", "conv", "ctc_loss", "diagonals", "distance",
            "dropout", "einsum", "embedding", "embedding_bag", "fractional_max_pool", "grid_sample", "gumbel_softmax",
            "host", "index_update", "indexing", "interpolate", "layout", "linalg", "local_response_norm", "loss",
            "lp_pool", "margin_loss", "math_functions", "matrix_solvers", "multi_margin_loss", "normalization",
            "order_statistics", "pointwise", "pool", "products", "rearrange", "reduction", "sampling", "scans",
            "sorting", "stacking", "statistics", "tensor", "unpool"]
__all__ = sorted({name for module in _MODULES
                  for name in _importlib.import_module("metajit.ops." + module).__all__})
