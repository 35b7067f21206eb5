"""Datasets: the Dataset protocol (__getitem__ + __len__) and TensorDataset over equally long arrays."""
import numpy as np

from .._core import Var

__all__ = ["Dataset", "TensorDataset"]


class Dataset:
    """Base class of map-style datasets: subclasses implement __getitem__(index) and __len__()."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __len__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __len__")


class TensorDataset(Dataset):
    """Samples are tuples (a[i], b[i], ...) of equally long numpy arrays or Vars (Vars are read once, into
    numpy, so indexing a sample costs no kernel)."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset needs at least one array")
        arrays = []
        for index, tensor in enumerate(tensors):
            if isinstance(tensor, Var):
                tensor = tensor.numpy()
            tensor = np.asarray(tensor)
            if tensor.ndim == 0:
                raise ValueError(f"TensorDataset: array {index} is 0-dimensional; samples are taken along the "
                                 "first dimension")
            arrays.append(tensor)
        lengths = {len(array) for array in arrays}
        if len(lengths) != 1:
            raise ValueError("TensorDataset: size mismatch between arrays, first dimensions are "
                             f"{[len(array) for array in arrays]}")
        self.tensors = tuple(arrays)

    def __getitem__(self, index):
        return tuple(array[index] for array in self.tensors)

    def __len__(self):
        return len(self.tensors[0])
