"""DataLoader: batches a map-style dataset into metajit Vars, with reproducible shuffling and an optional
tqdm progress bar. Samples are gathered and stacked in numpy (one host copy per batch); each batch field
becomes one Var."""
import numbers

import numpy as np

from .._core import Var
from .dataset import TensorDataset

__all__ = ["DataLoader", "default_collate"]


def _host(value):
    return value.numpy() if isinstance(value, Var) else value


def default_collate(samples):
    """Stacks a list of samples into a batch: arrays and numbers become one Var with a leading batch dimension
    (Python floats give float64, ints int64, as in PyTorch), tuples/lists and dicts are collated field by field,
    strings are kept as a list."""
    from .. import array
    first = samples[0]
    if isinstance(first, (tuple, list)):
        lengths = {len(sample) for sample in samples}
        if len(lengths) != 1:
            raise ValueError(f"default_collate: samples have different numbers of fields: {sorted(lengths)}")
        return type(first)(default_collate([sample[index] for sample in samples]) for index in range(len(first))) \
            if isinstance(first, tuple) else [default_collate([sample[index] for sample in samples])
                                             for index in range(len(first))]
    if isinstance(first, dict):
        return {key: default_collate([sample[key] for sample in samples]) for key in first}
    if isinstance(first, str):
        return list(samples)
    if isinstance(first, (Var, np.ndarray, np.generic, numbers.Number)):
        # Python floats stack to float64 and ints to int64, as in PyTorch's default_collate.
        return array(np.stack([np.asarray(_host(sample)) for sample in samples]))
    raise TypeError(f"default_collate: cannot batch samples of type {type(first).__name__}; pass collate_fn=")


class DataLoader:
    """DataLoader(dataset, batch_size=1, shuffle=False, drop_last=False, seed=None, collate_fn=None,
    progress=False).

    Iterating yields collated batches (Vars). shuffle draws a new order every epoch from a generator seeded with
    `seed` (None: from fresh OS entropy), so two loaders with the same seed give the same batches. progress=True
    or a description string shows a tqdm progress bar. batch_size=None yields single samples, uncollated."""

    def __init__(self, dataset, batch_size=1, shuffle=False, drop_last=False, seed=None, collate_fn=None,
                 progress=False):
        if not hasattr(dataset, "__getitem__") or not hasattr(dataset, "__len__"):
            raise TypeError(f"DataLoader needs a map-style dataset with __getitem__ and __len__, got "
                            f"{type(dataset).__name__}")
        if batch_size is not None and (not isinstance(batch_size, numbers.Integral) or batch_size <= 0):
            raise ValueError(f"batch_size should be a positive integer or None, got {batch_size!r}")
        if collate_fn is not None and not callable(collate_fn):
            raise TypeError("collate_fn must be callable")
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.seed = seed
        self.collate_fn = collate_fn if collate_fn is not None else default_collate
        self.progress = progress
        self._generator = np.random.default_rng(seed)

    def __len__(self):
        count = len(self.dataset)
        if self.batch_size is None:
            return count
        return count // self.batch_size if self.drop_last else -(-count // self.batch_size)

    def _batches(self):
        count = len(self.dataset)
        order = self._generator.permutation(count) if self.shuffle else np.arange(count)
        if self.batch_size is None:
            for index in order:
                yield self.dataset[int(index)]
            return
        from .. import array
        fast = type(self.dataset) is TensorDataset and self.collate_fn is default_collate
        for start in range(0, count, self.batch_size):
            indices = order[start:start + self.batch_size]
            if len(indices) < self.batch_size and self.drop_last:
                return
            if fast:
                # One fancy-indexing gather per array instead of stacking single samples.
                yield tuple(array(tensor[indices]) for tensor in self.dataset.tensors)
            else:
                yield self.collate_fn([self.dataset[int(index)] for index in indices])

    def __iter__(self):
        batches = self._batches()
        if not self.progress:
            return batches
        from tqdm import tqdm
        description = self.progress if isinstance(self.progress, str) else None
        return iter(tqdm(batches, total=len(self), desc=description))
