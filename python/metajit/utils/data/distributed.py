"""metajit.utils.data.distributed: PyTorch's `torch.utils.data.distributed` import path (DistributedSampler).
A re-export only; the sampler lives in metajit.data.distributed."""
from ...data.distributed import DistributedSampler  # noqa: F401

__all__ = ["DistributedSampler"]
