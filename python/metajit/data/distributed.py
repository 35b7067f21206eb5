"""DistributedSampler: each rank of an mpirun job (metajit.distributed) visits its own share of a dataset, with
PyTorch's torch.utils.data.distributed.DistributedSampler rules: the dataset is padded by repeating its first
indices (or, with drop_last, cut) to a multiple of the number of ranks, and rank r takes every num_replicas-th index
from position r. With shuffle, every rank draws the same permutation from seed + epoch, so the shares partition
it; call set_epoch(epoch) before each epoch for a new order (a DataLoader that made the sampler itself does).

The shuffled order is numpy's permutation, not PyTorch's: the same seed gives another order than in PyTorch (the
sharding rule is the same). Samplers yield Python ints and must not run metajit's engine."""
import math

import numpy as np

from .sampler import Sampler

__all__ = ["DistributedSampler"]


class DistributedSampler(Sampler):
    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        from .. import distributed
        if num_replicas is None:
            num_replicas = distributed.get_world_size()
        if rank is None:
            rank = distributed.get_rank()
        if num_replicas <= 0:
            raise ValueError(f"DistributedSampler: num_replicas must be positive, got {num_replicas}")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = int(num_replicas)
        self.rank = int(rank)
        self.epoch = 0
        self.drop_last = bool(drop_last)
        self.shuffle = bool(shuffle)
        self.seed = int(seed)

    @property
    def num_samples(self):
        count = len(self.dataset)
        if self.drop_last and count % self.num_replicas != 0:
            return math.ceil((count - self.num_replicas) / self.num_replicas)
        return math.ceil(count / self.num_replicas)

    @property
    def total_size(self):
        return self.num_samples * self.num_replicas

    def __iter__(self):
        count = len(self.dataset)
        if self.shuffle:
            indices = np.random.default_rng(self.seed + self.epoch).permutation(count).tolist()
        else:
            indices = list(range(count))
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            else:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """The epoch that seeds the next order (with shuffle): every rank must set the same."""
        self.epoch = int(epoch)
