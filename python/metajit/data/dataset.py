"""Datasets with PyTorch's torch.utils.data semantics: Dataset (map-style, `+` concatenates), IterableDataset,
TensorDataset, ConcatDataset, ChainDataset, Subset and random_split.

TensorDataset keeps numpy copies of its arrays: inside a DataLoader worker process it must hand out numpy values
only (metajit's engine never runs in a worker), and in the main process it wraps each item in a Var as PyTorch
returns tensors. Nothing here may run a metajit kernel."""
import bisect
import math
import numbers
import warnings

import numpy as np

from .._core import Var
from .generator import check_generator, numpy_stream

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "ChainDataset", "Subset",
           "random_split"]


def _in_worker():
    from .worker import get_worker_info
    return get_worker_info() is not None


class Dataset:
    """Base class of map-style datasets: subclasses implement __getitem__(index) and usually __len__() (the
    default samplers need it). `a + b` is ConcatDataset([a, b])."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """Base class of iterable-style datasets: subclasses implement __iter__(). With DataLoader workers every worker
    iterates its own copy; use get_worker_info() inside __iter__ to give each worker its share. `a + b` is
    ChainDataset([a, b])."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")

    def __add__(self, other):
        return ChainDataset([self, other])


def _host_copy(value, position):
    if isinstance(value, Var):
        # Read once here, in the main process: the dataset then never needs the engine again.
        return np.array(value.numpy())
    array = np.array(value)  # a copy, so later changes to the caller's array do not show through
    if array.dtype == object:
        raise TypeError(f"TensorDataset: array {position} has dtype object; give numeric arrays or Vars")
    return array


class TensorDataset(Dataset):
    """TensorDataset(*arrays): sample i is (a[i], b[i], ...) over equally long Vars or numpy arrays.

    `tensors` holds numpy copies (Vars are read once, at construction). Indexing returns Vars in the main process,
    as PyTorch returns tensors, and numpy values inside DataLoader workers."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset needs at least one array")
        arrays = []
        for position, tensor in enumerate(tensors):
            array = _host_copy(tensor, position)
            if array.ndim == 0:
                raise ValueError(f"TensorDataset: array {position} is 0-dimensional; samples are taken along the "
                                 "first dimension")
            arrays.append(array)
        lengths = [len(array) for array in arrays]
        if len(set(lengths)) != 1:
            raise ValueError(f"TensorDataset: size mismatch between arrays, first dimensions are {lengths}")
        self.tensors = tuple(arrays)

    def __getitem__(self, index):
        items = tuple(array[index] for array in self.tensors)
        if _in_worker():
            return items
        from .. import array
        return tuple(array(np.asarray(item)) for item in items)

    def __len__(self):
        return len(self.tensors[0])


class ConcatDataset(Dataset):
    """ConcatDataset(datasets): the map-style datasets one after another; index i goes to the dataset whose range
    holds it (negative indices count from the end). `cumulative_sizes[k]` is the total length of datasets 0..k."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        for dataset in self.datasets:
            if isinstance(dataset, IterableDataset):
                raise TypeError("ConcatDataset does not support IterableDataset (use ChainDataset)")
        self.cumulative_sizes = []
        total = 0
        for dataset in self.datasets:
            total += len(dataset)
            self.cumulative_sizes.append(total)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, index):
        if not isinstance(index, numbers.Integral):
            raise TypeError(f"ConcatDataset indices must be integers, got {type(index).__name__}")
        index = int(index)
        if index < 0:
            if -index > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            index += len(self)
        if index >= len(self):
            raise IndexError(f"index {index} is out of range for a ConcatDataset of length {len(self)}")
        which = bisect.bisect_right(self.cumulative_sizes, index)
        start = self.cumulative_sizes[which - 1] if which > 0 else 0
        return self.datasets[which][index - start]


class ChainDataset(IterableDataset):
    """ChainDataset(datasets): iterates the iterable datasets one after another (lazily)."""

    def __init__(self, datasets):
        self.datasets = list(datasets)

    def __iter__(self):
        for dataset in self.datasets:
            if not isinstance(dataset, IterableDataset):
                raise TypeError("ChainDataset only supports IterableDataset")
            yield from dataset

    def __len__(self):
        total = 0
        for dataset in self.datasets:
            if not isinstance(dataset, IterableDataset):
                raise TypeError("ChainDataset only supports IterableDataset")
            total += len(dataset)
        return total


class Subset(Dataset):
    """Subset(dataset, indices): item i is dataset[indices[i]]; a list of positions gives a list of items."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, index):
        if isinstance(index, list):
            return [self.dataset[self.indices[position]] for position in index]
        return self.dataset[self.indices[index]]

    def __len__(self):
        return len(self.indices)


def _split_sizes(total, lengths):
    """Counts from `lengths` (counts, or fractions summing to 1 whose rounding remainder goes one by one to the
    first splits, as in PyTorch)."""
    lengths = list(lengths)
    if lengths and math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        for position, fraction in enumerate(lengths):
            if fraction < 0 or fraction > 1:
                raise ValueError(f"random_split: fraction at index {position} is not between 0 and 1")
        sizes = [int(math.floor(total * fraction)) for fraction in lengths]
        for position in range(total - sum(sizes)):
            sizes[position % len(sizes)] += 1
        for position, size in enumerate(sizes):
            if size == 0:
                warnings.warn(f"Length of split at index {position} is 0. This might result in an empty dataset.")
        return sizes
    for length in lengths:
        if not isinstance(length, numbers.Integral) or length < 0:
            raise ValueError(f"random_split: lengths must be non-negative integers or fractions summing to 1, got "
                             f"{lengths}")
    if sum(lengths) != total:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    return [int(length) for length in lengths]


def random_split(dataset, lengths, generator=None):
    """Splits `dataset` into non-overlapping Subsets of the given lengths (counts, or fractions that sum to 1),
    from one random permutation drawn from `generator` (see metajit.data.generator for what it may be; None draws
    from mj.seed's generator)."""
    check_generator(generator)
    sizes = _split_sizes(len(dataset), lengths)
    order = numpy_stream(generator).permutation(sum(sizes)).tolist()
    subsets, start = [], 0
    for size in sizes:
        subsets.append(Subset(dataset, order[start:start + size]))
        start += size
    return subsets
