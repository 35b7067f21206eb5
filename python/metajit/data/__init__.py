"""Data loading with PyTorch's torch.utils.data interface (also importable as metajit.utils.data): datasets,
samplers, default_collate and a DataLoader that yields metajit Vars and can load in worker processes.

Only re-exports live here. The rule every module in this package keeps: worker processes never run metajit's
engine; they produce numpy data and the main process makes Vars (docs/data.md)."""
from .collate import default_collate, default_convert
from .dataloader import DataLoader
from .dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset,
                      random_split)
from .distributed import DistributedSampler
from .generator import Generator
from .stack_dataset import StackDataset
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler,
                      WeightedRandomSampler)
from .worker import WorkerInfo, get_worker_info

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "ChainDataset", "Subset",
           "random_split", "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler", "DataLoader", "default_collate", "default_convert",
           "get_worker_info", "WorkerInfo", "Generator", "StackDataset", "DistributedSampler"]


def __getattr__(name):
    """A torch.utils.data name metajit lacks: an AttributeError that names it (reasons in _absent.py)."""
    from .._absent import absent_name
    raise absent_name(name, "metajit.utils.data", "torch.utils.data")
