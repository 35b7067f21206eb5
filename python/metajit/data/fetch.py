"""Turning one entry of the index sampler into one item of the DataLoader: a batch of indices into a collated batch
(map-style datasets), or the next batch_size samples of the dataset's iterator (iterable datasets). The same code
runs in the main process and in worker processes, so both give the same batches.

Must not run metajit's engine itself: it only indexes datasets, gathers numpy arrays and calls collate_fn."""
import numpy as np

from .collate import _finish, default_collate
from .dataset import Subset, TensorDataset

__all__ = ["MapFetcher", "IterableFetcher", "DatasetExhausted"]


class DatasetExhausted(Exception):
    """An iterable dataset's iterator ended (not StopIteration, which a user's __getitem__ may raise by mistake)."""


def _tensor_source(dataset):
    """(TensorDataset, index maps) when `dataset` is a TensorDataset, possibly inside Subsets, else None: such
    batches are gathered with one fancy index per array instead of item by item."""
    maps = []
    while type(dataset) is Subset:
        maps.append(dataset.indices)
        dataset = dataset.dataset
    if type(dataset) is not TensorDataset:
        return None
    return dataset, maps


class MapFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.tensor_source = _tensor_source(dataset) if auto_collation and collate_fn is default_collate else None

    def fetch(self, indices):
        if not self.auto_collation:
            return self.collate_fn(self.dataset[indices])
        if self.tensor_source is not None:
            tensor_dataset, maps = self.tensor_source
            positions = list(indices)
            for index_map in maps:
                positions = [index_map[position] for position in positions]
            positions = np.asarray(positions, dtype=np.int64)
            # A list, as PyTorch's default_collate gives for tuple samples.
            return [_finish(array[positions]) for array in tensor_dataset.tensors]
        getitems = getattr(self.dataset, "__getitems__", None)
        samples = getitems(list(indices)) if getitems is not None else [self.dataset[index] for index in indices]
        return self.collate_fn(samples)


class IterableFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.iterator = iter(dataset)
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last
        self.ended = False

    def fetch(self, indices):
        if self.ended:
            raise DatasetExhausted
        if not self.auto_collation:
            try:
                return self.collate_fn(next(self.iterator))
            except StopIteration:
                self.ended = True
                raise DatasetExhausted from None
        samples = []
        for _ in range(len(indices)):  # the batch sampler's list length is the batch size
            try:
                samples.append(next(self.iterator))
            except StopIteration:
                self.ended = True
                break
        if not samples or (self.drop_last and len(samples) < len(indices)):
            raise DatasetExhausted
        return self.collate_fn(samples)


def make_fetcher(iterable, dataset, auto_collation, collate_fn, drop_last):
    kind = IterableFetcher if iterable else MapFetcher
    return kind(dataset, auto_collation, collate_fn, drop_last)
