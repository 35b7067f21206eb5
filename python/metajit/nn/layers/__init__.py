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
    embedding_bag, flatten, lazy, linear, loss, margin_loss, normalization, parameter_containers, pooling, \
    recurrent, recurrent_cells, resampling, transformer, unpooling

__all__ = sorted(set(activation.__all__ + attention.__all__ + container.__all__ + convolution.__all__ +
                     ctc_loss.__all__ + data_parallel.__all__ + lazy.__all__ +
                     distance.__all__ + dropout.__all__ + embedding.__all__ + embedding_bag.__all__ +
                     flatten.__all__ + linear.__all__ + loss.__all__ + margin_loss.__all__ + normalization.__all__ +
                     parameter_containers.__all__ + pooling.__all__ + recurrent.__all__ + recurrent_cells.__all__ +
                     resampling.__all__ + transformer.__all__ + unpooling.__all__))
