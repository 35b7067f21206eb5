"""Samplers with PyTorch's torch.utils.data semantics: which dataset indices an epoch visits, in which order, and
how they are grouped into batches (Sampler, SequentialSampler, RandomSampler, SubsetRandomSampler,
WeightedRandomSampler, BatchSampler).

Random samplers draw a fresh numpy stream from their `generator` at the start of every epoch (see
metajit.data.generator for the accepted generators). Samplers yield Python ints and must not run metajit's engine."""
import numbers

import numpy as np

from .._core import Var
from .generator import check_generator, numpy_stream

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
           "BatchSampler"]


def _positive_integer(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ValueError(f"{name} should be a positive integer value, but got {name}={value!r}")
    return int(value)


class Sampler:
    """Base class of samplers: subclasses implement __iter__ (yielding indices, or lists of indices for a batch
    sampler) and, where the count is known, __len__. The data_source argument is accepted and ignored, as in
    PyTorch."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """RandomSampler(data_source, replacement=False, num_samples=None, generator=None).

    Without replacement: a new permutation every epoch; num_samples larger than the dataset repeats whole
    permutations and ends with part of one. With replacement: num_samples independent uniform draws."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={replacement!r}")
        check_generator(generator)
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        _positive_integer(self.num_samples, "num_samples")

    @property
    def num_samples(self):
        # Read per epoch: the dataset may change size between epochs.
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        count = len(self.data_source)
        wanted = self.num_samples
        stream = numpy_stream(self.generator)
        if self.replacement:
            yield from stream.integers(0, count, size=wanted).tolist()
            return
        for _ in range(wanted // count):
            yield from stream.permutation(count).tolist()
        if wanted % count:
            yield from stream.permutation(count)[:wanted % count].tolist()

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a new random order every epoch."""

    def __init__(self, indices, generator=None):
        check_generator(generator)
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for position in numpy_stream(self.generator).permutation(len(self.indices)).tolist():
            yield self.indices[position]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """WeightedRandomSampler(weights, num_samples, replacement=True, generator=None): indices 0..len(weights)-1
    drawn with probability proportional to the (not necessarily normalised) weights; without replacement each
    index at most once."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        num_samples = _positive_integer(num_samples, "num_samples")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement!r}")
        check_generator(generator)
        if isinstance(weights, Var):
            weights = weights.numpy()
        weights = np.asarray(weights, dtype=np.float64)
        if weights.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape {weights.shape}")
        self.weights = weights
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        # Checked per epoch, as PyTorch's multinomial does when sampling.
        weights = self.weights
        if not np.all(np.isfinite(weights)) or np.any(weights < 0):
            raise RuntimeError("invalid multinomial distribution (weights must be finite and non-negative)")
        if weights.sum() <= 0:
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
        if not self.replacement and self.num_samples > len(weights):
            raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
        stream = numpy_stream(self.generator)
        if self.replacement:
            yield from stream.choice(len(weights), size=self.num_samples, p=weights / weights.sum()).tolist()
            return
        nonzero = np.flatnonzero(weights)
        weighted = min(self.num_samples, len(nonzero))
        draws = nonzero[stream.choice(len(nonzero), size=weighted, replace=False,
                                      p=weights[nonzero] / weights.sum())].tolist()
        if weighted < self.num_samples:
            # Zero-weight indices come last, in random order, once the others are used up.
            zeros = np.flatnonzero(weights == 0)
            draws += zeros[stream.permutation(len(zeros))[:self.num_samples - weighted]].tolist()
        yield from draws

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """BatchSampler(sampler, batch_size, drop_last): lists of batch_size indices from `sampler` (any iterable of
    indices); the last, shorter list is kept unless drop_last."""

    def __init__(self, sampler, batch_size, drop_last):
        batch_size = _positive_integer(batch_size, "batch_size")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last!r}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return -(-len(self.sampler) // self.batch_size)


class _InfiniteSampler(Sampler):
    """Placeholder indices (None forever) for iterable datasets: only the batch size matters there."""

    def __iter__(self):
        while True:
            yield None
