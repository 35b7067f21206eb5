"""metajit.nn.parallel: PyTorch's torch.nn.parallel path (DistributedDataParallel; DataParallel is also here)."""
from ..layers.data_parallel import DataParallel  # noqa: F401
from .distributed import DistributedDataParallel  # noqa: F401
from .sync_batch_norm import SyncBatchNorm  # noqa: F401

__all__ = ["DataParallel", "DistributedDataParallel"]
