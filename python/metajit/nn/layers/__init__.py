"""The layer modules of metajit.nn, one concept per file."""
from .activation import *  # noqa: F401,F403
from .attention import *  # noqa: F401,F403
from .container import *  # noqa: F401,F403
from .data_parallel import *  # noqa: F401,F403
from .convolution import *  # noqa: F401,F403
from .ctc_loss import *  # noqa: F401,F403
from .distance import *  # noqa: F401,F403
from .dropout import *  # noqa: F401,F403
from .embedding import *  # noqa: F401,F403
from .embedding_bag import *  # noqa: F401,F403
from .flatten import *  # noqa: F401,F403
from .fractional_pooling import *  # noqa: F401,F403
from .lazy import *  # noqa: F401,F403
from .linear import *  # noqa: F401,F403
from .loss import *  # noqa: F401,F403
from .margin_loss import *  # noqa: F401,F403
from .normalization import *  # noqa: F401,F403
from .parameter_containers import *  # noqa: F401,F403
from .pooling import *  # noqa: F401,F403
from .recurrent import *  # noqa: F401,F403
from .recurrent_cells import *  # noqa: F401,F403
from .resampling import *  # noqa: F401,F403
from .transformer import *  # noqa: F401,F403
from .unpooling import *  # noqa: F401,F403
from . import activation, attention, container, convolution, ctc_loss, data_parallel, distance, dropout, embedding, \
    embedding_bag, flatten, fractional_pooling, lazy, linear, loss, margin_loss, normalization, \
    parameter_containers, pooling, recurrent, recurrent_cells, resampling, transformer, unpooling

__all__ = sorted({name for module in (activation, attention, container, convolution, ctc_loss, data_parallel,
                                      distance, dropout, embedding, embedding_bag, flatten, fractional_pooling,
                                      lazy, linear, loss, margin_loss, normalization, parameter_containers,
                                      pooling, recurrent, recurrent_cells, resampling, transformer, unpooling)
                  for name in module.__all__})
